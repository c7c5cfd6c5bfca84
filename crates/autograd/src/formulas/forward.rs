//! Helpers of the forward formulas (`result:` lines of derivatives.yaml), named as PyTorch's
//! `FunctionsManual.cpp` names them. They compute the tangent of an output from the primals
//! (`_p`) and tangents (`_t`) of the inputs (Note [Forward-mode AD]).

use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::{ScalarType, Tensor};

/// PyTorch's `logsumexp_jvp` over one dimension: `sum(softmax(self) * self_t, dim)`.
pub(crate) fn logsumexp_jvp(
    self_p: &Tensor,
    self_t: &Tensor,
    dim: i64,
    keepdim: bool,
) -> Result<Tensor> {
    let weights = ops::_softmax(self_p, dim, false)?;
    ops::sum_dim_int_list_with(
        &ops::mul(&weights, self_t)?,
        Some(&[dim]),
        ops::SumDimIntListOptions::default().keepdim(keepdim),
    )
}

/// Applies `reduction` (0 none, 1 mean, 2 sum) to an elementwise loss (`apply_loss_reduction`).
pub(crate) fn apply_loss_reduction(t: &Tensor, reduction: i64) -> Result<Tensor> {
    match reduction {
        1 => ops::mean(t),
        2 => ops::sum(t),
        _ => Ok(t.clone()),
    }
}

/// The tangent of `mse_loss`: `2 (self - target) (self_t - target_t)`, reduced.
pub(crate) fn mse_loss_jvp(
    self_p: &Tensor,
    self_t: &Tensor,
    target_p: &Tensor,
    target_t: &Tensor,
    reduction: i64,
) -> Result<Tensor> {
    let diff = ops::sub(self_p, target_p)?;
    let t = ops::mul(&ops::mul_scalar(&diff, 2)?, &ops::sub(self_t, target_t)?)?;
    apply_loss_reduction(&t, reduction)
}

/// The tangent of `mse_loss_backward` (PyTorch's formula: two `mse_loss_double_backward`
/// terms and `mse_loss_backward` of the incoming tangent).
pub(crate) fn mse_loss_backward_jvp(
    grad_output_p: &Tensor,
    grad_output_t: &Tensor,
    self_p: &Tensor,
    self_t: &Tensor,
    target_p: &Tensor,
    target_t: &Tensor,
    reduction: i64,
) -> Result<Tensor> {
    let scale = if reduction == 1 {
        2.0 / self_p.numel().max(1) as f64
    } else {
        2.0
    };
    let d = ops::mul(&ops::sub(self_t, target_t)?, grad_output_p)?;
    let first = ops::mul_scalar(&d, scale)?;
    let second = ops::mse_loss_backward(grad_output_t, self_p, target_p, reduction)?;
    ops::add(&first, &second)
}

/// The tangent of `nll_loss_forward`'s output: the loss of the tangent (linear in `self`).
pub(crate) fn nll_loss_jvp(
    self_t: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    ignore_index: i64,
) -> Result<Tensor> {
    Ok(ops::nll_loss_forward(self_t, target, weight, reduction, ignore_index)?.0)
}

/// The tangent of `_log_softmax_backward_data(g, o) = g - exp(o) sum(g, dim)`.
pub(crate) fn log_softmax_backward_data_jvp(
    grad_output_p: &Tensor,
    grad_output_t: &Tensor,
    output_p: &Tensor,
    output_t: &Tensor,
    dim: i64,
    input_dtype: ScalarType,
) -> Result<Tensor> {
    let linear = ops::_log_softmax_backward_data(grad_output_t, output_p, dim, input_dtype)?;
    let through_output = ops::mul(
        &ops::mul(&ops::exp(output_p)?, output_t)?,
        &super::sum_keepdim(grad_output_p, dim)?,
    )?;
    ops::sub(&linear, &through_output)
}

/// PyTorch's `convolution_jvp`: the convolution is bilinear in input and weight, and linear in
/// the bias.
#[allow(clippy::too_many_arguments)]
pub(crate) fn convolution_jvp(
    input_p: &Tensor,
    input_t: &Tensor,
    weight_p: &Tensor,
    weight_t: &Tensor,
    bias_t: Option<&Tensor>,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    transposed: bool,
    output_padding: &[i64],
    groups: i64,
) -> Result<Tensor> {
    let conv = |i: &Tensor, w: &Tensor, b: Option<&Tensor>| {
        ops::convolution(
            i,
            w,
            b,
            stride,
            padding,
            dilation,
            transposed,
            output_padding,
            groups,
        )
    };
    ops::add(
        &conv(input_t, weight_p, None)?,
        &conv(input_p, weight_t, bias_t)?,
    )
}

