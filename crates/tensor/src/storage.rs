//! [`Storage`]: the shared, reference-counted byte buffer behind tensors and their views.

use std::alloc::{self, Layout};
use std::cell::UnsafeCell;
use std::fmt;
use std::ops::Range;
use std::ptr::{addr_of_mut, NonNull};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::cpu_alloc::alloc_cpu;
use crate::device::Device;
use crate::dtype::{ScalarType, StorageElement};
use crate::error::{Result, TensorError};
use crate::storage_block::{impl_cached, Shared};

/// Alignment of every heap buffer the storage allocates itself (buffers larger than
/// [`INLINE_BYTES`]).
pub const STORAGE_ALIGNMENT: usize = 64;

/// Buffers up to this many bytes live inline in the storage (no second allocation), aligned to
/// [`INLINE_ALIGNMENT`].
pub const INLINE_BYTES: usize = 64;

/// Alignment of inline buffers: enough for every element type, and small enough that the
/// storage itself is allocated by plain `malloc` (an over-aligned block costs a slower
/// aligned allocation on every small tensor).
pub const INLINE_ALIGNMENT: usize = 16;

// Note [Storage mutability]
// Storage bytes are shared by every view of a tensor and may be written by kernels (outputs,
// in-place ops), so they are interior-mutable memory: a raw allocation (or an `UnsafeCell`
// inline buffer) that the crate never covers with a `&mut` it does not hold exclusively.
//
// Soundness rests on a *borrow flag* per storage, like `RefCell` but atomic and non-blocking:
// every access to the bytes happens under a borrow, shared for reading and exclusive for
// writing. A borrow that conflicts fails at once with `TensorError::StorageBorrowed`; nothing
// ever waits, so there are no locks and no deadlocks. The safe API takes the borrows itself:
// `Tensor::data` (shared, `DataRef` derefs to `&[T]`), `Tensor::data_mut` (exclusive, `DataMut`
// derefs to `&mut [T]`), `to_vec`, `copy_strided`, printing, saving.
//
// Kernels work with raw pointers for speed: they take one `Access` over all their tensors
// (exclusive borrows for the storages they write, shared for the rest; a storage that is both
// read and written - an in-place op, or an output aliasing an input - is borrowed once,
// exclusively), then read and write through `Tensor::data_ptr`/`mut_data_ptr` in `unsafe`
// blocks whose SAFETY argument is "the Access is alive" plus the bounds invariant (Note
// [Tensor bounds invariant]). Elementwise aliasing inside one kernel (out[i] = a[i] + b[i]
// with out == a) is the kernel's business, as in PyTorch.
//
// Cost: one compare-and-swap to take and one atomic op to release per distinct storage,
// uncontended in practice. A freshly created tensor is borrowed the same way; there is no
// unchecked path in the safe API.

const WRITER: usize = 1 << (usize::BITS - 1);

#[repr(C, align(16))]
struct InlineBuf(UnsafeCell<[u8; INLINE_BYTES]>);

enum Buffer {
    /// No data: meta tensors and devices without real storage here.
    None,
    /// Small buffers, inside the storage allocation.
    Inline(InlineBuf),
    /// A heap allocation made with `layout` by the global allocator.
    Heap { ptr: NonNull<u8>, layout: Layout },
    /// `nbytes` bytes from `start` inside an allocation shared with other storages over
    /// disjoint ranges of it (Note [Storage slices]).
    Slice {
        start: NonNull<u8>,
        owner: Arc<SharedAllocation>,
    },
}

// Note [Storage slices]
// A loader that reads one buffer holding many tensors (a safetensors file) wants each tensor
// to have storage bounds of its own, as PyTorch's do (its loader makes a storage per tensor),
// so that `as_strided` past a tensor's data fails ("out of bounds for storage of size N")
// instead of reading its neighbours or the file header, and without copying the data.
// `Storage::split` turns a storage that nobody else holds into storages over disjoint byte
// ranges of its allocation: the allocation moves into a reference-counted `SharedAllocation`,
// freed with the last slice, and each slice is an ordinary storage with its own size, borrow
// flag and version counter. The borrow flags stay sound because the ranges are checked to be
// disjoint and the original storage is consumed, so no handle covers two slices' bytes.

