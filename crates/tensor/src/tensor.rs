//! [`Tensor`] and [`TensorImpl`]: a tensor's metadata over a shared [`Storage`], its version
//! counter and autograd and backend slots.

use std::any::Any;
use std::fmt;
use std::ops::Deref;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

use switchboard_keys::DispatchKeySet;

use crate::device::Device;
use crate::dtype::ScalarType;
use crate::error::{wrap_dim, Result, TensorError};
use crate::layout::{self, Layout, MemoryFormat};
use crate::storage::Storage;
use crate::storage_block::Shared;
use crate::DimVec;

/// A backend's or layer's own data attached to a tensor (vmap's batched tensor, the lazy
/// backend's IR node, ...), or autograd metadata.
pub type AnyArc = Arc<dyn Any + Send + Sync>;

// Note [Tensor bounds invariant]
// Every TensorImpl satisfies, checked when it is built (TensorBuilder::build, the only way to
// make one) and preserved by every view function: sizes >= 0, strides >= 0, storage_offset >= 0,
// and if the tensor has elements, (storage_offset + sum((size[d] - 1) * stride[d]) + 1) *
// element_size <= storage.nbytes(), all without overflow. So every element a tensor addresses
// lies inside its storage, and `data_ptr()` plus any in-range strided offset is in bounds:
// kernels rely on this in their `unsafe` blocks.

/// A version counter, shared by a tensor and its views; in-place ops bump it and autograd
/// checks that saved tensors were not modified.
#[derive(Clone)]
pub struct VersionCounter(pub(crate) VersionInner);

#[derive(Clone)]
pub(crate) enum VersionInner {
    /// The counter in a storage, used by default by all tensors viewing it.
    Storage(Storage),
    /// A counter of its own.
    Own(Arc<AtomicU64>),
}

impl VersionCounter {
    /// A fresh counter at 0, not shared with a storage.
    pub fn new() -> VersionCounter {
        VersionCounter(VersionInner::Own(Arc::new(AtomicU64::new(0))))
    }

    fn atomic(&self) -> &AtomicU64 {
        match &self.0 {
            VersionInner::Storage(s) => s.version_atomic(),
            VersionInner::Own(a) => a,
        }
    }

    /// The current version.
    pub fn current(&self) -> u64 {
        self.atomic().load(Ordering::Relaxed)
    }

    /// Increments the version.
    pub fn bump(&self) {
        self.atomic().fetch_add(1, Ordering::Relaxed);
    }

    /// Whether two handles are the same counter.
    pub fn ptr_eq(a: &VersionCounter, b: &VersionCounter) -> bool {
        std::ptr::eq(a.atomic(), b.atomic())
    }
}

impl Default for VersionCounter {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for VersionCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VersionCounter({})", self.current())
    }
}

/// The bit of `TensorImpl::autograd_flags` mirroring `requires_grad`.
const REQUIRES_GRAD: u8 = 1;
/// The bit of `TensorImpl::autograd_flags` set while a tangent is attached.
const FORWARD_GRAD: u8 = 2;

/// A tensor's metadata and its storage. Reached through a [`Tensor`] (which derefs to it).
pub struct TensorImpl {
    pub(crate) storage: Storage,
    pub(crate) sizes: DimVec,
    pub(crate) strides: DimVec,
    pub(crate) storage_offset: i64,
    pub(crate) numel: i64,
    pub(crate) is_contiguous: bool,
    pub(crate) dtype: ScalarType,
    pub(crate) device: Device,
    pub(crate) layout: Layout,
    pub(crate) key_set: DispatchKeySet,
    pub(crate) is_wrapped_number: bool,
    /// `None`: the storage's counter.
    pub(crate) version: Option<VersionCounter>,
    /// Set once, read without locking (Note [Autograd metadata slot]).
    pub(crate) autograd_meta: OnceLock<AnyArc>,
    /// See Note [requires_grad hint]: `REQUIRES_GRAD` and `FORWARD_GRAD` bits.
    pub(crate) autograd_flags: AtomicU8,
    pub(crate) payload: Option<AnyArc>,
    /// Set by this tensor's maker only (Note [Payload tags]).
    pub(crate) payload_tag: u32,
}

/// A tensor: a cheap-to-clone handle (a reference-counted [`TensorImpl`], Note [Tensor
/// blocks]; see also [`WeakTensor`](crate::WeakTensor)) to sizes, strides, dtype, device, key
/// set and a shared [`Storage`]. Views share the storage (and version counter) of their base.
///
/// ```
/// use switchboard_tensor::{Tensor, ScalarType};
/// let t = Tensor::from_vec(vec![1.0f32, 2., 3., 4.], &[2, 2]).unwrap();
/// assert_eq!(t.sizes(), &[2, 2]);
/// assert_eq!(t.strides(), &[2, 1]);
/// assert_eq!(t.dtype(), ScalarType::Float);
/// assert_eq!(t.key_set().raw(), 635655225345);
/// let u = t.clone();
/// assert!(u.is_same(&t));
/// ```
#[derive(Clone)]
pub struct Tensor(pub(crate) Shared<TensorImpl>);

