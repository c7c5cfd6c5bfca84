//! 3-d average pooling: `avg_pool3d` and `avg_pool3d_backward` (windows with `ceil_mode`,
//! `count_include_pad` and `divisor_override`) over 4-d `(C, T, H, W)` and 5-d
//! `(N, C, T, H, W)` inputs, computed into the outputs their meta functions describe
//! (`switchboard_ops::structured::avg_pool3d`: contiguous whatever the input's layout, as
//! PyTorch's) by the loops of `avg_pool2d` (Note [One pooling loop for 2-d and 3-d]).

use switchboard_ops::structured;
use switchboard_tensor::{RawOps, ScalarType, Tensor};

use crate::avg_pool::{avg_pool_backward_planes, avg_pool_planes, Averaging, WindowArgs};
use crate::dispatch_floating_types;
use crate::error::{check_cpu, Result};
use crate::structured_output::{compute_contiguous, structured_output};

/// Runs `$body` with `$T` bound to the element type of `$dtype` for avg_pool3d's dtypes:
/// float, double and Long (PyTorch's CPU kernels have no float16 or bfloat16 loop).
macro_rules! dispatch_avg_pool3d_types {
    ($dtype:expr, $name:expr, $T:ident => $body:expr) => {{
        match $dtype {
            ScalarType::Long => {
                type $T = i64;
                $body
            }
            dt @ (ScalarType::Half | ScalarType::BFloat16) => {
                Err($crate::error::not_implemented($name, dt))
            }
            dt => dispatch_floating_types!(dt, $name, $T => $body),
        }
    }};
}

/// `avg_pool3d(Tensor self, int[3] kernel_size, int[3] stride=[], int[3] padding=0, bool
/// ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor`: the
/// mean of each 3-d window (its sum divided by `divisor_override`, or by the window's size
/// within the padded input with `count_include_pad`, else within the input). Floating dtypes
/// and Long (integer division).
///
/// ```
/// use switchboard_tensor::Tensor;
/// let x = Tensor::from_vec((0..8).map(|v| v as f32).collect(), &[1, 2, 2, 2]).unwrap();
/// let y = switchboard_cpu::avg_pool3d(&x, &[2], &[], &[0], false, true, None).unwrap();
/// assert_eq!(y.to_vec::<f32>().unwrap(), [3.5]);
/// ```
pub fn avg_pool3d(
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Option<i64>,
) -> Result<Tensor> {
    let window = (kernel_size, stride, padding, ceil_mode);
    avg_pool3d_impl(self_, window, (count_include_pad, divisor_override), None)
}

/// `avg_pool3d.out(..., *, Tensor(a!) out)`.
#[allow(clippy::too_many_arguments)]
pub fn avg_pool3d_out(
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Option<i64>,
    out: &Tensor,
) -> Result<Tensor> {
    let window = (kernel_size, stride, padding, ceil_mode);
    avg_pool3d_impl(
        self_,
        window,
        (count_include_pad, divisor_override),
        Some(out),
    )
}

/// `avg_pool3d` after its meta function, into `out` when given.
fn avg_pool3d_impl(
    self_: &Tensor,
    (kernel_size, stride, padding, ceil_mode): WindowArgs,
    (count_include_pad, divisor_override): Averaging,
    out: Option<&Tensor>,
) -> Result<Tensor> {
    let (meta, g) = structured::avg_pool3d(
        self_,
        kernel_size,
        stride,
        padding,
        ceil_mode,
        count_include_pad,
        divisor_override,
        out,
    )?;
    check_cpu("avg_pool3d", meta.device)?;
    let result = structured_output(meta, out)?;
    let dtype = self_.dtype();
    let x = self_.contiguous()?;
    compute_contiguous(&result, &[self_], |dense| {
        dispatch_avg_pool3d_types!(dtype, "avg_pool3d_out_frame", T => {
            avg_pool_planes::<T>(&x.data::<T>()?, &mut dense.data_mut::<T>()?, &(&g).into(), count_include_pad, divisor_override);
            Ok(())
        })
    })?;
    Ok(result)
}

/// `avg_pool3d_backward(Tensor grad_output, Tensor self, int[3] kernel_size, int[3] stride,
/// int[3] padding, bool ceil_mode, bool count_include_pad, int? divisor_override) -> Tensor`:
/// each output's gradient divided by its window's divisor and added to the window's inputs.
#[allow(clippy::too_many_arguments)]
pub fn avg_pool3d_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Option<i64>,
) -> Result<Tensor> {
    let window = (kernel_size, stride, padding, ceil_mode);
    let averaging = (count_include_pad, divisor_override);
    avg_pool3d_backward_impl(grad_output, self_, window, averaging, None)
}

/// `avg_pool3d_backward.grad_input(..., *, Tensor(a!) grad_input)`.
#[allow(clippy::too_many_arguments)]
pub fn avg_pool3d_backward_grad_input(
    grad_output: &Tensor,
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Option<i64>,
    grad_input: &Tensor,
) -> Result<Tensor> {
    let window = (kernel_size, stride, padding, ceil_mode);
    let averaging = (count_include_pad, divisor_override);
    avg_pool3d_backward_impl(grad_output, self_, window, averaging, Some(grad_input))
}

/// `avg_pool3d_backward` after its meta function, into `grad_input` when given.
fn avg_pool3d_backward_impl(
    grad_output: &Tensor,
    self_: &Tensor,
    (kernel_size, stride, padding, ceil_mode): WindowArgs,
    (count_include_pad, divisor_override): Averaging,
    grad_input: Option<&Tensor>,
) -> Result<Tensor> {
    let (meta, g) = structured::avg_pool3d_backward(
        grad_output,
        self_,
        kernel_size,
        stride,
        padding,
        ceil_mode,
        count_include_pad,
        divisor_override,
        grad_input,
    )?;
    check_cpu("avg_pool3d_backward", meta.device)?;
    let result = structured_output(meta, grad_input)?;
    let dtype = self_.dtype();
    let go = grad_output.contiguous()?;
    compute_contiguous(&result, &[grad_output, self_], |dense| {
        dispatch_avg_pool3d_types!(dtype, "avg_pool3d_backward_out_frame", T => {
            // A `grad_output` of another dtype fails to be read as `T`, with PyTorch's
            // `data_ptr<scalar_t>` message.
            avg_pool_backward_planes::<T>(&go.data::<T>()?, &mut dense.data_mut::<T>()?, &(&g).into(), count_include_pad, divisor_override);
            Ok(())
        })
    })?;
    Ok(result)
}

#[cfg(test)]
#[path = "avg_pool3d_tests.rs"]
mod tests;
