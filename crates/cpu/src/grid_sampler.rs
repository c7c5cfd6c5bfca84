//! `grid_sampler_2d` and `grid_sampler_2d_backward`: sampling an `(N, C, H, W)` input at the
//! normalized `(x, y)` locations of an `(N, OH, OW, 2)` grid, with bilinear, nearest or
//! bicubic interpolation and zeros, border or reflection padding (PyTorch's GridSampler.h).
//!
//! Note [Grid sampler coordinates]
//! A grid value `g` in [-1, 1] is unnormalized to a pixel coordinate: `(g + 1) / 2 * (size - 1)`
//! with `align_corners` (-1 and 1 are the centres of the corner pixels), else
//! `((g + 1) * size - 1) / 2` (they are the image's edges). Border padding then clips the
//! coordinate to `[0, size - 1]`; reflection padding reflects it about the corner centres
//! (`align_corners`) or the edges, then clips (NaN clips to 0). A pixel index that is not
//! finite or does not fit an `i32` becomes -100 (out of bounds, as PyTorch's
//! `safe_downgrade_to_int_range`), while the weights keep the raw coordinate: with zeros
//! padding a NaN or infinite coordinate gives NaN, as PyTorch's vectorized kernels. Bilinear
//! and nearest pad the continuous coordinate; bicubic unnormalizes only, and pads each of its 16
//! integer taps. Out-of-bounds taps read 0. The gradient with respect to the grid is the
//! product of the interpolation's slope and the derivative of each step (unnormalizing scales
//! by `(size - 1) / 2` or `size / 2`, clipping is 0 outside the image, reflecting flips the
//! sign); nearest has none (0). Everything is computed in the kernel's compute type (f32 for
//! float, half and bfloat16; f64 for double), in PyTorch's order of operations.

use std::ops::{Add, Div, Mul, Neg, Rem, Sub};

use rayon::prelude::*;
use switchboard_ops::composite::{check_grid_sampler_2d, check_grid_sampler_common};
use switchboard_tensor::{RawOps, ScalarType, Tensor};

use crate::dispatch_dtype::{CpuElement, Float, FloatElement, Num};
use crate::dispatch_floating_types;
use crate::error::{check_cpu_or_meta, invalid, shape_str, Result};
use crate::loops::{parallel_region, runs_planes_in_parallel};

/// The compute type's arithmetic, with operators for legibility.
trait Real:
    Float
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + Rem<Output = Self>
{
}
impl<F> Real for F where
    F: Float
        + Add<Output = F>
        + Sub<Output = F>
        + Mul<Output = F>
        + Div<Output = F>
        + Neg<Output = F>
        + Rem<Output = F>
{
}

/// `interpolation_mode`: PyTorch's `GridSamplerInterpolation`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Interpolation {
    Bilinear,
    Nearest,
    Bicubic,
}

/// `padding_mode`: PyTorch's `GridSamplerPadding`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Padding {
    Zeros,
    Border,
    Reflection,
}

/// The modes as integers. PyTorch's kernels switch on them with no default case (an unknown
/// mode leaves the output unwritten); here it is an error naming the accepted values.
fn modes(interpolation_mode: i64, padding_mode: i64) -> Result<(Interpolation, Padding)> {
    let interpolation = match interpolation_mode {
        0 => Interpolation::Bilinear,
        1 => Interpolation::Nearest,
        2 => Interpolation::Bicubic,
        m => {
            return Err(invalid(format!(
                "grid_sampler(): expected interpolation_mode to be 0 (bilinear), 1 (nearest) \
                 or 2 (bicubic), but got {m}"
            )))
        }
    };
    let padding = match padding_mode {
        0 => Padding::Zeros,
        1 => Padding::Border,
        2 => Padding::Reflection,
        m => {
            return Err(invalid(format!(
                "grid_sampler(): expected padding_mode to be 0 (zeros), 1 (border) or 2 \
                 (reflection), but got {m}"
            )))
        }
    };
    Ok((interpolation, padding))
}

/// The sampling's sizes and options.
#[derive(Clone, Copy)]
struct Geometry {
    batch: usize,
    channels: usize,
    in_h: i64,
    in_w: i64,
    /// Output locations per batch element (`OH * OW`).
    points: usize,
    interpolation: Interpolation,
    padding: Padding,
    align_corners: bool,
}

