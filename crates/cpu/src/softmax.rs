//! Softmax and log-softmax along any dimension, with their backward kernels
//! (`_softmax`, `_log_softmax`, `_softmax_backward_data`, `_log_softmax_backward_data`).
//! Numerically stable: the maximum along the dimension is subtracted before `exp`. Floating
//! dtypes; Half and BFloat16 accumulate in f32.

use rayon::prelude::*;
use switchboard_tensor::RawOps;
use switchboard_tensor::{wrap_dim, ScalarType, Tensor};

use switchboard_ops::structured;

use crate::dispatch_dtype::{Float, FloatElement, Num};
use crate::dispatch_floating_types;
use crate::error::{check_cpu, invalid, Result};
use crate::loops::{in_parallel_region, parallel_region, with_avx2_fma, GRAIN_SIZE};
use crate::reduce::{lane_fold, lane_fold2};
use crate::structured_output::{compute_contiguous, structured_output};

// Note [Softmax layout]
// The input is made contiguous and seen as `(outer, dim, inner)`. When `inner == 1` (the
// softmax dimension is the last non-trivial one) every lane is a contiguous row, handled
// as a slice. Otherwise a block of up to `COLS` neighbouring lanes is processed together,
// walking the dimension in the outer loop and the lanes in the inner one, so that reads stay
// contiguous instead of jumping by `inner` for every element. Work units (rows or column
// blocks) run in parallel above `GRAIN_SIZE` elements. Rows reduce in lanes (Note [Lane
// folds]) and every exponential is PyTorch's vector one (Note [Vectorized erf and exp]), each
// unit compiled for AVX2 where the CPU has it, as PyTorch's `Vectorized` kernels are: a
// softmax over a row of 512 floats then costs what PyTorch's does instead of four times that.

/// Lanes processed together when the softmax dimension is not the innermost.
const COLS: usize = 64;

/// Which kernel.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Softmax,
    LogSoftmax,
}

impl Kind {
    /// PyTorch's dispatch name (for dtype errors).
    fn name(self, lastdim: bool) -> &'static str {
        match (self, lastdim) {
            (Kind::Softmax, true) => "softmax_lastdim_kernel_impl",
            (Kind::Softmax, false) => "softmax_kernel_impl",
            (Kind::LogSoftmax, true) => "log_softmax_lastdim_kernel_impl",
            (Kind::LogSoftmax, false) => "log_softmax_kernel_impl",
        }
    }
}

/// `(outer, dim, inner)` of a contiguous tensor for a softmax along `dim`.
fn split(sizes: &[i64], dim: usize) -> (usize, usize, usize) {
    if sizes.is_empty() {
        return (1, 1, 1);
    }
    let p = |s: &[i64]| s.iter().product::<i64>() as usize;
    (p(&sizes[..dim]), sizes[dim] as usize, p(&sizes[dim + 1..]))
}

/// Runs `f(unit, out_chunk)` over `out` split in chunks of `len`, in parallel when large.
fn par_units<T: Send>(out: &mut [T], len: usize, f: impl Fn(usize, &mut [T]) + Sync) {
    if len == 0 {
        return;
    }
    let parallel =
        out.len() > GRAIN_SIZE && !in_parallel_region() && rayon::current_num_threads() > 1;
    if parallel {
        let per = (GRAIN_SIZE / len).max(1);
        out.par_chunks_mut(len * per)
            .enumerate()
            .for_each(|(c, o)| {
                parallel_region(|| {
                    for (i, oo) in o.chunks_mut(len).enumerate() {
                        f(c * per + i, oo);
                    }
                })
            });
    } else {
        for (i, o) in out.chunks_mut(len).enumerate() {
            f(i, o);
        }
    }
}

/// One row of the last-dimension forward. The exponentials are PyTorch's vector ones
/// (`exp_vectorized`), computed twice for softmax rather than kept in a buffer.
#[inline(always)]
fn forward_row<T: FloatElement>(x: &[T], o: &mut [T], kind: Kind) {
    let zero = <T::F as Num>::ZERO;
    let m = lane_fold(
        x,
        <T::F as Num>::LOWEST,
        |m, v: T| m.max_nan(v.to_acc()),
        |a, b| a.max_nan(b),
    );
    let shifted_exp = |v: T| v.to_acc().sub(m).exp_vectorized();
    let sum = lane_fold(x, zero, |s, v| s.add(shifted_exp(v)), |a, b| a.add(b));
    match kind {
        Kind::Softmax => {
            let inv = <T::F as Num>::ONE.div(sum);
            for (o, &v) in o.iter_mut().zip(x) {
                *o = T::from_acc(shifted_exp(v).mul(inv));
            }
        }
        Kind::LogSoftmax => {
            // (x - max) is exact; subtracting max + ln(sum) at once would round.
            let lse = sum.ln();
            for (o, &v) in o.iter_mut().zip(x) {
                *o = T::from_acc(v.to_acc().sub(m).sub(lse));
            }
        }
    }
}

