//! [`Tensor::wrapper_over`]: a wrapper tensor of a layer (a functional tensor, a batched
//! tensor) made as a shallow copy of a tensor already validated, without a builder.

use switchboard_keys::DispatchKeySet;

use crate::builder::ValidParts;
use crate::tensor::{AnyArc, Tensor, VersionCounter};

// Note [Wrapper tensors]
// A layer above the backends (functionalization, vmap) stands for a tensor of the user's program
// by a tensor of its own: the same sizes, strides, offset, dtype and device as a tensor it
// holds, its own key set (the layer's key), its own payload (the layer's state), and often its
// own version counter. Such a wrapper is made on every call through the layer, once per result.
// Through `to_builder().key_set(..).payload(..).version_counter(..).build()` it pays for
// what a wrapper never needs: copies of the sizes and strides into the builder, a clone and a
// drop of the storage's version counter, the bounds checks of `build` and the recount of its
// elements and contiguity. The metadata of a tensor that exists already satisfies Note [Tensor
// bounds invariant] for its storage, so `wrapper_over` copies it, and the element count and
// contiguity computed when that tensor was made, straight into the new tensor's block.

impl Tensor {
    /// A wrapper tensor over this one (Note [Wrapper tensors]): a shallow copy (same storage,
    /// sizes, strides, offset, dtype, device and wrapped-number flag) with key set `key_set`,
    /// payload `payload` and version counter `version` (`None`: the storage's, as a view's).
    /// Equal to `self.to_builder().key_set(key_set).payload(payload)` with the version counter
    /// set, built, but with no checks to repeat and no builder.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use switchboard_keys::{DispatchKey, DispatchKeySet};
    /// use switchboard_tensor::{ScalarType, Tensor, VersionCounter};
    /// let t = Tensor::zeros(&[2, 3], ScalarType::Float)?;
    /// let keys = DispatchKeySet::from_keys(&[DispatchKey::CPU, DispatchKey::Functionalize]);
    /// let w = t.wrapper_over(keys, Arc::new("state"), Some(VersionCounter::new()));
    /// assert_eq!((w.sizes(), w.strides(), w.key_set()), (t.sizes(), t.strides(), keys));
    /// assert_eq!(w.payload_as::<&str>(), Some(&"state"));
    /// assert!(w.is_alias_of(&t) && !w.is_same(&t));
    /// w.bump_version(); // its own counter
    /// assert_eq!((w.version(), t.version()), (1, 0));
    /// # Ok::<(), switchboard_tensor::TensorError>(())
    /// ```
    pub fn wrapper_over(
        &self,
        key_set: DispatchKeySet,
        payload: AnyArc,
        version: Option<VersionCounter>,
    ) -> Tensor {
        let parts = ValidParts::<&[i64], &[i64]> {
            storage: self.storage.clone(),
            sizes: &self.sizes[..],
            strides: &self.strides[..],
            storage_offset: self.storage_offset,
            dtype: self.dtype,
            device: self.device,
            key_set,
            version,
            payload: Some(payload),
            // Note [Payload tags]: a tensor derived from another starts untagged.
            payload_tag: 0,
            wrapped_number: self.is_wrapped_number,
        };
        // The bounds invariant holds: the geometry and storage are this tensor's.
        Tensor::from_valid_parts_with(parts, self.numel, self.is_contiguous)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use switchboard_keys::DispatchKey;

    use super::*;
    use crate::{ScalarType, TensorBuilder};

    #[test]
    fn a_wrapper_is_the_builders_shallow_copy() {
        // A strided, offset, non-contiguous tensor: every piece of metadata is copied.
        let base = Tensor::from_vec((0..24).map(|i| i as f32).collect(), &[4, 6]).unwrap();
        let t = TensorBuilder::new(base.storage().clone(), ScalarType::Float)
            .sizes(&[3, 2])
            .strides(&[1, 6])
            .storage_offset(2)
            .payload_tag(7)
            .build()
            .unwrap();
        let keys = t.key_set().add(DispatchKey::Functionalize);
        let payload: AnyArc = Arc::new(5u32);
        let w = t.wrapper_over(keys, payload.clone(), Some(VersionCounter::new()));
        let b = t
            .to_builder()
            .key_set(keys)
            .payload(payload)
            .version_counter(VersionCounter::new())
            .build()
            .unwrap();
        for x in [&w, &b] {
            assert_eq!(x.sizes(), t.sizes());
            assert_eq!(x.strides(), t.strides());
            assert_eq!(x.storage_offset(), 2);
            assert_eq!((x.numel(), x.is_contiguous()), (6, false));
            assert_eq!(
                (x.dtype(), x.device(), x.key_set()),
                (t.dtype(), t.device(), keys)
            );
            assert_eq!(x.payload_as::<u32>(), Some(&5));
            assert_eq!(x.payload_tag(), 0);
            assert!(x.is_alias_of(&t));
        }
        assert_eq!(w.to_vec::<f32>().unwrap(), t.to_vec::<f32>().unwrap());
        // Its own counter, or the storage's.
        w.bump_version();
        assert_eq!((w.version(), t.version()), (1, 0));
        let shared = t.wrapper_over(keys, Arc::new(()), None);
        shared.bump_version();
        assert_eq!(t.version(), 1);
    }
}