impl Geometry {
    fn plane_in(&self) -> usize {
        (self.in_h * self.in_w) as usize
    }
    fn read<T: CpuElement>(&self, plane: &[T], y: i64, x: i64) -> Option<T::Acc> {
        (y >= 0 && y < self.in_h && x >= 0 && x < self.in_w)
            .then(|| plane[(y * self.in_w + x) as usize].to_acc())
    }
}

/// Checks shared by the forward and the backward: PyTorch's, then the dtype's kernel (input
/// and grid of one floating dtype).
fn checks(op: &str, input: &Tensor, grid: &Tensor, modes_: (i64, i64)) -> Result<()> {
    check_grid_sampler_common(input, grid)?;
    check_grid_sampler_2d(input, grid)?;
    check_cpu_or_meta(op, input.device())?;
    if !matches!(
        input.dtype(),
        ScalarType::Half | ScalarType::BFloat16 | ScalarType::Float | ScalarType::Double
    ) {
        return Err(crate::error::not_implemented(
            "grid_sampler_2d_cpu_kernel_impl",
            input.dtype(),
        ));
    }
    expect_dtype(input.dtype(), grid)?;
    modes(modes_.0, modes_.1)?;
    Ok(())
}

/// PyTorch reads every tensor as the input's element type.
fn expect_dtype(dtype: ScalarType, t: &Tensor) -> Result<()> {
    if t.dtype() != dtype {
        return Err(invalid(format!(
            "expected scalar type {} but found {}",
            dtype.c10_name(),
            t.dtype().c10_name()
        )));
    }
    Ok(())
}

fn geometry(input: &Tensor, grid: &Tensor, modes_: (i64, i64), align: bool) -> Result<Geometry> {
    let (interpolation, padding) = modes(modes_.0, modes_.1)?;
    let (gs, is) = (grid.sizes(), input.sizes());
    Ok(Geometry {
        batch: is[0] as usize,
        channels: is[1] as usize,
        in_h: is[2],
        in_w: is[3],
        points: (gs[1] * gs[2]) as usize,
        interpolation,
        padding,
        align_corners: align,
    })
}

/// `grid_sampler_2d(Tensor input, Tensor grid, int interpolation_mode, int padding_mode, bool
/// align_corners) -> Tensor`: `output[n, c, h, w]` is `input[n, c]` interpolated at
/// `grid[n, h, w]` (Note [Grid sampler coordinates]). Floating dtypes; input and grid of
/// one dtype.
///
/// ```
/// use switchboard_tensor::Tensor;
/// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[1, 1, 2, 2]).unwrap();
/// let g = Tensor::from_vec(vec![0.0f32, 0.0], &[1, 1, 1, 2]).unwrap();
/// let y = switchboard_cpu::grid_sampler_2d(&x, &g, 0, 0, false).unwrap();
/// assert_eq!(y.to_vec::<f32>().unwrap(), [2.5]);
/// ```
pub fn grid_sampler_2d(
    input: &Tensor,
    grid: &Tensor,
    interpolation_mode: i64,
    padding_mode: i64,
    align_corners: bool,
) -> Result<Tensor> {
    let modes_ = (interpolation_mode, padding_mode);
    checks("grid_sampler_2d", input, grid, modes_)?;
    let (is, gs) = (input.sizes(), grid.sizes());
    let shape = [is[0], is[1], gs[1], gs[2]];
    let out = Tensor::empty_on(&shape, input.dtype(), input.device())?;
    if input.device().is_meta() || out.numel() == 0 {
        return Ok(out);
    }
    let g = geometry(input, grid, modes_, align_corners)?;
    let (x, gr) = (input.contiguous()?, grid.contiguous()?);
    dispatch_floating_types!(input.dtype(), "grid_sampler_2d_cpu_kernel_impl", T => {
        forward::<T>(&x.data::<T>()?, &gr.data::<T>()?, &mut out.data_mut::<T>()?, &g);
        Ok(())
    })?;
    Ok(out)
}

