//! Selection ops: `where` (all four overloads), `masked_fill` (Scalar and Tensor value) and
//! `clamp` (Scalar and Tensor bounds), with their `out=` and in-place forms.

use switchboard_tensor::RawOps;
use switchboard_tensor::{Scalar, ScalarType, Tensor};

use crate::copy::clone;
use crate::dispatch_dtype::{Acc, CpuElement, Num};
use crate::error::{invalid, Result};
use crate::iter::{IterConfig, TensorIter};
use crate::promote::{infer_size, ResultTypeState, DEFAULT_FLOAT};
use crate::{dispatch_all_types, dispatch_all_types_and_bool};

fn check_condition(condition: &Tensor) -> Result<()> {
    if condition.dtype() != ScalarType::Bool {
        return Err(invalid(format!(
            "where expected condition to be a boolean tensor, but got a tensor with dtype {}",
            condition.dtype().c10_name()
        )));
    }
    Ok(())
}

fn where_loop<T: CpuElement>(iter: &TensorIter) -> Result<()> {
    iter.for_each3(|c: bool, a: T, b: T| if c { a } else { b })
}

/// A uint8 condition is still taken (as bool), with PyTorch's one-time deprecation warning.
fn bool_condition(condition: &Tensor) -> Result<Tensor> {
    if condition.dtype() != ScalarType::Byte {
        return Ok(condition.clone());
    }
    static WARNED: std::sync::Once = std::sync::Once::new();
    WARNED.call_once(|| {
        switchboard_dispatcher::warn(
            "where received a uint8 condition tensor. This behavior is deprecated and will be \
             removed in a future version of PyTorch. Use a boolean condition instead.",
        )
    });
    crate::copy::cast(condition, ScalarType::Bool)
}

fn where_impl(condition: &Tensor, a: &Tensor, b: &Tensor, out: Option<&Tensor>) -> Result<Tensor> {
    let condition = &bool_condition(condition)?;
    check_condition(condition)?;
    let iter = IterConfig::new("where_cpu")
        .maybe_out(out)
        .input_exact(condition)
        .input(a)
        .input(b)
        .build()?;
    dispatch_all_types_and_bool!(iter.common_dtype(), "where_cpu", T => where_loop::<T>(&iter))?;
    iter.finish()
}

/// `where.self(Tensor condition, Tensor self, Tensor other)`: `self` where `condition` is
/// true, else `other` (broadcasting all three; `self` and `other` promote).
///
/// ```
/// use switchboard_cpu::where_self;
/// use switchboard_tensor::Tensor;
/// let c = Tensor::from_vec(vec![true, false], &[2]).unwrap();
/// let a = Tensor::from_vec(vec![1i64, 2], &[2]).unwrap();
/// let b = Tensor::from_vec(vec![0.5f32], &[1]).unwrap();
/// assert_eq!(where_self(&c, &a, &b).unwrap().to_vec::<f32>().unwrap(), [1.0, 0.5]);
/// ```
pub fn where_self(condition: &Tensor, self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    where_impl(condition, self_, other, None)
}

/// `where.self_out(Tensor condition, Tensor self, Tensor other, *, Tensor(a!) out)`.
pub fn where_self_out(
    condition: &Tensor,
    self_: &Tensor,
    other: &Tensor,
    out: &Tensor,
) -> Result<Tensor> {
    where_impl(condition, self_, other, Some(out))
}

fn where_scalar_dtype(tensor: &Tensor, value: Scalar) -> ScalarType {
    let mut promoted = ResultTypeState::default();
    promoted.update_tensor(tensor);
    promoted.update_scalar(value);
    promoted.result().unwrap_or(DEFAULT_FLOAT)
}

/// `where.ScalarSelf(Tensor condition, Scalar self, Tensor other)`.
pub fn where_scalar_self(condition: &Tensor, self_: Scalar, other: &Tensor) -> Result<Tensor> {
    self_.check_fits_scalar_tensor(where_scalar_dtype(other, self_))?;
    where_impl(condition, &Tensor::wrapped_scalar(self_), other, None)
}