/// A heap allocation shared by the slices [`Storage::split`] made of it (Note [Storage
/// slices]): freed when the last of them is dropped.
struct SharedAllocation {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl Drop for SharedAllocation {
    fn drop(&mut self) {
        // SAFETY: `ptr` was allocated by the global allocator with exactly `layout` (it was a
        // storage's `Buffer::Heap`), ownership moved here, and it is freed only here, once.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

// SAFETY: the allocation is owned (freed only in Drop); its bytes are only reached through
// the slices' storages, each under its own borrow flag over a disjoint range.
unsafe impl Send for SharedAllocation {}
// SAFETY: as for Send; a shared reference only reads the pointer and the layout.
unsafe impl Sync for SharedAllocation {}

/// The shared part of a [`Storage`]: bytes (or none), their device, the borrow flag and the
/// default version counter of the tensors viewing it.
pub struct StorageImpl {
    buf: Buffer,
    nbytes: usize,
    device: Device,
    /// Whether the bytes are `bool` elements (Note [Element bit patterns]).
    holds_bool: bool,
    borrow: AtomicUsize,
    version: AtomicU64,
}

// SAFETY: the raw buffer is owned by the StorageImpl (freed only in Drop) and every access to
// its bytes goes through the borrow flag (Note [Storage mutability]), which excludes a writer
// from running concurrently with any other reader or writer, on any thread.
unsafe impl Send for StorageImpl {}
// SAFETY: as for Send; shared references only read plain fields or go through the flag.
unsafe impl Sync for StorageImpl {}

impl Drop for StorageImpl {
    fn drop(&mut self) {
        if let Buffer::Heap { ptr, layout } = self.buf {
            // SAFETY: `ptr` was allocated by the global allocator with exactly `layout` (by
            // `alloc_zeroed` below, or by a `Vec` whose capacity gave `layout`), and is freed
            // only here, once.
            unsafe { alloc::dealloc(ptr.as_ptr(), layout) };
        }
    }
}

/// A cheap-to-clone handle to a tensor's bytes. CPU storages own an aligned (64 bytes; 16 for
/// small inline buffers),
/// zero-initialised buffer (written before use, for [`Storage::uninit_cpu`]); storages on meta
/// and other devices record their size only.
///
/// ```
/// use switchboard_tensor::{Device, Storage};
/// let s = Storage::zeros(Device::CPU, 16).unwrap();
/// assert_eq!(s.nbytes(), 16);
/// assert!(s.has_data());
/// assert!(!Storage::zeros(Device::META, 16).unwrap().has_data());
/// ```
#[derive(Clone)]
pub struct Storage(Shared<StorageImpl>);

// Freed storage blocks of this thread (Note [Storage blocks]).
impl_cached!(StorageImpl, STORAGE_BLOCKS, weak_handles: false, outline_last_drop: false);

impl Storage {
    #[inline]
    fn from_parts(buf: Buffer, nbytes: usize, device: Device, holds_bool: bool) -> Storage {
        Storage(Shared::new(StorageImpl {
            buf,
            nbytes,
            device,
            holds_bool,
            borrow: AtomicUsize::new(0),
            version: AtomicU64::new(0),
        }))
    }

    /// A storage of `nbytes` for elements of `dtype` on `device` that holds no bytes (a meta
    /// or backend storage: Note [Tensors without data]); the caller knows `device` is not
    /// the CPU. Written field by field into its block: the buffer's tag only, not a whole
    /// inline buffer's worth of stack copy (`from_parts` moves a built value, which for the
    /// CPU's inline buffers is cheaper).
    #[inline]
    pub(crate) fn without_bytes(device: Device, nbytes: usize, dtype: ScalarType) -> Storage {
        debug_assert!(!device.is_cpu());
        debug_assert_eq!(device, device.tensor_device());
        // This pattern names every field of `StorageImpl`: a field added there and not
        // written below fails to compile here.
        #[allow(dead_code)]
        fn every_field_is_written(s: &StorageImpl) {
            let StorageImpl {
                buf: _,
                nbytes: _,
                device: _,
                holds_bool: _,
                borrow: _,
                version: _,
            } = s;
        }
        // SAFETY: every field of the value is written (checked by the pattern above) from
        // values already computed; the slot is the block's uninitialised value.
        Storage(unsafe {
            Shared::new_with(|s: *mut StorageImpl| {
                addr_of_mut!((*s).buf).write(Buffer::None);
                addr_of_mut!((*s).nbytes).write(nbytes);
                addr_of_mut!((*s).device).write(device);
                addr_of_mut!((*s).holds_bool).write(dtype == ScalarType::Bool);
                addr_of_mut!((*s).borrow).write(AtomicUsize::new(0));
                addr_of_mut!((*s).version).write(AtomicU64::new(0));
            })
        })
    }

    /// A storage of `nbytes` for elements of `dtype` on `device` (zeroed bytes on CPU, no
    /// data elsewhere). Only storages made for `Bool` can hold bool tensors, and they hold
    /// nothing else (Note [Element bit patterns]).
    pub fn zeros_for(device: Device, nbytes: usize, dtype: ScalarType) -> Result<Storage> {
        // Note [The devices of CPU and meta tensors]
        let device = device.tensor_device();
        let is_bool = dtype == ScalarType::Bool;
        let buf = if device.is_cpu() {
            cpu_buffer(nbytes, true)?
        } else {
            Buffer::None
        };
        Ok(Self::from_parts(buf, nbytes, device, is_bool))
    }

    /// A CPU storage of `nbytes` for elements of `dtype` whose bytes are not initialised
    /// (buffers of up to [`INLINE_BYTES`] are zeroed all the same): for outputs a kernel
    /// writes entirely, sparing the zero fill of large buffers.
    ///
    /// # Safety
    /// Every byte (every element, for the tensor viewing it) must be written, through raw
    /// pointers under a borrow (Note [Storage mutability]), before any byte is read by any
    /// means (`bytes`, `Tensor::data`, `to_vec`, printing, a kernel reading it...); until
    /// then the storage and the tensors over it must not reach code that may read them.
    /// Dropping it unread is fine. Bool storages must be written with 0 or 1 bytes.
    #[inline(always)]
    pub unsafe fn uninit_cpu(nbytes: usize, dtype: ScalarType) -> Result<Storage> {
        let is_bool = dtype == ScalarType::Bool;
        Ok(Self::from_parts(
            cpu_buffer(nbytes, false)?,
            nbytes,
            Device::CPU,
            is_bool,
        ))
    }

    /// A storage on `device` that nevertheless holds zeroed host memory: for backends that
    /// emulate a device with CPU memory (test backends, `privateuseone` demos). Tensors on it
    /// have data like CPU tensors.
    pub fn zeros_host_backed(device: Device, nbytes: usize, dtype: ScalarType) -> Result<Storage> {
        // Note [The devices of CPU and meta tensors]
        let device = device.tensor_device();
        let is_bool = dtype == ScalarType::Bool;
        Ok(Self::from_parts(
            cpu_buffer(nbytes, true)?,
            nbytes,
            device,
            is_bool,
        ))
    }

    /// A storage of raw bytes (not for bool tensors) of `nbytes` on `device`: zeroed bytes on
    /// CPU, no data elsewhere.
    pub fn zeros(device: Device, nbytes: usize) -> Result<Storage> {
        // Note [The devices of CPU and meta tensors]
        let device = device.tensor_device();
        if !device.is_cpu() {
            return Ok(Self::from_parts(Buffer::None, nbytes, device, false));
        }
        Ok(Self::from_parts(
            cpu_buffer(nbytes, true)?,
            nbytes,
            device,
            false,
        ))
    }

    /// A CPU storage of `nbytes` whose bytes are set by `init` before anyone else sees them.
    pub fn cpu_with(nbytes: usize, init: impl FnOnce(&mut [u8])) -> Result<Storage> {
        Self::try_cpu_with(nbytes, |b| {
            init(b);
            Ok(())
        })
    }

    /// Like [`cpu_with`](Self::cpu_with) with a fallible initialiser (e.g. reading a file).
    pub fn try_cpu_with(
        nbytes: usize,
        init: impl FnOnce(&mut [u8]) -> Result<()>,
    ) -> Result<Storage> {
        let mut s = Self::zeros(Device::CPU, nbytes)?;
        let inner = Shared::get_mut(&mut s.0).expect("a fresh storage is unique");
        init(inner.bytes_mut_unique())?;
        Ok(s)
    }

    /// A zeroed CPU storage of `numel` elements of `T`, set by `init` before anyone else sees
    /// it. The buffer is 64-byte aligned (16 when inline).
    pub fn cpu_with_typed<T: StorageElement>(
        numel: usize,
        init: impl FnOnce(&mut [T]),
    ) -> Result<Storage> {
        let nbytes = numel.checked_mul(std::mem::size_of::<T>()).ok_or_else(|| {
            TensorError::invalid(format!(
                "Trying to create tensor with {numel} elements: too large"
            ))
        })?;
        Self::cpu_with(nbytes, |bytes| {
            // SAFETY: `bytes` is exclusively borrowed, 16- or 64-byte aligned (>= align_of::<T>()) and
            // holds exactly numel * size_of::<T>() zeroed bytes; all-zero bytes are a valid
            // value of every StorageElement type (0, 0.0, false, 0+0i), and `init` can only store valid
            // `T`s through the `&mut [T]`.
            let typed =
                unsafe { std::slice::from_raw_parts_mut(bytes.as_mut_ptr() as *mut T, numel) };
            init(typed)
        })
        .map(|s| s.mark_bool(T::DTYPE == ScalarType::Bool))
    }

    fn mark_bool(mut self, holds_bool: bool) -> Storage {
        if let Some(inner) = Shared::get_mut(&mut self.0) {
            inner.holds_bool = holds_bool;
        }
        self
    }

    /// A CPU storage for a bool tensor holding a copy of `bytes`, each of which must be 0
    /// or 1.
    pub fn bool_from_bytes(bytes: &[u8]) -> Result<Storage> {
        if let Some(b) = bytes.iter().find(|b| **b > 1) {
            return Err(TensorError::invalid(format!(
                "invalid value {b} for a bool element (expected 0 or 1)"
            )));
        }
        Ok(Self::cpu_with(bytes.len(), |d| d.copy_from_slice(bytes))?.mark_bool(true))
    }

    /// Splits this storage into storages over disjoint byte `ranges` of its bytes, without
    /// copying (Note [Storage slices]): each is an ordinary storage of `range.len()` bytes,
    /// with its own bounds, borrow flag and version counter. No other handle may share this
    /// storage; the ranges must lie in it and must not overlap. Small (inline) buffers are
    /// copied into new storages instead.
    ///
    /// ```
    /// use switchboard_tensor::Storage;
    /// let s = Storage::cpu_with(256, |b| b[128] = 7).unwrap();
    /// let parts = s.split(&[0..100, 128..256]).unwrap();
    /// assert_eq!(parts[1].nbytes(), 128);
    /// let b = parts[1].try_borrow().unwrap();
    /// assert_eq!(parts[1].bytes(&b).unwrap()[0], 7);
    /// ```
    pub fn split(mut self, ranges: &[Range<usize>]) -> Result<Vec<Storage>> {
        let nbytes = self.nbytes();
        let mut order: Vec<&Range<usize>> = ranges.iter().collect();
        order.sort_by_key(|r| (r.start, r.end));
        let mut covered = 0;
        for r in &order {
            if r.start > r.end || r.end > nbytes || r.start < covered {
                return Err(TensorError::invalid(format!(
                    "Storage::split: the byte range {r:?} is reversed, overlaps another or lies                      outside the storage of {nbytes} bytes"
                )));
            }
            covered = r.end;
        }
        let (device, holds_bool) = (self.device(), self.holds_bool());
        let inner = Shared::get_mut(&mut self.0).ok_or_else(|| {
            TensorError::invalid("Storage::split: the storage is shared by another handle")
        })?;
        let (base, owner) = match std::mem::replace(&mut inner.buf, Buffer::None) {
            Buffer::Heap { ptr, layout } => (ptr, Arc::new(SharedAllocation { ptr, layout })),
            Buffer::Slice { start, owner } => (start, owner),
            Buffer::Inline(buf) => {
                // Small: copy each range (an inline buffer cannot be shared).
                let bytes = &buf.0.into_inner()[..nbytes];
                return ranges
                    .iter()
                    .map(|r| {
                        Self::cpu_with(r.len(), |d| d.copy_from_slice(&bytes[r.clone()]))
                            .map(|s| s.mark_bool(holds_bool))
                    })
                    .collect();
            }
            Buffer::None => {
                return Err(TensorError::invalid(
                    "Storage::split: the storage holds no data",
                ))
            }
        };
        Ok(ranges
            .iter()
            .map(|r| {
                // SAFETY: `r.start <= nbytes` (checked above), inside (or one past the end
                // of) the allocation `base` points into.
                let start = unsafe { base.add(r.start) };
                let buf = Buffer::Slice {
                    start,
                    owner: owner.clone(),
                };
                Self::from_parts(buf, r.len(), device, holds_bool)
            })
            .collect())
    }

    /// Whether this storage holds bool elements (then only bool tensors can view it).
    pub fn holds_bool(&self) -> bool {
        self.0.holds_bool
    }

    /// A CPU storage holding `v`'s elements. Takes over `v`'s allocation when it is larger than
    /// [`INLINE_BYTES`] (no copy; the buffer is then aligned for `T`, not to 64 bytes), copies
    /// small vectors inline.
    pub fn from_vec<T: StorageElement>(v: Vec<T>) -> Storage {
        let is_bool = T::DTYPE == ScalarType::Bool;
        let nbytes = std::mem::size_of_val(v.as_slice());
        if nbytes <= INLINE_BYTES {
            let buf = InlineBuf(UnsafeCell::new([0; INLINE_BYTES]));
            // SAFETY: the inline buffer is 64 bytes, 16-aligned and not yet shared; `v` holds
            // `nbytes <= 64` initialised bytes; the regions are distinct allocations.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    v.as_ptr() as *const u8,
                    buf.0.get() as *mut u8,
                    nbytes,
                );
            }
            return Self::from_parts(Buffer::Inline(buf), nbytes, Device::CPU, is_bool);
        }
        let mut v = std::mem::ManuallyDrop::new(v);
        let layout = Layout::array::<T>(v.capacity()).expect("a Vec's capacity has a layout");
        // A Vec with more than INLINE_BYTES of elements has a real (non-dangling) allocation.
        let ptr = NonNull::new(v.as_mut_ptr() as *mut u8).expect("Vec pointer is non-null");
        Self::from_parts(Buffer::Heap { ptr, layout }, nbytes, Device::CPU, is_bool)
    }

