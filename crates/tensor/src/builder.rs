//! [`TensorBuilder`]: makes a tensor from a storage and metadata, checking the bounds
//! invariant; shallow copies of tensors with other keys or payloads.

use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::ptr::{self, addr_of_mut};
use std::sync::atomic::AtomicU8;
use std::sync::OnceLock;

use switchboard_keys::{BackendComponent, DeviceType, DispatchKey, DispatchKeySet};

use crate::device::Device;
use crate::dtype::ScalarType;
use crate::error::{list, Result, TensorError};
use crate::layout::{self, Layout};
use crate::storage::Storage;
use crate::storage_block::Shared;
use crate::tensor::{AnyArc, Tensor, TensorImpl, VersionCounter, VersionInner};
use crate::DimVec;

// The checks live in bounds.rs; modules that build tensors import them from here.
use crate::bounds::CheckedGeometry;
pub(crate) use crate::bounds::{check_geometry, check_in_bounds, check_sizes, storage_extent};

impl Tensor {
    /// A builder over this tensor's storage, pre-filled with all its metadata (sizes, strides,
    /// offset, dtype, device, key set, payload, version counter): for shallow copies with
    /// changes. Not its payload tag: a copy is not the tensor its maker tagged (Note [Payload
    /// tags]).
    pub fn to_builder(&self) -> TensorBuilder {
        TensorBuilder {
            storage: self.storage.clone(),
            dtype: self.dtype,
            sizes: Some(self.sizes.clone()),
            strides: Some(self.strides.clone()),
            storage_offset: self.storage_offset,
            device: Some(self.device),
            key_set: KeySetChoice::Exact(self.key_set),
            payload: self.payload.clone(),
            payload_tag: 0,
            version: Some(self.version_counter()),
            wrapped_number: self.is_wrapped_number,
        }
    }

    /// A shallow copy (same storage, metadata and version counter) whose key set is `key_set`.
    ///
    /// ```
    /// use switchboard_keys::{DispatchKey, DispatchKeySet};
    /// use switchboard_tensor::{Tensor, ScalarType};
    /// let t = Tensor::zeros(&[2], ScalarType::Float).unwrap();
    /// let p = t.with_key_set(t.key_set().add(DispatchKey::Python));
    /// assert!(p.key_set().has(DispatchKey::Python));
    /// assert!(p.is_alias_of(&t));
    /// ```
    pub fn with_key_set(&self, key_set: DispatchKeySet) -> Tensor {
        let mut b = self.to_builder();
        b.key_set = KeySetChoice::Exact(key_set);
        b.build_unchecked()
    }

    /// A shallow copy whose key set is this one's plus `extra`.
    pub fn with_extra_keys(&self, extra: DispatchKeySet) -> Tensor {
        self.with_key_set(self.key_set | extra)
    }

    /// A shallow copy carrying `payload` (replacing any).
    pub fn with_payload(&self, payload: AnyArc) -> Tensor {
        let mut b = self.to_builder();
        b.payload = Some(payload);
        b.build_unchecked()
    }
}

/// The key set of a dense CPU tensor (see [`Device::dense_key_set`]).
pub(crate) const CPU_KEY_SET: DispatchKeySet = DispatchKeySet::from_key(DispatchKey::CPU)
    .union(BackendComponent::CPUBit.autograd_related_key_set())
    .union(BackendComponent::CPUBit.autocast_related_key_set());

/// The key set of a meta tensor.
pub(crate) const META_KEY_SET: DispatchKeySet = DispatchKeySet::from_key(DispatchKey::Meta)
    .union(BackendComponent::MetaBit.autograd_related_key_set())
    .union(BackendComponent::MetaBit.autocast_related_key_set());

/// [`Device::dense_key_set`] with constant fast paths for CPU and meta.
#[inline]
pub(crate) fn default_key_set(device: Device) -> Result<DispatchKeySet> {
    match device.ty {
        DeviceType::CPU => Ok(CPU_KEY_SET),
        DeviceType::Meta => Ok(META_KEY_SET),
        _ => device.dense_key_set(),
    }
}

