//! Extremum reductions over [`reduce`](crate::reduce): `amax`/`amin`, `max`/`min` (all-reduce,
//! and `dim` with the indices of the first occurrences) and `argmax`/`argmin`. NaN propagates:
//! it counts as the extremum, as in PyTorch.

use std::marker::PhantomData;

use switchboard_tensor::{RawOps, ScalarType, Tensor};

use crate::dispatch_all_types_and_bool;
use crate::dispatch_dtype::{Acc, CpuElement, Num};
use crate::error::check_cpu_or_meta;
use crate::error::{invalid, Result};
use crate::reduce::{reduce_into, reduction_mask, Reducer};
use crate::reductions::reduction_out;
use crate::structured_output::structured_output;
use switchboard_ops::structured;

/// NaN-propagating max or min of values.
struct ExtremumR<T>(bool, PhantomData<T>);

impl<T: CpuElement> Reducer<T> for ExtremumR<T> {
    type Acc = Acc<T>;
    type Out = T;
    fn init(&self) -> Acc<T> {
        if self.0 {
            Acc::<T>::LOWEST
        } else {
            Acc::<T>::HIGHEST
        }
    }
    #[inline]
    fn fold(&self, a: Acc<T>, x: T, _: i64) -> Acc<T> {
        if self.0 {
            a.max_nan(x.to_acc())
        } else {
            a.min_nan(x.to_acc())
        }
    }
    fn combine(&self, a: Acc<T>, b: Acc<T>) -> Acc<T> {
        if self.0 {
            a.max_nan(b)
        } else {
            a.min_nan(b)
        }
    }
    fn project(&self, a: Acc<T>) -> T {
        T::from_acc(a)
    }
}

/// `amax`/`amin` into `out` (given, or fresh), after their meta function.
fn extremum_into(
    max: bool,
    self_: &Tensor,
    dim: &[i64],
    keepdim: bool,
    out: Option<&Tensor>,
) -> Result<Tensor> {
    check_cpu_or_meta("reduction", self_.device())?;
    let meta = if max {
        structured::amax(self_, dim, keepdim, out)?
    } else {
        structured::amin(self_, dim, keepdim, out)?
    };
    let result = structured_output(meta, out)?;
    let mask = reduction_mask(Some(dim), self_.dim())?;
    let name = if max { "amax_cpu" } else { "amin_cpu" };
    dispatch_all_types_and_bool!(self_.dtype(), name, T => {
        reduce_into(self_, &result, &mask, keepdim, &ExtremumR::<T>(max, PhantomData))
    })?;
    Ok(result)
}

/// `amax(Tensor self, int[1] dim=[], bool keepdim=False)`: the maximum over `dim` (all dims
/// when empty), propagating NaN.
pub fn amax(self_: &Tensor, dim: &[i64], keepdim: bool) -> Result<Tensor> {
    extremum_into(true, self_, dim, keepdim, None)
}

/// `amax.out(Tensor self, int[1] dim=[], bool keepdim=False, *, Tensor(a!) out)`.
pub fn amax_out(self_: &Tensor, dim: &[i64], keepdim: bool, out: &Tensor) -> Result<Tensor> {
    extremum_into(true, self_, dim, keepdim, Some(out))
}

/// `amin(Tensor self, int[1] dim=[], bool keepdim=False)`.
pub fn amin(self_: &Tensor, dim: &[i64], keepdim: bool) -> Result<Tensor> {
    extremum_into(false, self_, dim, keepdim, None)
}

/// `amin.out(Tensor self, int[1] dim=[], bool keepdim=False, *, Tensor(a!) out)`.
pub fn amin_out(self_: &Tensor, dim: &[i64], keepdim: bool, out: &Tensor) -> Result<Tensor> {
    extremum_into(false, self_, dim, keepdim, Some(out))
}

fn check_all_reduce(name: &str, self_: &Tensor) -> Result<()> {
    if self_.numel() == 0 {
        return Err(invalid(format!(
            "{name}(): Expected reduction dim to be specified for input.numel() == 0. Specify \
             the reduction dim with the 'dim' argument."
        )));
    }
    Ok(())
}

