//! Sum, mean and variance reductions over [`reduce`](crate::reduce); the extremum reductions
//! (`amax`, `max`, `argmax`, ...) are in [`extrema`](crate::extrema).

use std::marker::PhantomData;

use switchboard_ops::structured;
use switchboard_tensor::{Scalar, ScalarType, Tensor};

use crate::copy::cast;
use crate::dispatch_dtype::{Acc, CpuElement, FloatElement, Num};
use crate::error::{check_cpu_or_meta, invalid, Result};
use crate::reduce::{reduce_into, reduced_shape, reduction_mask, Reducer};
use crate::structured_output::structured_output;
use crate::{dispatch_all_types_and_bool, dispatch_floating_types};

/// Sums in `T`'s compute type, eight lanes at a time over contiguous runs (vectorised, and a
/// shallower rounding tree than a sequential sum).
struct SumR<T>(PhantomData<T>);

impl<T: CpuElement> Reducer<T> for SumR<T> {
    type Acc = Acc<T>;
    type Out = T;
    fn init(&self) -> Acc<T> {
        Acc::<T>::ZERO
    }
    #[inline]
    fn fold(&self, a: Acc<T>, x: T, _: i64) -> Acc<T> {
        a.add(x.to_acc())
    }
    #[inline]
    fn fold_slice(&self, a: Acc<T>, xs: &[T], _: i64) -> Acc<T> {
        let mut total = a;
        for block in xs.chunks(4096) {
            let mut lanes = [Acc::<T>::ZERO; 8];
            let mut it = block.chunks_exact(8);
            for c in &mut it {
                for (l, &x) in lanes.iter_mut().zip(c) {
                    *l = l.add(x.to_acc());
                }
            }
            let mut s = Acc::<T>::ZERO;
            for &x in it.remainder() {
                s = s.add(x.to_acc());
            }
            let l4 = [
                lanes[0].add(lanes[4]),
                lanes[1].add(lanes[5]),
                lanes[2].add(lanes[6]),
                lanes[3].add(lanes[7]),
            ];
            total = total.add(l4[0].add(l4[2]).add(l4[1].add(l4[3])).add(s));
        }
        total
    }
    fn combine(&self, a: Acc<T>, b: Acc<T>) -> Acc<T> {
        a.add(b)
    }
    fn project(&self, a: Acc<T>) -> T {
        T::from_acc(a)
    }
}

/// The output tensor of a reduction of `self_` over `mask`.
pub(crate) fn reduction_out(
    self_: &Tensor,
    mask: &[bool],
    keepdim: bool,
    dtype: ScalarType,
) -> Result<Tensor> {
    check_cpu_or_meta("reduction", self_.device())?;
    Tensor::empty_on(
        &reduced_shape(self_.sizes(), mask, keepdim),
        dtype,
        self_.device(),
    )
}

fn sum_impl(
    self_: &Tensor,
    dim: Option<&[i64]>,
    keepdim: bool,
    dtype: Option<ScalarType>,
    out: Option<&Tensor>,
) -> Result<Tensor> {
    check_cpu_or_meta("reduction", self_.device())?;
    let meta = structured::sum_dim_int_list(self_, dim, keepdim, dtype, out)?;
    let result = structured_output(meta.clone(), out)?;
    let mask = reduction_mask(dim, self_.dim())?;
    let input = cast(self_, meta.dtype)?;
    dispatch_all_types_and_bool!(meta.dtype, "sum_cpu", T => {
        reduce_into(&input, &result, &mask, keepdim, &SumR::<T>(PhantomData))
    })?;
    Ok(result)
}

/// `sum(Tensor self, *, ScalarType? dtype=None)`: the sum of all elements (integers and bool
/// sum to `Long` unless `dtype` says otherwise).
pub fn sum(self_: &Tensor, dtype: Option<ScalarType>) -> Result<Tensor> {
    if !self_.has_data() {
        // Note [Meta path of unstructured kernels] in structured_output.rs.
        return structured::sum_dim_int_list(self_, None, false, dtype, None)?.allocate();
    }
    sum_impl(self_, None, false, dtype, None)
}

/// `sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None)`.
///
/// ```
/// use switchboard_cpu::sum_dim_int_list;
/// use switchboard_tensor::Tensor;
/// let t = Tensor::from_vec(vec![1i32, 2, 3, 4, 5, 6], &[2, 3]).unwrap();
/// let s = sum_dim_int_list(&t, Some(&[1]), true, None).unwrap();
/// assert_eq!(s.sizes(), &[2, 1]);
/// assert_eq!(s.to_vec::<i64>().unwrap(), [6, 15]);
/// ```
pub fn sum_dim_int_list(
    self_: &Tensor,
    dim: Option<&[i64]>,
    keepdim: bool,
    dtype: Option<ScalarType>,
) -> Result<Tensor> {
    sum_impl(self_, dim, keepdim, dtype, None)
}

