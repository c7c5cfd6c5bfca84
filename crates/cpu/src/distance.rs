//! p-norm distances: `_cdist_forward` / `_cdist_backward` (between the rows of two batches of
//! matrices) and `_pdist_forward` / `_pdist_backward` (between the rows of one matrix, upper
//! triangle), PyTorch's `Distance.cpp` and `DistanceOpsKernel.cpp`.
//!
//! Note [Distance norms]
//! As PyTorch's kernels, for `d = x - y` over the columns: p = 0 counts the nonzero `d`,
//! p = 1 sums `|d|`, p = 2 is `sqrt(sum d^2)`, p = inf takes `max |d|`, and any other p is
//! `(sum |d|^p)^(1/p)`, accumulated in the input's dtype (float32 or float64; PyTorch has no
//! other dtype for them). `_cdist_forward` with p = 2 and `compute_mode` 1, or mode 0 with more
//! than 25 rows on either side, computes PyTorch's `_euclidean_dist` instead, the
//! matrix-product form `sqrt(max(|x|^2 - 2 x.y + |y|^2, 0))`, whose rounding differs from the
//! direct form's in the last bits, as in PyTorch. The gradients (Note [Distance gradients]) are
//! PyTorch's per-norm formulas, zero where the distance is zero.

use switchboard_tensor::{bf16, f16, infer_size, Element, ScalarType, Tensor};

use crate::error::{check_cpu_or_meta, invalid, not_implemented, Result};

/// The float operations the distance kernels use (float32 and float64 only, as PyTorch's
/// `AT_DISPATCH_FLOATING_TYPES`).
trait DistFloat:
    Element
    + Copy
    + PartialOrd
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
{
    fn of(v: f64) -> Self;
    fn abs(self) -> Self;
    fn powf(self, e: Self) -> Self;
    fn sqrt(self) -> Self;
    fn signum0(self) -> Self;
    fn is_nan(self) -> bool;
}

macro_rules! dist_float {
    ($t:ty) => {
        impl DistFloat for $t {
            fn of(v: f64) -> Self {
                v as $t
            }
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            fn powf(self, e: Self) -> Self {
                <$t>::powf(self, e)
            }
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            /// `sign(x)`: -1, 0 or 1 (0 for 0, as PyTorch's `(0 < x) - (x < 0)`).
            fn signum0(self) -> Self {
                ((0.0 < self) as i32 - (self < 0.0) as i32) as $t
            }
        }
    };
}
dist_float!(f32);
dist_float!(f64);

/// Which of PyTorch's norm kernels a `p` selects.
#[derive(Clone, Copy)]
enum Norm {
    Zero,
    One,
    Two,
    Inf,
    General(f64),
}

impl Norm {
    fn of(p: f64) -> Norm {
        if p == 0.0 {
            Norm::Zero
        } else if p == 1.0 {
            Norm::One
        } else if p == 2.0 {
            Norm::Two
        } else if p.is_infinite() {
            Norm::Inf
        } else {
            Norm::General(p)
        }
    }

    /// The distance between rows `a` and `b`.
    fn distance<T: DistFloat>(self, a: &[T], b: &[T]) -> T {
        let zero = T::of(0.0);
        let diffs = a.iter().zip(b).map(|(&x, &y)| (x - y).abs());
        match self {
            Norm::Zero => diffs.fold(zero, |s, d| s + T::of(f64::from(u8::from(d != zero)))),
            Norm::One => diffs.fold(zero, |s, d| s + d),
            Norm::Two => diffs.fold(zero, |s, d| s + d * d).sqrt(),
            Norm::Inf => diffs.fold(zero, |s, d| if d > s || d.is_nan() { d } else { s }),
            Norm::General(p) => diffs
                .fold(zero, |s, d| s + d.powf(T::of(p)))
                .powf(T::of(1.0 / p)),
        }
    }

