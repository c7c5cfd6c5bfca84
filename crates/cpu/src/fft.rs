//! The FFT operators' kernels: `_fft_r2c`, `_fft_c2r`, `_fft_c2c` and their `out=` forms
//! (PyTorch's `SpectralOps.cpp`, pocketfft on the CPU; here the `rustfft` crate).

use num_complex::Complex;
use rustfft::{FftDirection, FftNum, FftPlanner};
use switchboard_tensor::{wrap_dim, Device, RawOps, ScalarType, StorageElement, Tensor};

use crate::copy::{cast, copy_into};
use crate::error::{check_cpu_or_meta, invalid, Result};

// Note [FFT kernels]
// A multi-dimensional transform is successive 1-d transforms over `dim`, on a contiguous
// complex copy of the input (one `rustfft` plan per signal length, lines along the last
// dimension transformed in place as chunks, lines along other dimensions gathered into a
// scratch line). As pocketfft's:
// - `_fft_r2c` is a forward c2c of the real input (imaginary parts 0), the last dim then cut
//   to its first `n/2 + 1` elements when `onesided`;
// - `_fft_c2r` runs the backward c2c over every dim but the last, then along the last dim
//   fills the full spectrum of `last_dim_size` by conjugate symmetry from the first
//   `last_dim_size/2 + 1` input elements, runs a backward c2c and keeps the real parts (the
//   imaginary parts of the 0th and Nyquist elements are ignored, as pocketfft's c2r does);
// - the normalization (`fft_norm_mode`: 0 none, 1 by 1/sqrt(n), 2 by 1/n) scales by the
//   product `n` of the signal sizes (the input's over `dim`; the output's for c2r).
// The dims are wrapped (PyTorch's meta functions index sizes with them, Python-style) and
// must be distinct and non-empty (PyTorch's MKL kernels transform a repeated dim twice; the
// `torch.fft` functions refuse repeated dims). A normalization other than 0, 1, 2 is an error
// (pocketfft's kernels raise it; MKL's take it as 1/n). Sizes, dtypes and the output layout
// come first, so tensors without data (Meta) get the output geometry alone.
//
// The output's layout is PyTorch's (`_exec_fft`): the batch dims (those not transformed)
// outermost, in the input's stride order, then the transformed dims in transform order,
// contiguous in that order. The transform order sorts the dims by the input's strides
// (largest first), except that a one-sided r2c keeps its last dim last; a multi-dim c2r is a
// c2c over all but the last dim, then a c2r over the last from that c2c's layout.

/// `fft_norm_mode`'s scale for `n` points.
fn norm_scale(normalization: i64, n: f64) -> Result<f64> {
    match normalization {
        0 => Ok(1.0),
        1 => Ok(1.0 / n.sqrt()),
        2 => Ok(1.0 / n),
        other => Err(invalid(format!("Unsupported normalization type {other}"))),
    }
}

/// The wrapped, distinct dims of a transform over `t`.
fn fft_dims(t: &Tensor, dim: &[i64]) -> Result<Vec<usize>> {
    if dim.is_empty() {
        return Err(invalid(
            "ArrayRef: attempted to access back() of empty list",
        ));
    }
    let mut out = Vec::with_capacity(dim.len());
    for &d in dim {
        let w = wrap_dim(d, t.dim())?;
        if out.contains(&w) {
            return Err(invalid("FFT dims must be unique"));
        }
        out.push(w);
    }
    Ok(out)
}

fn check_real_input(t: &Tensor) -> Result<()> {
    match t.dtype() {
        ScalarType::Float | ScalarType::Double => Ok(()),
        ScalarType::Half | ScalarType::BFloat16 => Err(invalid(format!(
            "MKL FFT doesn't support tensors of type: {}",
            t.dtype().c10_name()
        ))),
        other => Err(invalid(format!(
            "Only supports floating-point dtypes, but found: {}",
            other.c10_name()
        ))),
    }
}

fn check_complex_input(t: &Tensor) -> Result<()> {
    if !t.dtype().is_complex() {
        return Err(invalid(format!(
            "Only supports complex dtypes, but found: {}",
            t.dtype().c10_name()
        )));
    }
    Ok(())
}

