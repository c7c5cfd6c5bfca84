//! `index_add`, `index_add_` and `index_add.out` (PyTorch's `index_add_cpu_` impl): the
//! checks and the output's geometry are its meta function's
//! (`switchboard_ops::structured::index_add`, `index_func_meta_impl`).

use switchboard_ops::structured;
use switchboard_tensor::{wrap_dim, Access, Scalar, Tensor};

use crate::dispatch_all_types_and_bool;
use crate::dispatch_dtype::{CpuElement, Num};
use crate::error::{invalid, Result};

use super::common::*;

/// `index_add` after its meta function, into `out` (resized), a fresh output or `self` in
/// place.
fn index_add_impl(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    source: &Tensor,
    alpha: Scalar,
    (out, inplace): (Option<&Tensor>, bool),
) -> Result<Tensor> {
    let written = if inplace { Some(self_) } else { out };
    let meta = structured::index_add(self_, dim, index, source, alpha, written)?;
    let result = output_holding_self("index_add", self_, meta, out, inplace)?;
    if index.numel() == 0 {
        return Ok(result);
    }
    let d = wrap_dim(dim, self_.dim())?;
    let idx = index_values(index, &result)?;
    let bound = if result.dim() > 1 {
        result.sizes()[d]
    } else {
        result.numel()
    };
    if let Some(&bad) = idx.iter().find(|&&i| i < 0 || i >= bound) {
        // PyTorch's index_add_cpu_: the 1-D loop's message, or the other loop's.
        return Err(invalid(if result.dim() > 1 {
            format!("index {bad} is out of bounds for dimension {d} with size {bound}")
        } else {
            "index out of range in self".to_owned()
        }));
    }
    if result.numel() == 0 {
        return Ok(result);
    }
    let (a, b) = (nonempty(&result)?, nonempty(source)?);
    let (sa, sb) = (a.strides()[d] as isize, b.strides()[d] as isize);
    let off_a: Vec<isize> = idx.iter().map(|&i| i as isize * sa).collect();
    let off_b: Vec<isize> = (0..idx.len() as isize).map(|i| i * sb).collect();
    let _access = Access::new(&[&b], &[&a])?;
    let (pa, pb) = (a.mut_data_ptr() as usize, b.data_ptr() as usize);
    dispatch_all_types_and_bool!(a.dtype(), "index_add_cpu_", T => {
        let alpha = alpha.checked_to::<T>()?.to_acc();
        slice_pairs(&a, &b, d, &off_a, &off_b, false, |n, oa, ob, sa, sb| {
            for k in 0..n as isize {
                // SAFETY: `_access` holds the borrows (`self` exclusively; `source` does not
                // overlap it); offsets are in bounds (indices checked); repeated indices are
                // applied serially, and threads only split slice positions.
                unsafe {
                    let p = (pa as *mut T).offset(oa + k * sa);
                    let v = (*(pb as *const T).offset(ob + k * sb)).to_acc();
                    *p = T::from_acc((*p).to_acc().add(alpha.mul(v)));
                }
            }
        });
        Ok(())
    })?;
    Ok(result)
}

/// `index_add(Tensor self, int dim, Tensor index, Tensor source, *, Scalar alpha=1) ->
/// Tensor`
///
/// A copy of `self` with `alpha * source.select(dim, i)` added to its slice
/// `index[i]` along `dim` for every `i` (repeated indices accumulate).
///
/// ```
/// use switchboard_cpu::index_add;
/// use switchboard_tensor::{Scalar, ScalarType, Tensor};
/// let z = Tensor::zeros(&[3, 2], ScalarType::Float).unwrap();
/// let i = Tensor::from_vec(vec![2i32, 2], &[2]).unwrap();
/// let s = Tensor::ones(&[2, 2], ScalarType::Float).unwrap();
/// let r = index_add(&z, 0, &i, &s, Scalar::Int(3)).unwrap();
/// assert_eq!(r.to_vec::<f32>().unwrap(), [0.0, 0.0, 0.0, 0.0, 6.0, 6.0]);
/// ```
pub fn index_add(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    source: &Tensor,
    alpha: Scalar,
) -> Result<Tensor> {
    index_add_impl(self_, dim, index, source, alpha, (None, false))
}

/// `index_add_(Tensor(a!) self, int dim, Tensor index, Tensor source, *, Scalar alpha=1) ->
/// Tensor(a!)`
pub fn index_add_(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    source: &Tensor,
    alpha: Scalar,
) -> Result<Tensor> {
    index_add_impl(self_, dim, index, source, alpha, (None, true))
}

/// `index_add.out(Tensor self, int dim, Tensor index, Tensor source, *, Scalar alpha=1,
/// Tensor(a!) out) -> Tensor(a!)`
pub fn index_add_out(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    source: &Tensor,
    alpha: Scalar,
    out: &Tensor,
) -> Result<Tensor> {
    index_add_impl(self_, dim, index, source, alpha, (Some(out), false))
}