/// `sum.IntList_out(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None,
/// Tensor(a!) out)`.
pub fn sum_int_list_out(
    self_: &Tensor,
    dim: Option<&[i64]>,
    keepdim: bool,
    dtype: Option<ScalarType>,
    out: &Tensor,
) -> Result<Tensor> {
    sum_impl(self_, dim, keepdim, dtype, Some(out))
}

fn mean_impl(
    self_: &Tensor,
    dim: Option<&[i64]>,
    keepdim: bool,
    dtype: Option<ScalarType>,
    out: Option<&Tensor>,
) -> Result<Tensor> {
    check_cpu_or_meta("reduction", self_.device())?;
    let meta = structured::mean_dim(self_, dim, keepdim, dtype, out)?;
    let mask = reduction_mask(dim, self_.dim())?;
    let count: i64 = self_
        .sizes()
        .iter()
        .zip(mask.iter())
        .filter(|(_, m)| **m)
        .map(|(s, _)| *s)
        .product();
    let result = structured_output(meta.clone(), out)?;
    let input = cast(self_, meta.dtype)?;
    dispatch_floating_types!(meta.dtype, "mean_cpu", T => {
        reduce_into(&input, &result, &mask, keepdim, &MeanR::<T>(count as f64, PhantomData))
    })?;
    Ok(result)
}

struct MeanR<T>(f64, PhantomData<T>);

impl<T: FloatElement> Reducer<T> for MeanR<T> {
    type Acc = Acc<T>;
    type Out = T;
    fn init(&self) -> Acc<T> {
        Acc::<T>::ZERO
    }
    #[inline]
    fn fold(&self, a: Acc<T>, x: T, i: i64) -> Acc<T> {
        SumR::<T>(PhantomData).fold(a, x, i)
    }
    #[inline]
    fn fold_slice(&self, a: Acc<T>, xs: &[T], i: i64) -> Acc<T> {
        SumR::<T>(PhantomData).fold_slice(a, xs, i)
    }
    fn combine(&self, a: Acc<T>, b: Acc<T>) -> Acc<T> {
        a.add(b)
    }
    fn project(&self, a: Acc<T>) -> T {
        T::from_acc(a.div(Acc::<T>::from_f64(self.0)))
    }
}

/// `mean(Tensor self, *, ScalarType? dtype=None)`: floating inputs (or a floating `dtype`)
/// only, as in PyTorch; an empty tensor's mean is NaN.
pub fn mean(self_: &Tensor, dtype: Option<ScalarType>) -> Result<Tensor> {
    if !self_.has_data() {
        // Note [Meta path of unstructured kernels] in structured_output.rs.
        return structured::mean_dim(self_, None, false, dtype, None)?.allocate();
    }
    mean_impl(self_, None, false, dtype, None)
}

/// `mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None)`.
pub fn mean_dim(
    self_: &Tensor,
    dim: Option<&[i64]>,
    keepdim: bool,
    dtype: Option<ScalarType>,
) -> Result<Tensor> {
    mean_impl(self_, dim, keepdim, dtype, None)
}

/// `mean.out(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None,
/// Tensor(a!) out)`.
pub fn mean_out(
    self_: &Tensor,
    dim: Option<&[i64]>,
    keepdim: bool,
    dtype: Option<ScalarType>,
    out: &Tensor,
) -> Result<Tensor> {
    mean_impl(self_, dim, keepdim, dtype, Some(out))
}

/// Welford's running (count, mean, M2) in f64, combined with Chan's formula.
struct VarR<T>(f64, PhantomData<T>);

impl<T: CpuElement> Reducer<T> for VarR<T> {
    type Acc = (f64, f64, f64);
    type Out = T;
    fn init(&self) -> Self::Acc {
        (0.0, 0.0, 0.0)
    }
    #[inline]
    fn fold(&self, (n, mean, m2): Self::Acc, x: T, _: i64) -> Self::Acc {
        let x = x.to_acc().to_f64();
        let n = n + 1.0;
        let d = x - mean;
        let mean = mean + d / n;
        (n, mean, m2 + d * (x - mean))
    }
    fn combine(&self, a: Self::Acc, b: Self::Acc) -> Self::Acc {
        if a.0 == 0.0 {
            return b;
        }
        if b.0 == 0.0 {
            return a;
        }
        let n = a.0 + b.0;
        let d = b.1 - a.1;
        (n, a.1 + d * b.0 / n, a.2 + b.2 + d * d * a.0 * b.0 / n)
    }
    fn project(&self, (n, _, m2): Self::Acc) -> T {
        let denom = (n - self.0).max(0.0);
        T::from_acc(Acc::<T>::from_f64(m2 / denom))
    }
}

