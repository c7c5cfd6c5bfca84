//! Reductions: sum, mean, var, max/min and amax/amin.

use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::{Scalar, Tensor};

use super::new_zeros;

/// `dim` wrapped into `[0, n)` (an out-of-range dim was refused by the forward call).
fn wrap(dim: i64, n: usize) -> usize {
    let n = n as i64;
    (if dim < 0 && n > 0 { dim + n } else { dim }) as usize
}

/// `t` with a dimension of size 1 inserted at each of `dims` (wrapped against `ndim`, the
/// reduced tensor's rank), in increasing order (PyTorch's `unsqueeze_multiple`).
pub(crate) fn unsqueeze_multiple(t: &Tensor, dims: &[i64], ndim: usize) -> Result<Tensor> {
    match dims {
        [] => Ok(t.clone()),
        [d] => ops::unsqueeze(t, *d),
        _ => {
            let mut wrapped: Vec<usize> = dims.iter().map(|&d| wrap(d, ndim)).collect();
            wrapped.sort_unstable();
            wrapped.dedup();
            let mut r = t.clone();
            for d in wrapped {
                r = ops::unsqueeze(&r, d as i64)?;
            }
            Ok(r)
        }
    }
}

/// `sum.dim_IntList`'s gradient: `grad` with the reduced dims restored, expanded to the input's
/// sizes.
pub(crate) fn sum_backward(
    grad: &Tensor,
    sizes: &[i64],
    dims: Option<&[i64]>,
    keepdim: bool,
) -> Result<Tensor> {
    if !keepdim && !sizes.is_empty() {
        if let Some(d) = dims.filter(|d| !d.is_empty()) {
            return ops::expand(&unsqueeze_multiple(grad, d, sizes.len())?, sizes);
        }
    }
    ops::expand(grad, sizes)
}

/// The number of elements reduced over `dims` of `sizes`.
fn reduced_count(sizes: &[i64], dims: &[i64]) -> i64 {
    if sizes.is_empty() {
        return 1;
    }
    dims.iter().map(|&d| sizes[wrap(d, sizes.len())]).product()
}

/// `mean.dim`'s gradient: [`sum_backward`] divided by the number of elements averaged.
pub(crate) fn mean_backward(
    grad: &Tensor,
    sizes: &[i64],
    dims: Option<&[i64]>,
    numel: i64,
    keepdim: bool,
) -> Result<Tensor> {
    let n = match dims {
        Some(d) if !d.is_empty() => reduced_count(sizes, d),
        _ => numel,
    };
    ops::div_scalar(&sum_backward(grad, sizes, dims, keepdim)?, n)
}

/// `t` (a reduction's output) reshaped with its reduced `dims` put back as size 1 (PyTorch's
/// `restore_reduced_dims`).
pub(crate) fn restore_reduced_dims(t: &Tensor, dims: &[i64], keepdim: bool) -> Result<Tensor> {
    if keepdim {
        return Ok(t.clone());
    }
    let total = t.dim() + dims.len();
    let mut target = vec![0i64; total];
    for &d in dims {
        target[wrap(d, total)] = 1;
    }
    let mut j = 0;
    for &s in t.sizes() {
        while target[j] > 0 {
            j += 1;
        }
        target[j] = s;
        j += 1;
    }
    ops::reshape(t, &target)
}

/// `grad` shared evenly among the positions `mask` selects along `dims` (amax/amin).
pub(crate) fn scale_grad_by_count(grad: &Tensor, mask: &Tensor, dims: &[i64]) -> Result<Tensor> {
    let count = ops::sum_dim_int_list_with(
        mask,
        Some(dims),
        ops::SumDimIntListOptions::default().keepdim(true),
    )?;
    ops::mul(&ops::div(grad, &count)?, mask)
}

/// `max()` / `min()`'s gradient: shared evenly among the elements equal to the result.
pub(crate) fn evenly_distribute_backward(
    grad: &Tensor,
    input: &Tensor,
    value: &Tensor,
) -> Result<Tensor> {
    let mask = ops::eq(input, value)?;
    let share = ops::div(grad, &ops::sum(&mask)?)?;
    ops::masked_fill_tensor(&ops::zeros_like(input)?, &mask, &share)
}

/// `max.dim` / `min.dim`'s gradient: `grad` at the selected indices, zeros elsewhere (PyTorch's
/// `value_selecting_reduction_backward`).
pub(crate) fn value_selecting_reduction_backward(
    grad: &Tensor,
    dim: i64,
    indices: &Tensor,
    sizes: &[i64],
    keepdim: bool,
) -> Result<Tensor> {
    if sizes.is_empty() {
        // A 0-dim input: its value is the result.
        return ops::reshape(grad, sizes);
    }
    let zeros = new_zeros(grad, sizes)?;
    if keepdim {
        return ops::scatter_add(&zeros, dim, indices, grad);
    }
    ops::scatter_add(
        &zeros,
        dim,
        &ops::unsqueeze(indices, dim)?,
        &ops::unsqueeze(grad, dim)?,
    )
}

/// `var.correction`'s gradient: `2 / (N - correction) * grad * (self - mean)`, with the reduced
/// dims restored (infinite or NaN when `N <= correction`, as PyTorch's `var_backward`).
pub(crate) fn var_backward(
    grad: &Tensor,
    self_: &Tensor,
    dims: Option<&[i64]>,
    correction: Option<Scalar>,
    keepdim: bool,
) -> Result<Tensor> {
    let correction = correction.map_or(1.0, Scalar::to_f64);
    match dims {
        Some(d) if !d.is_empty() && self_.dim() > 0 => {
            let grad = if !keepdim && self_.dim() > 1 {
                unsqueeze_multiple(grad, d, self_.dim())?
            } else {
                grad.clone()
            };
            let n = reduced_count(self_.sizes(), d) as f64;
            // `(2 / dof) * grad * (self - mean)`, the centred input first as PyTorch computes it
            // (a trace records the same order).
            let mean =
                ops::mean_dim_with(self_, Some(d), ops::MeanDimOptions::default().keepdim(true))?;
            let centred = ops::sub(self_, &mean)?;
            let scaled = ops::mul_scalar(&grad, 2.0 / (n - correction))?;
            ops::mul(&scaled, &centred)
        }
        _ => {
            let dof = self_.numel() as f64 - correction;
            if dof <= 0.0 {
                // 2 / 0 = inf: inf * 0 = NaN where self equals its mean, inf elsewhere.
                let at_mean = ops::eq(self_, &ops::mean(self_)?)?;
                let inf = ops::add_scalar(&ops::zeros_like(self_)?, f64::INFINITY)?;
                let factor = ops::where_scalar_self(&at_mean, f64::NAN, &inf)?;
                return ops::mul(grad, &factor);
            }
            let centred = ops::sub(self_, &ops::mean(self_)?)?;
            let scaled = ops::mul_scalar(grad, 2.0 / dof)?;
            ops::mul(&scaled, &centred)
        }
    }
}