    /// Bytes in the storage (also for storages without data).
    #[inline]
    pub fn nbytes(&self) -> usize {
        self.0.nbytes
    }

    /// The storage's device.
    #[inline]
    pub fn device(&self) -> Device {
        self.0.device
    }

    /// Whether the storage holds real bytes (CPU) or only a size (meta and other devices).
    #[inline]
    pub fn has_data(&self) -> bool {
        !matches!(self.0.buf, Buffer::None)
    }

    /// Whether two handles share one storage.
    #[inline]
    pub fn ptr_eq(a: &Storage, b: &Storage) -> bool {
        Shared::ptr_eq(&a.0, &b.0)
    }

    /// Number of handles to this storage (tensors and views holding it).
    pub fn use_count(&self) -> usize {
        Shared::strong_count(&self.0)
    }

    /// The start of the bytes, or null for a storage without data. Getting the pointer is
    /// safe; reading or writing through it needs a borrow (Note [Storage mutability]).
    #[inline]
    pub fn data_ptr(&self) -> *mut u8 {
        match &self.0.buf {
            Buffer::None => std::ptr::null_mut(),
            Buffer::Inline(b) => b.0.get() as *mut u8,
            Buffer::Heap { ptr, .. } => ptr.as_ptr(),
            Buffer::Slice { start, .. } => start.as_ptr(),
        }
    }

