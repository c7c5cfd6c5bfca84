//! The clamp family's CPU kernels (`clamp`, `clamp_min`, `clamp_max`, with Scalar or Tensor
//! bounds, in their functional, in-place and `out=` forms). The argument checks, the result
//! dtype and the output's geometry are the meta functions' (`switchboard_ops::structured`);
//! the kernels compute into the output those describe, with PyTorch's NaN rules: a NaN element
//! stays NaN, a NaN Scalar bound makes every element NaN, and a Tensor bound propagates NaN
//! elementwise (`maximum` / `minimum`, which is what a one-bound Tensor clamp computes).

use switchboard_ops::structured;
use switchboard_tensor::{Scalar, ScalarType, Tensor};

use crate::binary::{binary_op, max_min_kernel};
use crate::dispatch_all_types;
use crate::dispatch_dtype::{Acc, CpuElement, Num};
use crate::error::{invalid, Result};
use crate::iter::{IterConfig, TensorIter};
use crate::structured_output::structured_output;

// Note [Clamp bounds outside the dtype's range]
// An integral clamp's bound is not converted blindly (a negative bound would wrap into an
// unsigned dtype): a lower bound below the dtype's range, or an upper bound above it, cannot
// change any element and is dropped; the opposite case would force every element to a value
// the dtype cannot hold, and is an error ("Clamp min value 300 is outside the representable
// range of Char"), as PyTorch's `prepare_clamp_bound`. Integer bounds compare exactly (no
// wrapping), float bounds as doubles. A floating dtype keeps its bounds, converted with the
// checked conversion (Note [Checked scalar conversion]). This is the kernel's business, not
// the meta function's: on Meta such a clamp succeeds, as in PyTorch.

/// Whether an integer-dtype clamp bound lies below / above `dtype`'s range.
fn bound_outside(bound: Scalar, dtype: ScalarType) -> (bool, bool) {
    let (lo, hi) = dtype.integer_range().unwrap_or((i64::MIN, i64::MAX));
    match bound {
        Scalar::Float(f) => (f < lo as f64, f > hi as f64),
        _ => {
            let v = bound.to_i64();
            (v < lo, v > hi)
        }
    }
}

/// The bound to apply, or `None` to drop it (Note [Clamp bounds outside the dtype's range]).
fn prepare_clamp_bound(
    bound: Option<Scalar>,
    dtype: ScalarType,
    is_lower_bound: bool,
) -> Result<Option<Scalar>> {
    let Some(bound) = bound else {
        return Ok(None);
    };
    if !dtype.is_integral(false) {
        return Ok(Some(bound));
    }
    let (below, above) = bound_outside(bound, dtype);
    if !below && !above {
        return Ok(Some(bound));
    }
    if is_lower_bound == below {
        return Ok(None);
    }
    Err(invalid(format!(
        "Clamp {} value {} is outside the representable range of {}",
        if is_lower_bound { "min" } else { "max" },
        Scalar::Float(bound.to_f64()),
        dtype.c10_name()
    )))
}

fn clamp_scalar_loop<T: CpuElement>(
    iter: &TensorIter,
    min: Option<Scalar>,
    max: Option<Scalar>,
) -> Result<()> {
    // A NaN bound makes every element NaN, as in PyTorch (`clamp_out` fills the result with
    // NaN, `clamp_min_out`/`clamp_max_out` with the bound); a NaN bound is a float, so the
    // result dtype is floating.
    if [min, max]
        .into_iter()
        .flatten()
        .any(|b| b.to_f64().is_nan())
    {
        let nan = Acc::<T>::from_f64(f64::NAN);
        return iter.for_each1(move |_: T| T::from_acc(nan));
    }
    let dtype = T::DTYPE;
    let min = prepare_clamp_bound(min, dtype, true)?;
    let max = prepare_clamp_bound(max, dtype, false)?;
    // Compared in the element type, as `min.to<scalar_t>()` (checked).
    let lo = min.map(|s| s.checked_to::<T>()).transpose()?.map(T::to_acc);
    let hi = max.map(|s| s.checked_to::<T>()).transpose()?.map(T::to_acc);
    match (lo, hi) {
        (Some(lo), Some(hi)) => iter.for_each1(move |x: T| {
            let x = x.to_acc();
            let y = if x < lo { lo } else { x };
            T::from_acc(if y > hi { hi } else { y })
        }),
        (Some(lo), None) => iter.for_each1(move |x: T| {
            let x = x.to_acc();
            T::from_acc(if x < lo { lo } else { x })
        }),
        (None, Some(hi)) => iter.for_each1(move |x: T| {
            let x = x.to_acc();
            T::from_acc(if x > hi { hi } else { x })
        }),
        // Both bounds dropped: the result is `self`.
        (None, None) => iter.for_each1(|x: T| x),
    }
}

