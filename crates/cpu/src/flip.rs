//! `flip` (TensorTransformations.cpp): a copy with the order of the elements along some
//! dimensions reversed.

use switchboard_ops::structured::reduction_mask;
use switchboard_tensor::{Access, DimVec, Tensor};

use crate::copy::empty_like_layout;
use crate::dispatch_all_types_and_bool;
use crate::error::{check_cpu_or_meta, Result};
use crate::index::Positions;
use crate::loops::GRAIN_SIZE;

/// `flip(Tensor self, int[] dims)`: `self` with its elements in reverse order along each of
/// `dims` (a repeated dim fails as in PyTorch), laid out as `self`.
///
/// ```
/// use switchboard_cpu::flip;
/// use switchboard_tensor::Tensor;
/// let t = Tensor::from_vec(vec![1i64, 2, 3, 4, 5, 6], &[2, 3]).unwrap();
/// assert_eq!(flip(&t, &[1]).unwrap().to_vec::<i64>().unwrap(), [3, 2, 1, 6, 5, 4]);
/// assert_eq!(flip(&t, &[0, -1]).unwrap().to_vec::<i64>().unwrap(), [6, 5, 4, 3, 2, 1]);
/// ```
pub fn flip(self_: &Tensor, dims: &[i64]) -> Result<Tensor> {
    check_cpu_or_meta("flip", self_.device())?;
    // `dim_list_to_bitset`: each dim wrapped, none twice. An empty list flips nothing.
    let flipped = if dims.is_empty() {
        smallvec::SmallVec::from_elem(false, self_.dim())
    } else {
        reduction_mask(Some(dims), self_.dim())?
    };
    let out = empty_like_layout(self_, self_.dtype(), self_.device())?;
    if !out.has_data() || out.numel() == 0 {
        return Ok(out);
    }
    // The source read backwards along the flipped dims: from its last element there, with
    // the stride negated.
    let mut src_strides = DimVec::from_slice(self_.strides());
    let mut start = 0isize;
    for (d, &f) in flipped.iter().enumerate() {
        if f && self_.dim() > 0 {
            start += (self_.sizes()[d] - 1) as isize * src_strides[d] as isize;
            src_strides[d] = -src_strides[d];
        }
    }
    let pos = Positions::new(self_.sizes(), [out.strides(), &src_strides]);
    let _access = Access::new(&[self_], &[&out])?;
    let (po, ps) = (out.mut_data_ptr() as usize, self_.data_ptr() as usize);
    dispatch_all_types_and_bool!(self_.dtype(), "flip_cpu", T => {
        pos.par_run(GRAIN_SIZE, |[oo, os]| {
            // SAFETY: `_access` holds the borrows; `start + os` addresses an element of
            // `self_` (the flipped position of `out`'s `oo`), `oo` one of the fresh `out`.
            unsafe { *(po as *mut T).offset(oo) = *(ps as *const T).offset(start + os) };
        });
        Ok::<(), switchboard_tensor::TensorError>(())
    })?;
    drop(_access);
    Ok(out)
}