/// Metadata known to satisfy Note [Tensor bounds invariant] for its storage; the sizes and
/// the strides each owned (`DimVec`) or borrowed (`&[i64]`), see [`Dims`].
pub(crate) struct ValidParts<S: Dims = DimVec, T: Dims = DimVec> {
    pub storage: Storage,
    pub sizes: S,
    pub strides: T,
    pub storage_offset: i64,
    pub dtype: ScalarType,
    pub device: Device,
    pub key_set: DispatchKeySet,
    pub version: Option<VersionCounter>,
    pub payload: Option<AnyArc>,
    /// Note [Payload tags]: 0 for a tensor derived from another.
    pub payload_tag: u32,
    pub wrapped_number: bool,
}

// Note [Dimensions written into the block]
// A tensor's sizes and strides live inline in its block (two `DimVec`s, ~100 bytes). Owned
// ones (a view's computed strides, the builder's, contiguous strides) are moved in. Borrowed
// ones (what `Tensor::without_data` gets, once per captured call of the lazy backend; a fresh
// tensor's sizes) used to be made into `DimVec`s on the stack first and then moved, which the
// compiler did as a build and a copy of all those bytes. `from_valid_parts_with` takes either,
// through `Dims`, and writes borrowed ones straight into the block.

/// Sizes or strides as [`Tensor::from_valid_parts_with`] takes them (Note [Dimensions written
/// into the block]).
pub(crate) trait Dims: Deref<Target = [i64]> {
    /// Writes these dimensions into `slot`.
    ///
    /// # Safety
    /// `slot` is valid for writes and aligned; what it holds is overwritten, never dropped.
    unsafe fn write_to(self, slot: *mut DimVec);
}

impl Dims for DimVec {
    #[inline(always)]
    unsafe fn write_to(self, slot: *mut DimVec) {
        // SAFETY: the caller's guarantee.
        unsafe { slot.write(self) }
    }
}

impl Dims for &[i64] {
    #[inline(always)]
    unsafe fn write_to(self, slot: *mut DimVec) {
        // SAFETY: the caller's guarantee.
        unsafe { slot.write(layout::dim_vec(self)) }
    }
}

impl Tensor {
    /// The one place a `TensorImpl` is made. The caller guarantees the bounds invariant.
    #[inline]
    pub(crate) fn from_valid_parts(p: ValidParts) -> Tensor {
        let numel = p.sizes.iter().product();
        let is_contiguous = layout::is_contiguous(&p.sizes, &p.strides);
        Tensor::from_valid_parts_with(p, numel, is_contiguous)
    }