/// `max(Tensor self)`: the maximum element as a zero-dim tensor (NaN if any).
pub fn max(self_: &Tensor) -> Result<Tensor> {
    check_all_reduce("max", self_)?;
    if !self_.has_data() {
        // Note [Meta path of unstructured kernels] in structured_output.rs.
        return structured::amax(self_, &[], false, None)?.allocate();
    }
    extremum_into(true, self_, &[], false, None)
}

/// `min(Tensor self)`.
pub fn min(self_: &Tensor) -> Result<Tensor> {
    check_all_reduce("min", self_)?;
    if !self_.has_data() {
        // Note [Meta path of unstructured kernels] in structured_output.rs.
        return structured::amin(self_, &[], false, None)?.allocate();
    }
    extremum_into(false, self_, &[], false, None)
}

/// Max or min with the index of its first occurrence (NaN counts as the extremum).
struct ArgR<T>(bool, PhantomData<T>);

impl<T: CpuElement> ArgR<T> {
    #[inline]
    fn better(&self, x: Acc<T>, than: Acc<T>) -> bool {
        if than.is_nan() {
            return false;
        }
        x.is_nan() || if self.0 { x > than } else { x < than }
    }
}

impl<T: CpuElement> Reducer<T> for ArgR<T> {
    type Acc = (Acc<T>, i64);
    type Out = i64;
    fn init(&self) -> (Acc<T>, i64) {
        (
            if self.0 {
                Acc::<T>::LOWEST
            } else {
                Acc::<T>::HIGHEST
            },
            -1,
        )
    }
    #[inline]
    fn fold(&self, a: (Acc<T>, i64), x: T, idx: i64) -> (Acc<T>, i64) {
        let x = x.to_acc();
        if a.1 < 0 || self.better(x, a.0) {
            (x, idx)
        } else {
            a
        }
    }
    fn combine(&self, a: (Acc<T>, i64), b: (Acc<T>, i64)) -> (Acc<T>, i64) {
        if a.1 < 0 || (b.1 >= 0 && self.better(b.0, a.0)) {
            b
        } else {
            a
        }
    }
    fn project(&self, a: (Acc<T>, i64)) -> i64 {
        a.1
    }
}

/// The values at `indices` of a max/min reduction over one dim, as a projection.
struct ArgValR<T>(ArgR<T>);

impl<T: CpuElement> Reducer<T> for ArgValR<T> {
    type Acc = (Acc<T>, i64);
    type Out = T;
    fn init(&self) -> Self::Acc {
        self.0.init()
    }
    fn fold(&self, a: Self::Acc, x: T, idx: i64) -> Self::Acc {
        self.0.fold(a, x, idx)
    }
    fn combine(&self, a: Self::Acc, b: Self::Acc) -> Self::Acc {
        self.0.combine(a, b)
    }
    fn project(&self, a: Self::Acc) -> T {
        T::from_acc(a.0)
    }
}

