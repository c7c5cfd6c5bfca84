//! Selection ops: `where` (all four overloads) and `masked_fill` (Scalar and Tensor value),
//! with their `out=` and in-place forms.

use switchboard_tensor::RawOps;
use switchboard_tensor::{Scalar, ScalarType, Tensor};

use crate::copy::clone;
use crate::dispatch_all_types_and_bool;
use crate::dispatch_dtype::CpuElement;
use crate::error::{invalid, Result};
use crate::iter::{IterConfig, TensorIter};
use crate::promote::{infer_size, ResultTypeState, DEFAULT_FLOAT};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