    /// Note [Distance gradients]
    /// `d/dx dist(x, y)` for one column, `diff = x - y`, times `grad`: 0 for p = 0; `sign(diff)`
    /// for p = 1; `diff / dist` for p = 2; `sign(diff) * (|diff| == dist)` for p = inf; for
    /// p < 2, `sign(diff) * |diff|^(p-1) / dist^(p-1)` (0 where `diff` is 0 and p < 1); else
    /// `diff * |diff|^(p-2) / dist^(p-1)`. Zero wherever the distance is zero.
    fn gradient<T: DistFloat>(self, diff: T, grad: T, dist: T) -> T {
        let zero = T::of(0.0);
        match self {
            Norm::Zero => zero,
            Norm::One => grad * diff.signum0(),
            Norm::Two if dist == zero => zero,
            Norm::Two => grad * diff / dist,
            Norm::Inf => grad * diff.signum0() * T::of(f64::from(u8::from(diff.abs() == dist))),
            Norm::General(p) if p < 2.0 => {
                if dist == zero || (diff == zero && p < 1.0) {
                    zero
                } else {
                    diff.signum0() * diff.abs().powf(T::of(p - 1.0)) * grad
                        / dist.powf(T::of(p - 1.0))
                }
            }
            Norm::General(_) if dist == zero => zero,
            Norm::General(p) => {
                diff * diff.abs().powf(T::of(p - 2.0)) * grad / dist.powf(T::of(p - 1.0))
            }
        }
    }
}

/// The float dtypes PyTorch's distance kernels dispatch (`AT_DISPATCH_FLOATING_TYPES`).
fn check_kernel_dtype(name: &str, dtype: ScalarType) -> Result<()> {
    match dtype {
        ScalarType::Float | ScalarType::Double => Ok(()),
        d => Err(not_implemented(name, d)),
    }
}

/// A tensor's elements in row-major order, converted to `T`.
fn values<T: Element>(t: &Tensor) -> Result<Vec<T>> {
    t.to_vec_as::<T>()
}

/// The geometry `cdist` works on: the broadcast batch sizes, rows of each side, columns.
struct CdistShape {
    batch: Vec<i64>,
    r1: i64,
    r2: i64,
    c: i64,
}

impl CdistShape {
    fn of(x1: &Tensor, x2: &Tensor) -> Result<CdistShape> {
        if x1.dim() < 2 {
            return Err(invalid(format!(
                "cdist only supports at least 2D tensors, X1 got: {}D",
                x1.dim()
            )));
        }
        if x2.dim() < 2 {
            return Err(invalid(format!(
                "cdist only supports at least 2D tensors, X2 got: {}D",
                x2.dim()
            )));
        }
        let (s1, s2) = (x1.sizes(), x2.sizes());
        let (c1, c2) = (s1[s1.len() - 1], s2[s2.len() - 1]);
        if c1 != c2 {
            return Err(invalid(format!(
                "X1 and X2 must have the same number of columns. X1: {c1} X2: {c2}"
            )));
        }
        let batch = infer_size(&s1[..s1.len() - 2], &s2[..s2.len() - 2])?.to_vec();
        Ok(CdistShape {
            batch,
            r1: s1[s1.len() - 2],
            r2: s2[s2.len() - 2],
            c: c1,
        })
    }

    fn batch_product(&self) -> i64 {
        self.batch.iter().product()
    }

    /// `sizes` with the broadcast batch in front of `rows x cols`.
    fn with(&self, rows: i64, cols: i64) -> Vec<i64> {
        let mut v = self.batch.clone();
        v.extend([rows, cols]);
        v
    }
}

/// `x` expanded to the broadcast batch, its elements row-major.
fn expanded<T: Element>(x: &Tensor, sizes: &[i64]) -> Result<Vec<T>> {
    values(&x.broadcast_to(sizes)?)
}