/// A clamp by Scalar bounds into the output its meta function (`meta`) describes: `out` when
/// given (resized), else a fresh one.
fn clamp_scalar_into(
    self_: &Tensor,
    min: Option<Scalar>,
    max: Option<Scalar>,
    meta: structured::MetaOutput,
    out: Option<&Tensor>,
) -> Result<Tensor> {
    let result = structured_output(meta, out)?;
    let dtype = result.dtype();
    let iter = IterConfig::new("clamp")
        .out(&result)
        .input(self_)
        .compute_dtype(dtype)
        .build()?;
    // The name of the kernel PyTorch runs for the bounds given.
    let name = match (min, max) {
        (Some(_), Some(_)) => "clamp_scalar_cpu",
        (Some(_), None) => "clamp_min_scalar_cpu",
        _ => "clamp_max_scalar_cpu",
    };
    dispatch_all_types!(dtype, name, T => clamp_scalar_loop::<T>(&iter, min, max))?;
    iter.finish()
}

fn clamp_impl(
    self_: &Tensor,
    min: Option<Scalar>,
    max: Option<Scalar>,
    out: Option<&Tensor>,
) -> Result<Tensor> {
    let meta = structured::clamp(self_, min, max, out)?;
    clamp_scalar_into(self_, min, max, meta, out)
}

/// `clamp(Tensor self, Scalar? min=None, Scalar? max=None)`: `min(max(x, min), max)` (NaN
/// stays NaN, a NaN bound makes every element NaN; an integral or bool `self` promotes with
/// the bounds).
///
/// ```
/// use switchboard_cpu::clamp;
/// use switchboard_tensor::{Scalar, ScalarType, Tensor};
/// let t = Tensor::from_vec(vec![-2i64, 0, 7], &[3]).unwrap();
/// let r = clamp(&t, Some(Scalar::Int(-1)), Some(Scalar::Int(5))).unwrap();
/// assert_eq!(r.to_vec::<i64>().unwrap(), [-1, 0, 5]);
/// let r = clamp(&t, Some(Scalar::Float(0.5)), None).unwrap();
/// assert_eq!((r.dtype(), r.to_vec::<f32>().unwrap()), (ScalarType::Float, vec![0.5, 0.5, 7.0]));
/// ```
pub fn clamp(self_: &Tensor, min: Option<Scalar>, max: Option<Scalar>) -> Result<Tensor> {
    clamp_impl(self_, min, max, None)
}

/// `clamp.out(Tensor self, Scalar? min=None, Scalar? max=None, *, Tensor(a!) out)`: `out`
/// must have the result dtype.
pub fn clamp_out(
    self_: &Tensor,
    min: Option<Scalar>,
    max: Option<Scalar>,
    out: &Tensor,
) -> Result<Tensor> {
    clamp_impl(self_, min, max, Some(out))
}

/// `clamp_(Tensor(a!) self, Scalar? min=None, Scalar? max=None)`.
pub fn clamp_(self_: &Tensor, min: Option<Scalar>, max: Option<Scalar>) -> Result<Tensor> {
    clamp_impl(self_, min, max, Some(self_))
}

fn clamp_min_impl(self_: &Tensor, min: Scalar, out: Option<&Tensor>) -> Result<Tensor> {
    let meta = structured::clamp_min(self_, min, out)?;
    clamp_scalar_into(self_, Some(min), None, meta, out)
}

/// `clamp_min(Tensor self, Scalar min)`.
pub fn clamp_min(self_: &Tensor, min: Scalar) -> Result<Tensor> {
    clamp_min_impl(self_, min, None)
}

/// `clamp_min.out(Tensor self, Scalar min, *, Tensor(a!) out)`.
pub fn clamp_min_out(self_: &Tensor, min: Scalar, out: &Tensor) -> Result<Tensor> {
    clamp_min_impl(self_, min, Some(out))
}

/// `clamp_min_(Tensor(a!) self, Scalar min)`.
pub fn clamp_min_(self_: &Tensor, min: Scalar) -> Result<Tensor> {
    clamp_min_impl(self_, min, Some(self_))
}

fn clamp_max_impl(self_: &Tensor, max: Scalar, out: Option<&Tensor>) -> Result<Tensor> {
    let meta = structured::clamp_max(self_, max, out)?;
    clamp_scalar_into(self_, None, Some(max), meta, out)
}