/// `where.ScalarOther(Tensor condition, Tensor self, Scalar other)`.
pub fn where_scalar_other(condition: &Tensor, self_: &Tensor, other: Scalar) -> Result<Tensor> {
    other.check_fits_scalar_tensor(where_scalar_dtype(self_, other))?;
    where_impl(condition, self_, &Tensor::wrapped_scalar(other), None)
}

fn masked_fill_loop<T: CpuElement>(iter: &TensorIter, value: Scalar) -> Result<()> {
    let v = value.checked_to::<T>()?;
    iter.for_each2(move |x: T, m: bool| if m { v } else { x })
}

fn check_mask(mask: &Tensor) -> Result<()> {
    if mask.dtype() != ScalarType::Bool {
        return Err(invalid(format!(
            "masked_fill_ only supports boolean masks, but got mask with dtype {}",
            mask.dtype().type_meta_name()
        )));
    }
    Ok(())
}

fn value_of(self_: &Tensor, value: &Tensor) -> Result<Scalar> {
    if value.dim() != 0 {
        return Err(invalid(format!(
            "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with {} \
             dimension(s).",
            value.dim()
        )));
    }
    if !value.has_data() {
        if self_.has_data() {
            return Err(invalid("masked_fill_: the value tensor has no data"));
        }
        // Meta tensors (PyTorch's meta masked_fill takes a meta value): nothing is written.
        return Ok(Scalar::Int(0));
    }
    value.item()
}

/// `masked_fill_.Scalar(Tensor(a!) self, Tensor mask, Scalar value)`: sets the elements of
/// `self` where `mask` (a bool tensor broadcastable to `self`) is true.
pub fn masked_fill_scalar_(self_: &Tensor, mask: &Tensor, value: Scalar) -> Result<Tensor> {
    check_mask(mask)?;
    let iter = IterConfig::new("masked_fill")
        .out(self_)
        .input_exact(self_)
        .input_exact(mask)
        .broadcast_to_out()
        .build()?;
    dispatch_all_types_and_bool!(self_.dtype(), "masked_fill", T => {
        masked_fill_loop::<T>(&iter, value)
    })?;
    iter.finish()
}

/// `masked_fill_.Tensor(Tensor(a!) self, Tensor mask, Tensor value)`: `value` must be
/// zero-dim.
pub fn masked_fill_tensor_(self_: &Tensor, mask: &Tensor, value: &Tensor) -> Result<Tensor> {
    let v = value_of(self_, value)?;
    masked_fill_scalar_(self_, mask, v)
}

/// `masked_fill.Scalar(Tensor self, Tensor mask, Scalar value)`: a copy of `self` (broadcast
/// with `mask`) with the masked elements set to `value`.
///
/// ```
/// use switchboard_cpu::masked_fill_scalar;
/// use switchboard_tensor::{Scalar, Tensor};
/// let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
/// let m = Tensor::from_vec(vec![false, true, false], &[3]).unwrap();
/// let r = masked_fill_scalar(&t, &m, Scalar::Float(-1.0)).unwrap();
/// assert_eq!(r.to_vec::<f32>().unwrap(), [1.0, -1.0, 3.0]);
/// ```
pub fn masked_fill_scalar(self_: &Tensor, mask: &Tensor, value: Scalar) -> Result<Tensor> {
    check_mask(mask)?;
    let shape = infer_size(self_.sizes(), mask.sizes())?;
    let base = self_.expand(&shape)?;
    let out = clone(&base, Some(switchboard_tensor::MemoryFormat::Contiguous))?;
    masked_fill_scalar_(&out, mask, value)
}