/// `_cdist_forward(Tensor x1, Tensor x2, float p, int? compute_mode) -> Tensor`
///
/// The p-norm distance between every row of `x1` (`[*, r1, c]`) and every row of `x2`
/// (`[*, r2, c]`), the batch dimensions broadcast: `[*, r1, r2]` (Note [Distance norms]).
pub fn _cdist_forward(
    x1: &Tensor,
    x2: &Tensor,
    p: f64,
    compute_mode: Option<i64>,
) -> Result<Tensor> {
    let shape = CdistShape::of(x1, x2)?;
    for (name, x) in [("X1", x1), ("X2", x2)] {
        if !x.dtype().is_floating_point() {
            return Err(invalid(format!(
                "cdist only supports floating-point dtypes, {name} got: {}",
                x.dtype().c10_name()
            )));
        }
    }
    if p.is_nan() || p < 0.0 {
        return Err(invalid("cdist only supports non-negative p values"));
    }
    if x1.device().ty != x2.device().ty {
        return Err(invalid(format!(
            "X1 and X2 must have the same device type. X1: {} X2: {}",
            x1.device().ty,
            x2.device().ty
        )));
    }
    let mode = compute_mode.unwrap_or(0);
    if !(0..=2).contains(&mode) {
        return Err(invalid(format!("possible modes: 0, 1, 2, but was: {mode}")));
    }
    check_cpu_or_meta("_cdist_forward", x1.device())?;
    let out_shape = shape.with(shape.r1, shape.r2);
    let euclidean = p == 2.0 && (mode == 1 || (mode == 0 && (shape.r1 > 25 || shape.r2 > 25)));
    let trivial = shape.r1 == 0 || shape.r2 == 0 || shape.batch_product() == 0;
    if !trivial && !euclidean && shape.c != 0 {
        check_kernel_dtype("cdist", x1.dtype())?;
    }
    if x1.dtype() != x2.dtype() {
        return Err(invalid(format!(
            "expected scalar type {} but found {}",
            x1.dtype().c10_name(),
            x2.dtype().c10_name()
        )));
    }
    if !x1.has_data() || trivial {
        return Tensor::empty_on(&out_shape, x1.dtype(), x1.device());
    }
    match x1.dtype() {
        ScalarType::Float => cdist_values::<f32>(x1, x2, &shape, Norm::of(p), euclidean),
        ScalarType::Double => cdist_values::<f64>(x1, x2, &shape, Norm::of(p), euclidean),
        // Only the Euclidean form gets here with a reduced float (PyTorch's matrix products
        // take them): computed in float32, rounded once.
        ScalarType::Half => reduced::<f16>(&cdist_values::<f32>(x1, x2, &shape, Norm::Two, true)?),
        ScalarType::BFloat16 => {
            reduced::<bf16>(&cdist_values::<f32>(x1, x2, &shape, Norm::Two, true)?)
        }
        d => Err(not_implemented("cdist", d)),
    }
}

/// A float32 result rounded to the reduced float `T`.
fn reduced<T: Element>(t: &Tensor) -> Result<Tensor> {
    let v: Vec<T> = t.to_vec_as::<T>()?;
    Tensor::from_vec(v, t.sizes())
}

fn cdist_values<T: DistFloat>(
    x1: &Tensor,
    x2: &Tensor,
    shape: &CdistShape,
    norm: Norm,
    euclidean: bool,
) -> Result<Tensor> {
    let (r1, r2, c) = (shape.r1 as usize, shape.r2 as usize, shape.c as usize);
    let a = expanded::<T>(x1, &shape.with(shape.r1, shape.c))?;
    let b = expanded::<T>(x2, &shape.with(shape.r2, shape.c))?;
    let batches = shape.batch_product() as usize;
    let mut out = Vec::with_capacity(batches * r1 * r2);
    for n in 0..batches {
        let a = &a[n * r1 * c..(n + 1) * r1 * c];
        let b = &b[n * r2 * c..(n + 1) * r2 * c];
        for i in 0..r1 {
            let row = &a[i * c..(i + 1) * c];
            for j in 0..r2 {
                let other = &b[j * c..(j + 1) * c];
                out.push(if c == 0 {
                    T::of(0.0)
                } else if euclidean {
                    euclidean_distance(row, other)
                } else {
                    norm.distance(row, other)
                });
            }
        }
    }
    Tensor::from_vec(out, &shape.with(shape.r1, shape.r2))
}

/// PyTorch's `_euclidean_dist` for one pair: `|x|^2 - 2 x.y + |y|^2`, clamped at 0,
/// square-rooted (Note [Distance norms]).
fn euclidean_distance<T: DistFloat>(x: &[T], y: &[T]) -> T {
    let zero = T::of(0.0);
    let xx = x.iter().fold(zero, |s, &v| s + v * v);
    let yy = y.iter().fold(zero, |s, &v| s + v * v);
    let xy = x
        .iter()
        .zip(y)
        .fold(zero, |s, (&u, &v)| s + T::of(-2.0) * u * v);
    let d = xy + xx + yy;
    let floor = T::of(0.0);
    (if d > floor || d.is_nan() { d } else { floor }).sqrt()
}

