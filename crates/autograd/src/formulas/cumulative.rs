//! Cumulative sums and products: `cumsum` and `prod`'s gradients (PyTorch's
//! `cumsum_backward`, `prod_backward` and `prod_safe_zeros_backward`).

use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

use crate::grad_mode::is_grad_enabled;

/// `dim` wrapped into `[0, n)` (an out-of-range dim was refused by the forward call).
fn wrap(dim: i64, n: usize) -> i64 {
    if dim < 0 {
        dim + n as i64
    } else {
        dim
    }
}

/// `w.flip(dim).cumsum(dim).flip(dim)`: the sums from each position to the end.
fn reversed_cumsum(w: &Tensor, dim: i64) -> Result<Tensor> {
    ops::flip(&ops::cumsum(&ops::flip(w, &[dim])?, dim)?, &[dim])
}

/// `cumsum`'s gradient: each input contributes to every later output.
pub(crate) fn cumsum_backward(grad: &Tensor, dim: i64) -> Result<Tensor> {
    if grad.numel() <= 1 || grad.dim() == 0 || grad.sizes()[wrap(dim, grad.dim()) as usize] == 1 {
        return Ok(grad.clone());
    }
    reversed_cumsum(grad, dim)
}

/// Ones of `like`'s sizes with `dim` of size `len`, of `grad`'s dtype and device.
fn ones_along(like: &Tensor, dim: usize, len: i64, grad: &Tensor) -> Result<Tensor> {
    let mut sizes = like.sizes().to_vec();
    sizes[dim] = len;
    ops::ones_with(
        &sizes,
        ops::OnesOptions::default()
            .dtype(grad.dtype())
            .device(grad.device()),
    )
}

// Note [Inclusive products without cumprod]
// PyTorch's `prod_safe_zeros_backward` multiplies two exclusive cumulative products. With no
// `cumprod` operator here, the inclusive product along `dim` is a Hillis-Steele scan: log2(n)
// steps of `x * shift(x, s)` (the first `s` positions multiplied by ones), each a dispatched,
// differentiable call, so gradients of gradients stay exact where zeros are. Products are
// grouped differently from a sequential scan: last-bit differences from PyTorch's values.

/// The inclusive cumulative product of `x` along `dim` (Note [Inclusive products without
/// cumprod]).
fn cumulative_product(x: &Tensor, dim: usize, grad: &Tensor) -> Result<Tensor> {
    let n = x.sizes()[dim];
    let mut acc = x.clone();
    let mut s = 1;
    while s < n {
        let shifted = ops::cat_with(
            &[
                ones_along(x, dim, s, grad)?,
                ops::narrow(&acc, dim as i64, 0, n - s)?,
            ],
            ops::CatOptions::default().dim(dim as i64),
        )?;
        acc = ops::mul(&acc, &shifted)?;
        s *= 2;
    }
    Ok(acc)
}

/// The product of every other element of each line along `dim`, safe where `inp` has zeros:
/// the exclusive products from the front times those from the back.
fn prod_safe_zeros_backward(grad: &Tensor, inp: &Tensor, dim: i64) -> Result<Tensor> {
    if inp.numel() == 0 {
        return ops::expand(grad, inp.sizes());
    }
    let d = wrap(dim, inp.dim()) as usize;
    let n = inp.sizes()[d];
    let cat =
        |a: Tensor, b: Tensor| ops::cat_with(&[a, b], ops::CatOptions::default().dim(d as i64));
    let exclusive_normal = cumulative_product(
        &cat(
            ones_along(inp, d, 1, grad)?,
            ops::narrow(inp, d as i64, 0, n - 1)?,
        )?,
        d,
        grad,
    )?;
    let narrow_reverse = ops::flip(&ops::narrow(inp, d as i64, 1, n - 1)?, &[d as i64])?;
    let exclusive_reverse = ops::flip(
        &cumulative_product(&cat(ones_along(inp, d, 1, grad)?, narrow_reverse)?, d, grad)?,
        &[d as i64],
    )?;
    ops::mul(grad, &ops::mul(&exclusive_normal, &exclusive_reverse)?)
}

/// `prod`'s gradient: `grad * result / input` when no element is zero, else the products of
/// the other elements (zero everywhere when two are zero and no graph is being built).
pub(crate) fn prod_backward(grad: &Tensor, input: &Tensor, result: &Tensor) -> Result<Tensor> {
    if input.dim() == 0 {
        return Ok(grad.clone());
    }
    let zeros = ops::sum(&ops::eq_scalar(input, 0)?)?.item()?.to_i64();
    if zeros == 0 {
        return ops::mul(grad, &ops::div(result, input)?);
    }
    if !is_grad_enabled() && zeros > 1 {
        return ops::zeros_like(input);
    }
    let flat = ops::view(&ops::contiguous(input)?, &[-1])?;
    ops::view(&prod_safe_zeros_backward(grad, &flat, 0)?, input.sizes())
}

/// `prod.dim_int`'s gradient: [`prod_backward`] line by line along `dim`.
pub(crate) fn prod_backward_dim(
    grad: &Tensor,
    input: &Tensor,
    result: &Tensor,
    dim: i64,
    keepdim: bool,
) -> Result<Tensor> {
    if input.dim() == 0 {
        return Ok(grad.clone());
    }
    let dim = wrap(dim, input.dim());
    let (grad, result) = if keepdim {
        (grad.clone(), result.clone())
    } else {
        (ops::unsqueeze(grad, dim)?, ops::unsqueeze(result, dim)?)
    };
    let zeros = ops::sum(&ops::eq_scalar(input, 0)?)?.item()?.to_i64();
    if zeros == 0 {
        return ops::mul(&grad, &ops::div(&result, input)?);
    }
    prod_safe_zeros_backward(&grad, input, dim)
}
