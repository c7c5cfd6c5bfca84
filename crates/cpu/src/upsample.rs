//! 2-d upsampling: `upsample_nearest2d`, `upsample_bilinear2d` and their backwards, over
//! `(N, C, H, W)` inputs, with PyTorch's source-index rules (UpSample.h) and messages.
//!
//! Note [Upsampling source indices]
//! Nearest: output index `o` reads input `min(floor(o * scale), in - 1)` with `scale` in f32
//! (`1 / scales` when a positive scale is given, else `in / out`), except that equal sizes copy
//! and doubled sizes shift (`o >> 1`), as PyTorch's `nearest_idx` does to avoid float error.
//! Bilinear: the source coordinate is `scale * o` with `align_corners` (scale `(in - 1) / (out -
//! 1)`), else `scale * (o + 0.5) - 0.5` clamped at 0; it reads `floor(src)` and the next input
//! (the last one repeats) with weights `1 - lambda`, `lambda`. Coordinates are computed in the
//! kernel's compute type (f32 for float, half and bfloat16, f64 for double), as PyTorch's
//! `opmath_t`, so the indices and weights are PyTorch's bit for bit.

use switchboard_tensor::{RawOps, ScalarType, Tensor};

use switchboard_ops::structured::{self, Upsample2d};

use crate::avg_pool::for_each_plane;
use crate::dispatch_dtype::{Float, FloatElement, Num};
use crate::dispatch_floating_types;
use crate::error::{check_cpu, invalid, Result};
use crate::structured_output::deliver;

/// PyTorch's `compute_scales_value<float>` for nearest: `1 / scale` when a positive scale is
/// given, else `in / out`.
fn nearest_scale(scale: Option<f64>, input: i64, output: i64) -> f32 {
    match scale {
        Some(s) if s > 0.0 => (1.0 / s) as f32,
        _ => input as f32 / output as f32,
    }
}

/// The input index each output index reads (Note [Upsampling source indices]).
fn nearest_indices(input: i64, output: i64, scale: Option<f64>) -> Vec<usize> {
    let f = nearest_scale(scale, input, output);
    (0..output)
        .map(|o| {
            let i = if output == input {
                o
            } else if output == 2 * input {
                o >> 1
            } else {
                ((o as f32 * f).floor() as i64).min(input - 1)
            };
            i as usize
        })
        .collect()
}

/// One output index's two inputs and their weights along a dim.
#[derive(Clone, Copy)]
struct Linear<F> {
    i0: usize,
    i1: usize,
    w0: F,
    w1: F,
}

/// PyTorch's `area_pixel_compute_scale` in the compute type `F`.
fn linear_scale<F: Float>(input: i64, output: i64, align_corners: bool, scale: Option<f64>) -> F {
    if align_corners {
        if output > 1 {
            F::from_i64(input - 1).div(F::from_i64(output - 1))
        } else {
            F::ZERO
        }
    } else {
        match scale {
            Some(s) if s > 0.0 => F::from_f64(1.0 / s),
            _ => F::from_i64(input).div(F::from_i64(output)),
        }
    }
}

/// The source index and weights of each output index (Note [Upsampling source indices]);
/// `identity_when_equal` is the backward's shortcut for equal sizes
/// (`compute_source_index_and_lambda`).
fn linear_weights<F: Float>(
    input: i64,
    output: i64,
    align_corners: bool,
    scale: Option<f64>,
    identity_when_equal: bool,
) -> Vec<Linear<F>> {
    let ratio = linear_scale::<F>(input, output, align_corners, scale);
    let half = F::from_f64(0.5);
    (0..output)
        .map(|o| {
            if identity_when_equal && input == output {
                let i = o as usize;
                return Linear {
                    i0: i,
                    i1: i,
                    w0: F::ONE,
                    w1: F::ZERO,
                };
            }
            let src = if align_corners {
                ratio.mul(F::from_i64(o))
            } else {
                let s = ratio.mul(F::from_i64(o).add(half)).sub(half);
                if s < F::ZERO {
                    F::ZERO
                } else {
                    s
                }
            };
            let i0 = (src.floor().to_i64()).min(input - 1);
            let lambda = src.sub(F::from_i64(i0));
            let lambda = if lambda < F::ZERO {
                F::ZERO
            } else if lambda > F::ONE {
                F::ONE
            } else {
                lambda
            };
            let i1 = i0 + i64::from(i0 < input - 1);
            Linear {
                i0: i0 as usize,
                i1: i1 as usize,
                w0: F::ONE.sub(lambda),
                w1: lambda,
            }
        })
        .collect()
}