/// `clamp_max(Tensor self, Scalar max)`.
pub fn clamp_max(self_: &Tensor, max: Scalar) -> Result<Tensor> {
    clamp_max_impl(self_, max, None)
}

/// `clamp_max.out(Tensor self, Scalar max, *, Tensor(a!) out)`.
pub fn clamp_max_out(self_: &Tensor, max: Scalar, out: &Tensor) -> Result<Tensor> {
    clamp_max_impl(self_, max, Some(out))
}

/// `clamp_max_(Tensor(a!) self, Scalar max)`.
pub fn clamp_max_(self_: &Tensor, max: Scalar) -> Result<Tensor> {
    clamp_max_impl(self_, max, Some(self_))
}

fn clamp_loop<T: CpuElement>(iter: &TensorIter) -> Result<()> {
    iter.for_each3(move |x: T, lo: T, hi: T| {
        T::from_acc(x.to_acc().max_nan(lo.to_acc()).min_nan(hi.to_acc()))
    })
}

/// A clamp by one Tensor bound: `maximum` for a lower bound, `minimum` for an upper one (the
/// kernels PyTorch runs; they take bool, and name themselves in dtype errors).
fn clamp_one_tensor_bound(
    self_: &Tensor,
    bound: &Tensor,
    is_lower_bound: bool,
    out: Option<&Tensor>,
) -> Result<Tensor> {
    let op = if is_lower_bound {
        "clamp_min"
    } else {
        "clamp_max"
    };
    binary_op!(op, self_, bound, out, false, |it| max_min_kernel(
        it,
        is_lower_bound
    ))
}

fn clamp_tensor_impl(
    self_: &Tensor,
    min: Option<&Tensor>,
    max: Option<&Tensor>,
    out: Option<&Tensor>,
) -> Result<Tensor> {
    structured::check_clamp_tensor(self_, min, max)?;
    let (lo, hi) = match (min, max) {
        (Some(lo), Some(hi)) => (lo, hi),
        (Some(lo), None) => return clamp_one_tensor_bound(self_, lo, true, out),
        (None, Some(hi)) => return clamp_one_tensor_bound(self_, hi, false, out),
        (None, None) => return Err(invalid("clamp: no bound (checked by its meta function)")),
    };
    let iter = IterConfig::new("clamp")
        .maybe_out(out)
        .input(self_)
        .input(lo)
        .input(hi)
        .build()?;
    dispatch_all_types!(iter.common_dtype(), "clamp_cpu", T => clamp_loop::<T>(&iter))?;
    iter.finish()
}

/// `clamp.Tensor(Tensor self, Tensor? min=None, Tensor? max=None)`: elementwise bounds
/// (broadcasting and promoting with `self`; NaN propagates from any operand).
pub fn clamp_tensor(self_: &Tensor, min: Option<&Tensor>, max: Option<&Tensor>) -> Result<Tensor> {
    clamp_tensor_impl(self_, min, max, None)
}

/// `clamp.Tensor_out(Tensor self, Tensor? min=None, Tensor? max=None, *, Tensor(a!) out)`.
pub fn clamp_tensor_out(
    self_: &Tensor,
    min: Option<&Tensor>,
    max: Option<&Tensor>,
    out: &Tensor,
) -> Result<Tensor> {
    clamp_tensor_impl(self_, min, max, Some(out))
}

/// `clamp_.Tensor(Tensor(a!) self, Tensor? min=None, Tensor? max=None)`.
pub fn clamp_tensor_(self_: &Tensor, min: Option<&Tensor>, max: Option<&Tensor>) -> Result<Tensor> {
    clamp_tensor_impl(self_, min, max, Some(self_))
}

/// `clamp_min.Tensor(Tensor self, Tensor min)`.
pub fn clamp_min_tensor(self_: &Tensor, min: &Tensor) -> Result<Tensor> {
    clamp_one_tensor_bound(self_, min, true, None)
}

/// `clamp_min.Tensor_out(Tensor self, Tensor min, *, Tensor(a!) out)`.
pub fn clamp_min_tensor_out(self_: &Tensor, min: &Tensor, out: &Tensor) -> Result<Tensor> {
    clamp_one_tensor_bound(self_, min, true, Some(out))
}

/// `clamp_min_.Tensor(Tensor(a!) self, Tensor min)`.
pub fn clamp_min_tensor_(self_: &Tensor, min: &Tensor) -> Result<Tensor> {
    clamp_one_tensor_bound(self_, min, true, Some(self_))
}

