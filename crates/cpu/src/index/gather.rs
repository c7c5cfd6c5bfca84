//! `gather` and `scatter_add` (+ in-place).

use switchboard_tensor::{wrap_dim, Access, DimVec, Tensor};

use crate::copy::copy_into;
use crate::dispatch_all_types_and_bool;
use crate::dispatch_dtype::{CpuElement, Num};
use crate::error::{check_cpu_or_meta, invalid, same_device, shape_str, Result};
use crate::iter::check_internal_overlap;
use crate::shape::check_no_overlap;

use super::common::*;

/// `gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor`
///
/// `out[i][j] = self[index[i][j]][j]` for `dim = 0` (and likewise for other dims): the
/// result has `index`'s shape and `self`'s dtype. `sparse_grad` only matters to autograd.
///
/// ```
/// use switchboard_cpu::gather;
/// use switchboard_tensor::Tensor;
/// let t = Tensor::from_vec(vec![1i32, 2, 3, 4], &[2, 2]).unwrap();
/// let i = Tensor::from_vec(vec![0i64, 0, 1, 0], &[2, 2]).unwrap();
/// assert_eq!(gather(&t, 1, &i, false).unwrap().to_vec::<i32>().unwrap(), [1, 1, 4, 3]);
/// ```
pub fn gather(self_: &Tensor, dim: i64, index: &Tensor, sparse_grad: bool) -> Result<Tensor> {
    let _ = sparse_grad;
    let device = same_device(&[self_, index])?;
    check_cpu_or_meta("gather", device)?;
    let d = wrap_dim(dim, self_.dim())?;
    let result = Tensor::empty_on(index.sizes(), self_.dtype(), device)?;
    if index.numel() == 0 {
        return Ok(result);
    }
    if !is_index_dtype(index) {
        return Err(invalid("gather(): Expected dtype int32/int64 for index"));
    }
    // `gather_shape_check`.
    let rank = self_.dim().max(1);
    if rank != index.dim().max(1) {
        return Err(invalid(
            "Index tensor must have the same number of dimensions as input tensor",
        ));
    }
    for i in (0..rank).filter(|&i| i != d) {
        if nonempty_size(index, i) > nonempty_size(self_, i) {
            return Err(invalid(format!(
                "Size does not match at dimension {i} expected index {} to be smaller than \
                 self {} apart from dimension {d}",
                shape_str(index.sizes()),
                shape_str(self_.sizes())
            )));
        }
    }
    if !result.has_data() {
        return Ok(result);
    }
    let idx = index_values(index, &result)?;
    check_bounds(&idx, d, nonempty_size(self_, d))?;
    let (x, y) = (nonempty(self_)?, nonempty(&result)?);
    let _access = Access::new(&[&x], &[&y])?;
    let (px, py) = (x.data_ptr() as usize, y.mut_data_ptr() as usize);
    by_element_size!(x.element_size(), E => {
        scatter_gather(&x, y.sizes(), &idx, &y, d, |ox, oy| {
            // SAFETY: `_access` holds the borrows; `ox` addresses `self` at an index position
            // (checked in bounds; index sizes <= self sizes off `dim`); each output element
            // is written once.
            unsafe { *(py as *mut E).offset(oy) = *(px as *const E).offset(ox) }
        })
    });
    Ok(result)
}