/// Transforms `data` (contiguous, of `sizes`) in place along each of `dims` in turn.
fn c2c_in_place<R: FftNum>(data: &mut [Complex<R>], sizes: &[i64], dims: &[usize], forward: bool) {
    let direction = if forward {
        FftDirection::Forward
    } else {
        FftDirection::Inverse
    };
    let mut planner = FftPlanner::<R>::new();
    for &d in dims {
        let n = sizes[d] as usize;
        if n == 0 || data.is_empty() {
            continue;
        }
        let fft = planner.plan_fft(n, direction);
        let inner: usize = sizes[d + 1..].iter().map(|&s| s as usize).product();
        if inner == 1 {
            fft.process(data);
            continue;
        }
        let mut line = vec![Complex::new(R::zero(), R::zero()); n];
        for block in data.chunks_exact_mut(n * inner) {
            for i in 0..inner {
                for (k, x) in line.iter_mut().enumerate() {
                    *x = block[i + k * inner];
                }
                fft.process(&mut line);
                for (k, x) in line.iter().enumerate() {
                    block[i + k * inner] = *x;
                }
            }
        }
    }
}

fn scale<R: FftNum>(data: &mut [Complex<R>], factor: f64) {
    if factor != 1.0 {
        let f = R::from_f64(factor).unwrap_or_else(R::one);
        for x in data {
            *x = *x * f;
        }
    }
}

/// `_sort_dims`: `dims` by decreasing input stride (all but the last when `keep_last`).
fn sort_dims(strides: &[i64], dims: &[usize], keep_last: bool) -> Vec<usize> {
    let mut sorted = dims.to_vec();
    let end = sorted.len() - usize::from(keep_last);
    sorted[..end].sort_by(|a, b| strides[*b].cmp(&strides[*a]));
    sorted
}

/// The strides of `_exec_fft`'s output of `sizes` for an input of `in_strides` transformed
/// over `dims` (already in transform order).
fn fft_output_strides(in_strides: &[i64], sizes: &[i64], dims: &[usize]) -> Vec<i64> {
    let mut order: Vec<usize> = (0..sizes.len()).filter(|d| !dims.contains(d)).collect();
    order.sort_by(|a, b| in_strides[*b].cmp(&in_strides[*a]));
    order.extend_from_slice(dims);
    let mut strides = vec![0i64; sizes.len()];
    let mut step = 1i64;
    for &d in order.iter().rev() {
        strides[d] = step;
        step *= sizes[d].max(1);
    }
    strides
}

/// `values` (row-major, of `sizes`) laid out with `strides`.
fn with_layout(values: Tensor, strides: &[i64]) -> Result<Tensor> {
    if values.strides() == strides {
        return Ok(values);
    }
    let out = Tensor::empty_strided(values.sizes(), strides, values.dtype(), values.device())?;
    copy_into(&out, &values)?;
    Ok(out)
}

/// A contiguous copy of `t` as `dtype`, as a vector.
fn contiguous_values<T: StorageElement>(t: &Tensor, dtype: ScalarType) -> Result<Vec<T>> {
    cast(t, dtype)?.contiguous()?.to_vec::<T>()
}

fn signal_size(sizes: &[i64], dims: &[usize]) -> f64 {
    dims.iter().map(|&d| sizes[d] as f64).product()
}

fn r2c_typed<R: FftNum>(
    self_: &Tensor,
    dims: &[usize],
    normalization: i64,
    onesided: bool,
    complex: ScalarType,
) -> Result<Tensor>
where
    Complex<R>: StorageElement,
{
    let sizes = self_.sizes();
    let mut data = contiguous_values::<Complex<R>>(self_, complex)?;
    c2c_in_place(&mut data, sizes, dims, true);
    scale(
        &mut data,
        norm_scale(normalization, signal_size(sizes, dims))?,
    );
    let full = Tensor::from_vec(data, sizes)?;
    if !onesided {
        return Ok(full);
    }
    let last = dims[dims.len() - 1];
    // A fresh contiguous output, also when empty (`contiguous` keeps an empty view's strides).
    full.narrow(last as i64, 0, sizes[last] / 2 + 1)?
        .deep_clone()
}

