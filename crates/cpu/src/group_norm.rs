//! Group normalization: `native_group_norm` and `native_group_norm_backward`, normalizing each
//! group of `C / group` channels of each batch element over those channels and the spatial
//! dims, with a per-channel affine transform. Floating dtypes; statistics in f64.

use rayon::prelude::*;
use switchboard_tensor::{RawOps, Tensor};

use crate::batch_norm::{like_input, output_format};
use crate::copy::cast;
use crate::dispatch_dtype::{FloatElement, Num};
use crate::dispatch_floating_types;
use crate::error::{check_cpu_or_meta, invalid, same_device, shape_str, Result};
use crate::loops::{parallel_region, runs_in_parallel};
use crate::norm::{check_param_dtypes, param, param_dtype};

/// PyTorch's message for a `TORCH_CHECK(cond)` without one.
fn expected(cond: &str) -> switchboard_tensor::TensorError {
    invalid(format!(
        "Expected {cond} to be true, but got false.  (Could this error message be improved?  \
         If so, please report an enhancement request to PyTorch.)"
    ))
}

/// The checked geometry: `n * group` rows of `d = (C / group) * hxw` elements.
#[derive(Clone, Copy)]
struct Geometry {
    c: usize,
    hxw: usize,
    group: usize,
    rows: usize,
}

impl Geometry {
    fn d(&self) -> usize {
        self.c / self.group * self.hxw
    }
}

/// PyTorch's `check_group_norm_inputs` and the size relations of `native_group_norm`.
#[allow(clippy::too_many_arguments)]
fn check(
    op: &str,
    input: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    n: i64,
    c: i64,
    hxw: i64,
    group: i64,
    extra: &[&Tensor],
) -> Result<Geometry> {
    let mut all = vec![input];
    all.extend(weight);
    all.extend(bias);
    all.extend_from_slice(extra);
    let device = same_device(&all)?;
    check_cpu_or_meta(op, device)?;
    if group <= 0 {
        return Err(invalid(format!(
            "Expected num groups to be greater than 0, got {group}"
        )));
    }
    if c < 0 || n < 0 || hxw < 0 || c % group != 0 {
        return Err(invalid(format!(
            "Expected number of channels in input to be divisible by num_groups, but got input \
             of shape {} and num_groups={group}",
            shape_str(input.sizes())
        )));
    }
    for (name, t) in [("weight", weight), ("bias", bias)] {
        if let Some(t) = t.filter(|t| t.dim() != 1 || t.numel() != c) {
            return Err(invalid(format!(
                "Expected {name} to be a vector of size equal to the number of channels in \
                 input, but got {name} of shape {} and input of shape {}",
                shape_str(t.sizes()),
                shape_str(input.sizes())
            )));
        }
    }
    let total = n.checked_mul(c).and_then(|v| v.checked_mul(hxw));
    if total != Some(input.numel()) {
        return Err(expected("X.numel() == N * C * HxW"));
    }
    if !input.dtype().is_floating_point() {
        return Err(crate::error::not_implemented(
            "GroupNormKernelImpl",
            input.dtype(),
        ));
    }
    check_param_dtypes(input, &[weight, bias])?;
    let rows = n.checked_mul(group).ok_or_else(|| {
        invalid(format!(
            "native_group_norm: N * group = {n} * {group} is too large"
        ))
    })?;
    Ok(Geometry {
        c: c as usize,
        hxw: hxw as usize,
        group: group as usize,
        rows: rows as usize,
    })
}

/// Runs `f(row, out_row)` over rows of `out` (length `d`), in parallel when large.
fn par_rows<T: Send>(out: &mut [T], d: usize, f: impl Fn(usize, &mut [T]) + Sync) {
    if d == 0 {
        return;
    }
    if runs_in_parallel(out.len()) {
        out.par_chunks_mut(d)
            .enumerate()
            .for_each(|(r, o)| parallel_region(|| f(r, o)));
    } else {
        out.chunks_mut(d).enumerate().for_each(|(r, o)| f(r, o));
    }
}