/// One block of `d x inner` elements of the forward along a non-last dimension, `COLS` lanes
/// at a time.
#[inline(always)]
fn forward_block<T: FloatElement>(xb: &[T], o: &mut [T], d: usize, inner: usize, kind: Kind) {
    let zero = <T::F as Num>::ZERO;
    let mut m = [<T::F as Num>::LOWEST; COLS];
    let mut s = [zero; COLS];
    for j0 in (0..inner).step_by(COLS) {
        let w = COLS.min(inner - j0);
        m[..w].fill(<T::F as Num>::LOWEST);
        s[..w].fill(zero);
        for k in 0..d {
            let row = &xb[k * inner + j0..][..w];
            for (mm, v) in m.iter_mut().zip(row) {
                *mm = mm.max_nan(v.to_acc());
            }
        }
        for k in 0..d {
            let row = &xb[k * inner + j0..][..w];
            for ((ss, mm), v) in s.iter_mut().zip(&m).zip(row) {
                *ss = ss.add(v.to_acc().sub(*mm).exp_vectorized());
            }
        }
        for k in 0..d {
            let row = &xb[k * inner + j0..][..w];
            let orow = &mut o[k * inner + j0..][..w];
            for (i, (ov, v)) in orow.iter_mut().zip(row).enumerate() {
                let y = v.to_acc().sub(m[i]);
                *ov = T::from_acc(match kind {
                    Kind::Softmax => y.exp_vectorized().div(s[i]),
                    Kind::LogSoftmax => y.sub(s[i].ln()),
                });
            }
        }
    }
}

/// Forward over a contiguous `(outer, d, inner)` input, each unit compiled for the CPU's
/// vector instructions where it has them (`with_avx2_fma`).
fn forward<T: FloatElement>(
    x: &[T],
    out: &mut [T],
    (_, d, inner): (usize, usize, usize),
    kind: Kind,
) {
    if inner == 1 {
        par_units(out, d, |r, o| {
            with_avx2_fma(
                #[inline(always)]
                || forward_row(&x[r * d..][..d], o, kind),
            )
        });
        return;
    }
    par_units(out, d * inner, |ob, o| {
        let xb = &x[ob * d * inner..][..d * inner];
        with_avx2_fma(
            #[inline(always)]
            || forward_block(xb, o, d, inner, kind),
        )
    });
}

/// One row of the last-dimension backward.
#[inline(always)]
fn backward_row<T: FloatElement>(g: &[T], y: &[T], o: &mut [T], kind: Kind) {
    let zero = <T::F as Num>::ZERO;
    let add = |a: T::F, b: T::F| a.add(b);
    match kind {
        Kind::Softmax => {
            let s = lane_fold2(
                g,
                y,
                zero,
                |s, gv: T, yv: T| s.add(gv.to_acc().mul(yv.to_acc())),
                add,
            );
            for ((ov, &gv), &yv) in o.iter_mut().zip(g).zip(y) {
                *ov = T::from_acc(yv.to_acc().mul(gv.to_acc().sub(s)));
            }
        }
        Kind::LogSoftmax => {
            let s = lane_fold(g, zero, |s, gv: T| s.add(gv.to_acc()), add);
            for ((ov, &gv), &yv) in o.iter_mut().zip(g).zip(y) {
                *ov = T::from_acc(gv.to_acc().sub(yv.to_acc().exp_vectorized().mul(s)));
            }
        }
    }
}

/// One block of `d x inner` elements of the backward along a non-last dimension.
#[inline(always)]
fn backward_block<T: FloatElement>(
    gb: &[T],
    yb: &[T],
    o: &mut [T],
    d: usize,
    inner: usize,
    kind: Kind,
) {
    let zero = <T::F as Num>::ZERO;
    let mut s = [zero; COLS];
    for j0 in (0..inner).step_by(COLS) {
        let w = COLS.min(inner - j0);
        s[..w].fill(zero);
        for k in 0..d {
            let (gr, yr) = (&gb[k * inner + j0..][..w], &yb[k * inner + j0..][..w]);
            for ((ss, &gv), &yv) in s.iter_mut().zip(gr).zip(yr) {
                *ss = ss.add(match kind {
                    Kind::Softmax => gv.to_acc().mul(yv.to_acc()),
                    Kind::LogSoftmax => gv.to_acc(),
                });
            }
        }
        for k in 0..d {
            let (gr, yr) = (&gb[k * inner + j0..][..w], &yb[k * inner + j0..][..w]);
            let orow = &mut o[k * inner + j0..][..w];
            for (i, ov) in orow.iter_mut().enumerate() {
                let (gv, yv) = (gr[i].to_acc(), yr[i].to_acc());
                *ov = T::from_acc(match kind {
                    Kind::Softmax => yv.mul(gv.sub(s[i])),
                    Kind::LogSoftmax => gv.sub(yv.exp_vectorized().mul(s[i])),
                });
            }
        }
    }
}