fn nearest_planes<T: Copy + Send + Sync>(
    x: &[T],
    out: &mut [T],
    g: &Upsample2d,
    rows: &[usize],
    cols: &[usize],
) {
    let (w, ow) = (g.input[3] as usize, g.output[3] as usize);
    let (plane_in, plane_out) = (g.plane_in(), g.plane_out());
    for_each_plane(out, plane_out, plane_out, |p, o| {
        let xp = &x[p * plane_in..][..plane_in];
        for (orow, &iy) in o.chunks_mut(ow).zip(rows) {
            let irow = &xp[iy * w..][..w];
            for (v, &ix) in orow.iter_mut().zip(cols) {
                *v = irow[ix];
            }
        }
    });
}

/// `upsample_nearest2d(Tensor self, SymInt[2] output_size, float? scales_h=None, float?
/// scales_w=None) -> Tensor`: each output element copies its nearest input (Note [Upsampling
/// source indices]). Floating dtypes and uint8; channels-last inputs give channels-last
/// outputs.
///
/// ```
/// use switchboard_tensor::Tensor;
/// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[1, 1, 1, 2]).unwrap();
/// let y = switchboard_cpu::upsample_nearest2d(&x, &[1, 4], None, None).unwrap();
/// assert_eq!(y.to_vec::<f32>().unwrap(), [1.0, 1.0, 2.0, 2.0]);
/// ```
pub fn upsample_nearest2d(
    self_: &Tensor,
    output_size: &[i64],
    scales_h: Option<f64>,
    scales_w: Option<f64>,
) -> Result<Tensor> {
    upsample_nearest2d_impl(self_, output_size, scales_h, scales_w, None)
}

/// `upsample_nearest2d.out(..., *, Tensor(a!) out)`.
pub fn upsample_nearest2d_out(
    self_: &Tensor,
    output_size: &[i64],
    scales_h: Option<f64>,
    scales_w: Option<f64>,
    out: &Tensor,
) -> Result<Tensor> {
    upsample_nearest2d_impl(self_, output_size, scales_h, scales_w, Some(out))
}

/// `upsample_nearest2d` after its meta function, into `out` when given.
fn upsample_nearest2d_impl(
    self_: &Tensor,
    output_size: &[i64],
    scales_h: Option<f64>,
    scales_w: Option<f64>,
    out: Option<&Tensor>,
) -> Result<Tensor> {
    let meta = structured::upsample_nearest2d(self_, output_size, scales_h, scales_w, out)?;
    check_cpu("upsample_nearest2d", meta.device)?;
    let given = out.map(|o| structured::resize_out(o, &meta)).transpose()?;
    let g = structured::upsample2d_geometry(self_, output_size)?;
    let dtype = self_.dtype();
    let rows = nearest_indices(g.input[2], g.output[2], scales_h);
    let cols = nearest_indices(g.input[3], g.output[3], scales_w);
    let x = self_.contiguous()?;
    let computed = Tensor::empty_on(&g.output, dtype, self_.device())?;
    let name = "upsample_nearest2d_channels_last";
    match dtype {
        ScalarType::Byte => nearest_planes(
            &x.data::<u8>()?,
            &mut computed.data_mut::<u8>()?,
            &g,
            &rows,
            &cols,
        ),
        dt => dispatch_floating_types!(dt, name, T => {
            nearest_planes(&x.data::<T>()?, &mut computed.data_mut::<T>()?, &g, &rows, &cols);
            Ok(())
        })?,
    }
    deliver(meta, given, computed)
}

