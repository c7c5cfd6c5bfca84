//! Max pooling: `max_pool2d_with_indices` and its backward, over 3-d `(C, H, W)` and 4-d
//! `(N, C, H, W)` inputs, with PyTorch's output-size rules (`ceil_mode`, dilation) and
//! messages. Indices are flat positions `h * W + w` within each input plane, as in PyTorch.
//! Also the pieces the poolings share: their window geometry over `(T, H, W)` planes and the
//! max pooling loops of `max_pool3d_with_indices` (Note [One pooling loop for 2-d and 3-d]).

use std::hint::{black_box, select_unpredictable};
use std::mem::MaybeUninit;

use rayon::prelude::*;
use switchboard_ops::structured::{self, Pool3d};
use switchboard_tensor::{Device, RawOps, ScalarType, Tensor};

pub(crate) use switchboard_ops::structured::{check_dim_size, first_inside, saturated_usize, Pool};

use crate::dispatch_dtype::{CpuElement, Num};
use crate::error::{check_cpu, invalid, not_implemented, Result};
use crate::fresh_output::{fresh_output, zero_fill, FreshData};
use crate::loops::{parallel_region, runs_planes_in_parallel};
use crate::structured_output::deliver;
use crate::{dispatch_all_types, dispatch_floating_types};

/// Runs `f(plane, a, b)` over matching per-plane chunks of two output buffers, in parallel
/// when the work is large enough and we are not already inside a parallel region.
fn for_planes<A: Send, B: Send>(
    a: &mut [A],
    la: usize,
    b: &mut [B],
    lb: usize,
    work_per_plane: usize,
    f: impl Fn(usize, &mut [A], &mut [B]) + Sync,
) {
    if la == 0 || lb == 0 {
        return;
    }
    let planes = a.len() / la;
    if runs_planes_in_parallel(planes, work_per_plane) {
        a.par_chunks_mut(la)
            .zip(b.par_chunks_mut(lb))
            .enumerate()
            .for_each(|(p, (x, y))| parallel_region(|| f(p, x, y)));
    } else {
        for (p, (x, y)) in a.chunks_mut(la).zip(b.chunks_mut(lb)).enumerate() {
            f(p, x, y);
        }
    }
}

// Note [One pooling loop for 2-d and 3-d]
// The 2-d and 3-d poolings share their loops (average pooling forward and backward, max
// pooling forward): a 2-d pooling is a 3-d one of depth 1, with a kernel, stride and dilation
// of 1 and no padding in depth, whose depth loop runs once per row. PyTorch's 2-d and 3-d
// kernels compute a window alike (its bounds clipped to the input, then its sum or maximum,
// in the same order), so one loop gives both their values, and their indices: a max pooling
// window wholly in the padding reads its first position past the padding in 2-d as in 3-d.
// For a 2-d pooling the depth loop adds one iteration per output row (max) or per output
// (average); examples/pool_shapes.rs times both.

/// The window geometry of a pooling over contiguous `(T, H, W)` planes, which the 2-d and 3-d
/// poolings' loops share: a 2-d pooling is a 3-d one of depth 1 (a kernel, stride and
/// dilation of 1, no padding), whose depth loop runs once (Note [One pooling loop for 2-d and
/// 3-d]).
pub(crate) struct PoolGeometry {
    pub(crate) kernel: [i64; 3],
    pub(crate) stride: [i64; 3],
    pub(crate) padding: [i64; 3],
    pub(crate) dilation: [i64; 3],
    pub(crate) input: [i64; 3],
    pub(crate) output: [i64; 3],
    /// Elements of an input plane.
    pub(crate) plane_in: usize,
    /// Elements of an output plane.
    pub(crate) plane_out: usize,
}

