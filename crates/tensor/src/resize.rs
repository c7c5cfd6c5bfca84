//! Resizing `out=` tensors: PyTorch's `resize_` and `at::native::resize_output`, returning the
//! resized tensor (see Note [Functional resize]).

use switchboard_keys::DeviceType;

use crate::builder::check_sizes;
use crate::create::storage_nbytes;
use crate::device_hooks::DeviceHooks;
use crate::error::{Result, TensorError};
use crate::layout::contiguous_strides;
use crate::storage::Storage;
use crate::tensor::{AnyArc, Tensor};
use crate::TensorBuilder;

// Note [Functional resize]
// PyTorch resizes an out= tensor in place: its TensorImpl gets new sizes and contiguous
// strides, and its storage grows (keeping the old bytes) when too small. Here TensorImpl
// metadata is immutable (shared behind an Arc and read without locks), so a resize returns a
// new handle instead, which out= kernels return as their result:
// - same sizes: the tensor itself (strides kept, as `resize_` does);
// - the storage is large enough: a tensor over the same storage (and version counter, key set,
//   payload) with contiguous strides and the same storage offset;
// - otherwise: the same, over a new storage holding a copy of the old bytes followed by zeros.
// Handles to the old tensor (and its views) keep the old shape and storage. Callers that need
// PyTorch's aliasing (the caller's `out` changes shape) must use the returned tensor.

// Note [Growing storages without data]
// A backend whose tensors have no data here may keep its state per storage in the tensor's
// payload, which views and resized tensors share. Growing such a storage needs a
// new payload too: the old one describes the old, smaller memory. This crate cannot make one
// (the backend lives above it), so a backend registers, per device type, a function that
// returns the larger storage and its payload, holding the old bytes followed by zeros, as
// PyTorch's `resize_` leaves them. Without one, a storage without data grows as a bare storage
// of the device, keeping the payload (a backend with no per-storage state needs nothing more).

/// A function giving a tensor without data of its device type a storage of `needed` bytes
/// (Note [Growing storages without data]): the storage and the payload its tensors carry.
pub type GrowStorageFn = fn(&Tensor, usize) -> Result<(Storage, Option<AnyArc>)>;

static GROW_STORAGE: DeviceHooks<GrowStorageFn> = DeviceHooks::new();

/// Registers how storages of tensors without data on devices of type `ty` grow when an
/// `out=` tensor is resized (Note [Growing storages without data]); replaces an earlier
/// registration. Fails for `cpu` and `meta`.
///
/// ```
/// use std::sync::Arc;
/// use switchboard_tensor::{register_grow_storage, AnyArc, DeviceType, Result, ScalarType, Storage, Tensor};
/// // A backend whose payload records the size of the storage it describes.
/// fn grow(t: &Tensor, needed: usize) -> Result<(Storage, Option<AnyArc>)> {
///     let payload: AnyArc = Arc::new(needed);
///     Ok((Storage::zeros_for(t.device(), needed, t.dtype())?, Some(payload)))
/// }
/// register_grow_storage(DeviceType::MTIA, grow).unwrap();
/// let out = Tensor::empty_on(&[0], ScalarType::Float, "mtia".parse().unwrap()).unwrap();
/// let resized = out.resize_output(&[2, 3]).unwrap();
/// assert_eq!(resized.sizes(), &[2, 3]);
/// assert_eq!(resized.payload_as::<usize>(), Some(&24));
/// assert!(register_grow_storage(DeviceType::CPU, grow).is_err());
/// ```
pub fn register_grow_storage(ty: DeviceType, f: GrowStorageFn) -> Result<()> {
    GROW_STORAGE.register(ty, f, || {
        format!("register_grow_storage: {ty} storages grow directly")
    })
}

impl Tensor {
    /// `resize_(size)` as a function: this tensor with `sizes` and contiguous strides (itself
    /// when the sizes already match). See Note [Functional resize].
    ///
    /// ```
    /// use switchboard_tensor::{ScalarType, Tensor};
    /// let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[4]).unwrap();
    /// let r = t.resized(&[2, 3]).unwrap();
    /// assert_eq!(r.sizes(), &[2, 3]);
    /// assert_eq!(r.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0, 0.0, 0.0]);
    /// let s = t.resized(&[1, 2]).unwrap(); // shrinking keeps the storage
    /// assert!(s.is_alias_of(&t));
    /// ```
    pub fn resized(&self, sizes: &[i64]) -> Result<Tensor> {
        check_sizes(sizes)?;
        if self.sizes() == sizes {
            return Ok(self.clone());
        }
        let strides = contiguous_strides(sizes);
        let elem = self.element_size();
        let needed = storage_nbytes(sizes, &strides, self.storage_offset(), elem)?;
        let (storage, payload) = if needed <= self.storage().nbytes() {
            (self.storage().clone(), self.payload().cloned())
        } else if let Some(grow) = GROW_STORAGE.for_tensor(self) {
            let (storage, payload) = grow(self, needed)?;
            if storage.nbytes() < needed {
                return Err(TensorError::invalid(format!(
                    "resize: the grown {} storage has {} bytes, {needed} are needed",
                    self.device(),
                    storage.nbytes()
                )));
            }
            (storage, payload)
        } else {
            (grow_storage(self, needed)?, self.payload().cloned())
        };
        TensorBuilder::new(storage, self.dtype())
            .sizes(sizes)
            .strides(&strides)
            .storage_offset(self.storage_offset())
            .device(self.device())
            .key_set(self.key_set())
            .version_counter(self.version_counter())
            .maybe_payload(payload)
            .build()
    }

