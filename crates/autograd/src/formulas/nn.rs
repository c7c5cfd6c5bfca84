//! Neural-network operators: activations, dropout, embedding, pooling, softmax, losses.

use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

use super::to_dtype;
use crate::node::err;

/// `1 - t`.
fn one_minus(t: &Tensor) -> Result<Tensor> {
    ops::add_scalar(&ops::neg(t)?, 1)
}

/// `silu`'s gradient with grad mode on, from differentiable operators:
/// `grad * σ(x) * (1 + x * (1 - σ(x)))`.
pub(crate) fn infinitely_differentiable_silu_backward(
    grad: &Tensor,
    input: &Tensor,
) -> Result<Tensor> {
    let sigmoid = ops::sigmoid(input)?;
    let inner = ops::add_scalar(&ops::mul(input, &one_minus(&sigmoid)?)?, 1)?;
    ops::mul(&ops::mul(grad, &sigmoid)?, &inner)
}

/// d²/dx² gelu(x): exact `φ(x)(2 - x²)`; tanh approximation
/// `(1 - t²)(u' + x/2 (u'' - 2 t u'²))` with `u = k(x + c x³)`, `t = tanh(u)`.
fn gelu_second_derivative(x: &Tensor, tanh: bool) -> Result<Tensor> {
    let x2 = ops::mul(x, x)?;
    if !tanh {
        let pdf = ops::mul_scalar(
            &ops::exp(&ops::mul_scalar(&x2, -0.5)?)?,
            1.0 / (2.0 * std::f64::consts::PI).sqrt(),
        )?;
        return ops::mul(&pdf, &ops::add_scalar(&ops::neg(&x2)?, 2)?);
    }
    let k = (2.0 / std::f64::consts::PI).sqrt();
    let c = 0.044715;
    let u = ops::mul_scalar(
        &ops::mul(x, &ops::add_scalar(&ops::mul_scalar(&x2, c)?, 1)?)?,
        k,
    )?;
    let t = ops::tanh(&u)?;
    let du = ops::mul_scalar(&ops::add_scalar(&ops::mul_scalar(&x2, 3.0 * c)?, 1)?, k)?;
    let ddu = ops::mul_scalar(x, 6.0 * k * c)?;
    let sech2 = one_minus(&ops::mul(&t, &t)?)?;
    let inner = ops::sub(
        &ddu,
        &ops::mul_scalar(&ops::mul(&t, &ops::mul(&du, &du)?)?, 2.0)?,
    )?;
    let s = ops::add(&du, &ops::mul_scalar(&ops::mul(x, &inner)?, 0.5)?)?;
    ops::mul(&sech2, &s)
}

/// `gelu_backward`'s gradient of `self`: `ggI * gO * gelu''(self)`.
pub(crate) fn gelu_double_backward(
    ggi: &Tensor,
    go: &Tensor,
    input: &Tensor,
    approximate: &str,
) -> Result<Tensor> {
    let second = gelu_second_derivative(input, approximate == "tanh")?;
    ops::mul(&ops::mul(ggi, go)?, &second)
}

/// `mask` as `like`'s dtype (`mask.type_as(like)`).
fn type_as(mask: &Tensor, like: &Tensor) -> Result<Tensor> {
    to_dtype(mask, like.dtype())
}

/// `native_dropout`'s gradient with grad mode on: `grad * mask * scale`.
pub(crate) fn infinitely_differentiable_native_dropout_backward(
    grad: &Tensor,
    mask: &Tensor,
    scale: f64,
) -> Result<Tensor> {
    ops::mul(grad, &ops::mul_scalar(&type_as(mask, grad)?, scale)?)
}

/// `native_dropout_backward`'s gradient of its gradient input: `ggI * mask * scale`.
pub(crate) fn native_dropout_double_backward(
    ggi: &Tensor,
    grad: &Tensor,
    mask: &Tensor,
    scale: f64,
) -> Result<Tensor> {
    ops::mul(
        &type_as(ggi, grad)?,
        &ops::mul_scalar(&type_as(mask, grad)?, scale)?,
    )
}

/// `embedding`'s gradient of the weight (dense only: there are no sparse tensors).
pub(crate) fn embedding_backward(
    grad: &Tensor,
    indices: &Tensor,
    num_weights: i64,
    padding_idx: i64,
    scale_grad_by_freq: bool,
    sparse: bool,
) -> Result<Tensor> {
    if sparse {
        return Err(err(
            "embedding: sparse=True needs sparse tensors, which are not supported",
        ));
    }
    ops::embedding_dense_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq)
}