impl From<&Pool> for PoolGeometry {
    fn from(p: &Pool) -> Self {
        let win = &p.win;
        PoolGeometry {
            kernel: [1, win.kh, win.kw],
            stride: [1, win.sh, win.sw],
            padding: [0, win.ph, win.pw],
            dilation: [1, win.dh, win.dw],
            input: [1, p.h, p.w],
            output: [1, p.oh, p.ow],
            plane_in: p.plane_in,
            plane_out: p.plane_out,
        }
    }
}

impl From<&Pool3d> for PoolGeometry {
    fn from(g: &Pool3d) -> Self {
        PoolGeometry {
            kernel: g.kernel,
            stride: g.stride,
            padding: g.padding,
            dilation: g.dilation,
            input: g.input,
            output: g.output,
            plane_in: g.plane_in(),
            plane_out: g.plane_out(),
        }
    }
}

impl PoolGeometry {
    /// The input elements the windows of a plane read, saturated: only a scheduling hint.
    pub(crate) fn work(&self) -> usize {
        let sizes = self.output.iter().chain(&self.kernel);
        saturated_usize(sizes.fold(1i64, |acc, &v| acc.saturating_mul(v)))
    }
}

// Note [Branchless window maxima]
// The maximum of a window is kept without a branch on which element wins: that is
// unpredictable on real activations, and a mispredicted branch per input element made
// `max_pool2d` of the MNIST CNN's 64x64x24x24 batch cost 10.4 ms on values in no predictable
// order, against 3.6 ms on a ramp (PyTorch's branchy loop: 9.6 ms). Writing selects is not
// enough: LLVM merges the value's two selects (larger, else NaN) into one on the index's
// condition, and x86 has no select of a float register, so it becomes a branch again. So the
// index is a `select_unpredictable` (a `cmov`), the value's larger one a `maxss`, and only
// the NaN case a branch, on a condition hidden from that merge by `black_box` (never taken
// on real data, so always predicted): 5.5 ms on that batch.
//
// Note [Pooling a row of windows at once]
// The windows of one output row are computed together, window offset by window offset: for
// each `(ky, kx)` of the window, one pass over the row's outputs (in blocks of `ROW_BLOCK`,
// their running maxima and indices on the stack) compares each with the input element at
// that offset. Each output still sees its window's elements in PyTorch's order (row by row,
// left to right, the first maximum winning), but the inner loop is a plain strided pass
// with no per-window set-up, where computing one window at a time spent more on the loops
// around a 2x2 window than on its four comparisons. Which outputs of a block each window
// column reaches (its `Span`) depends on the columns only, so the spans are planned once
// per call, not per row: computing them per row (a few integer divisions per window column)
// cost as much as the comparisons.

/// Outputs of one row pooled together (Note [Pooling a row of windows at once]).
const ROW_BLOCK: usize = 64;

/// The output positions `o < out` whose input position `o*s + off` lies in `0..size`
/// (`off` may be negative), as a range `lo..hi`.
fn inside_range(out: i64, size: i64, s: i64, off: i64) -> (i64, i64) {
    // In range: `prepare` bounds the window parameters by 2^31 and the output by the input.
    let lo = if off < 0 { (-off + s - 1) / s } else { 0 };
    let hi = if size > off {
        ((size - off + s - 1) / s).min(out)
    } else {
        0
    };
    (lo.min(hi), hi)
}

/// Block spans planned up front at most (`blocks * kw`): beyond, a window wider than any
/// real input, each row computes its own, so that nothing is allocated in proportion to a
/// user-given kernel size.
const MAX_PLANNED_SPANS: i64 = 4096;

/// One window column offset `kx` as seen by a block of outputs: the input column `off =
/// kx*dw - pw` relative to each output's `ox*sw`, and the outputs `lo..hi` of the block for
/// which it lies inside the input.
#[derive(Clone, Copy)]
struct Span {
    off: i64,
    lo: i64,
    hi: i64,
}