/// `grid_sampler_2d_backward(Tensor grad_output, Tensor input, Tensor grid, int
/// interpolation_mode, int padding_mode, bool align_corners, bool[2] output_mask) -> (Tensor,
/// Tensor)`: the gradients with respect to the input (when `output_mask[0]`; else an empty
/// 0-element tensor, PyTorch's undefined one) and to the grid (always, as PyTorch's CPU kernel).
#[allow(clippy::too_many_arguments)]
pub fn grid_sampler_2d_backward(
    grad_output: &Tensor,
    input: &Tensor,
    grid: &Tensor,
    interpolation_mode: i64,
    padding_mode: i64,
    align_corners: bool,
    output_mask: &[bool],
) -> Result<(Tensor, Tensor)> {
    let op = "grid_sampler_2d_backward";
    let modes_ = (interpolation_mode, padding_mode);
    checks(op, input, grid, modes_)?;
    let &[want_input, _] = output_mask else {
        return Err(invalid(format!(
            "{op}: expected output_mask to have 2 elements, got {}",
            output_mask.len()
        )));
    };
    let (is, gs) = (input.sizes(), grid.sizes());
    let out_shape = [is[0], is[1], gs[1], gs[2]];
    if grad_output.sizes() != out_shape {
        return Err(invalid(format!(
            "grid_sampler(): expected grad_output to have sizes {} but got grad_output with \
             sizes {}",
            shape_str(&out_shape),
            shape_str(grad_output.sizes())
        )));
    }
    crate::error::same_device(&[grad_output, input, grid])?;
    let (dtype, device) = (input.dtype(), input.device());
    expect_dtype(dtype, grad_output)?;
    let grad_input = if want_input {
        Tensor::zeros_on(is, dtype, device)?
    } else {
        Tensor::empty_on(&[0], dtype, device)?
    };
    let grad_grid = Tensor::zeros_on(gs, dtype, device)?;
    if device.is_meta() || grad_grid.numel() == 0 && !want_input {
        return Ok((grad_input, grad_grid));
    }
    let g = geometry(input, grid, modes_, align_corners)?;
    let (go, x, gr) = (
        grad_output.contiguous()?,
        input.contiguous()?,
        grid.contiguous()?,
    );
    dispatch_floating_types!(dtype, "grid_sampler_2d_backward_cpu_kernel_impl", T => {
        let (gi, gg) = backward::<T>(&go.data::<T>()?, &x.data::<T>()?, &gr.data::<T>()?, &g);
        let mut ggd = grad_grid.data_mut::<T>()?;
        for (d, v) in ggd.iter_mut().zip(gg) {
            *d = T::from_acc(v);
        }
        if want_input {
            let mut gid = grad_input.data_mut::<T>()?;
            for (d, v) in gid.iter_mut().zip(gi) {
                *d = T::from_acc(v);
            }
        }
        Ok(())
    })?;
    Ok((grad_input, grad_grid))
}

/// Runs `f(n)` for each batch element, in parallel when the work is large, and collects the
/// results in order.
fn per_batch<R: Send>(batch: usize, work: usize, f: impl Fn(usize) -> R + Sync + Send) -> Vec<R> {
    if runs_planes_in_parallel(batch, work) {
        (0..batch)
            .into_par_iter()
            .map(|b| parallel_region(|| f(b)))
            .collect()
    } else {
        (0..batch).map(f).collect()
    }
}

fn forward<T: FloatElement>(x: &[T], grid: &[T], out: &mut [T], g: &Geometry)
where
    T::F: Real,
{
    let (c, points, plane_in) = (g.channels, g.points, g.plane_in());
    let batch_out = c * points;
    let work = batch_out.saturating_mul(16);
    let planes = per_batch(g.batch, work, |n| {
        let mut o = vec![<T::F as Num>::ZERO; batch_out];
        let xn = &x[n * c * plane_in..][..c * plane_in];
        for (p, xy) in grid[n * points * 2..][..points * 2].chunks(2).enumerate() {
            let (gx, gy) = (xy[0].to_acc(), xy[1].to_acc());
            for ch in 0..c {
                o[ch * points + p] = sample(&xn[ch * plane_in..][..plane_in], gx, gy, g);
            }
        }
        o
    });
    for (dst, plane) in out.chunks_mut(batch_out).zip(planes) {
        for (d, v) in dst.iter_mut().zip(plane) {
            *d = T::from_acc(v);
        }
    }
}

