//! Reading and writing tensor data: typed slices under borrows ([`DataRef`], [`DataMut`]),
//! copies out (`to_vec`, `item`), and the raw-pointer [`Access`] that kernels use
//! (Note [Storage mutability]).

use std::fmt;
use std::ops::{Deref, DerefMut};

use crate::dispatch_dtype;
use crate::dtype::{Element, ScalarType, StorageElement};
use crate::error::{Result, TensorError};
use crate::scalar::Scalar;
use crate::storage::{borrow_error, Storage, StorageBorrow};
use crate::strided::StridedOffsets;
use crate::tensor::{Tensor, TensorImpl};

/// A tensor's elements as `&[T]`, holding a shared borrow of its storage.
pub struct DataRef<'a, T> {
    slice: &'a [T],
    _borrow: StorageBorrow<'a>,
}

impl<T> Deref for DataRef<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.slice
    }
}

impl<T: fmt::Debug> fmt::Debug for DataRef<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.slice.fmt(f)
    }
}

/// A tensor's elements as `&mut [T]`, holding an exclusive borrow of its storage.
pub struct DataMut<'a, T> {
    slice: &'a mut [T],
    _borrow: StorageBorrow<'a>,
}

impl<T> Deref for DataMut<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.slice
    }
}

impl<T> DerefMut for DataMut<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.slice
    }
}

impl<T: fmt::Debug> fmt::Debug for DataMut<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.slice.fmt(f)
    }
}

impl TensorImpl {
    fn check_typed<T: StorageElement>(&self) -> Result<()> {
        if T::DTYPE != self.dtype {
            return Err(TensorError::DtypeMismatch {
                expected: T::DTYPE,
                found: self.dtype,
            });
        }
        self.check_data()
    }

    fn check_data(&self) -> Result<()> {
        if !self.has_data() {
            return Err(TensorError::NoData {
                device: self.device.to_string(),
            });
        }
        Ok(())
    }

    /// Pointer to the tensor's first element (storage start + offset), or null without data.
    /// Getting it is safe; dereferencing it needs an [`Access`] (Note [Storage mutability]).
    #[inline]
    pub fn data_ptr(&self) -> *const u8 {
        self.mut_data_ptr() as *const u8
    }

    /// Mutable pointer to the tensor's first element, or null without data. See
    /// [`data_ptr`](Self::data_ptr).
    #[inline]
    pub fn mut_data_ptr(&self) -> *mut u8 {
        let base = self.storage.data_ptr();
        if base.is_null() {
            return base;
        }
        // `wrapping_add` keeps this safe; by Note [Tensor bounds invariant] the result is in
        // bounds (or one past the end for empty tensors).
        base.wrapping_add((self.storage_offset as usize).wrapping_mul(self.element_size()))
    }

    /// [`data_ptr`](Self::data_ptr) typed, checking the dtype and that there is data.
    #[inline]
    pub fn data_ptr_as<T: StorageElement>(&self) -> Result<*const T> {
        self.check_typed::<T>()?;
        Ok(self.data_ptr() as *const T)
    }

    /// [`mut_data_ptr`](Self::mut_data_ptr) typed, checking the dtype and that there is data.
    #[inline]
    pub fn mut_data_ptr_as<T: StorageElement>(&self) -> Result<*mut T> {
        self.check_typed::<T>()?;
        Ok(self.mut_data_ptr() as *mut T)
    }