/// The spans of the outputs `c0..c1` of a row, in window order (`kx` ascending), those inside
/// the input for no output left out; replaces the contents of `spans`. The same for every
/// row and plane: it depends on the columns only.
fn block_spans(c0: i64, c1: i64, g: &PoolGeometry, spans: &mut Vec<Span>) {
    spans.clear();
    let (w, ow) = (g.input[2], g.output[2]);
    let (kw, sw, pw, dw) = (g.kernel[2], g.stride[2], g.padding[2], g.dilation[2]);
    // Only the window offsets inside the input for some output of the block: a window may
    // be far larger than the input (Note [Checked size arithmetic]).
    let (kx0, _) = inside_range(kw, w, dw, (c1 - 1) * sw - pw);
    let (_, kx1) = inside_range(kw, w, dw, c0 * sw - pw);
    for kx in kx0..kx1 {
        let off = kx * dw - pw;
        let (lo, hi) = inside_range(ow, w, sw, off);
        let (lo, hi) = (lo.max(c0), hi.min(c1));
        if lo < hi {
            spans.push(Span { off, lo, hi });
        }
    }
}

/// Updates the running maxima `m` of a block of windows and their indices `i` with the
/// window elements at one offset, `inputs` (one per window, at flat indices `at`, `at + step`,
/// ...): an element wins when it is larger or NaN, as in PyTorch (Note [Branchless window
/// maxima]).
#[inline(always)]
fn window_offset_max<'a, T: CpuElement + 'a>(
    m: &mut [T::Acc],
    i: &mut [i64],
    inputs: impl Iterator<Item = &'a T>,
    at: i64,
    step: i64,
) {
    for (k, ((m, i), v)) in m.iter_mut().zip(i).zip(inputs).enumerate() {
        let v = v.to_acc();
        let take = (v > *m) | v.is_nan();
        *i = select_unpredictable(take, at + k as i64 * step, *i);
        let larger = if v > *m { v } else { *m };
        *m = if black_box(v.is_nan()) { v } else { larger };
    }
}

/// The forward kernel over contiguous planes, 2-d and 3-d alike (Note [One pooling loop for
/// 2-d and 3-d]); writes every element of `out` and `idx`.
fn max_pool_planes<T: CpuElement>(
    x: &[T],
    out: &mut [MaybeUninit<T>],
    idx: &mut [MaybeUninit<i64>],
    g: &PoolGeometry,
) {
    let [_, h, w] = g.input;
    let [ot, oh, ow] = g.output;
    let [(kt, kh), (st, sh), (pt, ph), (dt, dh)] =
        [g.kernel, g.stride, g.padding, g.dilation].map(|[t, h, _]| (t, h));
    let sw = g.stride[2];
    // The column spans of every block, when they are few (Note [Pooling a row of windows at
    // once]); else each row computes its own.
    let blocks = (ow + ROW_BLOCK as i64 - 1) / ROW_BLOCK as i64;
    let plans: Option<Vec<Vec<Span>>> = (blocks.saturating_mul(g.kernel[2]) <= MAX_PLANNED_SPANS)
        .then(|| {
            (0..blocks)
                .map(|b| {
                    let c0 = b * ROW_BLOCK as i64;
                    let mut spans = Vec::new();
                    block_spans(c0, (c0 + ROW_BLOCK as i64).min(ow), g, &mut spans);
                    spans
                })
                .collect()
        });
    for_planes(out, g.plane_out, idx, g.plane_out, g.work(), |pl, o, ix| {
        let xp = &x[pl * g.plane_in..][..g.plane_in];
        let mut scratch = Vec::new();
        let mut maxv = [<T::Acc as Num>::LOWEST; ROW_BLOCK];
        let mut best = [0i64; ROW_BLOCK];
        // In range: `prepare` bounds the window parameters by 2^31 and the output by the
        // input (Note [Checked size arithmetic]).
        for (t, y) in (0..ot).flat_map(|t| (0..oh).map(move |y| (t, y))) {
            let (t0, y0) = (t * st - pt, y * sh - ph);
            let (kt0, kt1) = inside_range(kt, g.input[0], dt, t0);
            let (ky0, ky1) = inside_range(kh, h, dh, y0);
            // PyTorch's index for a window that covers no input element (all of it in the
            // padding) is its first position past the padding; wrapping, as it is then
            // arbitrary.
            let first_row = first_inside(t0, dt)
                .wrapping_mul(h)
                .wrapping_add(first_inside(y0, dh))
                .wrapping_mul(w);
            let mut c0 = 0;
            while c0 < ow {
                let c1 = (c0 + ROW_BLOCK as i64).min(ow);
                let n = (c1 - c0) as usize;
                for (b, (m, i)) in maxv[..n].iter_mut().zip(&mut best[..n]).enumerate() {
                    let x0 = first_inside((c0 + b as i64) * sw - g.padding[2], g.dilation[2]);
                    *i = first_row.wrapping_add(x0);
                    *m = <T::Acc as Num>::LOWEST;
                }
                let spans = match &plans {
                    Some(plans) => &plans[(c0 / ROW_BLOCK as i64) as usize],
                    None => {
                        block_spans(c0, c1, g, &mut scratch);
                        &scratch
                    }
                };
                for it in (kt0..kt1).map(|k| t0 + k * dt) {
                    for iy in (ky0..ky1).map(|k| y0 + k * dh) {
                        let row_at = (it * h + iy) * w;
                        let row = &xp[row_at as usize..][..w as usize];
                        for &Span { off, lo, hi } in spans {
                            let first = (lo * sw + off) as usize;
                            let inputs = row[first..].iter().step_by(sw as usize);
                            let span = (lo - c0) as usize..(hi - c0) as usize;
                            let (m, i) = (&mut maxv[span.clone()], &mut best[span]);
                            let at = row_at + lo * sw + off;
                            window_offset_max(m, i, inputs, at, sw);
                        }
                    }
                }
                let k = ((t * oh + y) * ow + c0) as usize;
                for (b, (&m, &i)) in maxv[..n].iter().zip(&best[..n]).enumerate() {
                    o[k + b].write(T::from_acc(m));
                    ix[k + b].write(i);
                }
                c0 = c1;
            }
        }
    });
}

