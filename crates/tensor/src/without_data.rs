//! [`Tensor::without_data`]: the cheap constructor of tensors whose storage holds no bytes
//! (Note [Tensors without data]).

use switchboard_keys::{DeviceType, DispatchKeySet};

use crate::builder::{check_geometry, ValidParts};
use crate::device::Device;
use crate::dtype::ScalarType;
use crate::error::{Result, TensorError};
use crate::storage::Storage;
use crate::tensor::{AnyArc, Tensor, VersionCounter};

// Note [Tensors without data]
// Meta tensors, and the tensors of backends that keep their data elsewhere (the lazy
// backend's graph values, a remote device's handles), have sizes, strides, a dtype, a key set
// and a storage that records its size but holds no bytes. A backend that makes one per
// captured call wants that cheap: `Tensor::without_data` writes the tensor straight into its
// block from borrowed metadata (sizes and strides land inline in the tensor, the storage
// block has no byte buffer), with only the checks that keep Note [Tensor bounds invariant]
// (sizes, strides, a storage large enough for them; in one pass, Note [One-pass geometry
// check]), and takes the key set from the caller,
// who knows it, instead of looking the device up. `TensorBuilder` stays the general way
// (default strides, data, checks of alignment and bool storages, device key sets).

/// What [`Tensor::without_data`] makes: a tensor's metadata, its device and key set, and the
/// size of its storage.
#[derive(Clone, Copy, Debug)]
pub struct DatalessTensor<'a> {
    /// Sizes.
    pub sizes: &'a [i64],
    /// Strides, in elements (as many as sizes).
    pub strides: &'a [i64],
    /// Offset of the first element in the storage, in elements.
    pub storage_offset: i64,
    /// Element type.
    pub dtype: ScalarType,
    /// The device: any but the CPU, whose tensors always have data.
    pub device: Device,
    /// The key set (usually `device.dense_key_set()`, computed once by the caller).
    pub key_set: DispatchKeySet,
    /// The size of the new storage in bytes: at least what the sizes, strides and offset
    /// address.
    pub storage_nbytes: usize,
    /// What the tensor is to its payload's owner (Note [Payload tags]; 0: nothing special).
    pub payload_tag: u32,
}

