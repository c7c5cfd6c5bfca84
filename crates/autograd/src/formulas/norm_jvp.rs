//! The forward formulas of the normalization layers (PyTorch's `batch_norm_jvp`,
//! `layer_norm_jvp`, `group_norm_jvp` and the group statistics' jvps).

use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

use crate::node::err;

// Note [Normalization statistics under nested forward mode]
// PyTorch's batch and layer norm formulas read the statistics the operator saved (`result1`,
// `result2`), which have no tangent of their own: under nested dual levels (`jacfwd(jacfwd)`)
// the inner level's tangent would then miss the outer levels' dependence through the mean
// and the variance (PyTorch's `torch.func` decomposes these operators for jvp instead). The
// formulas here recompute the statistics from the primal input, which the outer levels see:
// the same values, and a tangent that is itself differentiable at the outer levels. Group
// norm's statistics have forward formulas of their own (`result1`, `result2`), so its formula
// reads the saved ones, as PyTorch's does.

fn mean_over(t: &Tensor, dims: &[i64]) -> Result<Tensor> {
    ops::mean_dim_with(t, Some(dims), ops::MeanDimOptions::default().keepdim(true))
}

fn sum_over(t: &Tensor, dims: &[i64]) -> Result<Tensor> {
    ops::sum_dim_int_list_with(
        t,
        Some(dims),
        ops::SumDimIntListOptions::default().keepdim(true),
    )
}

/// The mean and `1 / sqrt(biased variance + eps)` of `input` over `dims`, kept (Note
/// [Normalization statistics under nested forward mode]).
fn statistics(input: &Tensor, dims: &[i64], eps: f64) -> Result<(Tensor, Tensor)> {
    let mean = mean_over(input, dims)?;
    let centred = ops::sub(input, &mean)?;
    let var = mean_over(&ops::mul(&centred, &centred)?, dims)?;
    Ok((mean, ops::rsqrt(&ops::add_scalar(&var, eps)?)?))
}

/// PyTorch's `invstd_jvp`: the tangent of `1 / sqrt(var + eps)` over `dims` (`count` elements
/// each), the dimensions kept.
fn invstd_jvp(
    input_p: &Tensor,
    input_t: &Tensor,
    mean_p: &Tensor,
    invstd_p: &Tensor,
    dims: &[i64],
    count: i64,
) -> Result<Tensor> {
    let centred_t = ops::sub(input_t, &mean_over(input_t, dims)?)?;
    let centred_p = ops::sub(input_p, mean_p)?;
    let cube = ops::pow_tensor_scalar(invstd_p, 3)?;
    let summed = sum_over(&ops::mul(&centred_t, &centred_p)?, dims)?;
    ops::div_scalar(&ops::neg(&ops::mul(&cube, &summed)?)?, count.max(1))
}

/// The tangent of `(input - mean) * invstd` with the statistics over `dims` (kept).
fn normalized_jvp(
    input_p: &Tensor,
    input_t: &Tensor,
    mean_p: &Tensor,
    invstd_p: &Tensor,
    dims: &[i64],
) -> Result<Tensor> {
    let count = dims
        .iter()
        .map(|&d| input_t.sizes()[d as usize])
        .product::<i64>();
    let invstd_t = invstd_jvp(input_p, input_t, mean_p, invstd_p, dims, count)?;
    let centred_t = ops::sub(input_t, &mean_over(input_t, dims)?)?;
    ops::add(
        &ops::mul(&centred_t, invstd_p)?,
        &ops::mul(&ops::sub(input_p, mean_p)?, &invstd_t)?,
    )
}

/// The affine part's tangent: `result_t * weight + normalized * weight_t + bias_t`, the
/// parameters viewed as `view_size`.
#[allow(clippy::too_many_arguments)]
fn affine_jvp(
    result_t: Tensor,
    input_p: &Tensor,
    mean_p: &Tensor,
    invstd_p: &Tensor,
    weight_p: Option<&Tensor>,
    weight_t: Option<&Tensor>,
    bias_t: Option<&Tensor>,
    view_size: &[i64],
) -> Result<Tensor> {
    let mut result_t = result_t;
    if let Some(w) = weight_p.filter(|w| w.numel() != 0) {
        result_t = ops::mul(&result_t, &ops::reshape(w, view_size)?)?;
        if let Some(wt) = weight_t.filter(|w| w.numel() != 0) {
            let normalized = ops::mul(&ops::sub(input_p, mean_p)?, invstd_p)?;
            result_t = ops::add(
                &result_t,
                &ops::mul(&normalized, &ops::reshape(wt, view_size)?)?,
            )?;
        }
    }
    if let Some(bt) = bias_t.filter(|b| b.numel() != 0) {
        result_t = ops::add(&result_t, &ops::reshape(bt, view_size)?)?;
    }
    Ok(result_t)
}