    /// The elements of a contiguous CPU tensor as `&[T]` (behind a guard holding a shared
    /// borrow of the storage). Fails for a wrong `T`, a tensor without data, a non-contiguous
    /// tensor, or a storage being written.
    ///
    /// ```
    /// use switchboard_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
    /// assert_eq!(&*t.data::<f32>().unwrap(), &[1.0, 2.0]);
    /// assert_eq!(t.data::<i64>().unwrap_err().to_string(),
    ///            "expected scalar type Long but found Float");
    /// ```
    pub fn data<T: StorageElement>(&self) -> Result<DataRef<'_, T>> {
        self.check_typed::<T>()?;
        if !self.is_contiguous {
            return Err(TensorError::NotContiguous { op: "data" });
        }
        let borrow = self.storage.try_borrow()?;
        if self.numel == 0 {
            return Ok(DataRef {
                slice: &[],
                _borrow: borrow,
            });
        }
        // SAFETY: the storage holds initialised bytes; by Note [Tensor bounds invariant] the
        // `numel` contiguous elements from `data_ptr` are inside it, and the pointer is aligned
        // for T (buffers are 16-, 64- or T-aligned and offsets are whole elements). The dtype check
        // makes them valid `T`s (Note [Element bit patterns]). `borrow` excludes writers for
        // the slice's lifetime.
        let slice =
            unsafe { std::slice::from_raw_parts(self.data_ptr() as *const T, self.numel as usize) };
        Ok(DataRef {
            slice,
            _borrow: borrow,
        })
    }

    /// The elements of a contiguous CPU tensor as `&mut [T]` (behind a guard holding an
    /// exclusive borrow of the storage: fails while any view of it is borrowed).
    ///
    /// ```
    /// use switchboard_tensor::{ScalarType, Tensor};
    /// let t = Tensor::zeros(&[3], ScalarType::Int).unwrap();
    /// t.data_mut::<i32>().unwrap()[1] = 7;
    /// assert_eq!(t.to_vec::<i32>().unwrap(), [0, 7, 0]);
    /// ```
    pub fn data_mut<T: StorageElement>(&self) -> Result<DataMut<'_, T>> {
        self.check_typed::<T>()?;
        if !self.is_contiguous {
            return Err(TensorError::NotContiguous { op: "data_mut" });
        }
        let borrow = self.storage.try_borrow_mut()?;
        if self.numel == 0 {
            return Ok(DataMut {
                slice: &mut [],
                _borrow: borrow,
            });
        }
        // SAFETY: as in `data`, plus: `borrow` is exclusive, so no other reference to any byte
        // of the storage exists or can be created while the slice lives.
        let slice = unsafe {
            std::slice::from_raw_parts_mut(self.mut_data_ptr() as *mut T, self.numel as usize)
        };
        Ok(DataMut {
            slice,
            _borrow: borrow,
        })
    }

    /// The elements in row-major order, for any strided CPU tensor of dtype `T` (and tensors
    /// of devices that registered a host copy, Note [Host copies of tensors without data]).
    pub fn to_vec<T: StorageElement>(&self) -> Result<Vec<T>> {
        if let Some(host) = crate::host::host_copy(self) {
            return host?.to_vec::<T>();
        }
        self.check_typed::<T>()?;
        let _borrow = self.storage.try_borrow()?;
        let base = self.data_ptr() as *const T;
        if self.numel == 0 {
            return Ok(Vec::new());
        }
        if self.is_contiguous {
            // SAFETY: as in `data`; the borrow is held until the copy is done.
            let s = unsafe { std::slice::from_raw_parts(base, self.numel as usize) };
            return Ok(s.to_vec());
        }
        let mut out = Vec::with_capacity(self.numel as usize);
        for off in StridedOffsets::new(&self.sizes, &self.strides) {
            // SAFETY: `off` is an in-range strided offset, in bounds by Note [Tensor bounds
            // invariant]; the borrow excludes writers.
            out.push(unsafe { *base.add(off as usize) });
        }
        Ok(out)
    }

    /// The elements converted to `T`, whatever the tensor's dtype (via `f64` or `i64`).
    pub fn to_vec_as<T: Element>(&self) -> Result<Vec<T>> {
        if self.dtype == T::DTYPE {
            return self.to_vec::<T>();
        }
        // A complex value converts as C++'s cast to a real type: its real part.
        dispatch_dtype!(self.dtype, S => {
            let v = self.to_vec::<S>()?;
            Ok(v.into_iter().map(convert::<S, T>).collect())
        }, C => {
            let v = self.to_vec::<C>()?;
            Ok(v.into_iter().map(|z| T::from_complex(z.to_complex())).collect())
        })
    }

    /// The single element as a [`Scalar`] (`Tensor.item()`).
    pub fn item(&self) -> Result<Scalar> {
        if self.numel != 1 {
            return Err(TensorError::invalid(format!(
                "a Tensor with {} elements cannot be converted to Scalar",
                self.numel
            )));
        }
        dispatch_dtype!(self.dtype, S => {
            let v = self.to_vec::<S>()?[0];
            Ok(scalar_of(v, self.dtype))
        }, _C => Err(TensorError::invalid(format!(
            "item(): a {} element is not a Scalar here (complex Scalars are not supported)",
            self.dtype.c10_name()
        ))))
    }
}

/// Converts one element between types (through `i64` between integer types, so that large
/// values are exact, else through `f64`).
#[inline]
pub fn convert<S: Element, T: Element>(v: S) -> T {
    if S::DTYPE.is_integral(true) && T::DTYPE.is_integral(true) {
        T::from_i64(v.to_i64())
    } else if T::DTYPE == ScalarType::Bool {
        T::from_bool(v.to_bool())
    } else {
        T::from_f64(v.to_f64())
    }
}