/// `argmax`/`argmin`'s indices (over the flattened input when `dim` is `None`).
fn arg_reduce(
    name: &'static str,
    max: bool,
    self_: &Tensor,
    dim: Option<i64>,
    keepdim: bool,
) -> Result<Tensor> {
    // PyTorch's `check_argmax_argmin` (`max.dim`/`min.dim`, which also return values, take
    // bools).
    if self_.dtype() == ScalarType::Bool {
        return Err(invalid(format!("{name}(): does not support bool input")));
    }
    let (input, mask, shape_sizes) = match dim {
        Some(d) => {
            let mask = reduction_mask(Some(&[d]), self_.dim())?;
            if self_.dim() > 0 {
                let w = mask.iter().position(|m| *m).unwrap_or(0);
                if self_.sizes()[w] == 0 {
                    return Err(invalid(format!(
                        "{name}(): Expected reduction dim {w} to have non-zero size."
                    )));
                }
            }
            (self_.clone(), mask, None)
        }
        None => {
            if self_.numel() == 0 {
                return Err(invalid(format!(
                    "{name}(): Expected reduction dim to be specified for input.numel() == 0."
                )));
            }
            let flat = self_.reshape(&[-1])?;
            (
                flat,
                reduction_mask(Some(&[0]), 1)?,
                Some(self_.sizes().to_vec()),
            )
        }
    };
    let k = keepdim && shape_sizes.is_none();
    let idx_out = reduction_out(&input, &mask, k, ScalarType::Long)?;
    dispatch_all_types_and_bool!(input.dtype(), name, T => {
        reduce_into(&input, &idx_out, &mask, k, &ArgR::<T>(max, PhantomData))
    })?;
    match (shape_sizes, keepdim) {
        (Some(s), true) => Ok(idx_out.view(&vec![1; s.len()])?),
        _ => Ok(idx_out),
    }
}

/// `max.dim`/`min.dim` after their meta function, into `outputs` when given: the first
/// extremum along `dim` and its index (PyTorch's `minmax_out_impl`).
fn extremum_with_indices_into(
    max: bool,
    self_: &Tensor,
    dim: i64,
    keepdim: bool,
    outputs: Option<[&Tensor; 2]>,
) -> Result<(Tensor, Tensor)> {
    check_cpu_or_meta("reduction", self_.device())?;
    let [mv, mi] = if max {
        structured::max_dim(self_, dim, keepdim, outputs)?
    } else {
        structured::min_dim(self_, dim, keepdim, outputs)?
    };
    let (values, indices) = match outputs {
        Some([v, i]) => (
            structured_output(mv, Some(v))?,
            structured_output(mi, Some(i))?,
        ),
        None => (mv.allocate()?, mi.allocate()?),
    };
    let mask = reduction_mask(Some(&[dim]), self_.dim())?;
    let name = if max {
        "max_values_cpu"
    } else {
        "min_values_cpu"
    };
    dispatch_all_types_and_bool!(self_.dtype(), name, T => {
        let arg = ArgR::<T>(max, PhantomData);
        reduce_into(self_, &indices, &mask, keepdim, &arg)?;
        reduce_into(self_, &values, &mask, keepdim, &ArgValR::<T>(arg))
    })?;
    Ok((values, indices))
}

/// `max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)`:
/// the first maximum along `dim` and its index (NaN counts as the maximum).
///
/// ```
/// use switchboard_cpu::max_dim;
/// use switchboard_tensor::Tensor;
/// let t = Tensor::from_vec(vec![1.0f32, 5.0, 5.0, 7.0, 0.0, -1.0], &[2, 3]).unwrap();
/// let (v, i) = max_dim(&t, 1, false).unwrap();
/// assert_eq!(v.to_vec::<f32>().unwrap(), [5.0, 7.0]);
/// assert_eq!(i.to_vec::<i64>().unwrap(), [1, 0]);
/// ```
pub fn max_dim(self_: &Tensor, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
    extremum_with_indices_into(true, self_, dim, keepdim, None)
}

/// `max.dim_max(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) max, Tensor(b!)
/// max_values) -> (Tensor(a!) values, Tensor(b!) indices)`.
pub fn max_dim_max(
    self_: &Tensor,
    dim: i64,
    keepdim: bool,
    max: &Tensor,
    max_values: &Tensor,
) -> Result<(Tensor, Tensor)> {
    extremum_with_indices_into(true, self_, dim, keepdim, Some([max, max_values]))
}

/// `min.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)`.
pub fn min_dim(self_: &Tensor, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
    extremum_with_indices_into(false, self_, dim, keepdim, None)
}

/// `min.dim_min(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) min, Tensor(b!)
/// min_indices) -> (Tensor(a!) values, Tensor(b!) indices)`.
pub fn min_dim_min(
    self_: &Tensor,
    dim: i64,
    keepdim: bool,
    min: &Tensor,
    min_indices: &Tensor,
) -> Result<(Tensor, Tensor)> {
    extremum_with_indices_into(false, self_, dim, keepdim, Some([min, min_indices]))
}