/// The maxima and their indices of max pooling `x` (planes of the geometry `g`, 2-d or 3-d),
/// as fresh contiguous tensors of `shape` on `device`.
pub(crate) fn max_pool(
    op: &str,
    x: &Tensor,
    g: &PoolGeometry,
    shape: &[i64],
    device: Device,
) -> Result<(Tensor, Tensor)> {
    // SAFETY: `max_pool_planes` writes every element of both (each output of each plane);
    // on an error they are dropped unread (Note [Fresh outputs]).
    let (out, idx) = unsafe {
        (
            fresh_output(shape, x.dtype(), device)?,
            fresh_output(shape, ScalarType::Long, device)?,
        )
    };
    let x = x.contiguous()?;
    dispatch_all_types!(x.dtype(), op, T => {
        let xs = x.data::<T>()?;
        // SAFETY: fresh outputs; only initialised values are stored through them.
        let mut os = unsafe { FreshData::<T>::new(&out)? };
        let mut is = unsafe { FreshData::<i64>::new(&idx)? };
        max_pool_planes::<T>(&xs, &mut os, &mut is, g);
        Ok(())
    })?;
    Ok((out, idx))
}

/// `max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], int[2]
/// padding=0, int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)`: the maxima over
/// each window (NaN propagates) and their flat indices within the input plane (`Long`).
/// Every dtype but Bool; outputs are contiguous.
///
/// ```
/// use switchboard_tensor::Tensor;
/// let x = Tensor::from_vec(vec![1.0f32, 5.0, 2.0, 3.0], &[1, 2, 2]).unwrap();
/// let (y, i) = switchboard_cpu::max_pool2d_with_indices(&x, &[2], &[], &[0], &[1], false).unwrap();
/// assert_eq!(y.to_vec::<f32>().unwrap(), [5.0]);
/// assert_eq!(i.to_vec::<i64>().unwrap(), [1]);
/// ```
pub fn max_pool2d_with_indices(
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
) -> Result<(Tensor, Tensor)> {
    max_pool2d_impl(
        self_,
        kernel_size,
        stride,
        padding,
        dilation,
        ceil_mode,
        None,
    )
}