    /// The storage's own version counter (shared by the tensors viewing it unless they were
    /// given another one).
    pub(crate) fn version_atomic(&self) -> &AtomicU64 {
        &self.0.version
    }

    /// Takes a shared borrow: fails if the storage is being written.
    pub fn try_borrow(&self) -> Result<StorageBorrow<'_>> {
        if !self.acquire(false) {
            return Err(borrow_error(false));
        }
        Ok(StorageBorrow {
            storage: self,
            exclusive: false,
        })
    }

    /// Takes an exclusive borrow: fails if the storage is being read or written.
    pub fn try_borrow_mut(&self) -> Result<StorageBorrow<'_>> {
        if !self.acquire(true) {
            return Err(borrow_error(true));
        }
        Ok(StorageBorrow {
            storage: self,
            exclusive: true,
        })
    }

    /// Takes a borrow (exclusive or shared) without a guard; false if it conflicts. Each
    /// success must be undone by one [`release`](Self::release) with the same `exclusive`.
    #[inline]
    pub(crate) fn acquire(&self, exclusive: bool) -> bool {
        let flag = &self.0.borrow;
        if exclusive {
            return flag
                .compare_exchange(0, WRITER, Ordering::Acquire, Ordering::Relaxed)
                .is_ok();
        }
        let mut cur = flag.load(Ordering::Relaxed);
        loop {
            if cur & WRITER != 0 || cur == WRITER - 1 {
                return false;
            }
            match flag.compare_exchange_weak(cur, cur + 1, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
    }

    /// Releases a borrow taken by [`acquire`](Self::acquire).
    #[inline]
    pub(crate) fn release(&self, exclusive: bool) {
        let flag = &self.0.borrow;
        if exclusive {
            flag.fetch_sub(WRITER, Ordering::Release);
        } else {
            flag.fetch_sub(1, Ordering::Release);
        }
    }

    /// The bytes as a slice, under a borrow. Empty for storages without data.
    pub fn bytes<'a>(&'a self, borrow: &'a StorageBorrow<'_>) -> Result<&'a [u8]> {
        self.check_borrow(borrow)?;
        if !self.has_data() {
            return Ok(&[]);
        }
        // SAFETY: the storage has `nbytes` initialised bytes at `data_ptr`; `borrow` (checked to
        // be of this storage) excludes writers for its lifetime, which bounds the slice's.
        Ok(unsafe { std::slice::from_raw_parts(self.data_ptr(), self.nbytes()) })
    }

    fn check_borrow(&self, borrow: &StorageBorrow<'_>) -> Result<()> {
        if Storage::ptr_eq(self, borrow.storage) {
            Ok(())
        } else {
            Err(TensorError::StorageBorrowed(
                "the borrow passed is of another storage",
            ))
        }
    }
}

