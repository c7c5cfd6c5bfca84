//! The `torch.fft` functions users call (CompositeImplicitAutograd, as PyTorch's
//! `SpectralOps.cpp`): `fft_fft`, `fft_ifft`, `fft_rfft`, `fft_irfft`, `fft_rfftn` and
//! `fft_irfftn`, decomposed into `_fft_r2c`, `_fft_c2r`, `_fft_c2c`, `slice` and
//! `constant_pad_nd`.

use switchboard_dispatcher::Result;
use switchboard_tensor::{wrap_dim, ScalarType, Tensor};

use super::error;

// Note [FFT normalization modes]
// `norm` names which direction is scaled (`fft_norm_mode`: 0 none, 1 by 1/sqrt(n), 2 by 1/n):
// "backward" (the default) scales the backward transforms by 1/n, "forward" the forward ones,
// "ortho" both by 1/sqrt(n).
fn norm_from_string(norm: Option<&str>, forward: bool) -> Result<i64> {
    match norm {
        None | Some("backward") => Ok(if forward { 0 } else { 2 }),
        Some("forward") => Ok(if forward { 2 } else { 0 }),
        Some("ortho") => Ok(1),
        Some(other) => Err(error(format!("Invalid normalization mode: \"{other}\""))),
    }
}

/// `promote_tensor_fft`: integers to the default float dtype; Half and BFloat16 are
/// unsupported on the CPU; the complex dtype when `require_complex`.
fn promote_tensor_fft(t: &Tensor, require_complex: bool) -> Result<Tensor> {
    let current = t.dtype();
    let mut target = current;
    if !current.is_complex() {
        if !current.is_floating_point() {
            target = ScalarType::Float;
        }
        if !matches!(target, ScalarType::Float | ScalarType::Double) {
            return Err(error(format!("Unsupported dtype {}", target.c10_name())));
        }
        if require_complex {
            target = target.to_complex_type()?;
        }
    }
    if target == current {
        return Ok(t.clone());
    }
    crate::to(t, target)
}

/// `maybe_wrap_dim(dim, input.dim(), wrap_scalar=false)`.
fn wrap_fft_dim(dim: i64, t: &Tensor) -> Result<usize> {
    if t.dim() == 0 {
        return Err(error(format!(
            "Dimension specified as {dim} but tensor has no dimensions"
        )));
    }
    Ok(wrap_dim(dim, t.dim())?)
}

fn check_points(n: i64) -> Result<()> {
    if n < 1 {
        return Err(error(format!(
            "Invalid number of data points ({n}) specified"
        )));
    }
    Ok(())
}

/// `resize_fft_input`: `x` cut (a slice) or zero-padded (`constant_pad_nd`) to `sizes` along
/// `dims`.
fn resize_fft_input(x: &Tensor, dims: &[usize], sizes: &[i64]) -> Result<Tensor> {
    let mut x = x.clone();
    let mut pad = vec![0i64; x.dim() * 2];
    let mut must_pad = false;
    for (&d, &n) in dims.iter().zip(sizes) {
        let have = x.sizes()[d];
        if have < n {
            must_pad = true;
            pad[2 * (x.dim() - d) - 1] = n - have;
        }
        if have > n {
            x = crate::narrow(&x, d as i64, 0, n)?;
        }
    }
    if must_pad {
        return crate::constant_pad_nd(&x, &pad);
    }
    Ok(x)
}

fn as_dims(dims: &[usize]) -> Vec<i64> {
    dims.iter().map(|&d| d as i64).collect()
}

/// PyTorch's `fft_r2c`: a real input's transform along `dim` (one-sided for rfft).
fn fft_r2c(
    name: &str,
    input: &Tensor,
    n: Option<i64>,
    dim: i64,
    norm: Option<&str>,
    forward: bool,
    onesided: bool,
) -> Result<Tensor> {
    if input.dtype().is_complex() {
        return Err(error(format!(
            "{name} expects a real input tensor, but got {}",
            input.dtype().c10_name()
        )));
    }
    let input = promote_tensor_fft(input, false)?;
    let d = wrap_fft_dim(dim, &input)?;
    let points = n.unwrap_or(input.sizes()[d]);
    check_points(points)?;
    let input = match n {
        Some(n) => resize_fft_input(&input, &[d], &[n])?,
        None => input,
    };
    let norm = norm_from_string(norm, forward)?;
    let ret = crate::_fft_r2c(&input, &[d as i64], norm, onesided)?;
    if forward {
        return Ok(ret);
    }
    // The backward transform of a real signal is the conjugate of the forward one.
    crate::conj_physical(&ret)
}

/// PyTorch's `fft_c2c`: a complex input's transform along `dim`.
fn fft_c2c(
    name: &str,
    input: &Tensor,
    n: Option<i64>,
    dim: i64,
    norm: Option<&str>,
    forward: bool,
) -> Result<Tensor> {
    if !input.dtype().is_complex() {
        return Err(error(format!(
            "{name} expects a complex input tensor, but got {}",
            input.dtype().c10_name()
        )));
    }
    let d = wrap_fft_dim(dim, input)?;
    let points = n.unwrap_or(input.sizes()[d]);
    check_points(points)?;
    let input = match n {
        Some(n) => resize_fft_input(input, &[d], &[n])?,
        None => input.clone(),
    };
    let norm = norm_from_string(norm, forward)?;
    crate::_fft_c2c(&input, &[d as i64], norm, forward)
}

