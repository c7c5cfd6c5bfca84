//! 3-d max pooling: `max_pool3d_with_indices` and its backward, over 4-d `(C, T, H, W)` and
//! 5-d `(N, C, T, H, W)` inputs, with PyTorch's output-size rules (`ceil_mode`, dilation)
//! and messages. Indices are flat positions `t * H * W + h * W + w` within each input plane,
//! as in PyTorch; a NaN in a window wins it (the last NaN, as PyTorch's `val > max ||
//! isnan(val)` update).

use switchboard_tensor::{RawOps, ScalarType, Tensor};

use crate::avg_pool::for_each_plane;
use crate::avg_pool3d::{shape_check, triple, Pool3d};
use crate::dispatch_dtype::{CpuElement, Num};
use crate::error::{check_cpu_or_meta, invalid, same_device, Result};
use crate::pool::{check_dim_size, pooling_output_shape, saturated_usize};
use crate::{dispatch_all_types, dispatch_floating_types};

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
    let kernel = triple(
        kernel_size,
        "max_pool3d: kernel_size must either be a single int, or a tuple of three ints",
    )?;
    let stride = if stride.is_empty() {
        kernel
    } else {
        triple(
            stride,
            "max_pool3d: stride must either be omitted, a single int, or a tuple of three ints",
        )?
    };
    let padding = triple(
        padding,
        "max_pool3d: padding must either be a single int, or a tuple of three ints",
    )?;
    let dilation = triple(
        dilation,
        "max_pool3d: dilation must be either a single int, or a tuple of three ints",
    )?;
    let nd = input.dim();
    if nd != 4 && nd != 5 {
        return Err(invalid(
            "non-empty 4D or 5D (batch mode) tensor expected for input",
        ));
    }
    let s = input.sizes();
    let spatial = [s[nd - 3], s[nd - 2], s[nd - 1]];
    let output = match output {
        Some(o) => o,
        None => {
            let mut o = [0; 3];
            for d in 0..3 {
                o[d] = pooling_output_shape(
                    "max_pool3d",
                    spatial[d],
                    kernel[d],
                    padding[d],
                    stride[d],
                    dilation[d],
                    ceil_mode,
                )?;
            }
            o
        }
    };
    let mut out_shape = s[..nd - 3].to_vec();
    out_shape.extend(output);
    let g = Pool3d {
        kernel,
        stride,
        padding,
        dilation,
        input: spatial,
        output,
        out_shape,
        device,
    };
    shape_check(
        "max_pool3d_with_indices_out_cpu_template()",
        input,
        &g,
        false,
    )?;
    Ok(g)
}

/// The input positions a window reads along one dim: `start, start + dilation, ...` below
/// `end`, the ones in the padding skipped.
fn taps(o: i64, g: &Pool3d, d: usize) -> impl Iterator<Item = usize> {
    let start = o * g.stride[d] - g.padding[d];
    let end = (start + (g.kernel[d] - 1) * g.dilation[d] + 1).min(g.input[d]);
    let step = g.dilation[d];
    let first = if start >= 0 {
        start
    } else {
        start + (-start + step - 1) / step * step
    };
    (first..end).step_by(step as usize).map(|i| i as usize)
}

