//! Average pooling: `avg_pool2d` and `avg_pool2d_backward` (windows with `ceil_mode`,
//! `count_include_pad` and `divisor_override`), over 3-d `(C, H, W)` and 4-d `(N, C, H, W)`
//! inputs, with PyTorch's output-size rules and messages (shared with max pooling); and the
//! loops they share with `avg_pool3d` (Note [One pooling loop for 2-d and 3-d]).

use rayon::prelude::*;
use switchboard_ops::structured;
use switchboard_tensor::{MemoryFormat, RawOps, ScalarType, Tensor};

use crate::copy::copy_into;
use crate::dispatch_dtype::{CpuElement, Num};
use crate::dispatch_floating_types;
use crate::error::{check_cpu, Result};
use crate::loops::{parallel_region, runs_planes_in_parallel};
use crate::pool::PoolGeometry;
use crate::structured_output::deliver;

pub(crate) use switchboard_ops::structured::pool_output_format;

/// `values` (contiguous, shaped `sizes`) in the memory format `like` suggests.
pub(crate) fn in_format_of(like: &Tensor, values: Tensor) -> Result<Tensor> {
    match pool_output_format(like) {
        MemoryFormat::Contiguous => Ok(values),
        format => {
            let out =
                Tensor::empty_with_format(values.sizes(), values.dtype(), values.device(), format)?;
            copy_into(&out, &values)?;
            Ok(out)
        }
    }
}

/// Runs `f(plane, out_plane)` over the planes of `out` (`len` elements each), in parallel when
/// the work is large.
pub(crate) fn for_each_plane<T: Send>(
    out: &mut [T],
    len: usize,
    work: usize,
    f: impl Fn(usize, &mut [T]) + Sync,
) {
    if len == 0 {
        return;
    }
    if runs_planes_in_parallel(out.len() / len, work) {
        out.par_chunks_mut(len)
            .enumerate()
            .for_each(|(p, o)| parallel_region(|| f(p, o)));
    } else {
        out.chunks_mut(len).enumerate().for_each(|(p, o)| f(p, o));
    }
}

/// One output's window clamped to the input (`[start, end)` per dim,
/// [`structured::avg_pool_window`]) and its divisor, or `None` for a window wholly in the
/// padding (its output is 0, as PyTorch's).
#[inline]
fn window(
    g: &PoolGeometry,
    o: [i64; 3],
    count_include_pad: bool,
    divisor: Option<i64>,
) -> Option<([(usize, usize); 3], i64)> {
    let geometry = [g.kernel, g.stride, g.padding];
    let (range, divisor) =
        structured::avg_pool_window(o, g.input, geometry, count_include_pad, divisor);
    if range.iter().any(|&(start, end)| start >= end) {
        return None;
    }
    Some((
        range.map(|(start, end)| (start as usize, end as usize)),
        divisor,
    ))
}

/// Runs `f(window, out)` over the outputs of one plane, in order, each with its [`window`].
#[inline]
fn for_each_window<O>(
    g: &PoolGeometry,
    outs: impl IntoIterator<Item = O>,
    count_include_pad: bool,
    divisor: Option<i64>,
    mut f: impl FnMut(Option<([(usize, usize); 3], i64)>, O),
) {
    let [ot, oh, ow] = g.output;
    let mut outs = outs.into_iter();
    for t in 0..ot {
        for y in 0..oh {
            for x in 0..ow {
                let Some(o) = outs.next() else { return };
                f(window(g, [t, y, x], count_include_pad, divisor), o);
            }
        }
    }
}

/// The average poolings' forward loop over contiguous planes, 2-d and 3-d alike (Note [One
/// pooling loop for 2-d and 3-d]): each output the sum of its window divided by the divisor.
pub(crate) fn avg_pool_planes<T: CpuElement>(
    x: &[T],
    out: &mut [T],
    g: &PoolGeometry,
    count_include_pad: bool,
    divisor: Option<i64>,
) {
    let (h, w) = (g.input[1] as usize, g.input[2] as usize);
    for_each_plane(out, g.plane_out, g.work(), |p, o| {
        let xp = &x[p * g.plane_in..][..g.plane_in];
        for_each_window(g, o, count_include_pad, divisor, |window, v| {
            let Some(([t, y, xr], d)) = window else {
                *v = T::from_acc(<T::Acc as Num>::ZERO);
                return;
            };
            let mut sum = <T::Acc as Num>::ZERO;
            for it in t.0..t.1 {
                for iy in y.0..y.1 {
                    let row = &xp[(it * h + iy) * w..][..w];
                    for e in &row[xr.0..xr.1] {
                        sum = sum.add(e.to_acc());
                    }
                }
            }
            *v = T::from_acc(sum.div(<T::Acc as Num>::from_f64(d as f64)));
        });
    });
}

/// The average poolings' backward loop over contiguous planes, 2-d and 3-d alike (Note [One
/// pooling loop for 2-d and 3-d]): each output's gradient divided by its window's divisor and
/// added to the window's inputs.
pub(crate) fn avg_pool_backward_planes<T: CpuElement>(
    go: &[T],
    gi: &mut [T],
    g: &PoolGeometry,
    count_include_pad: bool,
    divisor: Option<i64>,
) {
    let (h, w) = (g.input[1] as usize, g.input[2] as usize);
    for_each_plane(gi, g.plane_in, g.work(), |p, gp| {
        gp.fill(T::from_acc(<T::Acc as Num>::ZERO));
        let gop = &go[p * g.plane_out..][..g.plane_out];
        for_each_window(g, gop, count_include_pad, divisor, |window, v| {
            let Some(([t, y, xr], d)) = window else {
                return;
            };
            let share = v.to_acc().div(<T::Acc as Num>::from_f64(d as f64));
            for it in t.0..t.1 {
                for iy in y.0..y.1 {
                    let row = &mut gp[(it * h + iy) * w..][..w];
                    for e in &mut row[xr.0..xr.1] {
                        *e = T::from_acc(e.to_acc().add(share));
                    }
                }
            }
        });
    });
}

