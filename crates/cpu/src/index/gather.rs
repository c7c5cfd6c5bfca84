//! `gather` and `gather.out` (PyTorch's `gather_out` impl): the checks and the output's
//! geometry are its meta function's (`switchboard_ops::structured::gather`).

use switchboard_ops::structured;
use switchboard_tensor::{wrap_dim, Access, Tensor};

use crate::error::{check_cpu, Result};
use crate::structured_output::structured_output;

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
    gather_impl(self_, dim, index, sparse_grad, None)
}

/// `gather.out(Tensor self, int dim, Tensor index, *, bool sparse_grad=False, Tensor(a!) out)
/// -> Tensor(a!)`
pub fn gather_out(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    sparse_grad: bool,
    out: &Tensor,
) -> Result<Tensor> {
    gather_impl(self_, dim, index, sparse_grad, Some(out))
}

/// `gather` after its meta function, into `out` when given (any strides).
fn gather_impl(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    sparse_grad: bool,
    out: Option<&Tensor>,
) -> Result<Tensor> {
    let meta = structured::gather(self_, dim, index, sparse_grad, out)?;
    check_cpu("gather", meta.device)?;
    let result = structured_output(meta, out)?;
    if index.numel() == 0 {
        return Ok(result);
    }
    let d = wrap_dim(dim, self_.dim())?;
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