/// Per row: the mean and `1 / sqrt(biased variance + eps)`.
fn row_stats<T: FloatElement>(x: &[T], g: &Geometry, eps: f64) -> Vec<(f64, f64)> {
    let d = g.d();
    let stat = |r: usize| {
        let xr = &x[r * d..][..d];
        let mean = xr.iter().map(|v| v.to_acc().to_f64()).sum::<f64>() / d as f64;
        let var = xr
            .iter()
            .map(|v| {
                let e = v.to_acc().to_f64() - mean;
                e * e
            })
            .sum::<f64>()
            / d as f64;
        (mean, 1.0 / (var + eps).sqrt())
    };
    if runs_in_parallel(x.len()) {
        (0..g.rows)
            .into_par_iter()
            .map(|r| parallel_region(|| stat(r)))
            .collect()
    } else {
        (0..g.rows).map(stat).collect()
    }
}

/// `y = (x - mean) * rstd * w[c] + b[c]` over contiguous rows, as `x * alpha + beta` per
/// channel.
fn forward_rows<T: FloatElement>(
    xs: &[T],
    ys: &mut [T],
    g: &Geometry,
    stats: &[(f64, f64)],
    w: &[f64],
    b: &[f64],
) {
    let conv = |v: f64| <T::F as Num>::from_f64(v);
    let (cpg, hxw, d) = (g.c / g.group, g.hxw.max(1), g.d());
    par_rows(ys, d, |r, yr| {
        let (mean, rstd) = stats[r];
        let xr = &xs[r * d..][..d];
        for (k, (yc, xc)) in yr.chunks_mut(hxw).zip(xr.chunks(hxw)).enumerate() {
            let ch = (r % g.group) * cpg + k;
            let alpha = rstd * w[ch];
            let (alpha, beta) = (conv(alpha), conv(b[ch] - mean * alpha));
            for (o, v) in yc.iter_mut().zip(xc) {
                *o = T::from_acc(v.to_acc().mul(alpha).add(beta));
            }
        }
    });
}

/// `native_group_norm(Tensor input, Tensor? weight, Tensor? bias, SymInt N, SymInt C, SymInt
/// HxW, int group, float eps) -> (Tensor, Tensor, Tensor)`: `(x - mean) * rstd * weight[c] +
/// bias[c]` with the statistics of each group of `C / group` channels of each batch element;
/// returns the output, `mean` and `rstd` (both `[N, group]`).
///
/// ```
/// use switchboard_tensor::Tensor;
/// let x = Tensor::from_vec(vec![1.0f64, 3.0, 4.0, 6.0], &[1, 2, 2]).unwrap();
/// let (y, mean, rstd) = switchboard_cpu::native_group_norm(&x, None, None, 1, 2, 2, 2, 0.0).unwrap();
/// assert_eq!(y.to_vec::<f64>().unwrap(), [-1.0, 1.0, -1.0, 1.0]);
/// assert_eq!(mean.to_vec::<f64>().unwrap(), [2.0, 5.0]);
/// assert_eq!(rstd.to_vec::<f64>().unwrap(), [1.0, 1.0]);
/// ```
#[allow(clippy::too_many_arguments)]
pub fn native_group_norm(
    input: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    n: i64,
    c: i64,
    hxw: i64,
    group: i64,
    eps: f64,
) -> Result<(Tensor, Tensor, Tensor)> {
    let g = check(
        "native_group_norm",
        input,
        weight,
        bias,
        n,
        c,
        hxw,
        group,
        &[],
    )?;
    let (dtype, device) = (input.dtype(), input.device());
    let stat_dtype = param_dtype(input, &[weight, bias]);
    let stat_shape = [n, group];
    // An empty input reads nothing (and `C` may then be any size: nothing is allocated in
    // proportion to it).
    if device.is_meta() || input.numel() == 0 {
        let y = Tensor::empty_with_format(input.sizes(), dtype, device, output_format(input))?;
        let stat = || Tensor::empty_on(&stat_shape, stat_dtype, device);
        return Ok((y, stat()?, stat()?));
    }
    let x = input.contiguous()?;
    let y = Tensor::empty_on(input.sizes(), dtype, device)?;
    let (w, b) = (param(weight, g.c, 1.0)?, param(bias, g.c, 0.0)?);
    let stats = dispatch_floating_types!(dtype, "GroupNormKernelImpl", T => {
        let xs = x.data::<T>()?;
        let stats = row_stats::<T>(&xs, &g, eps);
        forward_rows::<T>(&xs, &mut y.data_mut::<T>()?, &g, &stats, &w, &b);
        Ok(stats)
    })?;
    let stat = |f: fn(&(f64, f64)) -> f64| -> Result<Tensor> {
        cast(
            &Tensor::from_vec(stats.iter().map(f).collect::<Vec<f64>>(), &stat_shape)?,
            stat_dtype,
        )
    };
    Ok((like_input(input, y)?, stat(|s| s.0)?, stat(|s| s.1)?))
}