/// Backward over contiguous `(outer, d, inner)` grad and output: softmax
/// `gi = y * (g - sum(g * y))`, log-softmax `gi = g - exp(y) * sum(g)`.
fn backward<T: FloatElement>(
    g: &[T],
    y: &[T],
    out: &mut [T],
    (_, d, inner): (usize, usize, usize),
    kind: Kind,
) {
    if inner == 1 {
        par_units(out, d, |r, o| {
            let (gr, yr) = (&g[r * d..][..d], &y[r * d..][..d]);
            with_avx2_fma(
                #[inline(always)]
                || backward_row(gr, yr, o, kind),
            )
        });
        return;
    }
    par_units(out, d * inner, |ob, o| {
        let base = ob * d * inner;
        let (gb, yb) = (&g[base..][..d * inner], &y[base..][..d * inner]);
        with_avx2_fma(
            #[inline(always)]
            || backward_block(gb, yb, o, d, inner, kind),
        )
    });
}

/// The shared forward after the meta function: the kernel into `result` (fresh, or `out`
/// resized). `half_to_float` is refused on the CPU as in PyTorch.
fn softmax_impl(
    self_: &Tensor,
    dim: i64,
    half_to_float: bool,
    kind: Kind,
    out: Option<&Tensor>,
) -> Result<Tensor> {
    let meta = match kind {
        Kind::Softmax => structured::_softmax(self_, dim, half_to_float, out)?,
        Kind::LogSoftmax => structured::_log_softmax(self_, dim, half_to_float, out)?,
    };
    check_cpu("softmax", meta.device)?;
    let result = structured_output(meta, out)?;
    if half_to_float {
        return Err(invalid(
            "softmax with half to float conversion is not supported on CPU",
        ));
    }
    let d = wrap_dim(dim, self_.dim())?;
    let lastdim = self_.dim() == 0 || d == self_.dim() - 1;
    if !self_.dtype().is_floating_point() {
        return Err(crate::error::not_implemented(
            kind.name(lastdim),
            self_.dtype(),
        ));
    }
    if self_.numel() == 0 {
        return Ok(result);
    }
    let x = self_.contiguous()?;
    let shape = split(x.sizes(), d);
    compute_contiguous(&result, &[self_], |dense| {
        dispatch_floating_types!(self_.dtype(), kind.name(lastdim), T => {
            let xs = x.data::<T>()?;
            let mut os = dense.data_mut::<T>()?;
            forward::<T>(&xs, &mut os, shape, kind);
            Ok(())
        })
    })?;
    Ok(result)
}

/// `_softmax(Tensor self, int dim, bool half_to_float) -> Tensor`: `exp(x - max) / sum`
/// along `dim` (the output is contiguous). `half_to_float` is rejected on the CPU as in
/// PyTorch (on meta tensors it gives a Float output).
///
/// ```
/// use switchboard_tensor::Tensor;
/// let x = Tensor::from_vec(vec![0.0f64, 0.0, 1000.0, 1000.0], &[2, 2]).unwrap();
/// let y = switchboard_cpu::_softmax(&x, 1, false).unwrap();
/// assert_eq!(y.to_vec::<f64>().unwrap(), [0.5; 4]);
/// ```
pub fn _softmax(self_: &Tensor, dim: i64, half_to_float: bool) -> Result<Tensor> {
    softmax_impl(self_, dim, half_to_float, Kind::Softmax, None)
}

/// `_softmax.out(Tensor self, int dim, bool half_to_float, *, Tensor(a!) out)`.
pub fn _softmax_out(self_: &Tensor, dim: i64, half_to_float: bool, out: &Tensor) -> Result<Tensor> {
    softmax_impl(self_, dim, half_to_float, Kind::Softmax, Some(out))
}

/// `_log_softmax(Tensor self, int dim, bool half_to_float) -> Tensor`: `x - max -
/// log(sum(exp(x - max)))` along `dim`.
pub fn _log_softmax(self_: &Tensor, dim: i64, half_to_float: bool) -> Result<Tensor> {
    softmax_impl(self_, dim, half_to_float, Kind::LogSoftmax, None)
}

/// `_log_softmax.out(Tensor self, int dim, bool half_to_float, *, Tensor(a!) out)`.
pub fn _log_softmax_out(
    self_: &Tensor,
    dim: i64,
    half_to_float: bool,
    out: &Tensor,
) -> Result<Tensor> {
    softmax_impl(self_, dim, half_to_float, Kind::LogSoftmax, Some(out))
}

