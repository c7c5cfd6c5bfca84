//! Strided iteration and copies: [`StridedOffsets`] (the element offsets of a strided tensor
//! in row-major order), [`copy_strided`] and `contiguous`.

use crate::access::{convert, Access};
use crate::dispatch_dtype;
use crate::dtype::StorageElement;
use crate::error::{Result, TensorError};
use crate::layout::MemoryFormat;
use crate::tensor::Tensor;
use crate::DimVec;
use crate::RawOps;

/// The element offsets (relative to the first element) of a tensor with `sizes` and
/// `strides`, in row-major order of its indices. Yields `numel` offsets (none for an empty
/// tensor, one for a 0-dim tensor).
///
/// ```
/// use switchboard_tensor::StridedOffsets;
/// // A transposed 2x3 tensor: sizes (3, 2), strides (1, 3).
/// let offs: Vec<i64> = StridedOffsets::new(&[3, 2], &[1, 3]).collect();
/// assert_eq!(offs, [0, 3, 1, 4, 2, 5]);
/// ```
#[derive(Clone, Debug)]
pub struct StridedOffsets {
    sizes: DimVec,
    strides: DimVec,
    index: DimVec,
    offset: i64,
    remaining: usize,
}

impl StridedOffsets {
    /// Offsets for `sizes`/`strides`. Meant for equal lengths and non-negative sizes; extra
    /// strides are ignored, a missing stride or a negative size makes the iteration empty, and
    /// offsets wrap rather than overflow.
    pub fn new(sizes: &[i64], strides: &[i64]) -> StridedOffsets {
        let valid = strides.len() >= sizes.len() && sizes.iter().all(|s| *s >= 0);
        let numel = sizes
            .iter()
            .try_fold(1usize, |acc, &s| acc.checked_mul(s as usize))
            .unwrap_or(usize::MAX);
        StridedOffsets {
            sizes: DimVec::from_slice(sizes),
            strides: DimVec::from_slice(&strides[..sizes.len().min(strides.len())]),
            index: DimVec::from_elem(0, sizes.len()),
            offset: 0,
            remaining: if valid { numel } else { 0 },
        }
    }
}

impl Iterator for StridedOffsets {
    type Item = i64;