/// Per channel of each row: `(sum dy, sum dy * x)`.
fn channel_sums<T: FloatElement>(dys: &[T], xs: &[T], g: &Geometry) -> (Vec<f64>, Vec<f64>) {
    let (cpg, hxw) = (g.c / g.group, g.hxw);
    let mut sum_dy = vec![0.0f64; g.rows * cpg];
    let mut sum_dyx = vec![0.0f64; g.rows * cpg];
    for (i, (s, sx)) in sum_dy.iter_mut().zip(sum_dyx.iter_mut()).enumerate() {
        let (dp, xp) = (&dys[i * hxw..][..hxw], &xs[i * hxw..][..hxw]);
        for (a, v) in dp.iter().zip(xp) {
            let a = a.to_acc().to_f64();
            *s += a;
            *sx += a * v.to_acc().to_f64();
        }
    }
    (sum_dy, sum_dyx)
}

/// The input gradient over contiguous rows. With `a = dy * w[c]`, `dx = rstd * (a - mean(a) -
/// xhat * mean(a * xhat))` over the row, which is linear in `dy` and `x` per channel:
/// `dx = dy * (rstd * w[c]) + x * b + k`.
#[allow(clippy::too_many_arguments)]
fn input_grad<T: FloatElement>(
    dys: &[T],
    xs: &[T],
    dxs: &mut [T],
    g: &Geometry,
    sums: &(Vec<f64>, Vec<f64>),
    mean: &[f64],
    rstd: &[f64],
    w: &[f64],
) {
    let conv = |v: f64| <T::F as Num>::from_f64(v);
    let (cpg, hxw, d) = (g.c / g.group, g.hxw.max(1), g.d());
    let (sum_dy, sum_dyx) = sums;
    par_rows(dxs, d, |r, out| {
        let (mu, rs) = (mean[r], rstd[r]);
        let (mut sa, mut sax) = (0.0, 0.0);
        for k in 0..cpg {
            let ch = (r % g.group) * cpg + k;
            sa += w[ch] * sum_dy[r * cpg + k];
            sax += w[ch] * sum_dyx[r * cpg + k];
        }
        let dn = d as f64;
        // rstd * xhat * mean(a * xhat) = (x - mu) * rs * proj.
        let proj = rs * rs * (sax - mu * sa) / dn;
        let (b, k) = (conv(-rs * proj), conv(rs * (proj * mu - sa / dn)));
        let (dp, xp) = (&dys[r * d..][..d], &xs[r * d..][..d]);
        let chunks = out.chunks_mut(hxw).zip(dp.chunks(hxw)).zip(xp.chunks(hxw));
        for (c, ((o, a), v)) in chunks.enumerate() {
            let scale = conv(rs * w[(r % g.group) * cpg + c]);
            for ((o, a), v) in o.iter_mut().zip(a).zip(v) {
                *o = T::from_acc(a.to_acc().mul(scale).add(v.to_acc().mul(b)).add(k));
            }
        }
    });
}