impl StorageImpl {
    /// All bytes, mutably, given exclusive ownership (`&mut self`: the storage is not shared).
    fn bytes_mut_unique(&mut self) -> &mut [u8] {
        match &mut self.buf {
            Buffer::None => &mut [],
            Buffer::Inline(b) => &mut b.0.get_mut()[..self.nbytes],
            // SAFETY: `ptr` owns `nbytes` initialised bytes, and `&mut self` proves no other
            // handle exists, so no other reference to them can be alive.
            Buffer::Heap { ptr, .. } => unsafe {
                std::slice::from_raw_parts_mut(ptr.as_ptr(), self.nbytes)
            },
            // SAFETY: the slice's `nbytes` bytes from `start` lie in the shared allocation and
            // no other storage covers them (Note [Storage slices]); `&mut self` proves no
            // other handle to this storage exists.
            Buffer::Slice { start, .. } => unsafe {
                std::slice::from_raw_parts_mut(start.as_ptr(), self.nbytes)
            },
        }
    }
}

/// A CPU buffer of `nbytes`: inline and zeroed up to [`INLINE_BYTES`], else a heap
/// allocation ([`alloc_cpu`]), zeroed when `zeroed` (else uninitialised: see
/// [`Storage::uninit_cpu`]).
#[inline]
fn cpu_buffer(nbytes: usize, zeroed: bool) -> Result<Buffer> {
    if nbytes <= INLINE_BYTES {
        return Ok(Buffer::Inline(InlineBuf(UnsafeCell::new(
            [0; INLINE_BYTES],
        ))));
    }
    let (ptr, layout) = alloc_cpu(nbytes, zeroed)?;
    Ok(Buffer::Heap { ptr, layout })
}