/// `_cdist_backward(Tensor grad, Tensor x1, Tensor x2, float p, Tensor cdist) -> Tensor`
///
/// The gradient of `_cdist_forward` for `x1` (Note [Distance gradients]), in the broadcast
/// batch shape `[*, r1, c]` (autograd sums it down to `x1`'s shape); zeros for empty inputs.
pub fn _cdist_backward(
    grad: &Tensor,
    x1: &Tensor,
    x2: &Tensor,
    p: f64,
    cdist: &Tensor,
) -> Result<Tensor> {
    let shape = CdistShape::of(x1, x2)?;
    check_cpu_or_meta("_cdist_backward", x1.device())?;
    if shape.r1 == 0 || shape.r2 == 0 || shape.c == 0 || shape.batch_product() == 0 {
        return Tensor::zeros_on(x1.sizes(), x1.dtype(), x1.device());
    }
    let out_shape = shape.with(shape.r1, shape.c);
    check_kernel_dtype("cdist_backward", x1.dtype())?;
    let dist_shape = shape.with(shape.r1, shape.r2);
    for (name, t) in [("grad", grad), ("cdist", cdist)] {
        if t.sizes() != dist_shape.as_slice() {
            return Err(invalid(format!(
                "_cdist_backward: {name} has sizes {:?}, expected {dist_shape:?}",
                t.sizes()
            )));
        }
    }
    if !x1.has_data() {
        return Tensor::empty_on(&out_shape, x1.dtype(), x1.device());
    }
    match x1.dtype() {
        ScalarType::Float => cdist_grad::<f32>(grad, x1, x2, cdist, &shape, Norm::of(p)),
        _ => cdist_grad::<f64>(grad, x1, x2, cdist, &shape, Norm::of(p)),
    }
}

fn cdist_grad<T: DistFloat>(
    grad: &Tensor,
    x1: &Tensor,
    x2: &Tensor,
    cdist: &Tensor,
    shape: &CdistShape,
    norm: Norm,
) -> Result<Tensor> {
    let (r1, r2, c) = (shape.r1 as usize, shape.r2 as usize, shape.c as usize);
    let a = expanded::<T>(x1, &shape.with(shape.r1, shape.c))?;
    let b = expanded::<T>(x2, &shape.with(shape.r2, shape.c))?;
    let g = values::<T>(grad)?;
    let dist = values::<T>(cdist)?;
    let batches = shape.batch_product() as usize;
    let mut out = vec![T::of(0.0); batches * r1 * c];
    for n in 0..batches {
        for i in 0..r1 {
            let row = &a[(n * r1 + i) * c..(n * r1 + i + 1) * c];
            let acc = &mut out[(n * r1 + i) * c..(n * r1 + i + 1) * c];
            for j in 0..r2 {
                let other = &b[(n * r2 + j) * c..(n * r2 + j + 1) * c];
                let k = (n * r1 + i) * r2 + j;
                for col in 0..c {
                    acc[col] = acc[col] + norm.gradient(row[col] - other[col], g[k], dist[k]);
                }
            }
        }
    }
    Tensor::from_vec(out, &shape.with(shape.r1, shape.c))
}

/// `_pdist_forward(Tensor self, float p=2) -> Tensor`
///
/// The p-norm distance between every pair of rows `i < j` of the contiguous matrix `self`,
/// in row-major order of the pairs: `n * (n - 1) / 2` values (Note [Distance norms]).
pub fn _pdist_forward(self_: &Tensor, p: f64) -> Result<Tensor> {
    if !self_.is_contiguous() {
        return Err(invalid("_pdist_forward requires contiguous input"));
    }
    check_cpu_or_meta("_pdist_forward", self_.device())?;
    let sizes = self_.sizes();
    let n = sizes.first().copied().unwrap_or(1);
    if n <= 1 {
        return Tensor::empty_on(&[0], self_.dtype(), self_.device());
    }
    if self_.dim() < 2 {
        return Err(invalid(
            "Dimension out of range (expected to be in range of [-1, 0], but got 1)",
        ));
    }
    let pairs = n
        .checked_mul(n - 1)
        .map(|v| v / 2)
        .ok_or_else(|| invalid(format!("_pdist_forward: {n} rows make too many pairs")))?;
    let cols = sizes[1];
    if cols != 0 {
        check_kernel_dtype("pdist", self_.dtype())?;
    }
    if !self_.has_data() {
        return Tensor::empty_on(&[pairs], self_.dtype(), self_.device());
    }
    if cols == 0 {
        return Tensor::zeros_on(&[pairs], self_.dtype(), self_.device());
    }
    match self_.dtype() {
        ScalarType::Float => pdist_values::<f32>(self_, Norm::of(p), pairs),
        _ => pdist_values::<f64>(self_, Norm::of(p), pairs),
    }
}

