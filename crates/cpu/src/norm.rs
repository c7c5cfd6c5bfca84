//! Layer normalization: `native_layer_norm` and `native_layer_norm_backward`, normalizing
//! over the trailing `normalized_shape` dimensions. Floating dtypes; Half and BFloat16 compute
//! in f32; statistics are computed in two passes over each row.

use rayon::prelude::*;
use switchboard_tensor::RawOps;
use switchboard_tensor::{Device, ScalarType, Tensor};

use crate::copy::cast;
use crate::dispatch_dtype::{Float, FloatElement, Num};
use crate::dispatch_floating_types;
use crate::error::{check_cpu_or_meta, invalid, same_device, shape_str, Result};
use crate::loops::{in_parallel_region, parallel_region, with_avx2_fma, GRAIN_SIZE};
use crate::reduce::{lane_fold, lane_fold2};

/// The checked geometry: `m` rows of `n` normalized elements.
struct Ln {
    m: usize,
    n: usize,
    /// The shape of `mean` and `rstd`: the input's leading dims, then 1s.
    stat_shape: Vec<i64>,
    device: Device,
}

/// PyTorch's `_check_layer_norm_inputs`.
fn check(
    input: &Tensor,
    normalized_shape: &[i64],
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    extra: &[&Tensor],
) -> Result<Ln> {
    let mut all = vec![input];
    all.extend(weight);
    all.extend(bias);
    all.extend_from_slice(extra);
    let device = same_device(&all)?;
    check_cpu_or_meta("native_layer_norm", device)?;
    let ns = shape_str(normalized_shape);
    if normalized_shape.is_empty() {
        return Err(invalid(format!(
            "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least \
             one element, but got normalized_shape = {ns}"
        )));
    }
    for (name, t) in [("weight", weight), ("bias", bias)] {
        if let Some(t) = t.filter(|t| t.sizes() != normalized_shape) {
            return Err(invalid(format!(
                "Expected {name} to be of same shape as normalized_shape, but got {name} of \
                 shape {} and normalized_shape = {ns}",
                shape_str(t.sizes())
            )));
        }
    }
    let (nd, k) = (input.dim(), normalized_shape.len());
    if nd < k || &input.sizes()[nd - k..] != normalized_shape {
        let tail: String = normalized_shape.iter().map(|s| format!(", {s}")).collect();
        return Err(invalid(format!(
            "Given normalized_shape={ns}, expected input with shape [*{tail}], but got input of \
             size{}",
            shape_str(input.sizes())
        )));
    }
    check_param_dtypes(input, &[weight, bias])?;
    if !input.dtype().is_floating_point() {
        return Err(crate::error::not_implemented(
            "LayerNormKernelImpl",
            input.dtype(),
        ));
    }
    let axis = nd - k;
    let prod = |s: &[i64]| s.iter().product::<i64>() as usize;
    let mut stat_shape = input.sizes()[..axis].to_vec();
    stat_shape.extend(std::iter::repeat_n(1, k));
    Ok(Ln {
        m: prod(&input.sizes()[..axis]),
        n: prod(normalized_shape),
        stat_shape,
        device,
    })
}

/// PyTorch's parameter dtype rules (`is_mixed_type` / `check_mixed_data_type`): parameters
/// whose (first) dtype differs from the input's are a "mixed type", allowed only as Float
/// parameters of a float16/bfloat16 input; otherwise every parameter has the input's dtype
/// (its kernel reads them as the input's type). Shared by layer, batch and group norm.
pub(crate) fn check_param_dtypes(input: &Tensor, params: &[Option<&Tensor>]) -> Result<()> {
    let dtype = input.dtype();
    let mut defined = params.iter().flatten();
    let Some(first) = defined.clone().next().map(|p| p.dtype()) else {
        return Ok(());
    };
    if first != dtype {
        if defined.any(|p| p.dtype() != ScalarType::Float) {
            return Err(invalid(
                "mixed dtype (CPU): expect parameter to have scalar type of Float",
            ));
        }
        if !matches!(dtype, ScalarType::Half | ScalarType::BFloat16) {
            return Err(invalid(
                "mixed dtype (CPU): all inputs must share same datatype.",
            ));
        }
        return Ok(());
    }
    if let Some(p) = defined.find(|p| p.dtype() != dtype) {
        return Err(invalid(format!(
            "expected scalar type {} but found {}",
            dtype.c10_name(),
            p.dtype().c10_name()
        )));
    }
    Ok(())
}