/// `embedding_dense_backward`'s gradient of its gradient input: the transpose of the row
/// scatter, which gathers the rows back, zeroes the padding positions and, with
/// `scale_grad_by_freq`, divides by each index's count (PyTorch leaves that scaling out).
pub(crate) fn embedding_dense_double_backward(
    grad: &Tensor,
    indices: &Tensor,
    num_weights: i64,
    padding_idx: i64,
    scale_grad_by_freq: bool,
) -> Result<Tensor> {
    let flat = ops::reshape(indices, &[-1])?;
    let mut r = ops::index_select(grad, 0, &flat)?;
    if padding_idx >= 0 {
        let pad = ops::unsqueeze(&ops::eq_scalar(&flat, padding_idx)?, 1)?;
        r = ops::masked_fill(&r, &pad, 0)?;
    }
    if scale_grad_by_freq {
        let ones = ops::ones_like_with(&flat, ops::OnesLikeOptions::default().dtype(grad.dtype()))?;
        let counts = ops::index_add(&super::new_zeros(grad, &[num_weights])?, 0, &flat, &ones)?;
        let per = ops::unsqueeze(&ops::index_select(&counts, 0, &flat)?, 1)?;
        r = ops::div(&r, &per)?;
    }
    let mut shape = indices.sizes().to_vec();
    shape.push(-1);
    ops::view(&r, &shape)
}

/// `max_pool2d_with_indices_backward`'s gradient of its gradient input: `grad` read back at
/// the argmax positions (over the last `dim` dimensions).
pub(crate) fn max_pool_double_backward(
    grad: &Tensor,
    indices: &Tensor,
    dim: usize,
) -> Result<Tensor> {
    if indices.numel() == 0 {
        return ops::empty_like_with(
            indices,
            ops::EmptyLikeOptions::default().dtype(grad.dtype()),
        );
    }
    let lead = indices.dim().saturating_sub(dim);
    let mut size = indices.sizes()[..lead].to_vec();
    size.push(-1);
    let flat_indices = ops::view(indices, &size)?;
    let flat_grad = ops::view(&ops::contiguous(grad)?, &size)?;
    ops::view(
        &ops::gather(&flat_grad, -1, &flat_indices)?,
        indices.sizes(),
    )
}

/// `_softmax_backward_data`'s gradient of the softmax output:
/// `gO * grad - sum(output * gO) * grad - gO * sum(output * grad)`, sums along `dim`.
pub(crate) fn softmax_double_backward(
    grad: &Tensor,
    grad_output: &Tensor,
    dim: i64,
    output: &Tensor,
) -> Result<Tensor> {
    let a = ops::mul(grad_output, grad)?;
    let b = ops::mul(
        &super::sum_keepdim(&ops::mul(output, grad_output)?, dim)?,
        grad,
    )?;
    let c = ops::mul(
        grad_output,
        &super::sum_keepdim(&ops::mul(output, grad)?, dim)?,
    )?;
    ops::sub(&ops::sub(&a, &b)?, &c)
}

/// `mse_loss_backward`'s gradient of the input: `2 * grad` (divided by the number of elements
/// for the mean).
pub(crate) fn mse_loss_double_backward(
    grad: &Tensor,
    input: &Tensor,
    reduction: i64,
) -> Result<Tensor> {
    let g = ops::mul_scalar(grad, 2)?;
    if reduction == 1 {
        return ops::div_scalar(&g, input.numel());
    }
    Ok(g)
}

/// `elu_backward`'s gradient of `self_or_result` (PyTorch's `elu_double_backward`): zero where
/// the forward was linear (`self_or_result >= 0`).
pub(crate) fn elu_double_backward(
    grad: &Tensor,
    grad_output: &Tensor,
    alpha: switchboard_tensor::Scalar,
    scale: switchboard_tensor::Scalar,
    input_scale: switchboard_tensor::Scalar,
    is_result: bool,
    self_or_result: &Tensor,
) -> Result<Tensor> {
    let negative = to_dtype(&ops::lt_scalar(self_or_result, 0)?, grad.dtype())?;
    let scaled = ops::mul_scalar(&ops::mul(grad, grad_output)?, input_scale)?;
    if is_result {
        return ops::mul(&scaled, &negative);
    }
    let d = ops::elu_backward(
        &scaled,
        alpha,
        scale,
        input_scale,
        is_result,
        self_or_result,
    )?;
    ops::mul(&d, &negative)
}