/// `fft_fft(Tensor self, SymInt? n=None, int dim=-1, str? norm=None) -> Tensor`.
pub fn fft_fft(self_: &Tensor, n: Option<i64>, dim: i64, norm: Option<&str>) -> Result<Tensor> {
    if self_.dtype().is_complex() {
        fft_c2c("fft", self_, n, dim, norm, true)
    } else {
        fft_r2c("fft", self_, n, dim, norm, true, false)
    }
}

/// `fft_ifft(Tensor self, SymInt? n=None, int dim=-1, str? norm=None) -> Tensor`.
pub fn fft_ifft(self_: &Tensor, n: Option<i64>, dim: i64, norm: Option<&str>) -> Result<Tensor> {
    if self_.dtype().is_complex() {
        fft_c2c("ifft", self_, n, dim, norm, false)
    } else {
        fft_r2c("ifft", self_, n, dim, norm, false, false)
    }
}

/// `fft_rfft(Tensor self, SymInt? n=None, int dim=-1, str? norm=None) -> Tensor`.
pub fn fft_rfft(self_: &Tensor, n: Option<i64>, dim: i64, norm: Option<&str>) -> Result<Tensor> {
    fft_r2c("rfft", self_, n, dim, norm, true, true)
}

/// `fft_irfft(Tensor self, SymInt? n=None, int dim=-1, str? norm=None) -> Tensor`: the real
/// signal of `n` points (default `2 * (size - 1)`) whose one-sided spectrum `self` is.
pub fn fft_irfft(self_: &Tensor, n: Option<i64>, dim: i64, norm: Option<&str>) -> Result<Tensor> {
    let input = promote_tensor_fft(self_, true)?;
    let d = wrap_fft_dim(dim, &input)?;
    let points = n.unwrap_or(2 * (input.sizes()[d] - 1));
    check_points(points)?;
    let input = match n {
        Some(n) => resize_fft_input(&input, &[d], &[n / 2 + 1])?,
        None => input,
    };
    let norm = norm_from_string(norm, false)?;
    crate::_fft_c2r(&input, &[d as i64], norm, points)
}

/// `canonicalize_fft_shape_and_dim_args`: the transformed dims and their signal sizes.
fn fft_shape_and_dims(
    input: &Tensor,
    s: Option<&[i64]>,
    dim: Option<&[i64]>,
) -> Result<(Vec<usize>, Vec<i64>)> {
    let sizes = input.sizes();
    let mut dims = Vec::new();
    if let Some(dim) = dim {
        for &d in dim {
            dims.push(wrap_fft_dim(d, input)?);
        }
        let mut sorted = dims.clone();
        sorted.sort_unstable();
        if sorted.windows(2).any(|w| w[0] == w[1]) {
            return Err(error("FFT dims must be unique"));
        }
    }
    let shape: Vec<i64> = match (s, dim) {
        (Some(s), _) => {
            if dim.is_some_and(|d| d.len() != s.len()) {
                return Err(error(
                    "When given, dim and shape arguments must have the same length",
                ));
            }
            if s.len() > input.dim() {
                return Err(error(format!(
                    "Got shape with {} values but input tensor only has {} dimensions.",
                    s.len(),
                    input.dim()
                )));
            }
            if dim.is_none() {
                dims = (input.dim() - s.len()..input.dim()).collect();
            }
            s.iter()
                .zip(&dims)
                .map(|(&n, &d)| if n == -1 { sizes[d] } else { n })
                .collect()
        }
        (None, None) => {
            dims = (0..input.dim()).collect();
            sizes.to_vec()
        }
        (None, Some(_)) => dims.iter().map(|&d| sizes[d]).collect(),
    };
    for &n in &shape {
        check_points(n)?;
    }
    Ok((dims, shape))
}

/// `fft_rfftn(Tensor self, SymInt[1]? s=None, int[1]? dim=None, str? norm=None) -> Tensor`.
pub fn fft_rfftn(
    self_: &Tensor,
    s: Option<&[i64]>,
    dim: Option<&[i64]>,
    norm: Option<&str>,
) -> Result<Tensor> {
    if self_.dtype().is_complex() {
        return Err(error(format!(
            "rfftn expects a real-valued input tensor, but got {}",
            self_.dtype().c10_name()
        )));
    }
    let (dims, shape) = fft_shape_and_dims(self_, s, dim)?;
    if shape.is_empty() {
        return Err(error("rfftn must transform at least one axis"));
    }
    let input = promote_tensor_fft(self_, false)?;
    let x = resize_fft_input(&input, &dims, &shape)?;
    let norm = norm_from_string(norm, true)?;
    crate::_fft_r2c(&x, &as_dims(&dims), norm, true)
}

/// `fft_irfftn(Tensor self, SymInt[1]? s=None, int[1]? dim=None, str? norm=None) -> Tensor`.
pub fn fft_irfftn(
    self_: &Tensor,
    s: Option<&[i64]>,
    dim: Option<&[i64]>,
    norm: Option<&str>,
) -> Result<Tensor> {
    let (dims, mut shape) = fft_shape_and_dims(self_, s, dim)?;
    let (Some(&last_dim), Some(last_shape)) = (dims.last(), shape.last_mut()) else {
        return Err(error("irfftn must transform at least one axis"));
    };
    // The output size of the Hermitian-symmetric last dim.
    let last_dim_size = match s {
        Some(s) if s.last() != Some(&-1) => *last_shape,
        _ => 2 * (self_.sizes()[last_dim] - 1),
    };
    check_points(last_dim_size)?;
    *last_shape = last_dim_size / 2 + 1;
    let input = promote_tensor_fft(self_, true)?;
    let x = resize_fft_input(&input, &dims, &shape)?;
    let norm = norm_from_string(norm, false)?;
    crate::_fft_c2r(&x, &as_dims(&dims), norm, last_dim_size)
}
