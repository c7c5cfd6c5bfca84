//! Max pooling: `max_pool2d_with_indices` and its backward, over 3-d `(C, H, W)` and 4-d
//! `(N, C, H, W)` inputs, with PyTorch's output-size rules (`ceil_mode`, dilation) and
//! messages. Indices are flat positions `h * W + w` within each input plane, as in PyTorch.

use std::mem::MaybeUninit;

use rayon::prelude::*;
use switchboard_tensor::RawOps;
use switchboard_tensor::{to_int32, CheckedSize, Device, ScalarType, Tensor};

use crate::dispatch_dtype::{CpuElement, Num};
use crate::error::{check_cpu_or_meta, invalid, same_device, shape_str, Result};
use crate::fresh_output::{fresh_output, zero_fill, FreshData};
use crate::loops::{in_parallel_region, GRAIN_SIZE};
use crate::{dispatch_all_types, dispatch_floating_types};

/// The parsed pooling window (PyTorch's `TORCH_META_FUNC(max_pool2d_with_indices)`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Window {
    pub(crate) kh: i64,
    pub(crate) kw: i64,
    pub(crate) sh: i64,
    pub(crate) sw: i64,
    pub(crate) ph: i64,
    pub(crate) pw: i64,
    pub(crate) dh: i64,
    pub(crate) dw: i64,
}

/// Reads the `int[2]` arguments (one value applies to both dims; empty stride = kernel) of
/// the pooling operator `op` (named in the messages).
fn parse_window(
    op: &str,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
) -> Result<Window> {
    // PyTorch narrows every window parameter to a C++ `int` as it reads it (`safe_downcast`),
    // which bounds all the window arithmetic below: with parameters under 2^31, the
    // output-size formula and the window bounds cannot overflow `i64` for any input size
    // (Note [Checked size arithmetic]).
    let pair = |v: &[i64], name: &str, msg: &str| -> Result<(i64, i64)> {
        let (a, b) = match v {
            [a] => (*a, *a),
            [a, b] => (*a, *b),
            _ => return Err(invalid(format!("{op}: {name} {msg}"))),
        };
        to_int32(a)?;
        to_int32(b)?;
        Ok((a, b))
    };
    let (kh, kw) = pair(
        kernel_size,
        "kernel_size",
        "must either be a single int, or a tuple of two ints",
    )?;
    let (sh, sw) = if stride.is_empty() {
        (kh, kw)
    } else {
        pair(
            stride,
            "stride",
            "must either be omitted, a single int, or a tuple of two ints",
        )?
    };
    let (ph, pw) = pair(
        padding,
        "padding",
        "must either be a single int, or a tuple of two ints",
    )?;
    let (dh, dw) = pair(
        dilation,
        "dilation",
        "must be either a single int, or a tuple of two ints",
    )?;
    Ok(Window {
        kh,
        kw,
        sh,
        sw,
        ph,
        pw,
        dh,
        dw,
    })
}

/// PyTorch's `pooling_output_shape`: the number of windows along one dim.
pub(crate) fn pooling_output_shape(
    op: &str,
    size: i64,
    k: i64,
    pad: i64,
    s: i64,
    d: i64,
    ceil: bool,
) -> Result<i64> {
    if s == 0 {
        return Err(invalid("stride should not be zero"));
    }
    if pad < 0 {
        return Err(invalid(format!(
            "pad must be non-negative, but got pad: {pad}"
        )));
    }
    if pad > ((k - 1) * d + 1) / 2 {
        return Err(invalid(format!(
            "pad should be at most half of effective kernel size, but got pad={pad}, \
             kernel_size={k} and dilation={d}"
        )));
    }
    let size = CheckedSize::new(size);
    let extra = if ceil { s - 1 } else { 0 };
    let what = || format!("{op}: the output size");
    let mut out = ((size + pad * 2 - (CheckedSize::new(k) - 1) * d - 1 + extra).div_floor(s) + 1)
        .get(what)?;
    // The last window must start inside the input (or its left padding).
    if ceil && (CheckedSize::new(out - 1) * s).get(what)? >= (size + pad).get(what)? {
        out -= 1;
    }
    Ok(out)
}

/// The first input position `>= 0` of a window starting at `start` (possibly in the padding)
/// and stepping by `dilation`: `start` moved up by whole steps, in closed form (a loop would
/// take `padding / dilation` steps).
fn first_inside(start: i64, dilation: i64) -> i64 {
    if start >= 0 {
        start
    } else {
        start + (-start + dilation - 1) / dilation * dilation
    }
}