/// `upsample_nearest2d_backward(Tensor grad_output, SymInt[2] output_size, SymInt[4]
/// input_size, float? scales_h=None, float? scales_w=None) -> Tensor`: each output gradient
/// added to the input it was copied from. Floating dtypes.
pub fn upsample_nearest2d_backward(
    grad_output: &Tensor,
    output_size: &[i64],
    input_size: &[i64],
    scales_h: Option<f64>,
    scales_w: Option<f64>,
) -> Result<Tensor> {
    let scales = (scales_h, scales_w);
    upsample_nearest2d_backward_impl(grad_output, output_size, input_size, scales, None)
}

/// `upsample_nearest2d_backward.grad_input(..., *, Tensor(a!) grad_input)`.
pub fn upsample_nearest2d_backward_grad_input(
    grad_output: &Tensor,
    output_size: &[i64],
    input_size: &[i64],
    scales_h: Option<f64>,
    scales_w: Option<f64>,
    grad_input: &Tensor,
) -> Result<Tensor> {
    let scales = (scales_h, scales_w);
    upsample_nearest2d_backward_impl(
        grad_output,
        output_size,
        input_size,
        scales,
        Some(grad_input),
    )
}

/// `upsample_nearest2d_backward` after its meta function, into `grad_input` when given.
fn upsample_nearest2d_backward_impl(
    grad_output: &Tensor,
    output_size: &[i64],
    input_size: &[i64],
    (scales_h, scales_w): (Option<f64>, Option<f64>),
    grad_input: Option<&Tensor>,
) -> Result<Tensor> {
    let op = "upsample_nearest2d_backward";
    let meta = structured::upsample_nearest2d_backward(
        grad_output,
        output_size,
        input_size,
        scales_h,
        scales_w,
        grad_input,
    )?;
    check_cpu(op, meta.device)?;
    let given = grad_input
        .map(|g| structured::resize_out(g, &meta))
        .transpose()?;
    let g = structured::upsample2d_backward_geometry(grad_output, output_size, input_size)?;
    let dtype = grad_output.dtype();
    let rows = nearest_indices(g.input[2], g.output[2], scales_h);
    let cols = nearest_indices(g.input[3], g.output[3], scales_w);
    let go = grad_output.contiguous()?;
    let gi = Tensor::empty_on(&g.input, dtype, grad_output.device())?;
    dispatch_floating_types!(dtype, op, T => {
        nearest_backward_planes::<T>(&go.data::<T>()?, &mut gi.data_mut::<T>()?, &g, &rows, &cols);
        Ok(())
    })?;
    deliver(meta, given, gi)
}

fn nearest_backward_planes<T: FloatElement>(
    go: &[T],
    gi: &mut [T],
    g: &Upsample2d,
    rows: &[usize],
    cols: &[usize],
) {
    let (w, ow) = (g.input[3] as usize, g.output[3] as usize);
    let (plane_in, plane_out) = (g.plane_in(), g.plane_out());
    for_each_plane(gi, plane_in, plane_out, |p, gp| {
        let mut acc = vec![<T::F as Num>::ZERO; plane_in];
        let gop = &go[p * plane_out..][..plane_out];
        for (orow, &iy) in gop.chunks(ow).zip(rows) {
            let arow = &mut acc[iy * w..][..w];
            for (v, &ix) in orow.iter().zip(cols) {
                arow[ix] = arow[ix].add(v.to_acc());
            }
        }
        for (d, a) in gp.iter_mut().zip(acc) {
            *d = T::from_acc(a);
        }
    });
}