/// `max_pool2d_with_indices.out(..., *, Tensor(a!) out, Tensor(b!) indices)`.
#[allow(clippy::too_many_arguments)]
pub fn max_pool2d_with_indices_out(
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
    out: &Tensor,
    indices: &Tensor,
) -> Result<(Tensor, Tensor)> {
    let outputs = Some([out, indices]);
    max_pool2d_impl(
        self_,
        kernel_size,
        stride,
        padding,
        dilation,
        ceil_mode,
        outputs,
    )
}

/// `max_pool2d_with_indices` after its meta function, into `outputs` when given.
fn max_pool2d_impl(
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
    outputs: Option<[&Tensor; 2]>,
) -> Result<(Tensor, Tensor)> {
    let ([values_meta, indices_meta], p) = structured::max_pool2d_with_indices(
        self_,
        kernel_size,
        stride,
        padding,
        dilation,
        ceil_mode,
        outputs,
    )?;
    check_cpu("max_pool2d", values_meta.device)?;
    let given = match outputs {
        Some([o, i]) => Some([
            structured::resize_out(o, &values_meta)?,
            structured::resize_out(i, &indices_meta)?,
        ]),
        None => None,
    };
    let (out, idx) = max_pool("max_pool2d", self_, &(&p).into(), &p.out_shape, p.device)?;
    let [o, i] = given.map_or([None, None], |[o, i]| [Some(o), Some(i)]);
    Ok((
        deliver(values_meta, o, out)?,
        deliver(indices_meta, i, idx)?,
    ))
}

/// `max_pool2d_with_indices_backward(Tensor grad_output, Tensor self, int[2] kernel_size,
/// int[2] stride, int[2] padding, int[2] dilation, bool ceil_mode, Tensor indices) ->
/// Tensor`: scatters `grad_output` into a zero tensor shaped like `self` at `indices`
/// (accumulating where windows overlap). Floating dtypes.
#[allow(clippy::too_many_arguments)]
pub fn max_pool2d_with_indices_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
    indices: &Tensor,
) -> Result<Tensor> {
    let window = (kernel_size, stride, padding, dilation, ceil_mode);
    max_pool2d_backward_impl(grad_output, self_, window, indices, None)
}

/// `max_pool2d_with_indices_backward.grad_input(..., *, Tensor(a!) grad_input)`.
#[allow(clippy::too_many_arguments)]
pub fn max_pool2d_with_indices_backward_grad_input(
    grad_output: &Tensor,
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
    indices: &Tensor,
    grad_input: &Tensor,
) -> Result<Tensor> {
    let window = (kernel_size, stride, padding, dilation, ceil_mode);
    max_pool2d_backward_impl(grad_output, self_, window, indices, Some(grad_input))
}

/// A max pooling's window arguments: `kernel_size`, `stride`, `padding`, `dilation`,
/// `ceil_mode`.
type WindowArgs<'a> = (&'a [i64], &'a [i64], &'a [i64], &'a [i64], bool);