/// The checked geometry of one pooling: planes (`N*C`), input and output plane sizes, and
/// the output shape.
pub(crate) struct Pool {
    pub(crate) win: Window,
    pub(crate) planes: usize,
    /// Elements of an input and an output plane (exact whenever there is a plane: a tensor
    /// with elements has a numel that fits; saturated otherwise, as they are then unused).
    pub(crate) plane_in: usize,
    pub(crate) plane_out: usize,
    pub(crate) h: i64,
    pub(crate) w: i64,
    pub(crate) oh: i64,
    pub(crate) ow: i64,
    pub(crate) out_shape: Vec<i64>,
    pub(crate) device: Device,
}

/// The checked geometry of a 2-d pooling of `input` by operator `op` (PyTorch's
/// `pool2d_shape_check` and its argument parsing).
#[allow(clippy::too_many_arguments)]
pub(crate) fn prepare(
    op: &str,
    tensors: &[&Tensor],
    input: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
) -> Result<Pool> {
    let device = same_device(tensors)?;
    check_cpu_or_meta(op, device)?;
    let win = parse_window(op, kernel_size, stride, padding, dilation)?;
    let nd = input.dim();
    if nd != 3 && nd != 4 {
        return Err(invalid(
            "non-empty 3D or 4D (batch mode) tensor expected for input",
        ));
    }
    let s = input.sizes();
    let (c, h, w) = (s[nd - 3], s[nd - 2], s[nd - 1]);
    let n = if nd == 4 { s[0] } else { 1 };
    let oh = pooling_output_shape(op, h, win.kh, win.ph, win.sh, win.dh, ceil_mode)?;
    let ow = pooling_output_shape(op, w, win.kw, win.pw, win.sw, win.dw, ceil_mode)?;
    // pool2d_shape_check.
    if win.kw <= 0 || win.kh <= 0 {
        return Err(invalid(format!(
            "kernel size should be greater than zero, but got kH: {} kW: {}",
            win.kh, win.kw
        )));
    }
    if win.sw <= 0 || win.sh <= 0 {
        return Err(invalid(format!(
            "stride should be greater than zero, but got dH: {} dW: {}",
            win.sh, win.sw
        )));
    }
    if win.dh <= 0 || win.dw <= 0 {
        return Err(invalid(format!(
            "dilation should be greater than zero, but got dilationH: {} dilationW: {}",
            win.dh, win.dw
        )));
    }
    let valid_dims = s[1] != 0 && s[2] != 0;
    if !((nd == 3 && s[0] != 0 && valid_dims) || (nd == 4 && valid_dims && s[3] != 0)) {
        return Err(invalid(format!(
            "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, \
             but got:{}",
            shape_str(s)
        )));
    }
    if win.kw / 2 < win.pw || win.kh / 2 < win.ph {
        return Err(invalid(format!(
            "pad should be smaller than or equal to half of kernel size, but got padW = {}, \
             padH = {}, kW = {}, kH = {}",
            win.pw, win.ph, win.kw, win.kh
        )));
    }
    if ow < 1 || oh < 1 {
        return Err(invalid(format!(
            "Given input size: ({c}x{h}x{w}). Calculated output size: ({c}x{oh}x{ow}). Output \
             size is too small"
        )));
    }
    let mut out_shape = s[..nd - 2].to_vec();
    out_shape.extend([oh, ow]);
    Ok(Pool {
        win,
        planes: saturated_usize(n.saturating_mul(c)),
        plane_in: saturated_usize(h.saturating_mul(w)),
        plane_out: saturated_usize(oh.saturating_mul(ow)),
        h,
        w,
        oh,
        ow,
        out_shape,
        device,
    })
}

pub(crate) fn saturated_usize(v: i64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

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
    let parallel = planes > 1
        && planes.saturating_mul(work_per_plane) > GRAIN_SIZE
        && !in_parallel_region()
        && rayon::current_num_threads() > 1;
    if parallel {
        a.par_chunks_mut(la)
            .zip(b.par_chunks_mut(lb))
            .enumerate()
            .for_each(|(p, (x, y))| f(p, x, y));
    } else {
        for (p, (x, y)) in a.chunks_mut(la).zip(b.chunks_mut(lb)).enumerate() {
            f(p, x, y);
        }
    }
}