    /// [`from_valid_parts`](Self::from_valid_parts) when the caller already knows the numel
    /// and the contiguity of the sizes and strides (fresh contiguous tensors).
    // Always inlined: since `TensorBuilder::finish` calls it too, the compiler outlined it, and
    // every fresh contiguous tensor (each kernel's result) paid a copy of its parts.
    #[inline(always)]
    pub(crate) fn from_valid_parts_with<S: Dims, T: Dims>(
        p: ValidParts<S, T>,
        numel: i64,
        is_contiguous: bool,
    ) -> Tensor {
        debug_assert_eq!(numel, p.sizes.iter().product::<i64>());
        debug_assert_eq!(is_contiguous, layout::is_contiguous(&p.sizes, &p.strides));
        // The fields are moved out of `p` with `ptr::read` by a closure that borrows it, rather
        // than captured by move: a capturing closure gets a copy of the parts on the stack,
        // and the compiler did not forward it, so every tensor paid two copies of its sizes
        // and strides instead of one. Nothing the closure captures needs dropping (hence the
        // `ManuallyDrop` version): a closure with drop glue must live in memory for the unwind
        // path of the allocation, which kept the parts on the stack too.
        let p = ManuallyDrop::new(p);
        // SAFETY: each non-`Copy` field of `p` is read exactly once (here and in the closure
        // below) and `p` is never dropped, so each value has exactly one owner.
        let version = ManuallyDrop::new(match unsafe { ptr::read(&p.version) } {
            Some(VersionCounter(VersionInner::Storage(s))) if Storage::ptr_eq(&s, &p.storage) => {
                None
            }
            v => v,
        });
        // Written field by field into the block (Note [Tensor blocks]). This pattern names every
        // field of `TensorImpl`: a field added there and not written below fails to compile
        // here instead of being left uninitialised.
        #[allow(dead_code)]
        fn every_field_is_written(t: &TensorImpl) {
            let TensorImpl {
                storage: _,
                sizes: _,
                strides: _,
                storage_offset: _,
                numel: _,
                is_contiguous: _,
                dtype: _,
                device: _,
                layout: _,
                key_set: _,
                is_wrapped_number: _,
                version: _,
                autograd_meta: _,
                autograd_flags: _,
                payload: _,
                payload_tag: _,
            } = t;
        }
        // SAFETY: every field of the impl is written below (checked by the pattern above), from
        // values already computed, but for borrowed dimensions, copied here (whose allocation,
        // for more than 5 dimensions, could only panic by leaking what was written: allowed by
        // `new_with`); the slot is the block's uninitialised value. `storage`, `sizes`,
        // `strides` and `payload` are moved out of `p`, and `version` out of its `ManuallyDrop`
        // (each read once, never dropped there, see above); `Dims::write_to` writes into the
        // fresh slots.
        Tensor(unsafe {
            Shared::new_with(|t: *mut TensorImpl| {
                addr_of_mut!((*t).storage).write(ptr::read(&p.storage));
                ptr::read(&p.sizes).write_to(addr_of_mut!((*t).sizes));
                ptr::read(&p.strides).write_to(addr_of_mut!((*t).strides));
                addr_of_mut!((*t).storage_offset).write(p.storage_offset);
                addr_of_mut!((*t).numel).write(numel);
                addr_of_mut!((*t).is_contiguous).write(is_contiguous);
                addr_of_mut!((*t).dtype).write(p.dtype);
                addr_of_mut!((*t).device).write(p.device);
                addr_of_mut!((*t).layout).write(Layout::Strided);
                addr_of_mut!((*t).key_set).write(p.key_set);
                addr_of_mut!((*t).is_wrapped_number).write(p.wrapped_number);
                addr_of_mut!((*t).version).write(ptr::read(&*version));
                addr_of_mut!((*t).autograd_meta).write(OnceLock::new());
                addr_of_mut!((*t).autograd_flags).write(AtomicU8::new(0));
                addr_of_mut!((*t).payload).write(ptr::read(&p.payload));
                addr_of_mut!((*t).payload_tag).write(p.payload_tag);
            })
        })
    }
}

#[derive(Clone, Copy)]
enum KeySetChoice {
    /// The device's dense key set plus these keys.
    FromDevice(DispatchKeySet),
    /// Exactly this set.
    Exact(DispatchKeySet),
}

/// Builds a tensor over a storage: sizes (default: 1-d over the whole storage), strides
/// (default: contiguous), offset, key set, payload, version counter.
///
/// ```
/// use std::sync::Arc;
/// use switchboard_keys::{DispatchKey, DispatchKeySet};
/// use switchboard_tensor::{Device, ScalarType, Storage, TensorBuilder};
/// let storage = Storage::zeros(Device::CPU, 24).unwrap();
/// let t = TensorBuilder::new(storage, ScalarType::Float)
///     .sizes(&[2, 3])
///     .extra_keys(DispatchKeySet::from_key(DispatchKey::FuncTorchBatched))
///     .payload(Arc::new("level 1"))
///     .build()
///     .unwrap();
/// assert!(t.key_set().has(DispatchKey::FuncTorchBatched));
/// assert_eq!(t.payload_as::<&str>(), Some(&"level 1"));
/// ```
#[must_use]
pub struct TensorBuilder {
    storage: Storage,
    dtype: ScalarType,
    sizes: Option<DimVec>,
    strides: Option<DimVec>,
    storage_offset: i64,
    device: Option<Device>,
    key_set: KeySetChoice,
    payload: Option<AnyArc>,
    payload_tag: u32,
    version: Option<VersionCounter>,
    wrapped_number: bool,
}