/// Calls `f(k, i, j)` for the pairs `i < j` of `n` rows, `k` counting them in order.
fn for_each_pair(n: usize, mut f: impl FnMut(usize, usize, usize)) {
    let mut k = 0;
    for i in 0..n {
        for j in i + 1..n {
            f(k, i, j);
            k += 1;
        }
    }
}

fn pdist_values<T: DistFloat>(self_: &Tensor, norm: Norm, pairs: i64) -> Result<Tensor> {
    let (n, c) = (self_.sizes()[0] as usize, self_.sizes()[1] as usize);
    let x = values::<T>(self_)?;
    let mut out = Vec::with_capacity(pairs as usize);
    for_each_pair(n, |_, i, j| {
        out.push(norm.distance(&x[i * c..(i + 1) * c], &x[j * c..(j + 1) * c]));
    });
    Tensor::from_vec(out, &[pairs])
}

/// `_pdist_backward(Tensor grad, Tensor self, float p, Tensor pdist) -> Tensor`
///
/// The gradient of `_pdist_forward` for `self` (Note [Distance gradients]): each pair's term
/// added to row `i` and subtracted from row `j`.
pub fn _pdist_backward(grad: &Tensor, self_: &Tensor, p: f64, pdist: &Tensor) -> Result<Tensor> {
    if !self_.is_contiguous() {
        return Err(invalid("_pdist_backward requires self to be contiguous"));
    }
    if !pdist.is_contiguous() {
        return Err(invalid("_pdist_backward requires pdist to be contiguous"));
    }
    check_cpu_or_meta("_pdist_backward", self_.device())?;
    if self_.dim() != 2 {
        return Err(invalid(format!(
            "_pdist_backward: self must be a matrix, got {}D",
            self_.dim()
        )));
    }
    let (n, c) = (self_.sizes()[0], self_.sizes()[1]);
    let pairs = if n <= 1 { 0 } else { n * (n - 1) / 2 };
    for (name, t) in [("grad", grad), ("pdist", pdist)] {
        if t.numel() != pairs {
            return Err(invalid(format!(
                "_pdist_backward: {name} has {} elements, expected {pairs}",
                t.numel()
            )));
        }
    }
    if !self_.has_data() {
        return Tensor::empty_on(self_.sizes(), self_.dtype(), self_.device());
    }
    if pairs == 0 || c == 0 {
        return Tensor::zeros_on(self_.sizes(), self_.dtype(), self_.device());
    }
    check_kernel_dtype("pdist_backward", self_.dtype())?;
    match self_.dtype() {
        ScalarType::Float => pdist_grad::<f32>(grad, self_, Norm::of(p), pdist),
        _ => pdist_grad::<f64>(grad, self_, Norm::of(p), pdist),
    }
}