// Note [Branchless window maxima]
// The maximum of a window is kept with selects rather than an `if` around the update: which
// element wins is unpredictable on real activations, and a mispredicted branch per input
// element made `max_pool2d` of a 64x64x24x24 batch cost a third of a convolution. The value
// and the index are selected separately (`maxss` and `cmov`; only the rare NaN case stays a
// branch): one `if take { (v, i) }` is compiled back into a branch.
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
fn block_spans(c0: i64, c1: i64, win: &Window, w: i64, ow: i64, spans: &mut Vec<Span>) {
    spans.clear();
    // Only the window offsets inside the input for some output of the block: a window may
    // be far larger than the input (Note [Checked size arithmetic]).
    let (kx0, _) = inside_range(win.kw, w, win.dw, (c1 - 1) * win.sw - win.pw);
    let (_, kx1) = inside_range(win.kw, w, win.dw, c0 * win.sw - win.pw);
    for kx in kx0..kx1 {
        let off = kx * win.dw - win.pw;
        let (lo, hi) = inside_range(ow, w, win.sw, off);
        let (lo, hi) = (lo.max(c0), hi.min(c1));
        if lo < hi {
            spans.push(Span { off, lo, hi });
        }
    }
}

/// The forward kernel over contiguous planes; writes every element of `out` and `idx`.
fn max_pool_planes<T: CpuElement>(
    x: &[T],
    out: &mut [MaybeUninit<T>],
    idx: &mut [MaybeUninit<i64>],
    p: &Pool,
) {
    let (h, w, oh, ow) = (p.h, p.w, p.oh, p.ow);
    let win = p.win;
    let plane_in = p.plane_in;
    // Only a scheduling hint: saturate rather than overflow for huge windows.
    let work = saturated_usize(
        [ow, win.kh, win.kw]
            .iter()
            .fold(oh, |acc, &v| acc.saturating_mul(v)),
    );
    // The column spans of every block, when they are few (Note [Pooling a row of windows at
    // once]); else each row computes its own.
    let blocks = (ow + ROW_BLOCK as i64 - 1) / ROW_BLOCK as i64;
    let plans: Option<Vec<Vec<Span>>> =
        (blocks.saturating_mul(win.kw) <= MAX_PLANNED_SPANS).then(|| {
            (0..blocks)
                .map(|b| {
                    let c0 = b * ROW_BLOCK as i64;
                    let mut spans = Vec::new();
                    block_spans(c0, (c0 + ROW_BLOCK as i64).min(ow), &win, w, ow, &mut spans);
                    spans
                })
                .collect()
        });
    for_planes(out, p.plane_out, idx, p.plane_out, work, |pl, o, ix| {
        let xp = &x[pl * plane_in..][..plane_in];
        let mut scratch = Vec::new();
        let mut maxv = [<T::Acc as Num>::LOWEST; ROW_BLOCK];
        let mut best = [0i64; ROW_BLOCK];
        for oy in 0..oh {
            // In range: `prepare` bounds the window parameters by 2^31 and the output by
            // the input (Note [Checked size arithmetic]).
            let y0 = oy * win.sh - win.ph;
            let first_y = first_inside(y0, win.dh);
            let mut c0 = 0;
            while c0 < ow {
                let c1 = (c0 + ROW_BLOCK as i64).min(ow);
                let n = (c1 - c0) as usize;
                for (b, (m, i)) in maxv[..n].iter_mut().zip(&mut best[..n]).enumerate() {
                    // PyTorch's index for a window that covers no input element (all of it
                    // in the padding); wrapping, as it is then arbitrary.
                    let x0 = first_inside((c0 + b as i64) * win.sw - win.pw, win.dw);
                    *i = first_y.wrapping_mul(w).wrapping_add(x0);
                    *m = <T::Acc as Num>::LOWEST;
                }
                let spans = match &plans {
                    Some(plans) => &plans[(c0 / ROW_BLOCK as i64) as usize],
                    None => {
                        block_spans(c0, c1, &win, w, ow, &mut scratch);
                        &scratch
                    }
                };
                let (ky0, ky1) = inside_range(win.kh, h, win.dh, y0);
                for ky in ky0..ky1 {
                    let iy = y0 + ky * win.dh;
                    let row = &xp[(iy * w) as usize..][..w as usize];
                    for &Span { off, lo, hi } in spans {
                        let first = (lo * win.sw + off) as usize;
                        let inputs = row[first..].iter().step_by(win.sw as usize);
                        let span = (lo - c0) as usize..(hi - c0) as usize;
                        let outs = maxv[span.clone()].iter_mut().zip(&mut best[span]);
                        for (((m, i), v), ox) in outs.zip(inputs).zip(lo..hi) {
                            let v = v.to_acc();
                            let at = iy * w + ox * win.sw + off;
                            // NaN wins, as in PyTorch. Selects, not a branch: Note
                            // [Branchless window maxima].
                            let take = (v > *m) | v.is_nan();
                            *i = if take { at } else { *i };
                            let larger = if v > *m { v } else { *m };
                            *m = if v.is_nan() { v } else { larger };
                        }
                    }
                }
                let k = (oy * ow + c0) as usize;
                for (b, (&m, &i)) in maxv[..n].iter().zip(&best[..n]).enumerate() {
                    o[k + b].write(T::from_acc(m));
                    ix[k + b].write(i);
                }
                c0 = c1;
            }
        }
    });
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
    let p = prepare(
        "max_pool2d",
        &[self_],
        self_,
        kernel_size,
        stride,
        padding,
        dilation,
        ceil_mode,
    )?;
    // SAFETY: `max_pool_planes` writes every element of both (each output of each plane);
    // on an error they are dropped unread (Note [Fresh outputs]).
    let (out, idx) = unsafe {
        (
            fresh_output(&p.out_shape, self_.dtype(), p.device)?,
            fresh_output(&p.out_shape, ScalarType::Long, p.device)?,
        )
    };
    if p.device.is_meta() {
        return Ok((out, idx));
    }
    let x = self_.contiguous()?;
    dispatch_all_types!(self_.dtype(), "max_pool2d", T => {
        let xs = x.data::<T>()?;
        // SAFETY: fresh outputs; only initialised values are stored through them.
        let mut os = unsafe { FreshData::<T>::new(&out)? };
        let mut is = unsafe { FreshData::<i64>::new(&idx)? };
        max_pool_planes::<T>(&xs, &mut os, &mut is, &p);
        Ok(())
    })?;
    Ok((out, idx))
}

