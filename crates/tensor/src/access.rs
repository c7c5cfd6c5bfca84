//! Reading and writing tensor data: typed slices under borrows ([`DataRef`], [`DataMut`]),
//! copies out (`to_vec`, `item`), and the raw-pointer [`Access`] that kernels use
//! (Note [Storage mutability]).

use std::fmt;
use std::ops::{Deref, DerefMut};

use smallvec::SmallVec;

use crate::dispatch_dtype;
use crate::dtype::{Element, ScalarType};
use crate::error::{Result, TensorError};
use crate::scalar::Scalar;
use crate::storage::{Storage, StorageBorrow};
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
    fn check_typed<T: Element>(&self) -> Result<()> {
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
    pub fn data_ptr_as<T: Element>(&self) -> Result<*const T> {
        self.check_typed::<T>()?;
        Ok(self.data_ptr() as *const T)
    }

    /// [`mut_data_ptr`](Self::mut_data_ptr) typed, checking the dtype and that there is data.
    #[inline]
    pub fn mut_data_ptr_as<T: Element>(&self) -> Result<*mut T> {
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
    pub fn data<T: Element>(&self) -> Result<DataRef<'_, T>> {
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
    pub fn data_mut<T: Element>(&self) -> Result<DataMut<'_, T>> {
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

    /// The elements in row-major order, for any strided CPU tensor of dtype `T`.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
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
        dispatch_dtype!(self.dtype, S => {
            let v = self.to_vec::<S>()?;
            Ok(v.into_iter().map(convert::<S, T>).collect())
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
        })
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
    borrows: SmallVec<[StorageBorrow<'a>; 4]>,
}

impl<'a> Access<'a> {
    /// Borrows the storages of `reads` (shared) and `writes` (exclusive). Fails without
    /// waiting if any is borrowed in a conflicting way elsewhere.
    pub fn new(reads: &[&'a Tensor], writes: &[&'a Tensor]) -> Result<Access<'a>> {
        let mut borrows: SmallVec<[StorageBorrow<'a>; 4]> = SmallVec::new();
        let held = |b: &SmallVec<[StorageBorrow<'a>; 4]>, s: &Storage| {
            b.iter().any(|x| Storage::ptr_eq(x.storage(), s))
        };
        for t in writes {
            let s = t.storage();
            if s.has_data() && !held(&borrows, s) {
                borrows.push(s.try_borrow_mut()?);
            }
        }
        for t in reads {
            let s = t.storage();
            if s.has_data() && !held(&borrows, s) {
                borrows.push(s.try_borrow()?);
            }
        }
        Ok(Access { borrows })
    }

    /// Whether the access covers writing `t`'s storage.
    pub fn can_write(&self, t: &Tensor) -> bool {
        self.borrows
            .iter()
            .any(|b| b.is_exclusive() && Storage::ptr_eq(b.storage(), t.storage()))
    }
}

impl fmt::Debug for Access<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Access")
            .field("storages", &self.borrows.len())
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
        assert_eq!(acc.borrows.len(), 1);
        drop(acc);
        let m = Tensor::zeros_on(&[2], ScalarType::Int, Device::META).unwrap();
        let acc = Access::new(&[&m], &[&m]).unwrap();
        assert_eq!(acc.borrows.len(), 0);
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