    #[inline]
    fn next(&mut self) -> Option<i64> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let current = self.offset;
        if self.remaining > 0 {
            // Advance the multi-index like an odometer.
            let mut d = self.sizes.len();
            while d > 0 {
                d -= 1;
                self.index[d] += 1;
                self.offset = self.offset.wrapping_add(self.strides[d]);
                if self.index[d] < self.sizes[d] {
                    break;
                }
                self.offset = self
                    .offset
                    .wrapping_sub(self.strides[d].wrapping_mul(self.sizes[d]));
                self.index[d] = 0;
            }
        }
        Some(current)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for StridedOffsets {}

/// Copies the elements of `src` (shape `sizes`, strides `src_strides`) to `dst` (same shape,
/// strides `dst_strides`), in row-major index order.
///
/// # Safety
/// For every index within `sizes`, `src` plus its strided offset must be valid for reads and
/// `dst` plus its offset valid for writes, and no other reference to the written elements may
/// be alive (hold an [`Access`] covering both tensors). The regions may alias only if each
/// destination element is written from the source element at the same address or from one not
/// read after the write (an identical layout satisfies this).
pub unsafe fn copy_strided_raw<T: Copy>(
    src: *const T,
    src_strides: &[i64],
    dst: *mut T,
    dst_strides: &[i64],
    sizes: &[i64],
) {
    let srcs = StridedOffsets::new(sizes, src_strides);
    let dsts = StridedOffsets::new(sizes, dst_strides);
    for (s, d) in srcs.zip(dsts) {
        // SAFETY: the caller guarantees every in-range offset is valid and unaliased.
        unsafe { *dst.offset(d as isize) = *src.offset(s as isize) };
    }
}

/// `dst.copy_(src)`: copies `src` into `dst` elementwise, broadcasting `src` to `dst`'s shape
/// and converting dtypes. Both must be CPU tensors with data. When they share a storage the
/// source is read out first, so overlapping copies give the result of a copy through a
/// temporary.
///
/// ```
/// use switchboard_tensor::RawOps;
/// use switchboard_tensor::{copy_strided, ScalarType, Tensor};
/// let src = Tensor::from_vec(vec![1i32, 2, 3, 4, 5, 6], &[2, 3]).unwrap();
/// let dst = Tensor::zeros(&[3, 2], ScalarType::Float).unwrap();
/// copy_strided(&src.t().unwrap(), &dst).unwrap();
/// assert_eq!(dst.to_vec::<f32>().unwrap(), [1., 4., 2., 5., 3., 6.]);
/// ```
pub fn copy_strided(src: &Tensor, dst: &Tensor) -> Result<()> {
    for t in [src, dst] {
        if !t.has_data() {
            return Err(TensorError::NoData {
                device: t.device().to_string(),
            });
        }
    }
    let src = src.expand(dst.sizes())?;
    if src.is_alias_of(dst) {
        // Go through a temporary: correct for any overlap.
        return copy_disjoint(&src.deep_clone()?, dst);
    }
    copy_disjoint(&src, dst)
}

fn copy_disjoint(src: &Tensor, dst: &Tensor) -> Result<()> {
    let access = Access::new(&[src], &[dst])?;
    if src.dtype() == dst.dtype() && src.is_contiguous() && dst.is_contiguous() {
        // The same bytes in the same order: one copy of the block, not one per element.
        let nbytes = usize::try_from(dst.numel()).unwrap_or(0) * dst.element_size();
        // No bytes: no pointer to use.
        if nbytes > 0 {
            // SAFETY: both tensors have data and are contiguous with `dst`'s sizes (`src` was
            // expanded to them; an expanded dimension has stride 0 and is not contiguous), so
            // each addresses `nbytes` bytes from its data pointer within its storage (Note
            // [Tensor bounds invariant]); the storages are distinct, and `access` excludes
            // every other reader and writer of `dst`'s storage.
            unsafe { std::ptr::copy_nonoverlapping(src.data_ptr(), dst.mut_data_ptr(), nbytes) };
        }
        drop(access);
        return Ok(());
    }
    // Between complex and real types, C++'s casts as PyTorch's copy_ uses them (Note
    // [Complex elements]): a real value is the real part, a complex one loses its imaginary part.
    dispatch_dtype!(src.dtype(), S => {
        dispatch_dtype!(dst.dtype(), D => {
            copy_convert::<S, D>(src, dst, convert::<S, D>);
        }, D => {
            copy_convert::<S, D>(src, dst, |v| D::from_complex(v.to_complex()));
        })
    }, S => {
        dispatch_dtype!(dst.dtype(), D => {
            copy_convert::<S, D>(src, dst, |v| D::from_complex(v.to_complex()));
        }, D => {
            copy_convert::<S, D>(src, dst, |v| D::from_complex(v.to_complex()));
        })
    });
    drop(access);
    Ok(())
}

/// Copies with conversion; the caller holds an `Access` over both (disjoint storages).
fn copy_convert<S: StorageElement, D: StorageElement>(
    src: &Tensor,
    dst: &Tensor,
    convert: impl Fn(S) -> D,
) {
    let sp = src.data_ptr() as *const S;
    let dp = dst.mut_data_ptr() as *mut D;
    let offsets = StridedOffsets::new(dst.sizes(), src.strides())
        .zip(StridedOffsets::new(dst.sizes(), dst.strides()));
    for (s, d) in offsets {
        // SAFETY: both tensors have data, their in-range offsets are in bounds (Note [Tensor
        // bounds invariant]), the dtypes match S and D, the storages are distinct, and the
        // caller's Access excludes every other reader and writer of `dst`'s storage.
        unsafe { *dp.add(d as usize) = convert(*sp.add(s as usize)) };
    }
}

impl Tensor {
    /// `self` if it is contiguous in `format`, else a copy in that format.
    pub(crate) fn contiguous_impl(&self, format: MemoryFormat) -> Result<Tensor> {
        if format == MemoryFormat::Preserve {
            return Err(TensorError::invalid(
                "preserve memory format is unsupported by the contiguous operator",
            ));
        }
        if self.is_contiguous_as(format) {
            return Ok(self.clone());
        }
        let out = Tensor::empty_with_format(self.sizes(), self.dtype(), self.device(), format)?;
        if self.has_data() {
            copy_strided(self, &out)?;
        }
        Ok(out)
    }

    /// A contiguous copy, always (`clone()` in PyTorch).
    pub fn deep_clone(&self) -> Result<Tensor> {
        let out = Tensor::empty_on(self.sizes(), self.dtype(), self.device())?;
        if self.has_data() {
            copy_strided(self, &out)?;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::ScalarType;

    #[test]
    fn offsets() {
        assert_eq!(StridedOffsets::new(&[], &[]).collect::<Vec<_>>(), [0]);
        assert_eq!(StridedOffsets::new(&[0, 3], &[3, 1]).count(), 0);
        assert_eq!(
            StridedOffsets::new(&[2, 2], &[0, 1]).collect::<Vec<_>>(),
            [0, 1, 0, 1]
        );
        assert_eq!(StridedOffsets::new(&[2, 3, 4], &[12, 4, 1]).len(), 24);
    }

    #[test]
    fn overlapping_copy_goes_through_temporary() {
        let t = Tensor::arange(0, 5, 1, None).unwrap();
        let src = t.narrow(0, 0, 4).unwrap();
        let dst = t.narrow(0, 1, 4).unwrap();
        copy_strided(&src, &dst).unwrap();
        assert_eq!(t.to_vec::<i64>().unwrap(), [0, 0, 1, 2, 3]);
    }

    #[test]
    fn broadcasting_copy_and_meta() {
        let src = Tensor::from_vec(vec![7u8], &[1]).unwrap();
        let dst = Tensor::zeros(&[2, 2], ScalarType::Short).unwrap();
        copy_strided(&src, &dst).unwrap();
        assert_eq!(dst.to_vec::<i16>().unwrap(), [7; 4]);
        let m = Tensor::zeros_on(&[2, 2], ScalarType::Short, crate::Device::META).unwrap();
        assert!(copy_strided(&src, &m).is_err());
        let mt = m.t().unwrap().contiguous().unwrap();
        assert!(mt.is_contiguous());
        assert!(!mt.has_data());
    }
}