/// PyTorch's `check_dim_size`.
pub(crate) fn check_dim_size(t: &Tensor, dim: usize, at: usize, size: i64) -> Result<()> {
    if t.dim() != dim || t.sizes()[at] != size {
        let got = t.sizes().get(at).copied().unwrap_or(-1);
        return Err(invalid(format!(
            "Expected a tensor of dimension {dim} and tensor.size[{at}] == {size} but got: \
             dimension {} and tensor.size[{at}] = {got}",
            t.dim()
        )));
    }
    Ok(())
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
    let p = prepare(
        "max_pool2d",
        &[grad_output, self_, indices],
        self_,
        kernel_size,
        stride,
        padding,
        dilation,
        ceil_mode,
    )?;
    let nd = self_.dim();
    let c = self_.sizes()[nd - 3];
    for t in [grad_output, indices] {
        check_dim_size(t, nd, nd - 3, c)?;
        check_dim_size(t, nd, nd - 2, p.oh)?;
        check_dim_size(t, nd, nd - 1, p.ow)?;
    }
    if nd == 4 {
        check_dim_size(grad_output, nd, 0, self_.sizes()[0])?;
        check_dim_size(indices, nd, 0, self_.sizes()[0])?;
    }
    if indices.dtype() != ScalarType::Long {
        return Err(invalid(format!(
            "max_pool2d_with_indices_backward: expected indices of dtype Long, but got {}",
            indices.dtype().c10_name()
        )));
    }
    if grad_output.dtype() != self_.dtype() {
        return Err(invalid(format!(
            "expected scalar type {} but found {}",
            self_.dtype().c10_name(),
            grad_output.dtype().c10_name()
        )));
    }
    // SAFETY: the loop below zeroes every plane before it scatters into it; on an error the
    // tensor is dropped unread (Note [Fresh outputs]).
    let gi = unsafe { fresh_output(self_.sizes(), self_.dtype(), p.device)? };
    if p.device.is_meta() {
        return Ok(gi);
    }
    let (go, ix) = (grad_output.contiguous()?, indices.contiguous()?);
    let (plane_in, plane_out) = (p.plane_in, p.plane_out);
    dispatch_floating_types!(self_.dtype(), "max_pool2d_backward", T => {
        let (gos, ixs) = (go.data::<T>()?, ix.data::<i64>()?);
        // SAFETY: a fresh output; only initialised values are stored through it.
        let mut gis = unsafe { FreshData::<T>::new(&gi)? };
        let mut bad = vec![false; p.planes];
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
        if bad.iter().any(|&b| b) {
            return Err(invalid(format!(
                "max_pool2d_with_indices_backward: found an index out of range [0, {plane_in}) \
                 for an input plane of {}x{}",
                p.h, p.w
            )));
        }
        Ok(())
    })?;
    Ok(gi)
}

#[cfg(test)]
#[path = "pool_tests.rs"]
mod tests;