impl TensorBuilder {
    /// A builder for a tensor of `dtype` over `storage`.
    pub fn new(storage: Storage, dtype: ScalarType) -> TensorBuilder {
        TensorBuilder {
            storage,
            dtype,
            sizes: None,
            strides: None,
            storage_offset: 0,
            device: None,
            key_set: KeySetChoice::FromDevice(DispatchKeySet::EMPTY),
            payload: None,
            payload_tag: 0,
            version: None,
            wrapped_number: false,
        }
    }

    /// The sizes.
    pub fn sizes(mut self, sizes: &[i64]) -> Self {
        self.sizes = Some(DimVec::from_slice(sizes));
        self
    }

    /// The strides (default: contiguous for the sizes).
    pub fn strides(mut self, strides: &[i64]) -> Self {
        self.strides = Some(DimVec::from_slice(strides));
        self
    }

    /// The storage offset, in elements.
    pub fn storage_offset(mut self, offset: i64) -> Self {
        self.storage_offset = offset;
        self
    }

    /// The device (default: the storage's). Must be of the storage's device type; `cpu:0`
    /// and `meta:0` are `cpu` and `meta` (Note [The devices of CPU and meta tensors]).
    pub fn device(mut self, device: Device) -> Self {
        self.device = Some(device.tensor_device());
        self
    }

    /// Replaces the key set entirely.
    pub fn key_set(mut self, key_set: DispatchKeySet) -> Self {
        self.key_set = KeySetChoice::Exact(key_set);
        self
    }

    /// Adds keys to the key set (to the device's set unless [`key_set`](Self::key_set) set
    /// one).
    pub fn extra_keys(mut self, extra: DispatchKeySet) -> Self {
        self.key_set = match self.key_set {
            KeySetChoice::FromDevice(e) => KeySetChoice::FromDevice(e | extra),
            KeySetChoice::Exact(k) => KeySetChoice::Exact(k | extra),
        };
        self
    }

    /// A backend's own payload.
    pub fn payload(mut self, payload: AnyArc) -> Self {
        self.payload = Some(payload);
        self
    }

    /// The payload tag (default 0): what this tensor is to its payload's owner (Note [Payload
    /// tags]). Not carried over to tensors made from this one.
    pub fn payload_tag(mut self, tag: u32) -> Self {
        self.payload_tag = tag;
        self
    }

    /// The version counter (default: the storage's, shared by all its views).
    pub fn version_counter(mut self, vc: VersionCounter) -> Self {
        self.version = Some(vc);
        self
    }

    /// Marks the tensor as a wrapped Python number.
    pub fn wrapped_number(mut self, yes: bool) -> Self {
        self.wrapped_number = yes;
        self
    }