fn bilinear_planes<T: FloatElement>(
    x: &[T],
    out: &mut [T],
    g: &Upsample2d,
    rows: &[Linear<T::F>],
    cols: &[Linear<T::F>],
) {
    let (w, ow) = (g.input[3] as usize, g.output[3] as usize);
    let (plane_in, plane_out) = (g.plane_in(), g.plane_out());
    for_each_plane(out, plane_out, plane_out.saturating_mul(4), |p, o| {
        let xp = &x[p * plane_in..][..plane_in];
        for (orow, r) in o.chunks_mut(ow).zip(rows) {
            let (top, bottom) = (&xp[r.i0 * w..][..w], &xp[r.i1 * w..][..w]);
            for (v, c) in orow.iter_mut().zip(cols) {
                let t =
                    c.w0.mul(top[c.i0].to_acc())
                        .add(c.w1.mul(top[c.i1].to_acc()));
                let b =
                    c.w0.mul(bottom[c.i0].to_acc())
                        .add(c.w1.mul(bottom[c.i1].to_acc()));
                *v = T::from_acc(r.w0.mul(t).add(r.w1.mul(b)));
            }
        }
    });
}

/// `upsample_bilinear2d(Tensor self, SymInt[2] output_size, bool align_corners, float?
/// scales_h=None, float? scales_w=None) -> Tensor`: each output element interpolates its four
/// neighbouring inputs (Note [Upsampling source indices]). Floating dtypes; channels-last
/// inputs give channels-last outputs.
pub fn upsample_bilinear2d(
    self_: &Tensor,
    output_size: &[i64],
    align_corners: bool,
    scales_h: Option<f64>,
    scales_w: Option<f64>,
) -> Result<Tensor> {
    let scales = (scales_h, scales_w);
    upsample_bilinear2d_impl(self_, output_size, align_corners, scales, None)
}

/// `upsample_bilinear2d.out(..., *, Tensor(a!) out)`.
pub fn upsample_bilinear2d_out(
    self_: &Tensor,
    output_size: &[i64],
    align_corners: bool,
    scales_h: Option<f64>,
    scales_w: Option<f64>,
    out: &Tensor,
) -> Result<Tensor> {
    let scales = (scales_h, scales_w);
    upsample_bilinear2d_impl(self_, output_size, align_corners, scales, Some(out))
}

/// `upsample_bilinear2d` after its meta function, into `out` when given.
fn upsample_bilinear2d_impl(
    self_: &Tensor,
    output_size: &[i64],
    align_corners: bool,
    (scales_h, scales_w): (Option<f64>, Option<f64>),
    out: Option<&Tensor>,
) -> Result<Tensor> {
    let meta = structured::upsample_bilinear2d(
        self_,
        output_size,
        align_corners,
        scales_h,
        scales_w,
        out,
    )?;
    check_cpu("upsample_bilinear2d", meta.device)?;
    let given = out.map(|o| structured::resize_out(o, &meta)).transpose()?;
    let g = structured::upsample2d_geometry(self_, output_size)?;
    let dtype = self_.dtype();
    if dtype == ScalarType::Byte {
        // PyTorch's uint8 path interpolates with rounded integer weights (a separable kernel
        // of its own): refused rather than approximated.
        return Err(invalid(
            "upsample_bilinear2d: uint8 inputs are not supported (PyTorch's integer-weight \
             kernel is not implemented); convert the input to a floating dtype",
        ));
    }
    let x = self_.contiguous()?;
    let computed = Tensor::empty_on(&g.output, dtype, self_.device())?;
    dispatch_floating_types!(dtype, "upsample_bilinear2d_channels_last", T => {
        let rows = linear_weights(g.input[2], g.output[2], align_corners, scales_h, false);
        let cols = linear_weights(g.input[3], g.output[3], align_corners, scales_w, false);
        bilinear_planes::<T>(&x.data::<T>()?, &mut computed.data_mut::<T>()?, &g, &rows, &cols);
        Ok(())
    })?;
    deliver(meta, given, computed)
}