/// PyTorch's `gather_with_keepdimed_indices`: the values a `dim` reduction selected, read from
/// `t` (the tangent of `max.dim` and friends).
pub(crate) fn gather_with_keepdimed_indices(
    t: &Tensor,
    dim: i64,
    indices: &Tensor,
    keepdim: bool,
) -> Result<Tensor> {
    if t.dim() == 0 {
        return Ok(t.clone());
    }
    if keepdim {
        return ops::gather(t, dim, indices);
    }
    ops::squeeze_dim(&ops::gather(t, dim, &ops::unsqueeze(indices, dim)?)?, dim)
}

/// PyTorch's `evenly_read_jvp`: the tangent of a full `max`/`min`, the mean of the tangent over
/// the elements equal to the result (the backward spreads the gradient evenly over them).
pub(crate) fn evenly_read_jvp(self_t: &Tensor, self_p: &Tensor, result: &Tensor) -> Result<Tensor> {
    let mask = ops::eq(self_p, result)?;
    let count = ops::sum(&super::to_dtype(&mask, self_t.dtype())?)?;
    ops::div(&ops::sum(&ops::mul(self_t, &mask)?)?, &count)
}

/// PyTorch's `amaxamin_jvp`: the mean of the tangent over the elements equal to the result,
/// per reduced slice.
pub(crate) fn amaxamin_jvp(
    self_p: &Tensor,
    self_t: &Tensor,
    result: &Tensor,
    dim: &[i64],
    keepdim: bool,
) -> Result<Tensor> {
    let mask = ops::eq(self_p, &super::restore_reduced_dims(result, dim, keepdim)?)?;
    let mask = super::to_dtype(&mask, self_t.dtype())?;
    let sum = |t: &Tensor| {
        ops::sum_dim_int_list_with(
            t,
            Some(dim),
            ops::SumDimIntListOptions::default().keepdim(keepdim),
        )
    };
    ops::div(&sum(&ops::mul(self_t, &mask)?)?, &sum(&mask)?)
}

/// PyTorch's `clamp_jvp`: the tangent of whichever of `self`, `min` and `max` the result took
/// (`max` where the bounds cross, as the primal does).
pub(crate) fn clamp_jvp(
    self_p: &Tensor,
    self_t: &Tensor,
    min_p: Option<&Tensor>,
    min_t: Option<&Tensor>,
    max_p: Option<&Tensor>,
    max_t: Option<&Tensor>,
) -> Result<Tensor> {
    match (min_p.zip(min_t), max_p.zip(max_t)) {
        (Some((lo, lo_t)), Some((hi, hi_t))) => {
            let inside = ops::r#where(&ops::gt(self_p, hi)?, hi_t, self_t)?;
            let clamped = ops::r#where(&ops::lt(self_p, lo)?, lo_t, &inside)?;
            ops::r#where(&ops::gt(lo, hi)?, hi_t, &clamped)
        }
        (Some((lo, lo_t)), None) => ops::r#where(&ops::gt(self_p, lo)?, self_t, lo_t),
        (None, Some((hi, hi_t))) => ops::r#where(&ops::lt(self_p, hi)?, self_t, hi_t),
        (None, None) => Ok(self_t.clone()),
    }
}

/// PyTorch's `scatter_reduce_jvp`: linear for `sum` and `mean`; for `amax` and `amin` the mean
/// of the tangents of the values equal to the result. PyTorch gives `prod` no tangent.
#[allow(clippy::too_many_arguments)]
pub(crate) fn scatter_reduce_jvp(
    self_p: &Tensor,
    self_t: &Tensor,
    dim: i64,
    index: &Tensor,
    src_p: &Tensor,
    src_t: &Tensor,
    reduce: &str,
    include_self: bool,
    result: &Tensor,
) -> Result<Option<Tensor>> {
    let scatter = |s: &Tensor, src: &Tensor, reduce: &str| {
        ops::scatter_reduce_with(
            s,
            dim,
            index,
            src,
            reduce,
            ops::ScatterReduceOptions { include_self },
        )
    };
    match reduce {
        "sum" | "mean" => scatter(self_t, src_t, reduce).map(Some),
        "amax" | "amin" => {
            let mask_self = ops::eq(self_p, result)?;
            let mask_src = ops::eq(src_p, &ops::gather(result, dim, index)?)?;
            let counts = scatter(
                &super::to_dtype(&mask_self, self_t.dtype())?,
                &super::to_dtype(&mask_src, self_t.dtype())?,
                "sum",
            )?;
            let sums = scatter(
                &ops::where_scalar_other(&mask_self, self_t, 0.0)?,
                &ops::where_scalar_other(&mask_src, src_t, 0.0)?,
                "sum",
            )?;
            ops::div(&sums, &counts).map(Some)
        }
        _ => Ok(None),
    }
}