/// The shared backward after the meta function (PyTorch's `TORCH_META_FUNC(_softmax_backward_data)`),
/// into `grad_input` when given.
fn backward_impl(
    grad_output: &Tensor,
    output: &Tensor,
    dim: i64,
    input_dtype: ScalarType,
    kind: Kind,
    grad_input: Option<&Tensor>,
) -> Result<Tensor> {
    let meta = match kind {
        Kind::Softmax => {
            structured::_softmax_backward_data(grad_output, output, dim, input_dtype, grad_input)?
        }
        Kind::LogSoftmax => structured::_log_softmax_backward_data(
            grad_output,
            output,
            dim,
            input_dtype,
            grad_input,
        )?,
    };
    check_cpu("softmax_backward", meta.device)?;
    let result = structured_output(meta, grad_input)?;
    let d = wrap_dim(dim, grad_output.dim())?;
    let lastdim = grad_output.dim() == 0 || d == grad_output.dim() - 1;
    let name = match (kind, lastdim) {
        (Kind::Softmax, true) => "softmax_backward_lastdim_kernel_impl",
        (Kind::Softmax, false) => "softmax_backward_kernel_impl",
        (Kind::LogSoftmax, true) => "log_softmax_backward_lastdim_kernel_impl",
        (Kind::LogSoftmax, false) => "log_softmax_backward_kernel_impl",
    };
    if !grad_output.dtype().is_floating_point() {
        return Err(crate::error::not_implemented(name, grad_output.dtype()));
    }
    // The kernel reads `output` and writes the result in `grad_output`'s dtype: PyTorch's
    // `data_ptr<scalar_t>` checks (a Float grad with a Half `input_dtype` gives a Half
    // result, which its CPU kernel refuses to write; an empty result is not written).
    let mismatch = |found: ScalarType| {
        invalid(format!(
            "expected scalar type {} but found {}",
            grad_output.dtype().c10_name(),
            found.c10_name()
        ))
    };
    if output.dtype() != grad_output.dtype() {
        return Err(mismatch(output.dtype()));
    }
    if result.dtype() != grad_output.dtype() && result.numel() > 0 {
        return Err(mismatch(result.dtype()));
    }
    if result.numel() == 0 {
        return Ok(result);
    }
    let (g, y) = (grad_output.contiguous()?, output.contiguous()?);
    let shape = split(g.sizes(), d);
    compute_contiguous(&result, &[grad_output, output], |dense| {
        dispatch_floating_types!(g.dtype(), name, T => {
            let (gs, ys) = (g.data::<T>()?, y.data::<T>()?);
            let mut os = dense.data_mut::<T>()?;
            backward::<T>(&gs, &ys, &mut os, shape, kind);
            Ok(())
        })
    })?;
    Ok(result)
}

/// `_softmax_backward_data(Tensor grad_output, Tensor output, int dim, ScalarType
/// input_dtype) -> Tensor`: `output * (grad_output - sum(grad_output * output, dim))`.
pub fn _softmax_backward_data(
    grad_output: &Tensor,
    output: &Tensor,
    dim: i64,
    input_dtype: ScalarType,
) -> Result<Tensor> {
    backward_impl(grad_output, output, dim, input_dtype, Kind::Softmax, None)
}

/// `_softmax_backward_data.out(..., *, Tensor(a!) grad_input)`.
pub fn _softmax_backward_data_out(
    grad_output: &Tensor,
    output: &Tensor,
    dim: i64,
    input_dtype: ScalarType,
    grad_input: &Tensor,
) -> Result<Tensor> {
    backward_impl(
        grad_output,
        output,
        dim,
        input_dtype,
        Kind::Softmax,
        Some(grad_input),
    )
}

/// `_log_softmax_backward_data(Tensor grad_output, Tensor output, int dim, ScalarType
/// input_dtype) -> Tensor`: `grad_output - exp(output) * sum(grad_output, dim)`.
pub fn _log_softmax_backward_data(
    grad_output: &Tensor,
    output: &Tensor,
    dim: i64,
    input_dtype: ScalarType,
) -> Result<Tensor> {
    backward_impl(
        grad_output,
        output,
        dim,
        input_dtype,
        Kind::LogSoftmax,
        None,
    )
}

/// `_log_softmax_backward_data.out(..., *, Tensor(a!) out)`.
pub fn _log_softmax_backward_data_out(
    grad_output: &Tensor,
    output: &Tensor,
    dim: i64,
    input_dtype: ScalarType,
    out: &Tensor,
) -> Result<Tensor> {
    backward_impl(
        grad_output,
        output,
        dim,
        input_dtype,
        Kind::LogSoftmax,
        Some(out),
    )
}

#[cfg(test)]
#[path = "softmax_tests.rs"]
mod tests;