/// PyTorch's `batch_norm_jvp`: the tangent of `native_batch_norm`'s output.
#[allow(clippy::too_many_arguments)]
pub(crate) fn batch_norm_jvp(
    input_p: &Tensor,
    input_t: &Tensor,
    weight_p: Option<&Tensor>,
    weight_t: Option<&Tensor>,
    bias_t: Option<&Tensor>,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    train: bool,
    eps: f64,
) -> Result<Tensor> {
    // Every dimension but the channels' (1) is reduced.
    let mut view_size = input_t.sizes().to_vec();
    let mut dims = Vec::new();
    for (d, size) in view_size.iter_mut().enumerate() {
        if d != 1 {
            *size = 1;
            dims.push(d as i64);
        }
    }
    let (mean_p, invstd_p, result_t) = if train {
        let (mean, invstd) = statistics(input_p, &dims, eps)?;
        let t = normalized_jvp(input_p, input_t, &mean, &invstd, &dims)?;
        (mean, invstd, t)
    } else {
        let (Some(mean), Some(var)) = (running_mean, running_var) else {
            return Err(err(
                "batch_norm_jvp: evaluation mode needs the running statistics",
            ));
        };
        let mean = ops::reshape(mean, &view_size)?;
        let invstd = ops::reshape(&ops::rsqrt(&ops::add_scalar(var, eps)?)?, &view_size)?;
        let t = ops::mul(input_t, &invstd)?;
        (mean, invstd, t)
    };
    affine_jvp(
        result_t, input_p, &mean_p, &invstd_p, weight_p, weight_t, bias_t, &view_size,
    )
}

/// PyTorch's `layer_norm_jvp`: the tangent of `native_layer_norm`'s output (the statistics
/// over the last `normalized_shape.len()` dimensions).
#[allow(clippy::too_many_arguments)]
pub(crate) fn layer_norm_jvp(
    input_p: &Tensor,
    input_t: &Tensor,
    weight_p: Option<&Tensor>,
    weight_t: Option<&Tensor>,
    bias_t: Option<&Tensor>,
    normalized_shape: &[i64],
    eps: f64,
) -> Result<Tensor> {
    let ndim = input_t.dim();
    let first = ndim.saturating_sub(normalized_shape.len());
    let dims: Vec<i64> = (first..ndim).map(|d| d as i64).collect();
    let mut view_size_affine = input_t.sizes().to_vec();
    for size in &mut view_size_affine[..first] {
        *size = 1;
    }
    let (mean_p, invstd_p) = statistics(input_p, &dims, eps)?;
    let result_t = normalized_jvp(input_p, input_t, &mean_p, &invstd_p, &dims)?;
    affine_jvp(
        result_t,
        input_p,
        &mean_p,
        &invstd_p,
        weight_p,
        weight_t,
        bias_t,
        &view_size_affine,
    )
}

/// The `[1, N * group, -1]` view group norm computes its statistics in.
fn grouped(t: &Tensor, group: i64) -> Result<Tensor> {
    let n = t.sizes().first().copied().unwrap_or(1);
    let rest = if n == 0 { 1 } else { -1 };
    ops::reshape(t, &[1, n * group, rest])
}

/// PyTorch's `group_norm_jvp`: the tangent of `native_group_norm`'s output.
#[allow(clippy::too_many_arguments)]
pub(crate) fn group_norm_jvp(
    input_p: &Tensor,
    input_t: &Tensor,
    weight_p: Option<&Tensor>,
    weight_t: Option<&Tensor>,
    bias_t: Option<&Tensor>,
    saved_mean: &Tensor,
    saved_invstd: &Tensor,
    group: i64,
) -> Result<Tensor> {
    let input_p_grouped = grouped(input_p, group)?;
    let mean = grouped(saved_mean, group)?;
    let invstd = grouped(saved_invstd, group)?;
    let result_t = ops::reshape(
        &normalized_jvp(
            &input_p_grouped,
            &grouped(input_t, group)?,
            &mean,
            &invstd,
            &[2],
        )?,
        input_t.sizes(),
    )?;
    let mut view_size = vec![1; input_t.dim()];
    if let Some(c) = input_t.sizes().get(1) {
        view_size[1] = *c;
    }
    let mut result_t = result_t;
    if let Some(w) = weight_p {
        result_t = ops::mul(&result_t, &ops::reshape(w, &view_size)?)?;
        if let Some(wt) = weight_t {
            let normalized = ops::reshape(
                &ops::mul(&ops::sub(&input_p_grouped, &mean)?, &invstd)?,
                input_t.sizes(),
            )?;
            result_t = ops::add(
                &result_t,
                &ops::mul(&normalized, &ops::reshape(wt, &view_size)?)?,
            )?;
        }
    }
    if let Some(bt) = bias_t {
        result_t = ops::add(&result_t, &ops::reshape(bt, &view_size)?)?;
    }
    Ok(result_t)
}

/// PyTorch's `group_norm_mean_jvp`: the tangent of `native_group_norm`'s mean.
pub(crate) fn group_norm_mean_jvp(input_t: &Tensor, mean_p: &Tensor, group: i64) -> Result<Tensor> {
    let mean = ops::mean_dim_with(
        &grouped(input_t, group)?,
        Some(&[2]),
        ops::MeanDimOptions::default(),
    )?;
    ops::reshape(&mean, mean_p.sizes())
}

/// PyTorch's `group_norm_invstd_jvp`: the tangent of `native_group_norm`'s `1 / std`.
pub(crate) fn group_norm_invstd_jvp(
    input_p: &Tensor,
    input_t: &Tensor,
    mean_p: &Tensor,
    invstd_p: &Tensor,
    group: i64,
) -> Result<Tensor> {
    let input_t = grouped(input_t, group)?;
    let count = input_t.sizes()[2];
    let t = invstd_jvp(
        &grouped(input_p, group)?,
        &input_t,
        &grouped(mean_p, group)?,
        &grouped(invstd_p, group)?,
        &[2],
        count,
    )?;
    ops::reshape(&t, invstd_p.sizes())
}