impl Deref for Tensor {
    type Target = TensorImpl;
    #[inline]
    fn deref(&self) -> &TensorImpl {
        &self.0
    }
}

impl Tensor {
    /// Whether two handles are the same tensor (same `TensorImpl`).
    #[inline]
    pub fn ptr_eq(a: &Tensor, b: &Tensor) -> bool {
        Shared::ptr_eq(&a.0, &b.0)
    }

    /// Whether `other` is the same tensor as `self` (`Tensor.is_same`).
    #[inline]
    pub fn is_same(&self, other: &Tensor) -> bool {
        Tensor::ptr_eq(self, other)
    }
}

impl TensorImpl {
    /// The sizes.
    #[inline]
    pub fn sizes(&self) -> &[i64] {
        &self.sizes
    }

    /// The strides, in elements.
    #[inline]
    pub fn strides(&self) -> &[i64] {
        &self.strides
    }

    /// The size of dimension `dim` (negative counts from the end).
    pub fn size(&self, dim: i64) -> Result<i64> {
        Ok(self.sizes[self.wrap(dim)?])
    }

    /// The stride of dimension `dim` (negative counts from the end).
    pub fn stride(&self, dim: i64) -> Result<i64> {
        Ok(self.strides[self.wrap(dim)?])
    }

    fn wrap(&self, dim: i64) -> Result<usize> {
        if self.sizes.is_empty() {
            return Err(TensorError::NoDimensions { dim });
        }
        wrap_dim(dim, self.sizes.len())
    }

    /// The number of dimensions.
    #[inline]
    pub fn dim(&self) -> usize {
        self.sizes.len()
    }

    /// The number of elements.
    #[inline]
    pub fn numel(&self) -> i64 {
        self.numel
    }

    /// The offset of the first element in the storage, in elements.
    #[inline]
    pub fn storage_offset(&self) -> i64 {
        self.storage_offset
    }

    /// The element type.
    #[inline]
    pub fn dtype(&self) -> ScalarType {
        self.dtype
    }

    /// Bytes per element.
    #[inline]
    pub fn element_size(&self) -> usize {
        self.dtype.element_size()
    }

    /// `numel * element_size`.
    pub fn nbytes(&self) -> usize {
        self.numel as usize * self.element_size()
    }

    /// The device.
    #[inline]
    pub fn device(&self) -> Device {
        self.device
    }

    /// The layout (always strided for now).
    #[inline]
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The dispatch key set (see [`Device::dense_key_set`]).
    #[inline]
    pub fn key_set(&self) -> DispatchKeySet {
        self.key_set
    }

    /// The storage.
    #[inline]
    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    /// Whether the tensor's storage holds real data (CPU tensors).
    #[inline]
    pub fn has_data(&self) -> bool {
        self.storage.has_data()
    }

    /// Whether the tensor is on the meta device.
    #[inline]
    pub fn is_meta(&self) -> bool {
        self.device.is_meta()
    }

    /// Whether the tensor is on the CPU.
    #[inline]
    pub fn is_cpu(&self) -> bool {
        self.device.is_cpu()
    }

    /// Whether the tensor is row-major contiguous (PyTorch's rules: size-1 dims ignored).
    #[inline]
    pub fn is_contiguous(&self) -> bool {
        self.is_contiguous
    }

    /// Whether the tensor is contiguous in `format`.
    pub fn is_contiguous_as(&self, format: MemoryFormat) -> bool {
        match format {
            MemoryFormat::Contiguous | MemoryFormat::Preserve => self.is_contiguous,
            _ => format.is_contiguous(&self.sizes, &self.strides),
        }
    }

    /// Whether the tensor's elements exactly tile a block of memory in some order.
    pub fn is_non_overlapping_and_dense(&self) -> bool {
        layout::is_non_overlapping_and_dense(&self.sizes, &self.strides)
    }

    /// The memory format its strides suggest (`suggest_memory_format`).
    pub fn suggest_memory_format(&self) -> MemoryFormat {
        layout::suggest_memory_format(&self.sizes, &self.strides)
    }

    /// Whether the tensor is a wrapped Python number (a 0-dim tensor standing for a scalar
    /// argument: lowest priority in type promotion).
    #[inline]
    pub fn is_wrapped_number(&self) -> bool {
        self.is_wrapped_number
    }

    /// The legacy type name PyTorch uses in messages: `torch.FloatTensor`,
    /// `torch.cuda.LongTensor`, `torch.meta.BoolTensor`...
    pub fn type_string(&self) -> String {
        let device = if self.device.is_cpu() {
            String::new()
        } else {
            format!("{}.", self.device.ty)
        };
        format!("torch.{device}{}Tensor", self.dtype.c10_name())
    }