    /// Checks the metadata against the storage (Note [Tensor bounds invariant]) and builds.
    pub fn build(mut self) -> Result<Tensor> {
        let elem = self.dtype.element_size();
        // The sizes and strides move into the tensor (no copy).
        let sizes = match self.sizes.take() {
            Some(s) => s,
            None => DimVec::from_elem((self.storage.nbytes() / elem) as i64, 1),
        };
        let strides = match self.strides.take() {
            Some(s) => {
                if s.len() != sizes.len() {
                    return Err(TensorError::invalid(format!(
                        "mismatch in length of strides and shape: sizes {} and strides {}",
                        list(&sizes),
                        list(&s)
                    )));
                }
                s
            }
            None => layout::contiguous_strides(&sizes),
        };
        let geometry = check_geometry(
            &sizes,
            &strides,
            self.storage_offset,
            elem,
            self.storage.nbytes(),
        )?;
        if self.storage.has_data() && self.storage.data_ptr() as usize % elem != 0 {
            // Only a storage adopted from a Vec of a smaller element type can be misaligned.
            return Err(TensorError::invalid(format!(
                "the storage's data is not aligned for elements of dtype {}",
                self.dtype
            )));
        }
        if self.storage.has_data() && self.storage.holds_bool() != (self.dtype == ScalarType::Bool)
        {
            return Err(TensorError::invalid(format!(
                "cannot make a tensor of dtype {} over a storage {} bool elements",
                self.dtype,
                if self.storage.holds_bool() {
                    "of"
                } else {
                    "without"
                }
            )));
        }
        if let Some(d) = self.device {
            if d.ty != self.storage.device().ty {
                return Err(TensorError::invalid(format!(
                    "Attempted to set the storage of a tensor on device \"{d}\" to a storage on \
                     different device \"{}\"",
                    self.storage.device()
                )));
            }
        }
        let device = self.device.unwrap_or(self.storage.device());
        let key_set = match self.key_set {
            KeySetChoice::Exact(k) => k,
            KeySetChoice::FromDevice(extra) => default_key_set(device)? | extra,
        };
        Ok(self.finish(sizes, strides, device, key_set, Some(geometry)))
    }

    /// Builds from metadata already known to be valid (a copy of a valid tensor's).
    pub(crate) fn build_unchecked(self) -> Tensor {
        let sizes = self.sizes.clone().expect("sizes set");
        let strides = self.strides.clone().expect("strides set");
        let device = self.device.unwrap_or(self.storage.device());
        let key_set = match self.key_set {
            KeySetChoice::Exact(k) => k,
            KeySetChoice::FromDevice(extra) => device.dense_key_set().unwrap_or_default() | extra,
        };
        self.finish(sizes, strides, device, key_set, None)
    }