fn scalar_of<S: Element>(v: S, dtype: ScalarType) -> Scalar {
    if dtype == ScalarType::Bool {
        Scalar::Bool(v.to_bool())
    } else if dtype.is_integral(false) {
        Scalar::Int(v.to_i64())
    } else {
        Scalar::Float(v.to_f64())
    }
}

/// The borrows a kernel holds while it reads and writes its tensors through raw pointers
/// (Note [Storage mutability]): exclusive for every storage written, shared for storages only
/// read; a storage both read and written is borrowed once, exclusively. Storages without data
/// are skipped.
///
/// ```
/// use switchboard_tensor::{Access, Tensor};
/// let a = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
/// let out = a.empty_like().unwrap();
/// let access = Access::new(&[&a], &[&out]).unwrap();
/// let (pa, po) = (a.data_ptr_as::<f32>().unwrap(), out.mut_data_ptr_as::<f32>().unwrap());
/// for i in 0..2 {
///     // SAFETY: `access` holds the borrows; i < numel of both contiguous tensors.
///     unsafe { *po.add(i) = *pa.add(i) * 2.0 };
/// }
/// drop(access);
/// assert_eq!(out.to_vec::<f32>().unwrap(), [2.0, 4.0]);
/// ```
pub struct Access<'a> {
    /// The first storages borrowed (each once); the rest in `more`. Released on drop. (Plain
    /// small fields: kernels borrow a few storages, and this is on every kernel's path.)
    first: [Option<&'a Storage>; INLINE_HELD],
    /// Bit `i`: `first[i]` is held exclusively.
    exclusive: u8,
    len: u8,
    more: Vec<(&'a Storage, bool)>,
}

/// Storages an [`Access`] holds without allocating.
const INLINE_HELD: usize = 4;

impl<'a> Access<'a> {
    /// Borrows the storages of `reads` (shared) and `writes` (exclusive). Fails without
    /// waiting if any is borrowed in a conflicting way elsewhere.
    ///
    /// Always inlined: kernels pass a few tensors, and inlined the bookkeeping stays in
    /// registers (this is on every kernel's path).
    #[inline(always)]
    pub fn new(reads: &[&'a Tensor], writes: &[&'a Tensor]) -> Result<Access<'a>> {
        let mut access = Access {
            first: [None; INLINE_HELD],
            exclusive: 0,
            len: 0,
            more: Vec::new(),
        };
        for t in writes {
            access.take(t.storage(), true)?;
        }
        for t in reads {
            access.take(t.storage(), false)?;
        }
        Ok(access)
    }

    /// The storages held, with whether exclusively.
    fn held(&self) -> impl Iterator<Item = (&'a Storage, bool)> + '_ {
        let ex = self.exclusive;
        self.first
            .iter()
            .enumerate()
            .filter_map(move |(i, s)| s.map(|s| (s, ex & (1 << i) != 0)))
            .chain(self.more.iter().copied())
    }

    /// Borrows `s` unless it has no data or is already held (by an earlier write or read:
    /// writes come first, so a storage both read and written is held exclusively).
    #[inline(always)]
    fn take(&mut self, s: &'a Storage, exclusive: bool) -> Result<()> {
        if !s.has_data() {
            return Ok(());
        }
        let held = (self.len as usize).min(INLINE_HELD);
        let seen = self.first[..held]
            .iter()
            .any(|h| h.is_some_and(|h| Storage::ptr_eq(h, s)))
            || self.more.iter().any(|(h, _)| Storage::ptr_eq(h, s));
        if seen {
            return Ok(());
        }
        if !s.acquire(exclusive) {
            // Dropping `self` releases what was taken so far.
            return Err(borrow_error(exclusive));
        }
        let i = self.len as usize;
        if i < INLINE_HELD {
            self.first[i] = Some(s);
            self.exclusive |= (exclusive as u8) << i;
            self.len += 1;
        } else {
            self.more.push((s, exclusive));
        }
        Ok(())
    }

    /// The number of storages held.
    #[cfg(test)]
    fn count(&self) -> usize {
        self.held().count()
    }

    /// Whether the access covers writing `t`'s storage.
    pub fn can_write(&self, t: &Tensor) -> bool {
        self.held()
            .any(|(s, exclusive)| exclusive && Storage::ptr_eq(s, t.storage()))
    }
}

impl Drop for Access<'_> {
    #[inline]
    fn drop(&mut self) {
        let held = (self.len as usize).min(INLINE_HELD);
        for (i, s) in self.first[..held].iter().enumerate() {
            if let Some(s) = s {
                s.release(self.exclusive & (1 << i) != 0);
            }
        }
        for (s, exclusive) in &self.more {
            s.release(*exclusive);
        }
    }
}