/// `masked_fill.Tensor(Tensor self, Tensor mask, Tensor value)`.
pub fn masked_fill_tensor(self_: &Tensor, mask: &Tensor, value: &Tensor) -> Result<Tensor> {
    let v = value_of(self_, value)?;
    masked_fill_scalar(self_, mask, v)
}

// Note [Clamp bounds outside the dtype's range]
// An integral clamp's bound is not converted blindly (a negative bound would wrap into an
// unsigned dtype): a lower bound below the dtype's range, or an upper bound above it, cannot
// change any element and is dropped; the opposite case would force every element to a value
// the dtype cannot hold, and is an error ("Clamp min value 300 is outside the representable
// range of Char"), as PyTorch's `prepare_clamp_bound`. Integer bounds compare exactly (no
// wrapping), float bounds as doubles. A floating dtype keeps its bounds, converted with the
// checked conversion (Note [Checked scalar conversion]).

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

fn clamp_impl(
    self_: &Tensor,
    min: Option<Scalar>,
    max: Option<Scalar>,
    out: Option<&Tensor>,
) -> Result<Tensor> {
    if min.is_none() && max.is_none() {
        return Err(invalid(
            "torch.clamp: At least one of 'min' or 'max' must not be None",
        ));
    }
    let mut promoted = ResultTypeState::default();
    promoted.update_tensor(self_);
    for s in min.into_iter().chain(max) {
        promoted.update_scalar(s);
    }
    let dtype = promoted.result().unwrap_or(DEFAULT_FLOAT);
    // PyTorch's clamp meta functions refuse to promote an in-place clamp, naming `self`'s
    // dtype by its C++ type.
    if out.is_some_and(|o| o.is_same(self_)) && dtype != self_.dtype() {
        return Err(invalid(format!(
            "result type {} can't be cast to the desired output type {}",
            dtype.c10_name(),
            self_.dtype().type_meta_name()
        )));
    }
    let iter = IterConfig::new("clamp")
        .maybe_out(out)
        .input(self_)
        .compute_dtype(dtype)
        .build()?;
    dispatch_all_types!(dtype, "clamp_scalar_cpu", T => clamp_scalar_loop::<T>(&iter, min, max))?;
    iter.finish()
}

/// `clamp(Tensor self, Scalar? min=None, Scalar? max=None)`: `min(max(x, min), max)` (NaN
/// stays NaN, a NaN bound makes every element NaN; the dtype promotes with the bounds).
pub fn clamp(self_: &Tensor, min: Option<Scalar>, max: Option<Scalar>) -> Result<Tensor> {
    clamp_impl(self_, min, max, None)
}

/// `clamp.out(Tensor self, Scalar? min=None, Scalar? max=None, *, Tensor(a!) out)`.
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

/// `clamp_min(Tensor self, Scalar min)`.
pub fn clamp_min(self_: &Tensor, min: Scalar) -> Result<Tensor> {
    clamp_impl(self_, Some(min), None, None)
}

/// `clamp_max(Tensor self, Scalar max)`.
pub fn clamp_max(self_: &Tensor, max: Scalar) -> Result<Tensor> {
    clamp_impl(self_, None, Some(max), None)
}

fn clamp_tensor_loop<T: CpuElement>(iter: &TensorIter, has_min: bool, has_max: bool) -> Result<()> {
    let f = |x: Acc<T>, lo: Acc<T>| x.max_nan(lo);
    let g = |x: Acc<T>, hi: Acc<T>| x.min_nan(hi);
    match (has_min, has_max) {
        (true, true) => iter.for_each3(move |x: T, lo: T, hi: T| {
            T::from_acc(g(f(x.to_acc(), lo.to_acc()), hi.to_acc()))
        }),
        (true, false) => iter.for_each2(move |x: T, lo: T| T::from_acc(f(x.to_acc(), lo.to_acc()))),
        _ => iter.for_each2(move |x: T, hi: T| T::from_acc(g(x.to_acc(), hi.to_acc()))),
    }
}