/// `_fft_r2c(self, dim, normalization, onesided)`: the forward transform of a real tensor over
/// `dim`, complex; `onesided` keeps the first `n/2 + 1` elements of the last dim (Note [FFT
/// kernels]).
pub fn _fft_r2c(self_: &Tensor, dim: &[i64], normalization: i64, onesided: bool) -> Result<Tensor> {
    check_cpu_or_meta("_fft_r2c", self_.device())?;
    check_real_input(self_)?;
    let dims = fft_dims(self_, dim)?;
    norm_scale(normalization, 1.0)?;
    let complex = self_.dtype().to_complex_type()?;
    let order = sort_dims(self_.strides(), &dims, true);
    if order.iter().any(|&d| self_.sizes()[d] == 0) {
        // PyTorch's r2c collapses the batch dims with `reshape(-1, *signal)`, which fails for
        // an empty signal (its c2c and c2r return empty results instead).
        let signal: Vec<String> = order
            .iter()
            .map(|&d| self_.sizes()[d].to_string())
            .collect();
        return Err(invalid(format!(
            "cannot reshape tensor of 0 elements into shape [-1, {}] because the unspecified \
             dimension size -1 can be any value and is ambiguous",
            signal.join(", ")
        )));
    }
    let mut sizes = self_.sizes().to_vec();
    let last = dims[dims.len() - 1];
    if onesided {
        sizes[last] = sizes[last] / 2 + 1;
    }
    let strides = fft_output_strides(self_.strides(), &sizes, &order);
    if !self_.has_data() {
        return Tensor::empty_strided(&sizes, &strides, complex, self_.device());
    }
    let values = if self_.dtype() == ScalarType::Float {
        r2c_typed::<f32>(self_, &dims, normalization, onesided, complex)?
    } else {
        r2c_typed::<f64>(self_, &dims, normalization, onesided, complex)?
    };
    with_layout(values, &strides)
}

fn c2r_typed<R>(
    self_: &Tensor,
    dims: &[usize],
    normalization: i64,
    out_sizes: &[i64],
) -> Result<Tensor>
where
    R: FftNum + StorageElement,
    Complex<R>: StorageElement,
{
    let (last, rest) = dims.split_last().expect("fft_dims is not empty");
    let sizes = self_.sizes();
    let mut data = contiguous_values::<Complex<R>>(self_, self_.dtype())?;
    c2c_in_place(&mut data, sizes, rest, false);
    let n = out_sizes[*last] as usize;
    let half = sizes[*last] as usize;
    let inner: usize = sizes[last + 1..].iter().map(|&s| s as usize).product();
    let numel: usize = out_sizes.iter().map(|&s| s as usize).product();
    let mut out = vec![R::zero(); numel];
    if n > 0 && numel > 0 {
        let fft = FftPlanner::<R>::new().plan_fft(n, FftDirection::Inverse);
        let mut line = vec![Complex::new(R::zero(), R::zero()); n];
        let keep = n / 2 + 1;
        for (block, out_block) in data
            .chunks_exact(half * inner)
            .zip(out.chunks_exact_mut(n * inner))
        {
            for i in 0..inner {
                for (k, x) in line.iter_mut().enumerate() {
                    *x = if k < keep {
                        block[i + k * inner]
                    } else {
                        block[i + (n - k) * inner].conj()
                    };
                }
                fft.process(&mut line);
                for (k, x) in line.iter().enumerate() {
                    out_block[i + k * inner] = x.re;
                }
            }
        }
    }
    let factor = norm_scale(normalization, signal_size(out_sizes, dims))?;
    if factor != 1.0 {
        let f = R::from_f64(factor).unwrap_or_else(R::one);
        for x in &mut out {
            *x = *x * f;
        }
    }
    Tensor::from_vec(out, out_sizes)
}