    /// Whether the two tensors share a storage (one is a view of the other, or both of a
    /// third).
    pub fn is_alias_of(&self, other: &TensorImpl) -> bool {
        Storage::ptr_eq(&self.storage, &other.storage)
    }

    /// The backend's payload, if any.
    pub fn payload(&self) -> Option<&AnyArc> {
        self.payload.as_ref()
    }

    /// The payload downcast to `T`, if it is one.
    pub fn payload_as<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.payload.as_ref().and_then(|p| p.downcast_ref::<T>())
    }

    // Note [Payload tags]
    // A backend that keeps its state in a tensor's payload (the lazy backend: one payload per
    // storage) sometimes needs to know that a tensor is the very one it made for that payload,
    // with the geometry it gave it, rather than a view or shallow copy of it: views, shallow
    // copies (`with_key_set`, `detach`, `with_payload`, `to_builder`) and resized tensors share
    // their source's payload. Comparing the geometry with the payload's on every use costs a
    // walk over the sizes and strides; since a TensorImpl's metadata never changes after it
    // is made (Note [Functional resize]), a number set when it is made says as much. So the
    // maker of a tensor may give it a tag (`DatalessTensor::payload_tag`,
    // `TensorBuilder::payload_tag`), and every tensor this crate derives from another gets 0:
    // the tag is *not* inherited with the payload. Were it inherited, a view would claim its
    // base's geometry, and a view of a tensor whose payload's memory was since reused would
    // pass for the new owner's base tensor. What a tag means is up to the payload's owner; 0
    // means "no claim".

    /// The tag this tensor's maker gave it (Note [Payload tags]): 0 unless it was set when
    /// the tensor was made, and 0 on every view, shallow copy or resized tensor, even of a
    /// tagged tensor (they share its payload, not its tag).
    ///
    /// ```
    /// use switchboard_tensor::{Device, RawOps, ScalarType, Storage, TensorBuilder};
    /// let storage = Storage::zeros(Device::META, 24).unwrap();
    /// let base = TensorBuilder::new(storage, ScalarType::Float)
    ///     .sizes(&[2, 3])
    ///     .payload_tag(1)
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(base.payload_tag(), 1);
    /// assert_eq!(base.clone().payload_tag(), 1); // the same tensor
    /// assert_eq!(base.t().unwrap().payload_tag(), 0); // a view
    /// assert_eq!(base.with_key_set(base.key_set()).payload_tag(), 0); // a shallow copy
    /// ```
    #[inline]
    pub fn payload_tag(&self) -> u32 {
        self.payload_tag
    }

    // Note [Autograd metadata slot]
    // Autograd reads a tensor's metadata several times per recorded operation (each input's
    // gradient edge, the output's grad_fn), so the slot is write-once: a `OnceLock` read with
    // one acquire load and handed out by reference, no lock and no reference-count traffic.
    // The metadata itself is interior-mutable (autograd keeps a mutex inside), so a tensor
    // never needs a second one; `detach` and friends make a new TensorImpl with an empty slot.

    /// The autograd metadata, if set (see Note [Autograd metadata slot]).
    #[inline]
    pub fn autograd_meta(&self) -> Option<&AnyArc> {
        self.autograd_meta.get()
    }

    /// Attaches autograd metadata; gives `meta` back if the slot was already set. The slot
    /// belongs to the autograd layer (switchboard-autograd), which expects its own type there.
    pub fn set_autograd_meta(&self, meta: AnyArc) -> std::result::Result<(), AnyArc> {
        self.autograd_meta.set(meta)
    }

    /// The autograd metadata, attaching `init()` first if none is set. If two threads race
    /// to attach, one value wins and both get it.
    pub fn autograd_meta_or_init(&self, init: impl FnOnce() -> AnyArc) -> &AnyArc {
        self.autograd_meta.get_or_init(init)
    }

    // Note [requires_grad hint]
    // Autograd kernels run on every call of a tensor with an Autograd key, which is almost
    // every tensor; they must find out cheaply that nothing requires grad. Asking the metadata
    // means a downcast and a mutex, so autograd keeps two flag bits in step with it instead:
    // one set whenever the metadata it attached requires grad or has a grad_fn, one set while
    // a forward-mode tangent is attached (Note [Forward-mode AD] in switchboard-autograd). The
    // generated kernels' fast path tests both bits with one relaxed load
    // ([`autograd_hint`](TensorImpl::autograd_hint)). Only switchboard-autograd writes them.

    /// Whether autograd metadata that requires grad (or has a `grad_fn`) is attached (see
    /// Note [requires_grad hint]); false means the tensor surely does not require grad.
    #[inline(always)]
    pub fn requires_grad_hint(&self) -> bool {
        self.autograd_flags.load(Ordering::Relaxed) & REQUIRES_GRAD != 0
    }

    /// Whether a forward-mode tangent may be attached (see Note [requires_grad hint]).
    #[inline(always)]
    pub fn forward_grad_hint(&self) -> bool {
        self.autograd_flags.load(Ordering::Relaxed) & FORWARD_GRAD != 0
    }

    /// Whether the tensor may require grad or carry a tangent: false means autograd, in
    /// either mode, has nothing to do with it (one load, see Note [requires_grad hint]).
    #[inline(always)]
    pub fn autograd_hint(&self) -> bool {
        self.autograd_flags.load(Ordering::Relaxed) != 0
    }

    /// Sets the flag of [`requires_grad_hint`](Self::requires_grad_hint) (autograd only).
    #[inline]
    pub fn set_requires_grad_hint(&self, value: bool) {
        self.set_autograd_flag(REQUIRES_GRAD, value);
    }

    /// Sets the flag of [`forward_grad_hint`](Self::forward_grad_hint) (autograd only).
    #[inline]
    pub fn set_forward_grad_hint(&self, value: bool) {
        self.set_autograd_flag(FORWARD_GRAD, value);
    }

    #[inline]
    fn set_autograd_flag(&self, bit: u8, value: bool) {
        if value {
            self.autograd_flags.fetch_or(bit, Ordering::Relaxed);
        } else {
            self.autograd_flags.fetch_and(!bit, Ordering::Relaxed);
        }
    }

    /// The version counter (shared with views).
    pub fn version_counter(&self) -> VersionCounter {
        match &self.version {
            Some(v) => v.clone(),
            None => VersionCounter(VersionInner::Storage(self.storage.clone())),
        }
    }

    /// The current version (`tensor._version`).
    #[inline]
    pub fn version(&self) -> u64 {
        match &self.version {
            Some(v) => v.current(),
            None => self.storage.version_atomic().load(Ordering::Relaxed),
        }
    }

    /// Increments the version, as in-place ops do.
    #[inline]
    pub fn bump_version(&self) {
        match &self.version {
            Some(v) => v.bump(),
            None => {
                self.storage
                    .version_atomic()
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TensorBuilder;
    use switchboard_keys::DispatchKey;

    #[test]
    fn key_sets_and_identity() {
        let s = Storage::zeros(Device::META, 16).unwrap();
        let t = TensorBuilder::new(s, ScalarType::Float).build().unwrap();
        assert_eq!(
            t.key_set().to_string(),
            "DispatchKeySet(Meta, ADInplaceOrView, AutogradMeta)"
        );
        let p = t.with_extra_keys(DispatchKeySet::from_key(DispatchKey::Python));
        assert!(!p.is_same(&t));
        assert!(p.is_alias_of(&t));
        assert!(p.key_set().has(DispatchKey::Python));
        let only = t.with_key_set(DispatchKeySet::from_key(DispatchKey::CPU));
        assert_eq!(only.key_set().to_string(), "DispatchKeySet(CPU)");
    }

    #[test]
    fn version_counters() {
        let s = Storage::zeros(Device::CPU, 16).unwrap();
        let a = TensorBuilder::new(s.clone(), ScalarType::Float)
            .build()
            .unwrap();
        let b = TensorBuilder::new(s.clone(), ScalarType::Float)
            .build()
            .unwrap();
        a.bump_version();
        assert_eq!(b.version(), 1, "views share the storage's counter");
        assert!(VersionCounter::ptr_eq(
            &a.version_counter(),
            &b.version_counter()
        ));
        let c = TensorBuilder::new(s, ScalarType::Float)
            .version_counter(VersionCounter::new())
            .build()
            .unwrap();
        c.bump_version();
        c.bump_version();
        assert_eq!((a.version(), c.version()), (1, 2));
        let d = c.with_key_set(c.key_set());
        d.bump_version();
        assert_eq!(c.version(), 3);
    }

    #[test]
    fn autograd_meta_slot() {
        let t = TensorBuilder::new(Storage::zeros(Device::CPU, 4).unwrap(), ScalarType::Int)
            .build()
            .unwrap();
        assert!(t.autograd_meta().is_none());
        t.set_autograd_meta(Arc::new(42u32)).unwrap();
        let m = t.autograd_meta().unwrap();
        assert_eq!(m.downcast_ref::<u32>(), Some(&42));
        // Write-once: a second value is handed back, the first stays.
        let back = t.set_autograd_meta(Arc::new(7u32)).unwrap_err();
        assert_eq!(back.downcast_ref::<u32>(), Some(&7));
        let again = t.autograd_meta_or_init(|| Arc::new(9u32));
        assert_eq!(again.downcast_ref::<u32>(), Some(&42));
    }
}