/// One plane sampled at grid location `(gx, gy)`.
fn sample<T: FloatElement>(plane: &[T], gx: T::F, gy: T::F, g: &Geometry) -> T::F
where
    T::F: Real,
{
    let zero = <T::F as Num>::ZERO;
    let tap = |y: i64, x: i64| g.read(plane, y, x).unwrap_or(zero);
    match g.interpolation {
        Interpolation::Bilinear => {
            let ix = source_index(gx, g.in_w, g);
            let iy = source_index(gy, g.in_h, g);
            let b = Bilinear::new(ix, iy);
            tap(b.y0, b.x0) * b.nw
                + tap(b.y0, b.x0 + 1) * b.ne
                + tap(b.y0 + 1, b.x0) * b.sw
                + tap(b.y0 + 1, b.x0 + 1) * b.se
        }
        Interpolation::Nearest => {
            let ix = index_of(source_index(gx, g.in_w, g).round_ties_even());
            let iy = index_of(source_index(gy, g.in_h, g).round_ties_even());
            tap(iy, ix)
        }
        Interpolation::Bicubic => {
            let ix = unnormalize(gx, g.in_w, g.align_corners);
            let iy = unnormalize(gy, g.in_h, g.align_corners);
            let (x0, y0) = (ix.floor(), iy.floor());
            let (wx, wy) = (cubic_weights(ix - x0), cubic_weights(iy - y0));
            let (x0, y0) = (index_of(x0), index_of(y0));
            let mut acc = zero;
            for (j, &wyj) in wy.iter().enumerate() {
                let mut row = zero;
                for (i, &wxi) in wx.iter().enumerate() {
                    let (y, x) = bounded_tap(x0 - 1 + i as i64, y0 - 1 + j as i64, g);
                    row = row + tap(y, x) * wxi;
                }
                acc = acc + row * wyj;
            }
            acc
        }
    }
}

/// The four bilinear neighbours of `(ix, iy)` (`x0 = floor(ix)`, `y0 = floor(iy)`) and
/// their weights.
struct Bilinear<F> {
    x0: i64,
    y0: i64,
    fx: F,
    fy: F,
    ix: F,
    iy: F,
    nw: F,
    ne: F,
    sw: F,
    se: F,
}

impl<F: Real> Bilinear<F> {
    fn new(ix: F, iy: F) -> Self {
        let (fx, fy) = (ix.floor(), iy.floor());
        let (x1, y1) = (fx + F::ONE, fy + F::ONE);
        Bilinear {
            x0: index_of(fx),
            y0: index_of(fy),
            fx,
            fy,
            ix,
            iy,
            nw: (x1 - ix) * (y1 - iy),
            ne: (ix - fx) * (y1 - iy),
            sw: (x1 - ix) * (iy - fy),
            se: (ix - fx) * (iy - fy),
        }
    }
}

/// Gradients of one batch element: `(grad_input, grad_grid)` in the compute type.
type BatchGrads<F> = (Vec<F>, Vec<F>);

fn backward<T: FloatElement>(go: &[T], x: &[T], grid: &[T], g: &Geometry) -> (Vec<T::F>, Vec<T::F>)
where
    T::F: Real,
{
    let (c, points, plane_in) = (g.channels, g.points, g.plane_in());
    let work = (c * points).saturating_mul(32);
    let parts: Vec<BatchGrads<T::F>> = per_batch(g.batch, work, |n| {
        let zero = <T::F as Num>::ZERO;
        let mut gi = vec![zero; c * plane_in];
        let mut gg = vec![zero; points * 2];
        let xn = &x[n * c * plane_in..][..c * plane_in];
        let gon = &go[n * c * points..][..c * points];
        for (p, xy) in grid[n * points * 2..][..points * 2].chunks(2).enumerate() {
            let (gx, gy) = (xy[0].to_acc(), xy[1].to_acc());
            let (dx, dy) = backward_point(xn, gon, &mut gi, p, gx, gy, g);
            gg[2 * p] = dx;
            gg[2 * p + 1] = dy;
        }
        (gi, gg)
    });
    let mut grad_input = Vec::with_capacity(x.len());
    let mut grad_grid = Vec::with_capacity(grid.len());
    for (gi, gg) in parts {
        grad_input.extend(gi);
        grad_grid.extend(gg);
    }
    (grad_input, grad_grid)
}

