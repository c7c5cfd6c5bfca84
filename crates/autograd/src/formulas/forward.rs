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
