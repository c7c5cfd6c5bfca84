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

use crate::avg_pool::{for_each_plane, in_format_of, pool_output_format};
use crate::dispatch_dtype::{Float, FloatElement, Num};
use crate::dispatch_floating_types;
use crate::error::{check_cpu_or_meta, invalid, shape_str, Result};

/// The checked geometry of a 2-d upsampling: input and output sizes.
struct Geometry {
    /// `[N, C, H, W]` of the input.
    input: [i64; 4],
    /// `[N, C, OH, OW]` of the output.
    output: [i64; 4],
}

impl Geometry {
    fn plane_in(&self) -> usize {
        (self.input[2] * self.input[3]) as usize
    }
    fn plane_out(&self) -> usize {
        (self.output[2] * self.output[3]) as usize
    }
}

/// PyTorch's `upsample_2d_common_check`: two output sizes, four input sizes, all spatial sizes
/// positive.
fn common_check(input_size: &[i64], output_size: &[i64]) -> Result<Geometry> {
    if output_size.len() != 2 {
        return Err(invalid(format!(
            "It is expected output_size equals to 2, but got size {}",
            output_size.len()
        )));
    }
    let &[n, c, h, w] = input_size else {
        return Err(invalid(format!(
            "It is expected input_size equals to 4, but got size {}",
            input_size.len()
        )));
    };
    let (oh, ow) = (output_size[0], output_size[1]);
    if h <= 0 || w <= 0 || oh <= 0 || ow <= 0 {
        return Err(invalid(format!(
            "Input and output sizes should be greater than 0, but got input (H: {h}, W: {w}) \
             output (H: {oh}, W: {ow})"
        )));
    }
    if n < 0 || c < 0 {
        return Err(invalid(format!(
            "upsample: input_size must not be negative, but got {}",
            shape_str(input_size)
        )));
    }
    Ok(Geometry {
        input: [n, c, h, w],
        output: [n, c, oh, ow],
    })
}

/// The forward's checks (PyTorch's meta function): the common check, then a non-empty
/// `(C, H, W)`.
fn forward_geometry(op: &str, input: &Tensor, output_size: &[i64]) -> Result<Geometry> {
    check_cpu_or_meta(op, input.device())?;
    let g = common_check(input.sizes(), output_size)?;
    if input.numel() == 0 && input.sizes()[1..].iter().product::<i64>() == 0 {
        return Err(invalid(format!(
            "Non-empty 4D data tensor expected but got a tensor with sizes {}",
            shape_str(input.sizes())
        )));
    }
    Ok(g)
}