impl fmt::Debug for Storage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Storage")
            .field("device", &self.device())
            .field("nbytes", &self.nbytes())
            .field("has_data", &self.has_data())
            .finish()
    }
}

/// A borrow of a storage's bytes, shared or exclusive (Note [Storage mutability]). Released on
/// drop.
pub struct StorageBorrow<'a> {
    storage: &'a Storage,
    exclusive: bool,
}

impl StorageBorrow<'_> {
    /// Whether the borrow is exclusive (allows writing).
    pub fn is_exclusive(&self) -> bool {
        self.exclusive
    }

    /// The borrowed storage.
    pub fn storage(&self) -> &Storage {
        self.storage
    }
}

impl Drop for StorageBorrow<'_> {
    fn drop(&mut self) {
        self.storage.release(self.exclusive);
    }
}

/// The error of a borrow that conflicts with another (exclusive or shared).
#[cold]
pub(crate) fn borrow_error(exclusive: bool) -> TensorError {
    TensorError::StorageBorrowed(if exclusive {
        "cannot write a tensor's storage while it is borrowed (a view of it is being read or \
         written)"
    } else {
        "cannot read a tensor's storage while it is being written"
    })
}

impl fmt::Debug for StorageBorrow<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StorageBorrow")
            .field("exclusive", &self.exclusive)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu_alloc::HUGE_PAGE_BYTES;

    #[test]
    fn alignment_and_zeroing() {
        let huge = HUGE_PAGE_BYTES;
        for n in [0usize, 1, 63, 64, 65, 1000, huge - 1, huge, huge + 5] {
            let s = Storage::zeros(Device::CPU, n).unwrap();
            let align = if n <= INLINE_BYTES {
                INLINE_ALIGNMENT
            } else if n < huge {
                STORAGE_ALIGNMENT
            } else {
                // Note [Huge pages for large buffers]
                huge
            };
            assert_eq!(s.data_ptr() as usize % align, 0, "{n}");
            let b = s.try_borrow().unwrap();
            assert!(s.bytes(&b).unwrap().iter().all(|x| *x == 0));
            assert_eq!(s.bytes(&b).unwrap().len(), n);
        }
        assert!(Storage::zeros(Device::META, 10)
            .unwrap()
            .data_ptr()
            .is_null());
    }

    #[test]
    fn from_vec_small_and_large() {
        let s = Storage::from_vec(vec![1u8, 2, 3]);
        let b = s.try_borrow().unwrap();
        assert_eq!(s.bytes(&b).unwrap(), &[1, 2, 3]);
        let big: Vec<i64> = (0..100).collect();
        let ptr = big.as_ptr() as usize;
        let s = Storage::from_vec(big);
        assert_eq!(
            s.data_ptr() as usize,
            ptr,
            "large vectors are adopted, not copied"
        );
        let b = s.try_borrow().unwrap();
        assert_eq!(s.bytes(&b).unwrap().len(), 800);
        assert_eq!(&s.bytes(&b).unwrap()[8..16], &1i64.to_ne_bytes());
        let mut v = Vec::with_capacity(50);
        v.extend([1.5f32; 20]);
        let s = Storage::from_vec(v);
        assert_eq!(s.nbytes(), 80);
    }

    #[test]
    fn borrow_flag() {
        let s = Storage::zeros(Device::CPU, 8).unwrap();
        let r1 = s.try_borrow().unwrap();
        let r2 = s.try_borrow().unwrap();
        assert!(s.try_borrow_mut().is_err());
        drop(r1);
        assert!(s.try_borrow_mut().is_err());
        drop(r2);
        let w = s.try_borrow_mut().unwrap();
        assert!(w.is_exclusive());
        assert!(s.try_borrow().is_err());
        assert!(s.try_borrow_mut().is_err());
        drop(w);
        assert!(s.try_borrow().is_ok());
        let other = Storage::zeros(Device::CPU, 8).unwrap();
        let b = other.try_borrow().unwrap();
        assert!(s.bytes(&b).is_err());
    }

    #[test]
    fn split_into_disjoint_slices() {
        for n in [40usize, 300] {
            let s = Storage::cpu_with(n, |b| {
                b.iter_mut().enumerate().for_each(|(i, x)| *x = i as u8)
            })
            .unwrap();
            let ptr = s.data_ptr() as usize;
            let parts = s.split(&[20..30, 0..8, 30..30, 8..20]).unwrap();
            assert_eq!(
                parts.iter().map(Storage::nbytes).collect::<Vec<_>>(),
                [10, 8, 0, 12]
            );
            if n > INLINE_BYTES {
                assert_eq!(parts[0].data_ptr() as usize, ptr + 20, "no copy");
            }
            for (p, first) in parts.iter().zip([20u8, 0, 0, 8]) {
                let b = p.try_borrow().unwrap();
                let bytes = p.bytes(&b).unwrap();
                assert!(bytes.iter().enumerate().all(|(i, x)| *x == first + i as u8));
            }
            // Disjoint slices are borrowed independently; a slice's writes stay in it.
            let w = parts[0].try_borrow_mut().unwrap();
            let r = parts[3].try_borrow().unwrap();
            drop((w, r));
            let mut first = parts.into_iter().next().unwrap();
            Shared::get_mut(&mut first.0).unwrap().bytes_mut_unique()[0] = 99;
            // Slices of a slice share the allocation, which outlives the first slice.
            let sub = first.split(&[1..3, 0..1]).unwrap();
            let b = sub[1].try_borrow().unwrap();
            assert_eq!(sub[1].bytes(&b).unwrap(), [99]);
        }
    }

    #[test]
    #[allow(clippy::single_range_in_vec_init)] // ranges of bytes, not vectors of indices
    fn split_refuses_bad_ranges() {
        let mk = || Storage::zeros(Device::CPU, 100).unwrap();
        for ranges in [vec![0..10, 5..20], vec![90..101], vec![10..20, 19..19]] {
            assert!(mk().split(&ranges).is_err(), "{ranges:?}");
        }
        #[allow(clippy::reversed_empty_ranges)]
        let reversed = [5..4];
        assert!(mk().split(&reversed).is_err());
        let s = mk();
        let other = s.clone();
        assert!(s.split(&[0..1]).unwrap_err().to_string().contains("shared"));
        drop(other);
        assert!(Storage::zeros(Device::META, 8)
            .unwrap()
            .split(&[0..8])
            .is_err());
    }

    #[test]
    fn cpu_with_initialises() {
        let s = Storage::cpu_with(100, |b| {
            b.iter_mut().enumerate().for_each(|(i, x)| *x = i as u8)
        })
        .unwrap();
        let b = s.try_borrow().unwrap();
        assert_eq!(s.bytes(&b).unwrap()[99], 99);
    }
}
