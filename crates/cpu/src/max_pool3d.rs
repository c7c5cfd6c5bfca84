//! 3-d max pooling: `max_pool3d_with_indices` and its backward, over 4-d `(C, T, H, W)` and
//! 5-d `(N, C, T, H, W)` inputs, with PyTorch's output-size rules (`ceil_mode`, dilation)
//! and messages. Indices are flat positions `t * H * W + h * W + w` within each input plane,
//! as in PyTorch; a NaN in a window wins it (the last NaN, as PyTorch's `val > max ||
//! isnan(val)` update). The loop is `max_pool2d`'s (Note [One pooling loop for 2-d and 3-d]).

use switchboard_tensor::{ScalarType, Tensor};

use switchboard_ops::structured::{
    check_grad_output_dtype, pool3d_geometry, pool3d_window, Pool3d,
};

use crate::error::{check_cpu_or_meta, not_implemented, same_device, Result};
use crate::pool::{
    check_dim_size, check_indices_dtype, max_pool, max_pool_backward, saturated_usize,
    MaxPoolPlanes,
};

/// The argument checks of `max_pool3d_with_indices` (PyTorch's
/// `max_pool3d_with_indices_out_cpu_template`); `output` overrides the computed output sizes
/// (the backward takes them from `grad_output`, as PyTorch's).
#[allow(clippy::too_many_arguments)]
fn checked(
    tensors: &[&Tensor],
    input: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
    output: Option<[i64; 3]>,
) -> Result<Pool3d> {
    let device = same_device(tensors)?;
    check_cpu_or_meta("max_pool3d", device)?;
    let window = [kernel_size, stride, padding];
    let window = pool3d_window("max_pool3d", "either ", input, window, Some(dilation))?;
    pool3d_geometry(
        "max_pool3d",
        "max_pool3d_with_indices_out_cpu_template()",
        input,
        device,
        window,
        ceil_mode,
        output,
        false,
    )
}

/// `max_pool3d_with_indices(Tensor self, int[3] kernel_size, int[3] stride=[], int[3]
/// padding=0, int[3] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)`: the maximum of
/// each 3-d window and its flat position in the input plane. Every dtype but Bool.
///
/// ```
/// use switchboard_tensor::Tensor;
/// let x = Tensor::from_vec((0..8).map(|v| v as f32).collect(), &[1, 2, 2, 2]).unwrap();
/// let (y, i) = switchboard_cpu::max_pool3d_with_indices(&x, &[2], &[], &[0], &[1], false).unwrap();
/// assert_eq!(y.to_vec::<f32>().unwrap(), [7.0]);
/// assert_eq!(i.to_vec::<i64>().unwrap(), [7]);
/// ```
pub fn max_pool3d_with_indices(
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
) -> Result<(Tensor, Tensor)> {
    let g = checked(
        &[self_],
        self_,
        kernel_size,
        stride,
        padding,
        dilation,
        ceil_mode,
        None,
    )?;
    if g.device.is_meta() {
        let out = Tensor::empty_on(&g.out_shape, self_.dtype(), g.device)?;
        let indices = Tensor::empty_on(&g.out_shape, ScalarType::Long, g.device)?;
        return Ok((out, indices));
    }
    max_pool("max_pool3d", self_, &(&g).into(), &g.out_shape, g.device)
}

/// `max_pool3d_with_indices_backward(Tensor grad_output, Tensor self, int[3] kernel_size,
/// int[3] stride, int[3] padding, int[3] dilation, bool ceil_mode, Tensor indices) ->
/// Tensor`: scatters `grad_output` into a zero tensor shaped like `self` at `indices`
/// (accumulating where windows overlap). Floating dtypes.
#[allow(clippy::too_many_arguments)]
pub fn max_pool3d_with_indices_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
    indices: &Tensor,
) -> Result<Tensor> {
    let dtype = self_.dtype();
    check_grad_output_dtype(grad_output, self_)?;
    let nd = self_.dim();
    // PyTorch reads the output sizes from `grad_output` (`gradOutput.size(-3)` ...).
    let gs = grad_output.sizes();
    if gs.len() < 3 {
        switchboard_tensor::wrap_dim(-3, gs.len())?;
    }
    let output = [gs[gs.len() - 3], gs[gs.len() - 2], gs[gs.len() - 1]];
    let g = checked(
        &[grad_output, self_, indices],
        self_,
        kernel_size,
        stride,
        padding,
        dilation,
        ceil_mode,
        Some(output),
    )?;
    let slices = self_.sizes()[nd - 4];
    for t in [grad_output, indices] {
        check_dim_size(t, nd, nd - 4, slices)?;
        for (d, &size) in output.iter().enumerate() {
            check_dim_size(t, nd, nd - 3 + d, size)?;
        }
        if nd == 5 {
            check_dim_size(t, nd, 0, self_.sizes()[0])?;
        }
    }
    if g.device.is_meta() {
        return Tensor::empty_on(self_.sizes(), dtype, g.device);
    }
    check_indices_dtype(indices)?;
    if !dtype.is_floating_point() {
        return Err(not_implemented("max_pool3d_backward", dtype));
    }
    let planes = MaxPoolPlanes {
        op: "max_pool3d_with_indices_backward",
        count: saturated_usize(self_.sizes()[..nd - 3].iter().product()),
        input: &g.input,
        plane_in: g.plane_in(),
        plane_out: g.plane_out(),
    };
    max_pool_backward(grad_output, indices, self_.sizes(), &planes)
}

#[cfg(test)]
#[path = "max_pool3d_tests.rs"]
mod tests;