/// `max_pool2d_with_indices_backward` after its meta function, into `grad_input` when given.
fn max_pool2d_backward_impl(
    grad_output: &Tensor,
    self_: &Tensor,
    (kernel_size, stride, padding, dilation, ceil_mode): WindowArgs,
    indices: &Tensor,
    grad_input: Option<&Tensor>,
) -> Result<Tensor> {
    let (meta, p) = structured::max_pool2d_with_indices_backward(
        grad_output,
        self_,
        kernel_size,
        stride,
        padding,
        dilation,
        ceil_mode,
        indices,
        grad_input,
    )?;
    check_cpu("max_pool2d", meta.device)?;
    let given = grad_input
        .map(|g| structured::resize_out(g, &meta))
        .transpose()?;
    let dtype = self_.dtype();
    if !dtype.is_floating_point() {
        return Err(not_implemented("max_pool2d_backward", dtype));
    }
    check_indices_dtype(indices)?;
    let planes = MaxPoolPlanes {
        op: "max_pool2d_with_indices_backward",
        count: p.planes,
        input: &[p.h, p.w],
        plane_in: p.plane_in,
        plane_out: p.plane_out,
    };
    let gi = max_pool_backward(grad_output, indices, self_.sizes(), &planes)?;
    deliver(meta, given, gi)
}

/// The pooling backwards read the indices as int64 (PyTorch's `data_ptr<int64_t>`).
pub(crate) fn check_indices_dtype(indices: &Tensor) -> Result<()> {
    if indices.dtype() != ScalarType::Long {
        return Err(invalid(format!(
            "expected scalar type Long but found {}",
            indices.dtype().c10_name()
        )));
    }
    Ok(())
}

/// The planes a max pooling backward scatters into.
pub(crate) struct MaxPoolPlanes<'a> {
    /// The operator, named in the out-of-range message.
    pub(crate) op: &'a str,
    /// `N * C`.
    pub(crate) count: usize,
    /// The input plane's sizes (`H, W` or `T, H, W`).
    pub(crate) input: &'a [i64],
    /// Elements of an input plane.
    pub(crate) plane_in: usize,
    /// Elements of an output (gradient) plane.
    pub(crate) plane_out: usize,
}

/// PyTorch's `cpu_max_pool_backward` (2-d and 3-d alike): a fresh gradient of `sizes` (the
/// input's) whose planes are zeroed, then each plane's `grad_output` added at its `indices`,
/// accumulating where windows overlap. Floating dtypes; an index outside its plane fails.
pub(crate) fn max_pool_backward(
    grad_output: &Tensor,
    indices: &Tensor,
    sizes: &[i64],
    planes: &MaxPoolPlanes,
) -> Result<Tensor> {
    let (plane_in, plane_out) = (planes.plane_in, planes.plane_out);
    let dtype = grad_output.dtype();
    // SAFETY: the loop below zeroes every plane before it scatters into it; on an error the
    // tensor is dropped unread (Note [Fresh outputs]).
    let gi = unsafe { fresh_output(sizes, dtype, grad_output.device())? };
    let (go, ix) = (grad_output.contiguous()?, indices.contiguous()?);
    let mut bad = vec![false; planes.count];
    dispatch_floating_types!(dtype, "max_pool2d_backward", T => {
        let (gos, ixs) = (go.data::<T>()?, ix.data::<i64>()?);
        // SAFETY: a fresh output; only initialised values are stored through it.
        let mut gis = unsafe { FreshData::<T>::new(&gi)? };
        for_planes(&mut gis, plane_in, &mut bad, 1, plane_out, |pl, g, b| {
            // Zeroed here, plane by plane, in parallel and while in cache.
            let g = zero_fill(g);
            let (gp, ip) = (&gos[pl * plane_out..][..plane_out], &ixs[pl * plane_out..][..plane_out]);
            for (&v, &i) in gp.iter().zip(ip) {
                if i < 0 || i as usize >= plane_in {
                    b[0] = true;
                    continue;
                }
                let d = &mut g[i as usize];
                *d = T::from_acc(d.to_acc().add(v.to_acc()));
            }
        });
        Ok(())
    })?;
    if bad.iter().any(|&b| b) {
        let plane: Vec<String> = planes.input.iter().map(|s| s.to_string()).collect();
        return Err(invalid(format!(
            "{}: found an index out of range [0, {plane_in}) for an input plane of {}",
            planes.op,
            plane.join("x")
        )));
    }
    Ok(gi)
}

#[cfg(test)]
#[path = "pool_tests.rs"]
mod tests;