/// `_fft_c2r(self, dim, normalization, last_dim_size)`: the backward transform over `dim` of
/// a one-sided (conjugate-symmetric) complex signal, real, with `last_dim_size` elements along
/// the last dim (Note [FFT kernels]).
pub fn _fft_c2r(
    self_: &Tensor,
    dim: &[i64],
    normalization: i64,
    last_dim_size: i64,
) -> Result<Tensor> {
    check_cpu_or_meta("_fft_c2r", self_.device())?;
    check_complex_input(self_)?;
    let dims = fft_dims(self_, dim)?;
    norm_scale(normalization, 1.0)?;
    let last = dims[dims.len() - 1];
    let mut out_sizes = self_.sizes().to_vec();
    out_sizes[last] = last_dim_size;
    if last_dim_size < 0 {
        return Err(invalid(format!(
            "Trying to create tensor with negative dimension {last_dim_size}: {out_sizes:?}"
        )));
    }
    let needed = last_dim_size / 2 + 1;
    if last_dim_size > 0 && self_.sizes()[last] < needed {
        return Err(invalid(format!(
            "_fft_c2r: a signal of {last_dim_size} points needs {needed} elements along dim \
             {last} of the input, but it has {}",
            self_.sizes()[last]
        )));
    }
    let real = self_.dtype().to_real_value_type();
    let (last_only, rest) = dims.split_last().expect("fft_dims is not empty");
    let c2c_strides = if rest.is_empty() {
        self_.strides().to_vec()
    } else {
        fft_output_strides(
            self_.strides(),
            self_.sizes(),
            &sort_dims(self_.strides(), rest, false),
        )
    };
    let strides = fft_output_strides(&c2c_strides, &out_sizes, &[*last_only]);
    if !self_.has_data() {
        return Tensor::empty_strided(&out_sizes, &strides, real, self_.device());
    }
    // Only the first n/2 + 1 elements of the last dim are read.
    let input = if last_dim_size > 0 {
        self_.narrow(last as i64, 0, needed)?
    } else {
        self_.clone()
    };
    let values = if real == ScalarType::Float {
        c2r_typed::<f32>(&input, &dims, normalization, &out_sizes)?
    } else {
        c2r_typed::<f64>(&input, &dims, normalization, &out_sizes)?
    };
    with_layout(values, &strides)
}

fn c2c_typed<R: FftNum>(
    self_: &Tensor,
    dims: &[usize],
    normalization: i64,
    forward: bool,
) -> Result<Tensor>
where
    Complex<R>: StorageElement,
{
    let sizes = self_.sizes();
    let mut data = contiguous_values::<Complex<R>>(self_, self_.dtype())?;
    c2c_in_place(&mut data, sizes, dims, forward);
    scale(
        &mut data,
        norm_scale(normalization, signal_size(sizes, dims))?,
    );
    Tensor::from_vec(data, sizes)
}

/// `_fft_c2c(self, dim, normalization, forward)`: the forward (or backward) transform of a
/// complex tensor over `dim` (Note [FFT kernels]).
pub fn _fft_c2c(self_: &Tensor, dim: &[i64], normalization: i64, forward: bool) -> Result<Tensor> {
    check_cpu_or_meta("_fft_c2c", self_.device())?;
    check_complex_input(self_)?;
    let dims = fft_dims(self_, dim)?;
    norm_scale(normalization, 1.0)?;
    let strides = fft_output_strides(
        self_.strides(),
        self_.sizes(),
        &sort_dims(self_.strides(), &dims, false),
    );
    if !self_.has_data() {
        return Tensor::empty_strided(self_.sizes(), &strides, self_.dtype(), self_.device());
    }
    let values = if self_.dtype() == ScalarType::ComplexFloat {
        c2c_typed::<f32>(self_, &dims, normalization, forward)?
    } else {
        c2c_typed::<f64>(self_, &dims, normalization, forward)?
    };
    with_layout(values, &strides)
}

/// PyTorch's `out=` forms of the FFT operators: the result, then `out` resized to it and the
/// result copied in.
fn write_out(result: Tensor, out: &Tensor, device: Device) -> Result<Tensor> {
    check_cpu_or_meta("fft", device)?;
    let out = out.resize_output(result.sizes())?;
    if out.has_data() {
        copy_into(&out, &result)?;
    }
    Ok(out)
}

/// `_fft_r2c.out`.
pub fn _fft_r2c_out(
    self_: &Tensor,
    dim: &[i64],
    normalization: i64,
    onesided: bool,
    out: &Tensor,
) -> Result<Tensor> {
    write_out(
        _fft_r2c(self_, dim, normalization, onesided)?,
        out,
        out.device(),
    )
}

/// `_fft_c2r.out`.
pub fn _fft_c2r_out(
    self_: &Tensor,
    dim: &[i64],
    normalization: i64,
    last_dim_size: i64,
    out: &Tensor,
) -> Result<Tensor> {
    write_out(
        _fft_c2r(self_, dim, normalization, last_dim_size)?,
        out,
        out.device(),
    )
}

/// `_fft_c2c.out`.
pub fn _fft_c2c_out(
    self_: &Tensor,
    dim: &[i64],
    normalization: i64,
    forward: bool,
    out: &Tensor,
) -> Result<Tensor> {
    write_out(
        _fft_c2c(self_, dim, normalization, forward)?,
        out,
        out.device(),
    )
}