/// Scatters the output gradients at location `p` (all channels) into `gi` and returns the
/// gradient with respect to the grid value `(gx, gy)`.
fn backward_point<T: FloatElement>(
    x: &[T],
    go: &[T],
    gi: &mut [T::F],
    p: usize,
    gx: T::F,
    gy: T::F,
    g: &Geometry,
) -> (T::F, T::F)
where
    T::F: Real,
{
    let zero = <T::F as Num>::ZERO;
    let (c, points, plane_in) = (g.channels, g.points, g.plane_in());
    let within = |y: i64, x: i64| y >= 0 && y < g.in_h && x >= 0 && x < g.in_w;
    let at = |y: i64, x: i64| (y * g.in_w + x) as usize;
    match g.interpolation {
        Interpolation::Bilinear => {
            let (ix, mx) = source_index_with_grad(gx, g.in_w, g);
            let (iy, my) = source_index_with_grad(gy, g.in_h, g);
            let b = Bilinear::new(ix, iy);
            let (x0, y0) = (b.fx, b.fy);
            let (x1, y1) = (x0 + T::F::ONE, y0 + T::F::ONE);
            let (mut dx, mut dy) = (zero, zero);
            for ch in 0..c {
                let gout = go[ch * points + p].to_acc();
                let xp = &x[ch * plane_in..][..plane_in];
                let gp = &mut gi[ch * plane_in..][..plane_in];
                // (row, col, weight, d weight / d ix, d weight / d iy) of each neighbour.
                let taps = [
                    (b.y0, b.x0, b.nw, -(y1 - b.iy), -(x1 - b.ix)),
                    (b.y0, b.x0 + 1, b.ne, y1 - b.iy, -(b.ix - x0)),
                    (b.y0 + 1, b.x0, b.sw, -(b.iy - y0), x1 - b.ix),
                    (b.y0 + 1, b.x0 + 1, b.se, b.iy - y0, b.ix - x0),
                ];
                for (y, xx, w, wx, wy) in taps {
                    if within(y, xx) {
                        let i = at(y, xx);
                        gp[i] = gp[i] + w * gout;
                        let v = xp[i].to_acc();
                        dx = dx + v * wx * gout;
                        dy = dy + v * wy * gout;
                    }
                }
            }
            (mx * dx, my * dy)
        }
        Interpolation::Nearest => {
            let ix = index_of(source_index(gx, g.in_w, g).round_ties_even());
            let iy = index_of(source_index(gy, g.in_h, g).round_ties_even());
            if within(iy, ix) {
                for ch in 0..c {
                    let i = ch * plane_in + at(iy, ix);
                    gi[i] = gi[i] + go[ch * points + p].to_acc();
                }
            }
            (zero, zero)
        }
        Interpolation::Bicubic => {
            let (ix, mx) = unnormalize_with_grad(gx, g.in_w, g.align_corners);
            let (iy, my) = unnormalize_with_grad(gy, g.in_h, g.align_corners);
            let (fx, fy) = (ix.floor(), iy.floor());
            let (tx, ty) = (ix - fx, iy - fy);
            let (wx, wy) = (cubic_weights(tx), cubic_weights(ty));
            let (dwx, dwy) = (cubic_weight_slopes(tx), cubic_weight_slopes(ty));
            let (x0, y0) = (index_of(fx), index_of(fy));
            let (mut dx, mut dy) = (zero, zero);
            for ch in 0..c {
                let gout = go[ch * points + p].to_acc();
                let xp = &x[ch * plane_in..][..plane_in];
                let gp = &mut gi[ch * plane_in..][..plane_in];
                for i in 0..4 {
                    for j in 0..4 {
                        let (y, xx) = bounded_tap(x0 - 1 + i as i64, y0 - 1 + j as i64, g);
                        if within(y, xx) {
                            let k = at(y, xx);
                            gp[k] = gp[k] + gout * wx[i] * wy[j];
                            let v = xp[k].to_acc();
                            dx = dx - v * dwx[i] * wy[j] * gout;
                            dy = dy - v * dwy[j] * wx[i] * gout;
                        }
                    }
                }
            }
            (mx * dx, my * dy)
        }
    }
}

#[path = "grid_sampler_coordinates.rs"]
mod coordinates;
use coordinates::*;

#[cfg(test)]
#[path = "grid_sampler_tests.rs"]
mod tests;