impl Tensor {
    /// A tensor without data over a new storage of `spec.storage_nbytes` bytes on
    /// `spec.device` (Note [Tensors without data]), carrying `payload` (a backend's own data,
    /// shared by views) and `version` (default: the storage's counter).
    ///
    /// ```
    /// use switchboard_tensor::{DatalessTensor, Device, ScalarType, Tensor};
    /// let spec = DatalessTensor {
    ///     sizes: &[2, 3],
    ///     strides: &[3, 1],
    ///     storage_offset: 0,
    ///     dtype: ScalarType::Float,
    ///     device: Device::META,
    ///     key_set: Device::META.dense_key_set().unwrap(),
    ///     storage_nbytes: 24,
    ///     payload_tag: 1,
    /// };
    /// let t = Tensor::without_data(&spec, None, None).unwrap();
    /// assert_eq!((t.sizes(), t.is_meta(), t.has_data()), (&[2i64, 3][..], true, false));
    /// assert_eq!(t.payload_tag(), 1);
    /// assert!(Tensor::without_data(&DatalessTensor { storage_nbytes: 20, ..spec }, None, None).is_err());
    /// ```
    // Inlinable into a backend's capture path: the spec's fields then come from where the
    // caller has them rather than from a struct built for the call.
    #[inline]
    pub fn without_data(
        spec: &DatalessTensor<'_>,
        payload: Option<AnyArc>,
        version: Option<VersionCounter>,
    ) -> Result<Tensor> {
        let DatalessTensor {
            sizes,
            strides,
            storage_offset,
            dtype,
            device,
            key_set,
            storage_nbytes,
            payload_tag,
        } = *spec;
        let device = match device.ty {
            DeviceType::CPU => {
                return Err(TensorError::invalid(
                    "Tensor::without_data: a CPU tensor must have data (use Tensor::empty)",
                ))
            }
            // Note [The devices of CPU and meta tensors]: `meta:0` is `meta`.
            DeviceType::Meta => Device::META,
            _ => device,
        };
        let geometry = check_geometry(
            sizes,
            strides,
            storage_offset,
            dtype.element_size(),
            storage_nbytes,
        )?;
        let storage = Storage::without_bytes(device, storage_nbytes, dtype);
        // Borrowed sizes and strides: written straight into the tensor's block (Note
        // [Dimensions written into the block]).
        Ok(Tensor::from_valid_parts_with(
            ValidParts {
                storage,
                sizes,
                strides,
                storage_offset,
                dtype,
                device,
                key_set,
                version,
                payload,
                payload_tag,
                wrapped_number: false,
            },
            geometry.numel,
            geometry.is_contiguous,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec<'a>(sizes: &'a [i64], strides: &'a [i64], nbytes: usize) -> DatalessTensor<'a> {
        DatalessTensor {
            sizes,
            strides,
            storage_offset: 0,
            dtype: ScalarType::Float,
            device: Device::META,
            key_set: Device::META.dense_key_set().unwrap(),
            storage_nbytes: nbytes,
            payload_tag: 0,
        }
    }

    #[test]
    fn matches_the_builder() {
        let t = Tensor::without_data(&spec(&[2, 3], &[1, 2], 24), None, None).unwrap();
        let b = crate::TensorBuilder::new(
            Storage::zeros_for(Device::META, 24, ScalarType::Float).unwrap(),
            ScalarType::Float,
        )
        .sizes(&[2, 3])
        .strides(&[1, 2])
        .build()
        .unwrap();
        assert_eq!(t.sizes(), b.sizes());
        assert_eq!(t.strides(), b.strides());
        assert_eq!(t.numel(), b.numel());
        assert_eq!(t.is_contiguous(), b.is_contiguous());
        assert_eq!(t.key_set(), b.key_set());
        assert_eq!(t.storage().nbytes(), 24);
        assert_eq!(t.version(), 0);
    }

    #[test]
    fn refuses_what_breaks_the_bounds_invariant() {
        let bad = |s: DatalessTensor<'_>| Tensor::without_data(&s, None, None).unwrap_err();
        assert!(bad(spec(&[2, 3], &[3], 24))
            .to_string()
            .contains("mismatch in length"));
        assert!(bad(spec(&[2, 3], &[3, 1], 20))
            .to_string()
            .contains("out of bounds for storage of size 20"));
        assert!(bad(spec(&[-1], &[1], 0)).to_string().contains("negative"));
        assert!(bad(spec(&[2], &[-1], 8))
            .to_string()
            .contains("Negative strides"));
        assert!(bad(DatalessTensor {
            device: Device::CPU,
            ..spec(&[1], &[1], 4)
        })
        .to_string()
        .contains("must have data"));
        let offset = DatalessTensor {
            storage_offset: -1,
            ..spec(&[1], &[1], 4)
        };
        assert!(bad(offset).to_string().contains("invalid storage offset"));
    }

    #[test]
    fn the_payload_tag_is_the_made_tensors_only() {
        // Note [Payload tags]: derived tensors share the payload, not the tag.
        use crate::RawOps;
        let tagged = DatalessTensor {
            payload_tag: 7,
            ..spec(&[2, 3], &[3, 1], 24)
        };
        let t = Tensor::without_data(&tagged, Some(std::sync::Arc::new(1u8)), None).unwrap();
        assert_eq!(t.payload_tag(), 7);
        assert_eq!(t.clone().payload_tag(), 7);
        let untagged = Tensor::without_data(&spec(&[1], &[1], 4), None, None).unwrap();
        assert_eq!(untagged.payload_tag(), 0);
        let derived = [
            // Even with the same geometry, a view is not the tagged tensor.
            t.as_strided(&[2, 3], &[3, 1], 0).unwrap(),
            t.view(&[6]).unwrap(),
            t.t().unwrap(),
            t.expand(&[2, 3]).unwrap(),
            t.view_dtype(ScalarType::Int).unwrap(),
            t.with_key_set(t.key_set()),
            t.to_builder().build().unwrap(),
            t.resized(&[1, 2]).unwrap(),
            t.resized(&[4, 4]).unwrap(),
        ];
        for d in &derived {
            assert_eq!(d.payload_tag(), 0, "{:?}", d.sizes());
            assert_eq!(d.payload_as::<u8>(), Some(&1));
        }
        let other = t.with_payload(std::sync::Arc::new(2u8));
        assert_eq!(
            (other.payload_tag(), other.payload_as::<u8>()),
            (0, Some(&2))
        );
    }

    #[test]
    fn carries_payload_and_version() {
        let t = Tensor::without_data(&spec(&[1], &[1], 4), None, None).unwrap();
        let u = Tensor::without_data(
            &spec(&[1], &[1], 4),
            Some(std::sync::Arc::new(7u8)),
            Some(t.version_counter()),
        )
        .unwrap();
        assert_eq!(u.payload_as::<u8>(), Some(&7));
        t.bump_version();
        assert_eq!(u.version(), 1);
    }
}