/// The dtype of the statistics (and of the parameters' computation): Float for a Half or
/// BFloat16 input whose first defined parameter is Float (PyTorch's mixed type), else the
/// input's dtype.
pub(crate) fn param_dtype(input: &Tensor, params: &[Option<&Tensor>]) -> ScalarType {
    let reduced = matches!(input.dtype(), ScalarType::Half | ScalarType::BFloat16);
    let float_params = params
        .iter()
        .flatten()
        .next()
        .is_some_and(|p| p.dtype() == ScalarType::Float);
    if reduced && float_params {
        ScalarType::Float
    } else {
        input.dtype()
    }
}

/// An optional parameter as `f64`s (or `n` copies of `default`).
pub(crate) fn param(t: Option<&Tensor>, n: usize, default: f64) -> Result<Vec<f64>> {
    match t {
        Some(t) => t.to_vec_as::<f64>(),
        None => Ok(vec![default; n]),
    }
}

/// The rows per chunk when `m` rows of `n` elements are split over the threads: all of them
/// when the work is small or already runs on a worker thread.
fn rows_per_chunk(m: usize, n: usize) -> usize {
    let threads = rayon::current_num_threads();
    if m.saturating_mul(n) > GRAIN_SIZE && !in_parallel_region() && threads > 1 {
        m.div_ceil(threads).max(1)
    } else {
        m.max(1)
    }
}

/// `sum f(v)` over a row in the compute type, in lanes (Note [Lane folds]).
#[inline(always)]
fn row_sum<T: FloatElement>(row: &[T], f: impl Fn(T::F) -> T::F) -> T::F {
    lane_fold(
        row,
        <T::F as Num>::ZERO,
        |a, v: T| a.add(f(v.to_acc())),
        |a, b| a.add(b),
    )
}

/// The forward pass over contiguous rows; returns `(mean, rstd)` per row. Row chunks run in
/// parallel, each compiled for the CPU's vector instructions (`with_avx2_fma`).
fn forward<T: FloatElement>(
    x: &[T],
    y: &mut [T],
    (m, n): (usize, usize),
    w: &[f64],
    b: &[f64],
    eps: f64,
) -> (Vec<f64>, Vec<f64>) {
    if n == 0 {
        // Rows of no element: PyTorch's moments give a zero mean and a NaN rstd.
        return (vec![0.0; m], vec![f64::NAN; m]);
    }
    let mut stats = vec![(0.0, 0.0); m];
    let conv = |v: f64| <T::F as Num>::from_f64(v);
    let (wf, bf): (Vec<T::F>, Vec<T::F>) = (
        w.iter().map(|&v| conv(v)).collect(),
        b.iter().map(|&v| conv(v)).collect(),
    );
    let (wf, bf) = (&wf[..n], &bf[..n]);
    let (nn, eps) = (conv(n as f64), conv(eps));
    let run = |xc: &[T], yc: &mut [T], sc: &mut [(f64, f64)]| {
        with_avx2_fma(
            #[inline(always)]
            || {
                for ((xr, yr), st) in xc.chunks_exact(n).zip(yc.chunks_exact_mut(n)).zip(sc) {
                    let mean = row_sum(xr, |v| v).div(nn);
                    let var = row_sum(xr, |v| {
                        let d = v.sub(mean);
                        d.mul(d)
                    })
                    .div(nn);
                    let rstd = var.add(eps).rsqrt();
                    for (((o, v), &wj), &bj) in yr.iter_mut().zip(xr).zip(wf).zip(bf) {
                        *o = T::from_acc(v.to_acc().sub(mean).mul(rstd).mul(wj).add(bj));
                    }
                    *st = (mean.to_f64(), rstd.to_f64());
                }
            },
        )
    };
    let per = rows_per_chunk(m, n);
    if per < m {
        y.par_chunks_mut(per * n)
            .zip(x.par_chunks(per * n))
            .zip(stats.par_chunks_mut(per))
            .for_each(|((yc, xc), sc)| parallel_region(|| run(xc, yc, sc)));
    } else {
        run(x, y, &mut stats);
    }
    stats.into_iter().unzip()
}