/// `clamp_max.Tensor(Tensor self, Tensor max)`.
pub fn clamp_max_tensor(self_: &Tensor, max: &Tensor) -> Result<Tensor> {
    clamp_one_tensor_bound(self_, max, false, None)
}

/// `clamp_max.Tensor_out(Tensor self, Tensor max, *, Tensor(a!) out)`.
pub fn clamp_max_tensor_out(self_: &Tensor, max: &Tensor, out: &Tensor) -> Result<Tensor> {
    clamp_one_tensor_bound(self_, max, false, Some(out))
}

/// `clamp_max_.Tensor(Tensor(a!) self, Tensor max)`.
pub fn clamp_max_tensor_(self_: &Tensor, max: &Tensor) -> Result<Tensor> {
    clamp_one_tensor_bound(self_, max, false, Some(self_))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::copy::clone;

    #[test]
    fn clamp_propagates_nan_bounds() {
        let x = Tensor::from_vec(vec![-2.0f32, 0.5, 3.0, f32::NAN], &[4]).unwrap();
        let nan = Scalar::Float(f64::NAN);
        let all_nan = |t: Tensor| t.to_vec_as::<f64>().unwrap().iter().all(|v| v.is_nan());
        // A NaN bound makes every element NaN, as in PyTorch.
        assert!(all_nan(clamp(&x, Some(nan), None).unwrap()));
        assert!(all_nan(clamp(&x, None, Some(nan)).unwrap()));
        assert!(all_nan(clamp(&x, Some(Scalar::Int(0)), Some(nan)).unwrap()));
        assert!(all_nan(clamp(&x, Some(nan), Some(Scalar::Int(1))).unwrap()));
        assert!(all_nan(clamp_min(&x, nan).unwrap()));
        assert!(all_nan(clamp_max(&x, nan).unwrap()));
        let y = clone(&x, None).unwrap();
        clamp_(&y, None, Some(nan)).unwrap();
        assert!(all_nan(y));
        // An integer tensor promotes with the float bound.
        let i = Tensor::from_vec(vec![1i64, 5], &[2]).unwrap();
        let r = clamp_max(&i, nan).unwrap();
        assert_eq!(r.dtype(), ScalarType::Float);
        assert!(all_nan(r));
        // Finite bounds keep NaN elements NaN and clamp the rest.
        let r = clamp(&x, Some(Scalar::Int(0)), Some(Scalar::Int(1))).unwrap();
        let v = r.to_vec::<f32>().unwrap();
        assert_eq!(v[..3], [0.0, 0.5, 1.0]);
        assert!(v[3].is_nan());
        // Tensor bounds: NaN propagates from any operand, elementwise.
        let lo = Tensor::from_vec(vec![f32::NAN, 0.0, 0.0, 0.0], &[4]).unwrap();
        let hi = Tensor::from_vec(vec![1.0f32, f32::NAN, 1.0, 1.0], &[4]).unwrap();
        let v = clamp_tensor(&x, Some(&lo), Some(&hi))
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        assert!(v[0].is_nan() && v[1].is_nan() && v[3].is_nan());
        assert_eq!(v[2], 1.0);
        let n0 = Tensor::from_vec(vec![f32::NAN], &[]).unwrap();
        assert!(all_nan(clamp_tensor(&x, Some(&n0), None).unwrap()));
        assert!(all_nan(clamp_tensor(&x, None, Some(&n0)).unwrap()));
    }

    #[test]
    fn clamp_forms() {
        let t = Tensor::from_vec(vec![-2.0f32, 0.5, 3.0, f32::NAN], &[4]).unwrap();
        let r = clamp(&t, Some(Scalar::Int(-1)), Some(Scalar::Int(1)))
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(&r[..3], &[-1.0, 0.5, 1.0]);
        assert!(r[3].is_nan());
        let i = Tensor::from_vec(vec![-5i64, 5], &[2]).unwrap();
        assert_eq!(
            clamp(&i, Some(Scalar::Float(0.5)), None).unwrap().dtype(),
            ScalarType::Float
        );
        assert!(clamp_(&i, Some(Scalar::Float(0.5)), None).is_err());
        assert!(clamp(&i, None, None).is_err());
        let lo = Tensor::from_vec(vec![0i64, 6], &[2]).unwrap();
        let r = clamp_tensor(&i, Some(&lo), None).unwrap();
        assert_eq!(r.to_vec::<i64>().unwrap(), [0, 6]);
    }
}