impl fmt::Debug for Access<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Access")
            .field("storages", &self.held().count())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Device;

    #[test]
    fn borrows_conflict_across_views() {
        let t = Tensor::zeros(&[4], ScalarType::Float).unwrap();
        let v = t.with_key_set(t.key_set());
        let r = t.data::<f32>().unwrap();
        assert!(
            v.data_mut::<f32>().is_err(),
            "a view's write conflicts with a read"
        );
        assert!(v.data::<f32>().is_ok(), "reads share");
        drop(r);
        let mut w = v.data_mut::<f32>().unwrap();
        w[0] = 1.0;
        assert!(t.to_vec::<f32>().is_err());
        assert!(Access::new(&[&t], &[]).is_err());
        drop(w);
        assert_eq!(t.to_vec::<f32>().unwrap(), [1.0, 0.0, 0.0, 0.0]);
    }

    #[test]
    fn access_dedups_storages() {
        let a = Tensor::zeros(&[2], ScalarType::Int).unwrap();
        let b = a.with_key_set(a.key_set());
        let acc = Access::new(&[&a, &b], &[&a]).unwrap();
        assert!(acc.can_write(&b));
        assert_eq!(acc.count(), 1);
        drop(acc);
        let m = Tensor::zeros_on(&[2], ScalarType::Int, Device::META).unwrap();
        let acc = Access::new(&[&m], &[&m]).unwrap();
        assert_eq!(acc.count(), 0);
    }

    #[test]
    fn access_many_storages_and_release_on_failure() {
        let ts: Vec<Tensor> = (0..7)
            .map(|_| Tensor::zeros(&[2], ScalarType::Float).unwrap())
            .collect();
        let refs: Vec<&Tensor> = ts.iter().collect();
        // ts[1] is both written and read: held once, exclusively.
        let acc = Access::new(&refs[1..], &refs[..2]).unwrap();
        assert_eq!(acc.count(), 7);
        assert!(acc.can_write(&ts[1]) && !acc.can_write(&ts[6]));
        assert!(
            ts[6].data::<f32>().is_ok(),
            "a read borrow past the inline ones"
        );
        assert!(ts[5].data_mut::<f32>().is_err());
        assert!(ts[0].data::<f32>().is_err());
        drop(acc);
        // A conflict in the middle releases the borrows taken before it.
        let w = ts[5].data_mut::<f32>().unwrap();
        assert!(Access::new(&refs, &refs[..1]).is_err());
        drop(w);
        for t in &ts {
            assert!(t.data_mut::<f32>().is_ok());
        }
    }

    #[test]
    fn uninit_tensors_written_then_read() {
        for n in [1usize, 3, 16, 17, 1000] {
            // SAFETY: every element is written below before anything reads them.
            let t = unsafe { Tensor::empty_uninit(&[n as i64], ScalarType::Long) }.unwrap();
            assert!(t.is_contiguous() && t.has_data());
            let access = Access::new(&[], &[&t]).unwrap();
            let p = t.mut_data_ptr_as::<i64>().unwrap();
            for i in 0..n {
                // SAFETY: `access` borrows the storage exclusively; i < numel.
                unsafe { p.add(i).write(i as i64) };
            }
            drop(access);
            assert_eq!(
                t.to_vec::<i64>().unwrap(),
                (0..n as i64).collect::<Vec<_>>()
            );
        }
        // Dropping one unread is fine.
        // SAFETY: never read.
        drop(unsafe { Tensor::empty_uninit(&[100], ScalarType::Bool) }.unwrap());
    }

    #[test]
    fn items_and_conversions() {
        let t = Tensor::from_vec(vec![300i64], &[]).unwrap();
        assert_eq!(t.item().unwrap(), Scalar::Int(300));
        assert_eq!(t.to_vec_as::<u8>().unwrap(), [44]);
        assert_eq!(t.to_vec_as::<f32>().unwrap(), [300.0]);
        assert_eq!(t.to_vec_as::<bool>().unwrap(), [true]);
        let f = Tensor::from_vec(vec![0.5f64], &[1]).unwrap();
        assert_eq!(f.to_vec_as::<bool>().unwrap(), [true]);
        assert_eq!(f.item().unwrap(), Scalar::Float(0.5));
        let z = Tensor::zeros(&[2], ScalarType::Bool).unwrap();
        assert_eq!(
            z.item().unwrap_err().to_string(),
            "a Tensor with 2 elements cannot be converted to Scalar"
        );
        let big = Tensor::from_vec(vec![i64::MAX], &[1]).unwrap();
        assert_eq!(big.to_vec_as::<i64>().unwrap(), [i64::MAX]);
        assert!(t.data_ptr_as::<f32>().is_err());
    }
}