fn bilinear_backward_planes<T: FloatElement>(
    go: &[T],
    gi: &mut [T],
    g: &Upsample2d,
    rows: &[Linear<T::F>],
    cols: &[Linear<T::F>],
) {
    let (w, ow) = (g.input[3] as usize, g.output[3] as usize);
    let (plane_in, plane_out) = (g.plane_in(), g.plane_out());
    for_each_plane(gi, plane_in, plane_out.saturating_mul(4), |p, gp| {
        let mut acc = vec![<T::F as Num>::ZERO; plane_in];
        let gop = &go[p * plane_out..][..plane_out];
        for (orow, r) in gop.chunks(ow).zip(rows) {
            for (v, c) in orow.iter().zip(cols) {
                let v = v.to_acc();
                for (iy, wy) in [(r.i0, r.w0), (r.i1, r.w1)] {
                    let wyv = wy.mul(v);
                    let arow = &mut acc[iy * w..][..w];
                    arow[c.i0] = arow[c.i0].add(c.w0.mul(wyv));
                    arow[c.i1] = arow[c.i1].add(c.w1.mul(wyv));
                }
            }
        }
        for (d, a) in gp.iter_mut().zip(acc) {
            *d = T::from_acc(a);
        }
    });
}

/// `upsample_bilinear2d_backward(Tensor grad_output, SymInt[2] output_size, SymInt[4]
/// input_size, bool align_corners, float? scales_h=None, float? scales_w=None) -> Tensor`:
/// each output gradient spread over its four inputs with the forward's weights. Floating
/// dtypes.
pub fn upsample_bilinear2d_backward(
    grad_output: &Tensor,
    output_size: &[i64],
    input_size: &[i64],
    align_corners: bool,
    scales_h: Option<f64>,
    scales_w: Option<f64>,
) -> Result<Tensor> {
    let sizes = (output_size, input_size);
    let scales = (scales_h, scales_w);
    upsample_bilinear2d_backward_impl(grad_output, sizes, align_corners, scales, None)
}

/// `upsample_bilinear2d_backward.grad_input(..., *, Tensor(a!) grad_input)`.
pub fn upsample_bilinear2d_backward_grad_input(
    grad_output: &Tensor,
    output_size: &[i64],
    input_size: &[i64],
    align_corners: bool,
    scales_h: Option<f64>,
    scales_w: Option<f64>,
    grad_input: &Tensor,
) -> Result<Tensor> {
    let sizes = (output_size, input_size);
    let scales = (scales_h, scales_w);
    upsample_bilinear2d_backward_impl(grad_output, sizes, align_corners, scales, Some(grad_input))
}

/// `upsample_bilinear2d_backward` after its meta function, into `grad_input` when given.
fn upsample_bilinear2d_backward_impl(
    grad_output: &Tensor,
    (output_size, input_size): (&[i64], &[i64]),
    align_corners: bool,
    (scales_h, scales_w): (Option<f64>, Option<f64>),
    grad_input: Option<&Tensor>,
) -> Result<Tensor> {
    let op = "upsample_bilinear2d_backward";
    let meta = structured::upsample_bilinear2d_backward(
        grad_output,
        output_size,
        input_size,
        align_corners,
        scales_h,
        scales_w,
        grad_input,
    )?;
    check_cpu(op, meta.device)?;
    let given = grad_input
        .map(|g| structured::resize_out(g, &meta))
        .transpose()?;
    let g = structured::upsample2d_backward_geometry(grad_output, output_size, input_size)?;
    let dtype = grad_output.dtype();
    let go = grad_output.contiguous()?;
    let gi = Tensor::empty_on(&g.input, dtype, grad_output.device())?;
    dispatch_floating_types!(dtype, op, T => {
        let rows = linear_weights(g.input[2], g.output[2], align_corners, scales_h, true);
        let cols = linear_weights(g.input[3], g.output[3], align_corners, scales_w, true);
        bilinear_backward_planes::<T>(&go.data::<T>()?, &mut gi.data_mut::<T>()?, &g, &rows, &cols);
        Ok(())
    })?;
    deliver(meta, given, gi)
}

#[cfg(test)]
#[path = "upsample_tests.rs"]
mod tests;