    /// `at::native::resize_output`: this tensor when it already has `sizes`, else
    /// [`resized`](Self::resized), with PyTorch's deprecation warning when the tensor had
    /// elements (`resize_output_check`).
    pub fn resize_output(&self, sizes: &[i64]) -> Result<Tensor> {
        if self.sizes() == sizes {
            return Ok(self.clone());
        }
        if self.numel() != 0 {
            warn_resized_output(self.sizes(), sizes);
        }
        self.resized(sizes)
    }
}

/// `resize_output_check`'s warning: an `out=` tensor with elements was resized.
#[cold]
fn warn_resized_output(from: &[i64], to: &[i64]) {
    switchboard_keys::warn(&format!(
        "An output with one or more elements was resized since it had shape {from:?}, which does \
         not match the required output shape {to:?}. This behavior is deprecated, and in a \
         future PyTorch release outputs will not be resized unless they have zero elements. You \
         can explicitly reuse an out tensor t by resizing it, inplace, to zero elements with \
         t.resize_(0)."
    ));
}

/// A storage of `needed` bytes on `t`'s device holding a copy of `t`'s storage bytes.
fn grow_storage(t: &Tensor, needed: usize) -> Result<Storage> {
    let old = t.storage();
    let device = t.device();
    if !old.has_data() {
        return Storage::zeros_for(device, needed, t.dtype());
    }
    let new = if device.is_cpu() {
        Storage::zeros_for(device, needed, t.dtype())?
    } else {
        Storage::zeros_host_backed(device, needed, t.dtype())?
    };
    let read = old.try_borrow()?;
    let write = new.try_borrow_mut()?;
    let src = old.bytes(&read)?;
    if src.len() > new.nbytes() || new.data_ptr().is_null() {
        return Err(TensorError::invalid("resize: the new storage is smaller"));
    }
    // SAFETY: `new` is a fresh storage with `needed >= src.len()` bytes, exclusively borrowed
    // by `write`; `src` is another allocation, borrowed shared by `read`. Both borrows live
    // until the copy is done. The bytes are valid elements of the same dtype (the new storage
    // is a bool storage exactly when the old one was made for this dtype).
    unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), new.data_ptr(), src.len()) };
    drop(write);
    drop(read);
    Ok(new)
}

impl TensorBuilder {
    fn maybe_payload(self, payload: Option<crate::AnyArc>) -> Self {
        match payload {
            Some(p) => self.payload(p),
            None => self,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Device, RawOps, ScalarType};

    #[test]
    fn resize_rules() {
        let t = Tensor::from_vec(vec![1i64, 2, 3, 4, 5, 6], &[2, 3]).unwrap();
        let tt = t.t().unwrap();
        // Same sizes: the same tensor, strides kept.
        let same = tt.resize_output(&[3, 2]).unwrap();
        assert!(same.is_same(&tt));
        // A view with an offset keeps it and its storage.
        let v = t.narrow(0, 1, 1).unwrap();
        let r = v.resized(&[3]).unwrap();
        assert!(r.is_alias_of(&t));
        assert_eq!(r.storage_offset(), 3);
        assert_eq!(r.to_vec::<i64>().unwrap(), [4, 5, 6]);
        // Growing copies the old bytes; the version counter is still shared.
        let g = v.resized(&[4]).unwrap();
        assert!(!g.is_alias_of(&t));
        assert_eq!(g.to_vec::<i64>().unwrap(), [4, 5, 6, 0]);
        g.bump_version();
        assert_eq!(t.version(), 1);
        let e = Tensor::zeros(&[0], ScalarType::Bool)
            .unwrap()
            .resized(&[2])
            .unwrap();
        assert_eq!(e.to_vec::<bool>().unwrap(), [false, false]);
        let m = Tensor::zeros_on(&[1], ScalarType::Float, Device::META).unwrap();
        let m2 = m.resized(&[5, 5]).unwrap();
        assert!(m2.is_meta() && !m2.has_data());
        assert_eq!(m2.storage().nbytes(), 100);
        assert!(t.resized(&[-1]).is_err());
    }
}