/// The tangent of `convolution_backward`'s output `which` (0: grad_input, 1: grad_weight, 2:
/// grad_bias), PyTorch's `result0`/`result1` formulas and `convolution_backward_jvp_grad_bias`:
/// the backward is bilinear in `grad_output` and the other input, and the bias gradient is a
/// sum of `grad_output`. None for an output `output_mask` did not ask for.
#[allow(clippy::too_many_arguments)]
pub(crate) fn convolution_backward_jvp(
    grad_output_p: &Tensor,
    grad_output_t: &Tensor,
    input_p: &Tensor,
    input_t: &Tensor,
    weight_p: &Tensor,
    weight_t: &Tensor,
    bias_sizes: Option<&[i64]>,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    transposed: bool,
    output_padding: &[i64],
    groups: i64,
    output_mask: &[bool],
    which: usize,
) -> Result<Option<Tensor>> {
    if !output_mask.get(which).copied().unwrap_or(false) {
        return Ok(None);
    }
    if which == 2 {
        let dims: Vec<i64> = (0..grad_output_t.dim() as i64)
            .filter(|&d| d != 1)
            .collect();
        return ops::sum_dim_int_list_with(
            grad_output_t,
            Some(&dims),
            ops::SumDimIntListOptions::default(),
        )
        .map(Some);
    }
    let mut mask = [false; 3];
    mask[which] = true;
    let backward = |g: &Tensor, i: &Tensor, w: &Tensor| -> Result<Tensor> {
        let grads = ops::convolution_backward(
            g,
            i,
            w,
            bias_sizes,
            stride,
            padding,
            dilation,
            transposed,
            output_padding,
            groups,
            &mask,
        )?;
        Ok(if which == 0 { grads.0 } else { grads.1 })
    };
    let through_grad_output = backward(grad_output_t, input_p, weight_p)?;
    let through_other = if which == 0 {
        backward(grad_output_p, input_p, weight_t)?
    } else {
        backward(grad_output_p, input_t, weight_p)?
    };
    ops::add(&through_other, &through_grad_output).map(Some)
}

/// The tangent of `grid_sampler_2d`: linear in `input` (the sampler applied to its tangent),
/// plus the derivative along the grid's tangent. That one is read per channel from the
/// backward with ones as the output's gradient, the channels moved into the batch so that the
/// backward's sum over channels sums nothing.
#[allow(clippy::too_many_arguments)]
pub(crate) fn grid_sampler_2d_jvp(
    input_p: &Tensor,
    input_t: &Tensor,
    grid_p: &Tensor,
    grid_t: &Tensor,
    interpolation_mode: i64,
    padding_mode: i64,
    align_corners: bool,
) -> Result<Tensor> {
    let through_input = ops::grid_sampler_2d(
        input_t,
        grid_p,
        interpolation_mode,
        padding_mode,
        align_corners,
    )?;
    let [n, c, h, w] = input_p.sizes() else {
        return Ok(through_input);
    };
    let (n, c) = (*n, *c);
    let [_, out_h, out_w, coords] = grid_p.sizes() else {
        return Ok(through_input);
    };
    let (out_h, out_w, coords) = (*out_h, *out_w, *coords);
    // [N, C, H, W] -> [N * C, 1, H, W]; the grid repeated for each channel.
    let per_channel = ops::reshape(input_p, &[n * c, 1, *h, *w])?;
    let repeat = |g: &Tensor| -> Result<Tensor> {
        let g = ops::expand(&ops::unsqueeze(g, 1)?, &[n, c, out_h, out_w, coords])?;
        ops::reshape(&g, &[n * c, out_h, out_w, coords])
    };
    let ones = ops::ones_like(&ops::reshape(&through_input, &[n * c, 1, out_h, out_w])?)?;
    let (_, d_grid) = ops::grid_sampler_2d_backward(
        &ones,
        &per_channel,
        &repeat(grid_p)?,
        interpolation_mode,
        padding_mode,
        align_corners,
        &[false, true],
    )?;
    // Sum over the coordinates of d out / d grid * grid_t.
    let along = ops::sum_dim_int_list_with(
        &ops::mul(&d_grid, &repeat(grid_t)?)?,
        Some(&[-1]),
        ops::SumDimIntListOptions::default(),
    )?;
    ops::add(
        &through_input,
        &ops::reshape(&along, &[n, c, out_h, out_w])?,
    )
}
