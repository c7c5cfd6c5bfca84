//! `index_add` (+ in-place).

use switchboard_tensor::{wrap_dim, Access, Scalar, Tensor};

use crate::copy::copy_into;
use crate::dispatch_all_types_and_bool;
use crate::dispatch_dtype::{CpuElement, Num};
use crate::error::{check_cpu_or_meta, invalid, same_device, shape_str, Result};
use crate::iter::check_internal_overlap;
use crate::shape::check_no_overlap;

use super::common::*;

/// `index_func_meta_impl` for `index_add`.
fn index_add_checks(self_: &Tensor, d: usize, index: &Tensor, source: &Tensor) -> Result<()> {
    if index.dim() > 1 {
        return Err(invalid(format!(
            "index_add_(): Index is supposed to be a vector, but got dim: {} with type: {} and \
             size: {}",
            index.dim(),
            index.dtype().c10_name(),
            shape_str(index.sizes())
        )));
    }
    if !is_index_dtype(index) {
        return Err(invalid(format!(
            "index_add_(): Expected dtype int32/int64 for index but got: {}",
            index.dtype().c10_name()
        )));
    }
    if self_.dtype() != source.dtype() {
        return Err(invalid(format!(
            "index_add_(): self ({}) and source ({}) must have the same scalar type",
            self_.dtype().c10_name(),
            source.dtype().c10_name()
        )));
    }
    if d != 0 && d >= source.dim() {
        return Err(invalid(format!(
            "index_add_(): Indexing dim {d} is out of bounds of the source tensor with dim {}",
            source.dim()
        )));
    }
    let expected = if source.dim() == 0 {
        1
    } else {
        source.sizes()[d]
    };
    if index.numel() != expected {
        return Err(invalid(format!(
            "index_add_(): Number of indices ({}) should be equal to source.size(dim): ({}), \
             for dim: {d}",
            index.numel(),
            source.size(d as i64)?
        )));
    }
    let mut ss = self_.sizes().to_vec();
    let mut rs = source.sizes().to_vec();
    if source.dim() != 0 && self_.dim() != 0 {
        ss.remove(d);
        rs.remove(d);
    }
    if ss != rs {
        return Err(invalid(format!(
            "source tensor shape must match self tensor shape, excluding the specified \
             dimension. Got self.shape = {} source.shape = {}",
            shape_str(self_.sizes()),
            shape_str(source.sizes())
        )));
    }
    Ok(())
}

fn index_add_impl(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    source: &Tensor,
    alpha: Scalar,
    inplace: bool,
) -> Result<Tensor> {
    let device = same_device(&[self_, index, source])?;
    check_cpu_or_meta("index_add", device)?;
    let d = wrap_dim(dim, self_.dim())?;
    index_add_checks(self_, d, index, source)?;
    let result = if inplace {
        check_internal_overlap(self_)?;
        check_no_overlap(self_, index)?;
        check_no_overlap(self_, source)?;
        self_.clone()
    } else {
        let r = Tensor::empty_on(self_.sizes(), self_.dtype(), device)?;
        if r.has_data() {
            copy_into(&r, self_)?;
        }
        r
    };
    if !result.has_data() || index.numel() == 0 {
        return Ok(result);
    }
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
    index_add_impl(self_, dim, index, source, alpha, false)
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
    index_add_impl(self_, dim, index, source, alpha, true)
}
