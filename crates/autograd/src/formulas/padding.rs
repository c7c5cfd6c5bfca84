//! Tiling and padding: `repeat` and `constant_pad_nd`'s gradients (PyTorch's
//! `repeat_backward` and `constant_pad_nd_backward`).

use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

/// `repeat`'s gradient: the tiles summed. `grad` is seen as `[r0, s0, r1, s1, ...]` (the
/// repeat dims only where a repeat is not 1) and summed over the repeat dims at once; the
/// leading dims `repeat` added are summed away first. A zero repeat gives zeros.
pub(crate) fn repeat_backward(
    grad: &Tensor,
    repeats: &[i64],
    input_shape: &[i64],
) -> Result<Tensor> {
    if repeats.contains(&0) {
        return ops::zeros_with(
            input_shape,
            ops::ZerosOptions::default()
                .dtype(grad.dtype())
                .device(grad.device()),
        );
    }
    let mut grad = grad.clone();
    let num_unsqueezed = grad.dim() - input_shape.len();
    for _ in 0..num_unsqueezed {
        grad = ops::sum_dim_int_list(&grad, Some(&[0]))?;
    }
    let mut grad_size = Vec::new();
    let mut sum_dims = Vec::new();
    for (dim, &size) in input_shape.iter().enumerate() {
        let repeat = repeats[dim + num_unsqueezed];
        if repeat != 1 {
            grad_size.push(repeat);
            sum_dims.push(grad_size.len() as i64 - 1);
        }
        grad_size.push(size);
    }
    if !sum_dims.is_empty() {
        grad = ops::reshape(&grad, &grad_size)?;
        grad = ops::sum_dim_int_list(&grad, Some(&sum_dims))?;
    }
    Ok(grad)
}

/// `constant_pad_nd`'s gradient: `grad` with the padding cropped (and the cropping padded
/// with zeros), i.e. padded by the negated amounts.
pub(crate) fn constant_pad_nd_backward(grad: &Tensor, pad: &[i64]) -> Result<Tensor> {
    let negated: Vec<i64> = pad.iter().map(|&p| -p).collect();
    ops::constant_pad_nd(grad, &negated)
}