    fn finish(
        self,
        sizes: DimVec,
        strides: DimVec,
        device: Device,
        key_set: DispatchKeySet,
        geometry: Option<CheckedGeometry>,
    ) -> Tensor {
        let parts = ValidParts {
            storage: self.storage,
            sizes,
            strides,
            storage_offset: self.storage_offset,
            dtype: self.dtype,
            device,
            key_set,
            version: self.version,
            payload: self.payload,
            payload_tag: self.payload_tag,
            wrapped_number: self.wrapped_number,
        };
        match geometry {
            Some(g) => Tensor::from_valid_parts_with(parts, g.numel, g.is_contiguous),
            None => Tensor::from_valid_parts(parts),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn misaligned_storages_are_refused() {
        // A Vec<u8> larger than the inline buffer is adopted with alignment 1.
        let bytes: Vec<u8> = (0..200).collect();
        let s = Storage::from_vec(bytes);
        let r = TensorBuilder::new(s.clone(), ScalarType::Double).build();
        if s.data_ptr() as usize % 8 != 0 {
            assert!(r.is_err());
        } else {
            assert_eq!(r.unwrap().numel(), 25);
        }
        let odd = TensorBuilder::new(s.clone(), ScalarType::Byte).storage_offset(1);
        let t = odd.sizes(&[8]).build().unwrap();
        assert_eq!(t.to_vec::<u8>().unwrap()[0], 1);
    }

    #[test]
    fn empty_tensors_far_past_the_end() {
        let s = Storage::zeros(Device::CPU, 8).unwrap();
        let t = TensorBuilder::new(s, ScalarType::Float)
            .sizes(&[0])
            .storage_offset(1 << 40)
            .build()
            .unwrap();
        assert!(t.data::<f32>().unwrap().is_empty());
        assert!(t.data_mut::<f32>().unwrap().is_empty());
        assert!(t.to_vec::<f32>().unwrap().is_empty());
    }

    #[test]
    fn constant_key_sets_match_devices() {
        assert_eq!(Ok(CPU_KEY_SET), Device::CPU.dense_key_set());
        assert_eq!(Ok(META_KEY_SET), Device::META.dense_key_set());
        assert_eq!(CPU_KEY_SET.raw(), 635655225345);
    }

    #[test]
    fn builder_checks_bounds() {
        let s = Storage::zeros(Device::CPU, 16).unwrap();
        let err = TensorBuilder::new(s.clone(), ScalarType::Float)
            .sizes(&[2, 3])
            .build()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "setStorage: sizes [2, 3], strides [3, 1], storage offset 0, and itemsize 4 \
             requiring a storage size of 24 are out of bounds for storage of size 16"
        );
        assert!(TensorBuilder::new(s.clone(), ScalarType::Float)
            .sizes(&[2])
            .strides(&[-1])
            .build()
            .is_err());
        assert!(TensorBuilder::new(s.clone(), ScalarType::Float)
            .sizes(&[-1])
            .build()
            .is_err());
        assert!(TensorBuilder::new(s.clone(), ScalarType::Float)
            .sizes(&[i64::MAX, 2])
            .strides(&[i64::MAX, 1])
            .build()
            .is_err());
        let t = TensorBuilder::new(s.clone(), ScalarType::Float)
            .sizes(&[0, 100])
            .storage_offset(1000)
            .build()
            .unwrap();
        assert_eq!(t.numel(), 0);
        let t = TensorBuilder::new(s, ScalarType::Byte).build().unwrap();
        assert_eq!(t.sizes(), &[16]);
    }

    #[test]
    fn payload_tags_are_set_by_the_maker_only() {
        let s = Storage::zeros(Device::CPU, 24).unwrap();
        let t = TensorBuilder::new(s.clone(), ScalarType::Float)
            .sizes(&[2, 3])
            .payload(std::sync::Arc::new(1u8))
            .payload_tag(3)
            .build()
            .unwrap();
        assert_eq!(t.payload_tag(), 3);
        // Copies through the builder start untagged, unless their maker tags them.
        assert_eq!(t.to_builder().build().unwrap().payload_tag(), 0);
        assert_eq!(
            t.to_builder()
                .payload_tag(5)
                .build_unchecked()
                .payload_tag(),
            5
        );
        assert_eq!(t.with_extra_keys(DispatchKeySet::EMPTY).payload_tag(), 0);
        assert_eq!(t.resized(&[3, 2]).unwrap().payload_tag(), 0);
        assert_eq!(t.resized(&[3, 3]).unwrap().payload_tag(), 0);
        let plain = TensorBuilder::new(s, ScalarType::Float).build().unwrap();
        assert_eq!(plain.payload_tag(), 0);
        assert_eq!(
            crate::Tensor::ones(&[2], ScalarType::Float)
                .unwrap()
                .payload_tag(),
            0
        );
    }

    #[test]
    fn bool_storages_hold_only_bools() {
        let raw = Storage::cpu_with(4, |b| b.fill(7)).unwrap();
        let err = TensorBuilder::new(raw.clone(), ScalarType::Bool)
            .build()
            .unwrap_err();
        assert!(err.to_string().contains("without bool elements"), "{err}");
        assert!(TensorBuilder::new(raw, ScalarType::Byte).build().is_ok());
        let b = Storage::bool_from_bytes(&[0, 1]).unwrap();
        assert!(TensorBuilder::new(b.clone(), ScalarType::Byte)
            .build()
            .is_err());
        let t = TensorBuilder::new(b, ScalarType::Bool).build().unwrap();
        assert_eq!(t.to_vec::<bool>().unwrap(), [false, true]);
        assert!(Storage::bool_from_bytes(&[2]).is_err());
        let z = crate::Tensor::zeros(&[2], ScalarType::Bool).unwrap();
        assert!(z.storage().holds_bool());
        let v = crate::Tensor::from_vec(vec![true; 100], &[100]).unwrap();
        assert!(v.storage().holds_bool());
        // Meta storages have no bytes to protect.
        let m = Storage::zeros(Device::META, 4).unwrap();
        assert!(TensorBuilder::new(m, ScalarType::Bool).build().is_ok());
    }
}