/// `scatter_shape_check` and the dtype checks of `scatter_add`.
fn scatter_add_checks(self_: &Tensor, d: usize, index: &Tensor, src: &Tensor) -> Result<()> {
    if index.numel() != 0 && !is_index_dtype(index) {
        return Err(invalid("scatter(): Expected dtype int32/int64 for index"));
    }
    if self_.dtype() != src.dtype() {
        return Err(invalid(
            "scatter(): Expected self.dtype to be equal to src.dtype",
        ));
    }
    if index.numel() == 0 {
        return Ok(());
    }
    let rank = self_.dim().max(1);
    if rank != index.dim().max(1) {
        return Err(invalid(
            "Index tensor must have the same number of dimensions as self tensor",
        ));
    }
    let wrong = (0..rank).any(|i| i != d && nonempty_size(index, i) > nonempty_size(self_, i))
        || (src.dim().max(1) == rank
            && (0..rank).any(|i| nonempty_size(index, i) > nonempty_size(src, i)));
    if src.dim().max(1) != rank {
        return Err(invalid(
            "Index tensor must have the same number of dimensions as src tensor",
        ));
    }
    if wrong {
        return Err(invalid(format!(
            "Expected index {} to be smaller than self {} apart from dimension {d} and to be \
             smaller size than src {}",
            shape_str(index.sizes()),
            shape_str(self_.sizes()),
            shape_str(src.sizes())
        )));
    }
    Ok(())
}

fn scatter_add_impl(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    src: &Tensor,
    inplace: bool,
) -> Result<Tensor> {
    let device = same_device(&[self_, index, src])?;
    check_cpu_or_meta("scatter_add", device)?;
    let d = wrap_dim(dim, self_.dim())?;
    scatter_add_checks(self_, d, index, src)?;
    let result = if inplace {
        check_internal_overlap(self_)?;
        check_no_overlap(self_, index)?;
        check_no_overlap(self_, src)?;
        self_.clone()
    } else {
        let r = Tensor::empty_on(self_.sizes(), self_.dtype(), device)?;
        if r.has_data() {
            copy_into(&r, self_)?;
        }
        r
    };
    if index.numel() == 0 || !result.has_data() {
        return Ok(result);
    }
    let idx = index_values(index, &result)?;
    check_bounds(&idx, d, nonempty_size(&result, d))?;
    let (x, y) = (nonempty(&result)?, nonempty(src)?);
    let isizes: DimVec = if index.dim() == 0 {
        DimVec::from_slice(&[1])
    } else {
        DimVec::from_slice(index.sizes())
    };
    let _access = Access::new(&[&y], &[&x])?;
    let (px, py) = (x.mut_data_ptr() as usize, y.data_ptr() as usize);
    dispatch_all_types_and_bool!(x.dtype(), "scatter_add_", T => {
        scatter_gather(&x, &isizes, &idx, &y, d, |ox, oy| {
            // SAFETY: `_access` holds the borrows (`self` exclusively, `src` does not overlap
            // it); offsets are in bounds (indices checked; index sizes <= self and src
            // sizes); threads own disjoint positions outside `dim`, so no element of `self`
            // is written by two threads.
            unsafe {
                let p = (px as *mut T).offset(ox);
                let v = *(py as *const T).offset(oy);
                *p = T::from_acc((*p).to_acc().add(v.to_acc()));
            }
        });
        Ok(())
    })?;
    Ok(result)
}

/// `scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor`
///
/// A copy of `self` where, for `dim = 0`, `out[index[i][j]][j] += src[i][j]` (likewise for
/// other dims); repeated indices accumulate.
///
/// ```
/// use switchboard_cpu::scatter_add;
/// use switchboard_tensor::{ScalarType, Tensor};
/// let z = Tensor::zeros(&[3], ScalarType::Float).unwrap();
/// let i = Tensor::from_vec(vec![0i64, 2, 0], &[3]).unwrap();
/// let s = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
/// assert_eq!(scatter_add(&z, 0, &i, &s).unwrap().to_vec::<f32>().unwrap(), [4.0, 0.0, 2.0]);
/// ```
pub fn scatter_add(self_: &Tensor, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
    scatter_add_impl(self_, dim, index, src, false)
}

/// `scatter_add_(Tensor(a!) self, int dim, Tensor index, Tensor src) -> Tensor(a!)`
pub fn scatter_add_(self_: &Tensor, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
    scatter_add_impl(self_, dim, index, src, true)
}