fn max_pool3d_planes<T: CpuElement>(x: &[T], out: &mut [T], idx: &mut [i64], g: &Pool3d) {
    let (plane_in, plane_out) = (g.plane_in(), g.plane_out());
    let (h, w) = (g.input[1] as usize, g.input[2] as usize);
    let [ot, oh, ow] = g.output;
    let work = plane_out.saturating_mul(saturated_usize(g.kernel.iter().product()));
    // The values and their indices, one plane each: pooled into pairs, then split.
    let mut pairs = vec![(T::from_acc(<T::Acc as Num>::ZERO), 0i64); out.len()];
    for_each_plane(&mut pairs, plane_out, work, |p, o| {
        let xp = &x[p * plane_in..][..plane_in];
        let mut k = 0;
        for t in 0..ot {
            for y in 0..oh {
                for xo in 0..ow {
                    let (mut best, mut best_at) = (<T::Acc as Num>::LOWEST, None);
                    for it in taps(t, g, 0) {
                        for iy in taps(y, g, 1) {
                            for ix in taps(xo, g, 2) {
                                let at = (it * h + iy) * w + ix;
                                let v = xp[at].to_acc();
                                if best_at.is_none() || v > best || v.is_nan() {
                                    best = v;
                                    best_at = Some(at);
                                }
                            }
                        }
                    }
                    // A window always holds an input (the padding is at most half the
                    // kernel); an empty one would read PyTorch's first-position default.
                    let at = best_at.unwrap_or(0);
                    o[k] = (T::from_acc(best), at as i64);
                    k += 1;
                }
            }
        }
    });
    for ((v, i), (pv, pi)) in out.iter_mut().zip(idx.iter_mut()).zip(pairs) {
        *v = pv;
        *i = pi;
    }
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
    let dtype = self_.dtype();
    let out = Tensor::empty_on(&g.out_shape, dtype, g.device)?;
    let indices = Tensor::empty_on(&g.out_shape, ScalarType::Long, g.device)?;
    if g.device.is_meta() {
        return Ok((out, indices));
    }
    let x = self_.contiguous()?;
    dispatch_all_types!(dtype, "max_pool3d", T => {
        max_pool3d_planes::<T>(&x.data::<T>()?, &mut out.data_mut::<T>()?, &mut indices.data_mut::<i64>()?, &g);
        Ok(())
    })?;
    Ok((out, indices))
}

/// Adds each plane's `values` into its zeroed input plane at `at` (checked in range).
fn scatter_planes<T: CpuElement>(
    values: &[T],
    at: &[i64],
    gi: &mut [T],
    plane_in: usize,
    plane_out: usize,
) {
    for_each_plane(gi, plane_in, plane_out, |p, gp| {
        gp.fill(T::from_acc(<T::Acc as Num>::ZERO));
        let (vals, at) = (
            &values[p * plane_out..][..plane_out],
            &at[p * plane_out..][..plane_out],
        );
        for (&v, &i) in vals.iter().zip(at) {
            let d = &mut gp[i as usize];
            *d = T::from_acc(d.to_acc().add(v.to_acc()));
        }
    });
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
    if grad_output.dtype() != dtype {
        return Err(invalid(format!(
            "expected dtype {} for `gradOutput` but got dtype {}",
            dtype.type_meta_name(),
            grad_output.dtype().type_meta_name()
        )));
    }
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
    let gi = Tensor::empty_on(self_.sizes(), dtype, g.device)?;
    if g.device.is_meta() {
        return Ok(gi);
    }
    if indices.dtype() != ScalarType::Long {
        return Err(invalid(format!(
            "expected scalar type Long but found {}",
            indices.dtype().c10_name()
        )));
    }
    let (go, ix) = (grad_output.contiguous()?, indices.contiguous()?);
    let (plane_in, plane_out) = (g.plane_in(), g.plane_out());
    dispatch_floating_types!(dtype, "max_pool3d_backward", T => {
        let (gos, ixs) = (go.data::<T>()?, ix.data::<i64>()?);
        if ixs.iter().any(|&i| i < 0 || i as usize >= plane_in) {
            return Err(invalid(format!(
                "max_pool3d_with_indices_backward: found an index out of range [0, {plane_in}) \
                 for an input plane of {}x{}x{}",
                g.input[0], g.input[1], g.input[2]
            )));
        }
        scatter_planes::<T>(&gos, &ixs, &mut gi.data_mut::<T>()?, plane_in, plane_out);
        Ok(())
    })?;
    Ok(gi)
}

#[cfg(test)]
#[path = "max_pool3d_tests.rs"]
mod tests;