/// `argmax(Tensor self, int? dim=None, bool keepdim=False)`: the index of the first maximum
/// (over the flattened tensor when `dim` is `None`).
pub fn argmax(self_: &Tensor, dim: Option<i64>, keepdim: bool) -> Result<Tensor> {
    arg_extremum_into(true, self_, dim, keepdim, None)
}

/// `argmax.out(Tensor self, int? dim=None, bool keepdim=False, *, Tensor(a!) out)`.
pub fn argmax_out(self_: &Tensor, dim: Option<i64>, keepdim: bool, out: &Tensor) -> Result<Tensor> {
    arg_extremum_into(true, self_, dim, keepdim, Some(out))
}

/// `argmin(Tensor self, int? dim=None, bool keepdim=False)`.
pub fn argmin(self_: &Tensor, dim: Option<i64>, keepdim: bool) -> Result<Tensor> {
    arg_extremum_into(false, self_, dim, keepdim, None)
}

/// `argmin.out(Tensor self, int? dim=None, bool keepdim=False, *, Tensor(a!) out)`.
pub fn argmin_out(self_: &Tensor, dim: Option<i64>, keepdim: bool, out: &Tensor) -> Result<Tensor> {
    arg_extremum_into(false, self_, dim, keepdim, Some(out))
}

/// `argmax`/`argmin` after their meta function; into `out` when given.
fn arg_extremum_into(
    max: bool,
    self_: &Tensor,
    dim: Option<i64>,
    keepdim: bool,
    out: Option<&Tensor>,
) -> Result<Tensor> {
    let (name, meta) = if max {
        ("argmax", structured::argmax(self_, dim, keepdim, out)?)
    } else {
        ("argmin", structured::argmin(self_, dim, keepdim, out)?)
    };
    let indices = arg_reduce(name, max, self_, dim, keepdim)?;
    match out {
        Some(o) => {
            let o = structured::resize_out(o, &meta)?;
            crate::copy::copy_into(&o, &indices)?;
            Ok(o)
        }
        None => Ok(indices),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_tensor::Scalar;

    #[test]
    fn extrema() {
        let t = Tensor::from_vec(vec![3i32, 9, -2, 9], &[2, 2]).unwrap();
        assert_eq!(max(&t).unwrap().item().unwrap(), Scalar::Int(9));
        assert_eq!(min(&t).unwrap().item().unwrap(), Scalar::Int(-2));
        assert_eq!(
            argmax(&t, None, false).unwrap().item().unwrap(),
            Scalar::Int(1)
        );
        assert_eq!(argmax(&t, None, true).unwrap().sizes(), &[1, 1]);
        assert_eq!(
            argmin(&t, Some(0), false).unwrap().to_vec::<i64>().unwrap(),
            [1, 0]
        );
        assert_eq!(
            amax(&t, &[0], true).unwrap().to_vec::<i32>().unwrap(),
            [3, 9]
        );
        let n = Tensor::from_vec(vec![1.0f32, f32::NAN, 3.0], &[3]).unwrap();
        assert!(max(&n).unwrap().item().unwrap().to_f64().is_nan());
        assert_eq!(
            argmax(&n, None, false).unwrap().item().unwrap(),
            Scalar::Int(1)
        );
        let (v, i) = min_dim(&n, 0, true).unwrap();
        assert_eq!(i.to_vec::<i64>().unwrap(), [1]);
        assert!(v.to_vec::<f32>().unwrap()[0].is_nan());
        let e = Tensor::zeros(&[0, 2], ScalarType::Float).unwrap();
        assert!(max(&e).is_err());
        assert_eq!(
            amax(&e, &[0], false).unwrap_err().to_string(),
            "amax(): Expected reduction dim 0 to have non-zero size."
        );
        assert_eq!(amax(&e, &[1], false).unwrap().sizes(), &[0]);
    }
}