/// `var.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool
/// keepdim=False)`: the variance with `correction` (default 1) subtracted from the count.
///
/// ```
/// use switchboard_cpu::var_correction;
/// use switchboard_tensor::{Scalar, Tensor};
/// let t = Tensor::from_vec(vec![1.0f64, 2.0, 3.0, 4.0], &[4]).unwrap();
/// let v = var_correction(&t, None, None, false).unwrap();
/// assert!((v.item().unwrap().to_f64() - 5.0 / 3.0).abs() < 1e-12);
/// let p = var_correction(&t, None, Some(Scalar::Int(0)), false).unwrap();
/// assert_eq!(p.item().unwrap().to_f64(), 1.25);
/// ```
pub fn var_correction(
    self_: &Tensor,
    dim: Option<&[i64]>,
    correction: Option<Scalar>,
    keepdim: bool,
) -> Result<Tensor> {
    if !self_.dtype().is_floating_point() {
        return Err(invalid(
            "std and var only support floating point and complex dtypes",
        ));
    }
    let correction = correction.map(|c| c.to_f64()).unwrap_or(1.0);
    let mask = reduction_mask(dim, self_.dim())?;
    let result = reduction_out(self_, &mask, keepdim, self_.dtype())?;
    if !self_.has_data() {
        // Note [Meta path of unstructured kernels] in structured_output.rs.
        return Ok(result);
    }
    dispatch_floating_types!(self_.dtype(), "var_cpu", T => {
        reduce_into(self_, &result, &mask, keepdim, &VarR::<T>(correction, PhantomData))
    })?;
    Ok(result)
}

/// `var(Tensor self, bool unbiased=True)`.
pub fn var(self_: &Tensor, unbiased: bool) -> Result<Tensor> {
    var_correction(self_, None, Some(Scalar::Int(unbiased as i64)), false)
}

/// `var.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False)`.
pub fn var_dim(
    self_: &Tensor,
    dim: Option<&[i64]>,
    unbiased: bool,
    keepdim: bool,
) -> Result<Tensor> {
    var_correction(self_, dim, Some(Scalar::Int(unbiased as i64)), keepdim)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_and_means() {
        let t = Tensor::from_vec(vec![true, true, false], &[3]).unwrap();
        let s = sum(&t, None).unwrap();
        assert_eq!(s.dtype(), ScalarType::Long);
        assert_eq!(s.item().unwrap(), Scalar::Int(2));
        let f = Tensor::from_vec((0..10).map(|x| x as f32).collect(), &[2, 5]).unwrap();
        let m = mean_dim(&f, Some(&[0]), false, None).unwrap();
        assert_eq!(m.to_vec::<f32>().unwrap(), [2.5, 3.5, 4.5, 5.5, 6.5]);
        let e = mean(&Tensor::zeros(&[0], ScalarType::Float).unwrap(), None).unwrap();
        assert!(e.item().unwrap().to_f64().is_nan());
        assert!(mean(&t, None)
            .unwrap_err()
            .to_string()
            .contains("Got: Bool"));
        let d = sum(&f, Some(ScalarType::Double)).unwrap();
        assert_eq!(d.item().unwrap(), Scalar::Float(45.0));
        let out = Tensor::zeros(&[2], ScalarType::Float).unwrap();
        sum_int_list_out(&f, Some(&[1]), false, None, &out).unwrap();
        assert_eq!(out.to_vec::<f32>().unwrap(), [10.0, 35.0]);
    }

    #[test]
    fn variance() {
        let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 7.0], &[2, 3]).unwrap();
        let v = var_dim(&t, Some(&[1]), true, false).unwrap();
        let got = v.to_vec::<f32>().unwrap();
        assert!((got[0] - 1.0).abs() < 1e-6 && (got[1] - 7.0 / 3.0).abs() < 1e-6);
        assert!(var(&Tensor::from_vec(vec![1i64], &[1]).unwrap(), true).is_err());
        let one = var(&Tensor::from_vec(vec![2.0f64], &[1]).unwrap(), true).unwrap();
        assert!(one.item().unwrap().to_f64().is_nan());
    }
}
