//! `masked_scatter` (+ in-place).

use switchboard_tensor::{broadcast_shapes, Access, MemoryFormat, RawOps, ScalarType, Tensor};

use crate::copy::clone;
use crate::error::{check_cpu_or_meta, invalid, same_device, Result};
use crate::iter::check_internal_overlap;
use crate::shape::check_no_overlap;

/// `masked_scatter_`'s body: `self`'s elements where `mask` (broadcast to `self`) is true,
/// in row-major order, take `source`'s elements in row-major order.
fn masked_scatter_into(self_: &Tensor, mask: &Tensor, source: &Tensor) -> Result<()> {
    check_internal_overlap(self_)?;
    if self_.dtype() != source.dtype() {
        return Err(invalid(format!(
            "masked_scatter: expected self and source to have same dtypes but got{} and {}",
            self_.dtype().c10_name(),
            source.dtype().c10_name()
        )));
    }
    if mask.dtype() != ScalarType::Bool {
        return Err(invalid(format!(
            "masked_scatter_ only supports boolean masks, but got mask with dtype {}",
            mask.dtype().c10_name()
        )));
    }
    let mask = mask.expand(self_.sizes())?;
    if !self_.has_data() {
        return Ok(());
    }
    check_no_overlap(self_, source)?;
    let source = source.contiguous()?;
    let n = source.numel() as usize;
    let _access = Access::new(&[&mask, &source], &[self_])?;
    let (ps, pm, pv) = (
        self_.mut_data_ptr() as usize,
        mask.data_ptr() as usize,
        source.data_ptr() as usize,
    );
    // Row-major order (PyTorch's `enforce_linear_iteration`), serially: the k-th true mask
    // element takes source element k.
    let size = self_.element_size();
    let mut taken = 0usize;
    let mut short = false;
    for (os, om) in RowMajor::new(self_, &mask) {
        // SAFETY: `_access` holds the borrows (`self` exclusively; `source` does not overlap
        // it); `om` and `os` are offsets of elements of the mask and of `self`; `taken < n`
        // elements of the contiguous source are read.
        unsafe {
            if *(pm as *const bool).offset(om) {
                if taken >= n {
                    short = true;
                    break;
                }
                std::ptr::copy_nonoverlapping(
                    (pv as *const u8).add(taken * size),
                    (ps as *mut u8).offset(os * size as isize),
                    size,
                );
                taken += 1;
            }
        }
    }
    if short {
        return Err(invalid(
            "Number of elements of source < number of ones in mask",
        ));
    }
    Ok(())
}

/// The element offsets of `a` and of `b` (of `a`'s shape), walked in row-major order.
struct RowMajor<'a> {
    a: &'a Tensor,
    b: &'a Tensor,
    coords: Vec<i64>,
    left: usize,
}

impl<'a> RowMajor<'a> {
    fn new(a: &'a Tensor, b: &'a Tensor) -> RowMajor<'a> {
        RowMajor {
            a,
            b,
            coords: vec![0; a.dim()],
            left: a.numel() as usize,
        }
    }
}

impl Iterator for RowMajor<'_> {
    type Item = (isize, isize);

    fn next(&mut self) -> Option<(isize, isize)> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let offset = |t: &Tensor| -> isize {
            self.coords
                .iter()
                .zip(t.strides())
                .map(|(&c, &s)| (c * s) as isize)
                .sum()
        };
        let item = (offset(self.a), offset(self.b));
        let sizes = self.a.sizes();
        for k in (0..sizes.len()).rev() {
            self.coords[k] += 1;
            if self.coords[k] < sizes[k] {
                break;
            }
            self.coords[k] = 0;
        }
        Some(item)
    }
}

/// `masked_scatter(Tensor self, Tensor mask, Tensor source) -> Tensor`
///
/// A contiguous copy of `self` (broadcast with `mask`) whose elements where `mask` is true
/// are, in row-major order, `source`'s first elements in row-major order.
///
/// ```
/// use switchboard_cpu::masked_scatter;
/// use switchboard_tensor::Tensor;
/// let s = Tensor::from_vec(vec![0.0f32; 4], &[4]).unwrap();
/// let m = Tensor::from_vec(vec![true, false, true, false], &[4]).unwrap();
/// let v = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
/// let r = masked_scatter(&s, &m, &v).unwrap();
/// assert_eq!(r.to_vec::<f32>().unwrap(), [1.0, 0.0, 2.0, 0.0]);
/// ```
pub fn masked_scatter(self_: &Tensor, mask: &Tensor, source: &Tensor) -> Result<Tensor> {
    let device = same_device(&[self_, mask, source])?;
    check_cpu_or_meta("masked_scatter", device)?;
    let shape = broadcast_shapes(&[mask.sizes(), self_.sizes()])?;
    let result = clone(&self_.expand(&shape)?, Some(MemoryFormat::Contiguous))?;
    masked_scatter_into(&result, mask, source)?;
    Ok(result)
}

/// `masked_scatter_(Tensor(a!) self, Tensor mask, Tensor source) -> Tensor(a!)`
pub fn masked_scatter_(self_: &Tensor, mask: &Tensor, source: &Tensor) -> Result<Tensor> {
    let device = same_device(&[self_, mask, source])?;
    check_cpu_or_meta("masked_scatter_", device)?;
    masked_scatter_into(self_, mask, source)?;
    Ok(self_.clone())
}
