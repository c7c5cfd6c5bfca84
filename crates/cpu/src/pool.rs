//! Max pooling: `max_pool2d_with_indices` and its backward, over 3-d `(C, H, W)` and 4-d
//! `(N, C, H, W)` inputs, with PyTorch's output-size rules (`ceil_mode`, dilation) and
//! messages. Indices are flat positions `h * W + w` within each input plane, as in PyTorch.

use rayon::prelude::*;
use switchboard_tensor::RawOps;
use switchboard_tensor::{to_int32, CheckedSize, Device, ScalarType, Tensor};

use crate::dispatch_dtype::{CpuElement, Num};
use crate::error::{check_cpu_or_meta, invalid, same_device, shape_str, Result};
use crate::loops::{in_parallel_region, GRAIN_SIZE};
use crate::{dispatch_all_types, dispatch_floating_types};

/// The parsed pooling window (PyTorch's `TORCH_META_FUNC(max_pool2d_with_indices)`).
#[derive(Clone, Copy, Debug)]
struct Window {
    kh: i64,
    kw: i64,
    sh: i64,
    sw: i64,
    ph: i64,
    pw: i64,
    dh: i64,
    dw: i64,
}

/// Reads the `int[2]` arguments (one value applies to both dims; empty stride = kernel).
fn parse_window(
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
            _ => return Err(invalid(format!("max_pool2d: {name} {msg}"))),
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
fn pooling_output_shape(size: i64, k: i64, pad: i64, s: i64, d: i64, ceil: bool) -> Result<i64> {
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
    let what = || "max_pool2d: the output size".to_string();
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
struct Pool {
    win: Window,
    planes: usize,
    /// Elements of an input and an output plane (exact whenever there is a plane: a tensor
    /// with elements has a numel that fits; saturated otherwise, as they are then unused).
    plane_in: usize,
    plane_out: usize,
    h: i64,
    w: i64,
    oh: i64,
    ow: i64,
    out_shape: Vec<i64>,
    device: Device,
}

fn prepare(
    tensors: &[&Tensor],
    input: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
) -> Result<Pool> {
    let device = same_device(tensors)?;
    check_cpu_or_meta("max_pool2d", device)?;
    let win = parse_window(kernel_size, stride, padding, dilation)?;
    let nd = input.dim();
    if nd != 3 && nd != 4 {
        return Err(invalid(
            "non-empty 3D or 4D (batch mode) tensor expected for input",
        ));
    }
    let s = input.sizes();
    let (c, h, w) = (s[nd - 3], s[nd - 2], s[nd - 1]);
    let n = if nd == 4 { s[0] } else { 1 };
    let oh = pooling_output_shape(h, win.kh, win.ph, win.sh, win.dh, ceil_mode)?;
    let ow = pooling_output_shape(w, win.kw, win.pw, win.sw, win.dw, ceil_mode)?;
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

fn saturated_usize(v: i64) -> usize {
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

/// The forward kernel over contiguous planes.
fn max_pool_planes<T: CpuElement>(x: &[T], out: &mut [T], idx: &mut [i64], p: &Pool) {
    let (h, w, oh, ow) = (p.h, p.w, p.oh, p.ow);
    let win = p.win;
    let plane_in = p.plane_in;
    // Only a scheduling hint: saturate rather than overflow for huge windows.
    let work = saturated_usize(
        [ow, win.kh, win.kw]
            .iter()
            .fold(oh, |acc, &v| acc.saturating_mul(v)),
    );
    for_planes(out, p.plane_out, idx, p.plane_out, work, |pl, o, ix| {
        let xp = &x[pl * plane_in..][..plane_in];
        for oy in 0..oh {
            // In range: `prepare` bounds the window parameters by 2^31 and the output by
            // the input (Note [Checked size arithmetic]).
            let y0 = oy * win.sh - win.ph;
            let y1 = (y0 + (win.kh - 1) * win.dh + 1).min(h);
            let y0 = first_inside(y0, win.dh);
            for ox in 0..ow {
                let x0 = ox * win.sw - win.pw;
                let x1 = (x0 + (win.kw - 1) * win.dw + 1).min(w);
                let x0 = first_inside(x0, win.dw);
                // PyTorch's index for a window that covers no input element (all of it
                // in the padding); wrapping, as it is then arbitrary.
                let mut best = y0.wrapping_mul(w).wrapping_add(x0);
                let mut maxv = <T::Acc as Num>::LOWEST;
                let mut iy = y0;
                while iy < y1 {
                    let mut jx = x0;
                    while jx < x1 {
                        let i = iy * w + jx;
                        let v = xp[i as usize].to_acc();
                        // NaN wins, as in PyTorch. Selects, not a branch: Note
                        // [Branchless window maxima].
                        let take = (v > maxv) | v.is_nan();
                        best = if take { i } else { best };
                        let larger = if v > maxv { v } else { maxv };
                        maxv = if v.is_nan() { v } else { larger };
                        jx += win.dw;
                    }
                    iy += win.dh;
                }
                let k = (oy * ow + ox) as usize;
                o[k] = T::from_acc(maxv);
                ix[k] = best;
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
        &[self_],
        self_,
        kernel_size,
        stride,
        padding,
        dilation,
        ceil_mode,
    )?;
    let out = Tensor::empty_on(&p.out_shape, self_.dtype(), p.device)?;
    let idx = Tensor::empty_on(&p.out_shape, ScalarType::Long, p.device)?;
    if p.device.is_meta() {
        return Ok((out, idx));
    }
    let x = self_.contiguous()?;
    dispatch_all_types!(self_.dtype(), "max_pool2d", T => {
        let xs = x.data::<T>()?;
        let mut os = out.data_mut::<T>()?;
        let mut is = idx.data_mut::<i64>()?;
        max_pool_planes::<T>(&xs, &mut os, &mut is, &p);
        Ok(())
    })?;
    Ok((out, idx))
}

/// PyTorch's `check_dim_size`.
fn check_dim_size(t: &Tensor, dim: usize, at: usize, size: i64) -> Result<()> {
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
    let gi = Tensor::zeros_on(self_.sizes(), self_.dtype(), p.device)?;
    if p.device.is_meta() {
        return Ok(gi);
    }
    let (go, ix) = (grad_output.contiguous()?, indices.contiguous()?);
    let (plane_in, plane_out) = (p.plane_in, p.plane_out);
    dispatch_floating_types!(self_.dtype(), "max_pool2d_backward", T => {
        let (gos, ixs) = (go.data::<T>()?, ix.data::<i64>()?);
        let mut gis = gi.data_mut::<T>()?;
        let mut bad = vec![false; p.planes];
        for_planes(&mut gis, plane_in, &mut bad, 1, plane_out, |pl, g, b| {
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
