//! `gather`.

use switchboard_tensor::{wrap_dim, Access, Tensor};

use crate::error::{check_cpu_or_meta, invalid, same_device, shape_str, Result};

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
                "Size does not match at dimension {i} expected index {} to be no larger \
                 than self {} apart from dimension {d}",
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