fn pdist_grad<T: DistFloat>(
    grad: &Tensor,
    self_: &Tensor,
    norm: Norm,
    pdist: &Tensor,
) -> Result<Tensor> {
    let (n, c) = (self_.sizes()[0] as usize, self_.sizes()[1] as usize);
    let x = values::<T>(self_)?;
    let g = values::<T>(grad)?;
    let dist = values::<T>(pdist)?;
    let mut out = vec![T::of(0.0); n * c];
    for_each_pair(n, |k, i, j| {
        for col in 0..c {
            let term = norm.gradient(x[i * c + col] - x[j * c + col], g[k], dist[k]);
            out[i * c + col] = out[i * c + col] + term;
            out[j * c + col] = out[j * c + col] - term;
        }
    });
    Tensor::from_vec(out, self_.sizes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(v: &[f64], s: &[i64]) -> Tensor {
        Tensor::from_vec(v.to_vec(), s).unwrap()
    }

    fn close(got: &Tensor, want: &[f64]) {
        let got = got.to_vec::<f64>().unwrap();
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert!(
                (g - w).abs() <= 1e-12 * w.abs().max(1.0),
                "{got:?} vs {want:?}"
            );
        }
    }

    // Values recorded from torch 2.15 (torch.ops.aten._cdist_forward / _cdist_backward /
    // _pdist_forward / _pdist_backward, float64).
    fn x1() -> Tensor {
        t(&[0., 1., 2., 3., -1., 0.5], &[2, 3])
    }
    fn x2() -> Tensor {
        t(&[1., 1., 1., 0., 1., 2., -2., 0., 4.], &[3, 3])
    }

    #[test]
    fn cdist_norms_are_pytorchs() {
        let cases: [(f64, [f64; 6]); 5] = [
            (0.0, [2., 0., 3., 3., 3., 3.]),
            (1.0, [2., 0., 5., 4.5, 6.5, 9.5]),
            (
                2.0,
                [
                    2f64.sqrt(),
                    0.,
                    3.,
                    2.8722813232690143,
                    3.905124837953327,
                    6.18465843842649,
                ],
            ),
            (
                3.0,
                [
                    1.2599210498948732,
                    0.,
                    2.571281590658235,
                    2.5263871736042804,
                    3.372998355852712,
                    5.527411367307018,
                ],
            ),
            (f64::INFINITY, [1., 0., 2., 2., 3., 5.]),
        ];
        for (p, want) in cases {
            close(&_cdist_forward(&x1(), &x2(), p, None).unwrap(), &want);
        }
        let euclidean = _cdist_forward(&x1(), &x2(), 2.0, Some(1)).unwrap();
        close(&euclidean, &cases[2].1);
    }

    #[test]
    fn cdist_gradients_are_pytorchs() {
        let g = t(&[1., 2., 3., 4., 5., 6.], &[2, 3]);
        let cases: [(f64, [f64; 6]); 4] = [
            (1.0, [2., 3., -2., 15., -15., -15.]),
            (
                2.0,
                [
                    1.2928932188134525,
                    1.,
                    -1.2928932188134525,
                    11.477061394004705,
                    -6.316122594094418,
                    -6.012362573324893,
                ],
            ),
            (f64::INFINITY, [2., 0., -2., 15., -4., 0.]),
            (
                0.5,
                [
                    6.12132034355964,
                    11.48528137423857,
                    -6.12132034355964,
                    36.32125854277557,
                    -56.0952314012007,
                    -54.223077062717195,
                ],
            ),
        ];
        for (p, want) in cases {
            let d = _cdist_forward(&x1(), &x2(), p, None).unwrap();
            close(&_cdist_backward(&g, &x1(), &x2(), p, &d).unwrap(), &want);
        }
    }

    #[test]
    fn pdist_and_its_gradient_are_pytorchs() {
        let x = t(
            &[
                0., 1., 2., 3., -1., 0.5, 1., 1., 1., 0., 1., 2., -2., 0., 4.,
            ],
            &[5, 3],
        );
        let d = _pdist_forward(&x, 1.0).unwrap();
        close(&d, &[6.5, 2., 0., 5., 4.5, 6.5, 9.5, 2., 7., 5.]);
        let g = t(&[1., 2., 3., 4., 5., 6., 7., 8., 9., 10.], &[10]);
        close(
            &_pdist_backward(&g, &x, 1.0, &d).unwrap(),
            &[
                1., 5., -1., 19., -19., -19., 14., 14., -14., -4., 16., 4., -30., -16., 30.,
            ],
        );
        let d = _pdist_forward(&x, f64::INFINITY).unwrap();
        close(
            &_pdist_backward(&g, &x, f64::INFINITY, &d).unwrap(),
            &[
                1., 0., -2., 19., -5., 0., 14., 5., -19., -4., 0., -2., -30., 0., 23.,
            ],
        );
    }
}