/// The backward's checks (PyTorch's meta function): the common check, then `grad_output`
/// shaped as the forward's output.
fn backward_geometry(
    op: &str,
    grad_output: &Tensor,
    output_size: &[i64],
    input_size: &[i64],
) -> Result<Geometry> {
    check_cpu_or_meta(op, grad_output.device())?;
    let g = common_check(input_size, output_size)?;
    if grad_output.dim() != 4 {
        return Err(invalid(format!(
            "Expected grad_output to be a tensor of dimension 4 but got: dimension {}",
            grad_output.dim()
        )));
    }
    for (i, (&want, &got)) in g.output.iter().zip(grad_output.sizes()).enumerate() {
        if want != got {
            return Err(invalid(format!(
                "Expected grad_output to have the same shape as output; output.size({i}) = \
                 {want} but got grad_output.size({i}) = {got}"
            )));
        }
    }
    Ok(g)
}

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
    g: &Geometry,
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
    let g = forward_geometry("upsample_nearest2d", self_, output_size)?;
    let dtype = self_.dtype();
    if self_.device().is_meta() {
        return Tensor::empty_with_format(
            &g.output,
            dtype,
            self_.device(),
            pool_output_format(self_),
        );
    }
    let rows = nearest_indices(g.input[2], g.output[2], scales_h);
    let cols = nearest_indices(g.input[3], g.output[3], scales_w);
    let x = self_.contiguous()?;
    let out = Tensor::empty_on(&g.output, dtype, self_.device())?;
    let name = "upsample_nearest2d_channels_last";
    match dtype {
        ScalarType::Byte => nearest_planes(
            &x.data::<u8>()?,
            &mut out.data_mut::<u8>()?,
            &g,
            &rows,
            &cols,
        ),
        dt => dispatch_floating_types!(dt, name, T => {
            nearest_planes(&x.data::<T>()?, &mut out.data_mut::<T>()?, &g, &rows, &cols);
            Ok(())
        })?,
    }
    in_format_of(self_, out)
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
    let op = "upsample_nearest2d_backward";
    let g = backward_geometry(op, grad_output, output_size, input_size)?;
    let dtype = grad_output.dtype();
    let device = grad_output.device();
    if device.is_meta() {
        return Tensor::empty_with_format(&g.input, dtype, device, pool_output_format(grad_output));
    }
    let rows = nearest_indices(g.input[2], g.output[2], scales_h);
    let cols = nearest_indices(g.input[3], g.output[3], scales_w);
    let go = grad_output.contiguous()?;
    let gi = Tensor::empty_on(&g.input, dtype, device)?;
    dispatch_floating_types!(dtype, op, T => {
        nearest_backward_planes::<T>(&go.data::<T>()?, &mut gi.data_mut::<T>()?, &g, &rows, &cols);
        Ok(())
    })?;
    in_format_of(grad_output, gi)
}

fn nearest_backward_planes<T: FloatElement>(
    go: &[T],
    gi: &mut [T],
    g: &Geometry,
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
    g: &Geometry,
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
    let g = forward_geometry("upsample_bilinear2d", self_, output_size)?;
    let dtype = self_.dtype();
    if self_.device().is_meta() {
        return Tensor::empty_with_format(
            &g.output,
            dtype,
            self_.device(),
            pool_output_format(self_),
        );
    }
    if dtype == ScalarType::Byte {
        // PyTorch's uint8 path interpolates with rounded integer weights (a separable kernel
        // of its own): refused rather than approximated.
        return Err(invalid(
            "upsample_bilinear2d: uint8 inputs are not supported (PyTorch's integer-weight \
             kernel is not implemented); convert the input to a floating dtype",
        ));
    }
    let x = self_.contiguous()?;
    let out = Tensor::empty_on(&g.output, dtype, self_.device())?;
    dispatch_floating_types!(dtype, "upsample_bilinear2d_channels_last", T => {
        let rows = linear_weights(g.input[2], g.output[2], align_corners, scales_h, false);
        let cols = linear_weights(g.input[3], g.output[3], align_corners, scales_w, false);
        bilinear_planes::<T>(&x.data::<T>()?, &mut out.data_mut::<T>()?, &g, &rows, &cols);
        Ok(())
    })?;
    in_format_of(self_, out)
}

fn bilinear_backward_planes<T: FloatElement>(
    go: &[T],
    gi: &mut [T],
    g: &Geometry,
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
    let op = "upsample_bilinear2d_backward";
    let g = backward_geometry(op, grad_output, output_size, input_size)?;
    let dtype = grad_output.dtype();
    let device = grad_output.device();
    if device.is_meta() {
        return Tensor::empty_with_format(&g.input, dtype, device, pool_output_format(grad_output));
    }
    let go = grad_output.contiguous()?;
    let gi = Tensor::empty_on(&g.input, dtype, device)?;
    dispatch_floating_types!(dtype, op, T => {
        let rows = linear_weights(g.input[2], g.output[2], align_corners, scales_h, true);
        let cols = linear_weights(g.input[3], g.output[3], align_corners, scales_w, true);
        bilinear_backward_planes::<T>(&go.data::<T>()?, &mut gi.data_mut::<T>()?, &g, &rows, &cols);
        Ok(())
    })?;
    in_format_of(grad_output, gi)
}

#[cfg(test)]
#[path = "upsample_tests.rs"]
mod tests;