/// `native_group_norm_backward(Tensor grad_out, Tensor input, Tensor mean, Tensor rstd,
/// Tensor? weight, SymInt N, SymInt C, SymInt HxW, int group, bool[3] output_mask) ->
/// (Tensor, Tensor, Tensor)`: the gradients with respect to the input, the weight and the
/// bias (`[C]`). An output not asked for by `output_mask` is an empty 0-element tensor
/// (PyTorch returns an undefined tensor).
#[allow(clippy::too_many_arguments)]
pub fn native_group_norm_backward(
    grad_out: &Tensor,
    input: &Tensor,
    mean: &Tensor,
    rstd: &Tensor,
    weight: Option<&Tensor>,
    n: i64,
    c: i64,
    hxw: i64,
    group: i64,
    output_mask: &[bool],
) -> Result<(Tensor, Tensor, Tensor)> {
    let g = check(
        "native_group_norm_backward",
        input,
        weight,
        None,
        n,
        c,
        hxw,
        group,
        &[grad_out, mean, rstd],
    )?;
    if grad_out.numel() != input.numel() {
        return Err(expected("dY.numel() == N * C * HxW"));
    }
    if grad_out.sizes() != input.sizes() {
        return Err(invalid(format!(
            "native_group_norm_backward: expected grad_out of shape {}, but got {}",
            shape_str(input.sizes()),
            shape_str(grad_out.sizes())
        )));
    }
    for (name, t) in [("mean", mean), ("rstd", rstd)] {
        if t.numel() as usize != g.rows {
            return Err(expected(&format!("{name}.numel() == N * group")));
        }
    }
    if output_mask.len() != 3 {
        return Err(invalid(format!(
            "native_group_norm_backward: expected output_mask to have 3 elements, got {}",
            output_mask.len()
        )));
    }
    let (dtype, device) = (input.dtype(), input.device());
    if grad_out.dtype() != dtype {
        return Err(invalid(format!(
            "expected scalar type {} but found {}",
            dtype.c10_name(),
            grad_out.dtype().c10_name()
        )));
    }
    let pdtype = param_dtype(input, &[weight, Some(mean), Some(rstd)]);
    let param_grad = |want: bool| Tensor::empty_on(&[if want { c } else { 0 }], pdtype, device);
    if device.is_meta() {
        let dx = if output_mask[0] {
            Tensor::empty_with_format(input.sizes(), dtype, device, output_format(input))?
        } else {
            Tensor::empty_on(&[0], dtype, device)?
        };
        return Ok((dx, param_grad(output_mask[1])?, param_grad(output_mask[2])?));
    }
    if input.numel() == 0 {
        let dx = Tensor::empty_on(
            if output_mask[0] { input.sizes() } else { &[0] },
            dtype,
            device,
        )?;
        let zeros = |want: bool| Tensor::zeros_on(&[if want { c } else { 0 }], pdtype, device);
        return Ok((dx, zeros(output_mask[1])?, zeros(output_mask[2])?));
    }
    let (mv, rv) = (mean.to_vec_as::<f64>()?, rstd.to_vec_as::<f64>()?);
    let w = param(weight, g.c, 1.0)?;
    let (dy, x) = (grad_out.contiguous()?, input.contiguous()?);
    let dx = Tensor::empty_on(
        if output_mask[0] { input.sizes() } else { &[0] },
        dtype,
        device,
    )?;
    let cpg = g.c / g.group;
    let (sum_dy, sum_dyx) = dispatch_floating_types!(dtype, "GroupNormBackwardKernelImpl", T => {
        let (dys, xs) = (dy.data::<T>()?, x.data::<T>()?);
        let sums = channel_sums::<T>(&dys, &xs, &g);
        if output_mask[0] {
            input_grad::<T>(&dys, &xs, &mut dx.data_mut::<T>()?, &g, &sums, &mv, &rv, &w);
        }
        Ok(sums)
    })?;
    let (mut dw, mut db) = (vec![0.0; g.c], vec![0.0; g.c]);
    for r in 0..g.rows {
        for k in 0..cpg {
            let ch = (r % g.group) * cpg + k;
            let (s, sx) = (sum_dy[r * cpg + k], sum_dyx[r * cpg + k]);
            // sum dy * xhat = rstd * (sum dy*x - mean * sum dy).
            dw[ch] += rv[r] * (sx - mv[r] * s);
            db[ch] += s;
        }
    }
    let fill = |want: bool, v: Vec<f64>| -> Result<Tensor> {
        if want {
            cast(&Tensor::from_vec(v, &[c])?, pdtype)
        } else {
            param_grad(false)
        }
    };
    let dx = if output_mask[0] {
        like_input(input, dx)?
    } else {
        dx
    };
    Ok((dx, fill(output_mask[1], dw)?, fill(output_mask[2], db)?))
}
