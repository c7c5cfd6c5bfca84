//! The FFT core's backward formulas (PyTorch's `fft_r2c_backward`, `fft_c2r_backward`).

use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

/// The last transformed dim, wrapped.
fn last_dim(dim: &[i64], rank: usize) -> usize {
    let d = dim.last().copied().unwrap_or(-1);
    if d < 0 {
        (d + rank as i64) as usize
    } else {
        d as usize
    }
}

/// The gradient of `_fft_r2c`: the backward c2c of the gradient, real part. A one-sided
/// gradient is first zero-padded to the input's `last_dim_size` along the last dim (the
/// elements the forward cut off got no gradient).
pub(crate) fn fft_r2c_backward(
    grad: &Tensor,
    dim: &[i64],
    normalization: i64,
    onesided: bool,
    self_sizes: &[i64],
) -> Result<Tensor> {
    let full = if onesided {
        let last = last_dim(dim, grad.dim());
        let zero_length = self_sizes[last] - grad.sizes()[last];
        if zero_length > 0 {
            let mut pad = vec![0i64; 2 * grad.dim()];
            pad[2 * (grad.dim() - last) - 1] = zero_length;
            ops::constant_pad_nd(grad, &pad)?
        } else {
            grad.clone()
        }
    } else {
        grad.clone()
    };
    ops::real(&ops::_fft_c2c(&full, dim, normalization, false)?)
}

// Note [The gradient of c2r]
// A one-sided c2r is: fill the other half by conjugate symmetry, a backward c2c, drop the
// imaginary parts. Its gradient is the one-sided r2c of the gradient, with the elements whose
// mirror image also lies outside the one-sided half counted twice: indices 1 to
// `n - (n/2 + 1)` of the last dim (PyTorch's `fft_c2r_backward`). The doubling multiplies the
// real view by a weight along that dim, out of place, so that gradients of gradients see it.

/// The gradient of `_fft_c2r` (Note [The gradient of c2r]).
pub(crate) fn fft_c2r_backward(grad: &Tensor, dim: &[i64], normalization: i64) -> Result<Tensor> {
    let gi = ops::_fft_r2c(grad, dim, normalization, true)?;
    let last = last_dim(dim, grad.dim());
    let onesided = gi.sizes()[last];
    let double_length = grad.sizes()[last] - onesided;
    if double_length <= 0 {
        return Ok(gi);
    }
    let real_dtype = gi.dtype().to_real_value_type();
    let weight = ops::ones_with(
        &[onesided],
        ops::OnesOptions::default()
            .dtype(real_dtype)
            .device(gi.device()),
    )?;
    ops::fill_(&ops::narrow(&weight, 0, 1, double_length)?, 2)?;
    // Shaped to broadcast along `last` of the real view (`sizes + [2]`).
    let mut shape = vec![1i64; gi.dim() + 1];
    shape[last] = onesided;
    let weight = ops::view(&weight, &shape)?;
    let doubled = ops::mul(&ops::view_as_real(&gi)?, &weight)?;
    ops::view_as_complex(&ops::contiguous(&doubled)?)
}