/// `native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias,
/// float eps) -> (Tensor, Tensor, Tensor)`: `(x - mean) * rstd * weight + bias` over the
/// trailing `normalized_shape` dims, with `rstd = 1/sqrt(var + eps)` (biased variance).
/// Returns the output (contiguous, the input's dtype), `mean` and `rstd` (shape: the input's
/// leading dims followed by one 1 per normalized dim).
///
/// ```
/// use switchboard_tensor::Tensor;
/// let x = Tensor::from_vec(vec![1.0f64, 3.0], &[1, 2]).unwrap();
/// let (y, mean, rstd) = switchboard_cpu::native_layer_norm(&x, &[2], None, None, 0.0).unwrap();
/// assert_eq!(y.to_vec::<f64>().unwrap(), [-1.0, 1.0]);
/// assert_eq!((mean.sizes(), mean.to_vec::<f64>().unwrap()), (&[1i64, 1][..], vec![2.0]));
/// assert_eq!(rstd.to_vec::<f64>().unwrap(), [1.0]);
/// ```
pub fn native_layer_norm(
    input: &Tensor,
    normalized_shape: &[i64],
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Result<(Tensor, Tensor, Tensor)> {
    let ln = check(input, normalized_shape, weight, bias, &[])?;
    let stat_dtype = param_dtype(input, &[weight, bias]);
    let y = Tensor::empty_on(input.sizes(), input.dtype(), ln.device)?;
    if ln.device.is_meta() {
        let mean = Tensor::empty_on(&ln.stat_shape, stat_dtype, ln.device)?;
        let rstd = Tensor::empty_on(&ln.stat_shape, stat_dtype, ln.device)?;
        return Ok((y, mean, rstd));
    }
    let (w, b) = (param(weight, ln.n, 1.0)?, param(bias, ln.n, 0.0)?);
    let x = input.contiguous()?;
    let (mean, rstd) = dispatch_floating_types!(input.dtype(), "LayerNormKernelImpl", T => {
        let xs = x.data::<T>()?;
        let mut ys = y.data_mut::<T>()?;
        Ok(forward::<T>(&xs, &mut ys, (ln.m, ln.n), &w, &b, eps))
    })?;
    let stat =
        |v: Vec<f64>| -> Result<Tensor> { cast(&Tensor::from_vec(v, &ln.stat_shape)?, stat_dtype) };
    Ok((y, stat(mean)?, stat(rstd)?))
}

/// The backward pass over contiguous rows: fills `dx` (when given) and returns the column
/// sums `(sum dy * xhat, sum dy)` (for the weight and bias gradients). Row chunks run in
/// parallel, each with its own column sums in the compute type (as PyTorch's per-thread
/// buffers), added up in chunk order.
#[allow(clippy::too_many_arguments)]
fn backward<T: FloatElement>(
    dy: &[T],
    x: &[T],
    mean: &[f64],
    rstd: &[f64],
    w: &[f64],
    dx: Option<&mut [T]>,
    n: usize,
    want_params: bool,
) -> (Vec<f64>, Vec<f64>) {
    let m = mean.len();
    if n == 0 || m == 0 {
        return (vec![0.0; n], vec![0.0; n]);
    }
    let conv = |v: f64| <T::F as Num>::from_f64(v);
    let wf: Vec<T::F> = w.iter().map(|&v| conv(v)).collect();
    let wf = &wf[..n];
    let zero = <T::F as Num>::ZERO;
    let inv_n = conv(1.0 / n as f64);
    // Rows `r0..` of `dyc` and `xc`, and their `dx` rows when asked.
    let run = |r0: usize, dyc: &[T], xc: &[T], dxc: Option<&mut [T]>| {
        with_avx2_fma(
            #[inline(always)]
            || {
                let sums = if want_params { n } else { 0 };
                let (mut gw, mut gb) = (vec![zero; sums], vec![zero; sums]);
                // `dy * w` of the current row.
                let mut g = vec![zero; if dxc.is_some() { n } else { 0 }];
                let mut dx_rows = dxc.map(|d| d.chunks_exact_mut(n));
                for (i, (dyr, xr)) in dyc.chunks_exact(n).zip(xc.chunks_exact(n)).enumerate() {
                    let (mu, rs) = (conv(mean[r0 + i]), conv(rstd[r0 + i]));
                    let xhat = |v: T| v.to_acc().sub(mu).mul(rs);
                    if let Some(dxr) = dx_rows.as_mut().and_then(Iterator::next) {
                        for ((gj, &d), &wj) in g.iter_mut().zip(dyr).zip(wf) {
                            *gj = d.to_acc().mul(wj);
                        }
                        // mean(dy * w) and mean(dy * w * xhat) over the row.
                        let (a, b) = lane_fold2(
                            &g,
                            xr,
                            (zero, zero),
                            |(a, b), gj, v: T| (a.add(gj), b.add(gj.mul(xhat(v)))),
                            |(a, b), (c, d)| (a.add(c), b.add(d)),
                        );
                        let (a, b) = (a.mul(inv_n), b.mul(inv_n));
                        for ((o, &gj), &v) in dxr.iter_mut().zip(&g).zip(xr) {
                            *o = T::from_acc(rs.mul(gj.sub(a).sub(xhat(v).mul(b))));
                        }
                    }
                    if want_params {
                        for (((sw, sb), &d), &v) in gw.iter_mut().zip(&mut gb).zip(dyr).zip(xr) {
                            *sw = sw.add(d.to_acc().mul(xhat(v)));
                            *sb = sb.add(d.to_acc());
                        }
                    }
                }
                (gw, gb)
            },
        )
    };
    let per = rows_per_chunk(m, n);
    // Each chunk's column sums `(sum dy * xhat, sum dy)`.
    let parts: Vec<_> = if per >= m {
        vec![run(0, dy, x, dx)]
    } else if let Some(dx) = dx {
        dx.par_chunks_mut(per * n)
            .zip(dy.par_chunks(per * n).zip(x.par_chunks(per * n)))
            .enumerate()
            .map(|(c, (dxc, (dyc, xc)))| parallel_region(|| run(c * per, dyc, xc, Some(dxc))))
            .collect()
    } else {
        dy.par_chunks(per * n)
            .zip(x.par_chunks(per * n))
            .enumerate()
            .map(|(c, (dyc, xc))| parallel_region(|| run(c * per, dyc, xc, None)))
            .collect()
    };
    if !want_params {
        return (vec![0.0; n], vec![0.0; n]);
    }
    let (mut gw, mut gb) = (vec![zero; n], vec![zero; n]);
    for (pw, pb) in &parts {
        gw.iter_mut().zip(pw).for_each(|(a, &b)| *a = a.add(b));
        gb.iter_mut().zip(pb).for_each(|(a, &b)| *a = a.add(b));
    }
    let f64s = |v: Vec<T::F>| v.into_iter().map(|a| a.to_f64()).collect();
    (f64s(gw), f64s(gb))
}

/// `native_layer_norm_backward(Tensor grad_out, Tensor input, SymInt[] normalized_shape,
/// Tensor mean, Tensor rstd, Tensor? weight, Tensor? bias, bool[3] output_mask) -> (Tensor,
/// Tensor, Tensor)`: the gradients with respect to the input, the weight and the bias (shaped
/// like `normalized_shape`, of the weight's dtype, or the input's without a weight). An
/// output not asked for by `output_mask` is an empty 0-element tensor (PyTorch returns an
/// undefined tensor).
#[allow(clippy::too_many_arguments)]
pub fn native_layer_norm_backward(
    grad_out: &Tensor,
    input: &Tensor,
    normalized_shape: &[i64],
    mean: &Tensor,
    rstd: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    output_mask: &[bool],
) -> Result<(Tensor, Tensor, Tensor)> {
    let ln = check(
        input,
        normalized_shape,
        weight,
        bias,
        &[grad_out, mean, rstd],
    )?;
    if output_mask.len() != 3 {
        return Err(invalid(format!(
            "native_layer_norm_backward: expected output_mask to have 3 elements, got {}",
            output_mask.len()
        )));
    }
    if grad_out.sizes() != input.sizes() {
        return Err(invalid(format!(
            "native_layer_norm_backward: expected grad_out of shape {}, but got {}",
            shape_str(input.sizes()),
            shape_str(grad_out.sizes())
        )));
    }
    for (name, t) in [("mean", mean), ("rstd", rstd)] {
        if t.numel() as usize != ln.m {
            return Err(invalid(format!(
                "native_layer_norm_backward: expected {name} to have {} elements (one per \
                 normalized row), but got {} of shape {}",
                ln.m,
                t.numel(),
                shape_str(t.sizes())
            )));
        }
    }
    let (dtype, device) = (input.dtype(), ln.device);
    let pdtype = weight.map_or(dtype, |w| w.dtype());
    let make = |want: bool, shape: &[i64], dt: ScalarType| -> Result<Tensor> {
        Tensor::empty_on(if want { shape } else { &[0] }, dt, device)
    };
    let dx = make(output_mask[0], input.sizes(), dtype)?;
    let dw = make(output_mask[1], normalized_shape, pdtype)?;
    let db = make(
        output_mask[2],
        normalized_shape,
        bias.map_or(pdtype, |b| b.dtype()),
    )?;
    if device.is_meta() {
        return Ok((dx, dw, db));
    }
    let (mv, rv) = (mean.to_vec_as::<f64>()?, rstd.to_vec_as::<f64>()?);
    let w = param(weight, ln.n, 1.0)?;
    let (go, x) = (grad_out.contiguous()?, input.contiguous()?);
    if go.dtype() != dtype {
        return Err(invalid(format!(
            "expected scalar type {} but found {}",
            dtype.c10_name(),
            go.dtype().c10_name()
        )));
    }
    let want_params = output_mask[1] || output_mask[2];
    let (gw, gb) = dispatch_floating_types!(dtype, "LayerNormBackwardKernelImpl", T => {
        let (gs, xs) = (go.data::<T>()?, x.data::<T>()?);
        let mut dxs = if output_mask[0] { Some(dx.data_mut::<T>()?) } else { None };
        Ok(backward::<T>(&gs, &xs, &mv, &rv, &w, dxs.as_deref_mut(), ln.n, want_params))
    })?;
    let fill = |t: &Tensor, v: Vec<f64>| -> Result<()> {
        crate::copy::copy_into(t, &Tensor::from_vec(v, normalized_shape)?)
    };
    if output_mask[1] {
        fill(&dw, gw)?;
    }
    if output_mask[2] {
        fill(&db, gb)?;
    }
    Ok((dx, dw, db))
}

#[cfg(test)]
#[path = "norm_tests.rs"]
mod tests;