fn clamp_tensor_impl(
    self_: &Tensor,
    min: Option<&Tensor>,
    max: Option<&Tensor>,
    out: Option<&Tensor>,
) -> Result<Tensor> {
    if min.is_none() && max.is_none() {
        return Err(invalid(
            "torch.clamp: At least one of 'min' or 'max' must not be None",
        ));
    }
    let mut cfg = IterConfig::new("clamp").maybe_out(out).input(self_);
    for t in [min, max].into_iter().flatten() {
        cfg = cfg.input(t);
    }
    let iter = cfg.build()?;
    dispatch_all_types!(iter.common_dtype(), "clamp_cpu", T => {
        clamp_tensor_loop::<T>(&iter, min.is_some(), max.is_some())
    })?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clamp_propagates_nan_bounds() {
        let x = Tensor::from_vec(vec![-2.0f32, 0.5, 3.0, f32::NAN], &[4]).unwrap();
        let nan = Scalar::Float(f64::NAN);
        let all_nan = |t: Tensor| t.to_vec_as::<f64>().unwrap().iter().all(|v| v.is_nan());
        // Issue #22: a NaN bound was ignored; PyTorch returns NaN everywhere.
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
    fn where_overloads() {
        let c = Tensor::from_vec(vec![true, false, true], &[3, 1]).unwrap();
        // where.Scalar (a composite in switchboard-ops): both values wrapped numbers.
        let w = |v: Scalar| Tensor::wrapped_scalar(v);
        let r = where_self(&c, &w(Scalar::Int(1)), &w(Scalar::Int(0))).unwrap();
        assert_eq!(r.dtype(), ScalarType::Long);
        assert_eq!(r.to_vec::<i64>().unwrap(), [1, 0, 1]);
        let r = where_self(&c, &w(Scalar::Float(1.0)), &w(Scalar::Int(0))).unwrap();
        assert_eq!(r.dtype(), ScalarType::Float);
        let a = Tensor::from_vec(vec![5u8, 6], &[2]).unwrap();
        let r = where_scalar_other(&c, &a, Scalar::Int(9)).unwrap();
        assert_eq!(r.sizes(), &[3, 2]);
        assert_eq!(r.to_vec::<u8>().unwrap(), [5, 6, 9, 9, 5, 6]);
        let f = Tensor::from_vec(vec![1.0f32, 0.0], &[2]).unwrap();
        assert_eq!(
            where_self(&f, &a, &a).unwrap_err().to_string(),
            "where expected condition to be a boolean tensor, but got a tensor with dtype Float"
        );
        // A uint8 condition is deprecated but taken as bool.
        let r = where_self(&a, &a, &Tensor::from_vec(vec![0u8, 0], &[2]).unwrap()).unwrap();
        assert_eq!(r.to_vec::<u8>().unwrap(), [5, 6]);
    }

    #[test]
    fn masked_fill_forms() {
        let t = Tensor::from_vec(vec![1i32, 2, 3, 4], &[2, 2]).unwrap();
        let m = Tensor::from_vec(vec![true, false], &[2]).unwrap();
        let r = masked_fill_scalar(&t, &m, Scalar::Float(7.9)).unwrap();
        assert_eq!(r.to_vec::<i32>().unwrap(), [7, 2, 7, 4]);
        let v = Tensor::scalar_tensor(0, ScalarType::Long);
        masked_fill_tensor_(&t, &m, &v).unwrap();
        assert_eq!(t.to_vec::<i32>().unwrap(), [0, 2, 0, 4]);
        let bad = Tensor::from_vec(vec![1i64], &[1]).unwrap();
        assert!(masked_fill_tensor(&t, &m, &bad)
            .unwrap_err()
            .to_string()
            .contains("0-dimensional"));
        assert!(masked_fill_scalar(&t, &t, Scalar::Int(1))
            .unwrap_err()
            .to_string()
            .contains("boolean masks"));
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