/// avg_pool2d's CPU dtypes: the floating types and Long (PyTorch's kernel dispatch, after the
/// meta function).
fn check_dtype(op: &str, dtype: ScalarType) -> Result<()> {
    if !dtype.is_floating_point() && dtype != ScalarType::Long {
        return Err(crate::error::not_implemented(op, dtype));
    }
    Ok(())
}

/// Runs `$body` with `$T` bound to the element type of `$dtype` for avg_pool2d's dtypes: the
/// floating types and Long.
macro_rules! dispatch_avg_pool_types {
    ($dtype:expr, $name:expr, $T:ident => $body:expr) => {{
        match $dtype {
            ScalarType::Long => {
                type $T = i64;
                $body
            }
            dt => dispatch_floating_types!(dt, $name, $T => $body),
        }
    }};
}

/// `avg_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, bool
/// ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor`: the
/// mean of each window (its sum divided by `divisor_override`, or by the window's size within
/// the padded input with `count_include_pad`, else within the input). Floating dtypes and
/// Long (integer division).
///
/// ```
/// use switchboard_tensor::Tensor;
/// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 6.0], &[1, 2, 2]).unwrap();
/// let y = switchboard_cpu::avg_pool2d(&x, &[2], &[], &[0], false, true, None).unwrap();
/// assert_eq!(y.to_vec::<f32>().unwrap(), [3.0]);
/// ```
pub fn avg_pool2d(
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Option<i64>,
) -> Result<Tensor> {
    let window = (kernel_size, stride, padding, ceil_mode);
    avg_pool2d_impl(self_, window, (count_include_pad, divisor_override), None)
}

/// `avg_pool2d.out(..., *, Tensor(a!) out)`.
#[allow(clippy::too_many_arguments)]
pub fn avg_pool2d_out(
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
    avg_pool2d_impl(
        self_,
        window,
        (count_include_pad, divisor_override),
        Some(out),
    )
}

/// An average pooling's window arguments: `kernel_size`, `stride`, `padding`, `ceil_mode`.
pub(crate) type WindowArgs<'a> = (&'a [i64], &'a [i64], &'a [i64], bool);

/// How an average pooling averages a window's sum: `count_include_pad`, `divisor_override`.
pub(crate) type Averaging = (bool, Option<i64>);

/// `avg_pool2d` after its meta function, into `out` when given.
fn avg_pool2d_impl(
    self_: &Tensor,
    (kernel_size, stride, padding, ceil_mode): WindowArgs,
    (count_include_pad, divisor_override): Averaging,
    out: Option<&Tensor>,
) -> Result<Tensor> {
    let (meta, p) = structured::avg_pool2d(
        self_,
        kernel_size,
        stride,
        padding,
        ceil_mode,
        count_include_pad,
        divisor_override,
        out,
    )?;
    check_cpu("avg_pool2d", meta.device)?;
    let given = out.map(|o| structured::resize_out(o, &meta)).transpose()?;
    let dtype = self_.dtype();
    check_dtype("avg_pool2d", dtype)?;
    let x = self_.contiguous()?;
    let computed = Tensor::empty_on(&p.out_shape, dtype, p.device)?;
    dispatch_avg_pool_types!(dtype, "avg_pool2d", T => {
        avg_pool_planes::<T>(&x.data::<T>()?, &mut computed.data_mut::<T>()?, &(&p).into(), count_include_pad, divisor_override);
        Ok(())
    })?;
    deliver(meta, given, computed)
}

/// `avg_pool2d_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride,
/// int[2] padding, bool ceil_mode, bool count_include_pad, int? divisor_override) -> Tensor`:
/// each output's gradient divided by its window's divisor and added to the window's inputs.
#[allow(clippy::too_many_arguments)]
pub fn avg_pool2d_backward(
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
    avg_pool2d_backward_impl(grad_output, self_, window, averaging, None)
}

/// `avg_pool2d_backward.grad_input(..., *, Tensor(a!) grad_input)`.
#[allow(clippy::too_many_arguments)]
pub fn avg_pool2d_backward_grad_input(
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
    avg_pool2d_backward_impl(grad_output, self_, window, averaging, Some(grad_input))
}

/// `avg_pool2d_backward` after its meta function, into `grad_input` when given.
fn avg_pool2d_backward_impl(
    grad_output: &Tensor,
    self_: &Tensor,
    (kernel_size, stride, padding, ceil_mode): WindowArgs,
    (count_include_pad, divisor_override): Averaging,
    grad_input: Option<&Tensor>,
) -> Result<Tensor> {
    let (meta, p) = structured::avg_pool2d_backward(
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
    check_cpu("avg_pool2d_backward", meta.device)?;
    let given = grad_input
        .map(|g| structured::resize_out(g, &meta))
        .transpose()?;
    let dtype = self_.dtype();
    check_dtype("avg_pool2d_backward_out_frame", dtype)?;
    structured::check_grad_output_dtype(grad_output, self_)?;
    let go = grad_output.contiguous()?;
    let gi = Tensor::empty_on(self_.sizes(), dtype, p.device)?;
    dispatch_avg_pool_types!(dtype, "avg_pool2d_backward_out_frame", T => {
        avg_pool_backward_planes::<T>(&go.data::<T>()?, &mut gi.data_mut::<T>()?, &(&p).into(), count_include_pad, divisor_override);
        Ok(())
    })?;
    deliver(meta, given, gi)
}

#[cfg(test)]
#[path = "avg_pool_tests.rs"]
mod tests;
