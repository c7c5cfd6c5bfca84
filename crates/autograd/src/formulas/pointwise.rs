//! Pointwise operators: clamp, division, powers, `atan2`, `log1p`, masked fills, dtype
//! conversion.

use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::{Device, Scalar, ScalarType, Tensor};

/// A bound of `clamp` (a number, or a tensor for `clamp.Tensor`): PyTorch overloads
/// `clamp_backward` on both, and they differ at the bounds. With number bounds (PyTorch 2.15's
/// `clamp_backward`: `(self > min).logical_and_(self < max)`) an element equal to a bound gets
/// no gradient, as `clamp_min` and `clamp_max`; with tensor bounds the tie goes to `self`.
pub(crate) trait ClampBound: Copy {
    /// Where `x` passes through a lower bound `self`.
    fn passes_min(self, x: &Tensor) -> Result<Tensor>;
    /// Where `x` passes through an upper bound `self`.
    fn passes_max(self, x: &Tensor) -> Result<Tensor>;
}

impl ClampBound for Scalar {
    fn passes_min(self, x: &Tensor) -> Result<Tensor> {
        ops::gt_scalar(x, self)
    }
    fn passes_max(self, x: &Tensor) -> Result<Tensor> {
        ops::lt_scalar(x, self)
    }
}

impl ClampBound for &Tensor {
    fn passes_min(self, x: &Tensor) -> Result<Tensor> {
        ops::ge(x, self)
    }
    fn passes_max(self, x: &Tensor) -> Result<Tensor> {
        ops::le(x, self)
    }
}

/// `clamp`'s gradient of `self`: `grad` where `self` passes through the bounds (see
/// [`ClampBound`]), else 0.
pub(crate) fn clamp_backward<B: ClampBound>(
    grad: &Tensor,
    self_: &Tensor,
    min: Option<B>,
    max: Option<B>,
) -> Result<Tensor> {
    let keep = |mask: &Tensor| ops::where_scalar_other(mask, grad, 0.0);
    match (min, max) {
        (Some(lo), Some(hi)) => keep(&ops::logical_and(
            &lo.passes_min(self_)?,
            &hi.passes_max(self_)?,
        )?),
        (Some(lo), None) => keep(&lo.passes_min(self_)?),
        (None, Some(hi)) => keep(&hi.passes_max(self_)?),
        (None, None) => Ok(grad.clone()),
    }
}

/// `clamp.Tensor`'s gradients of `min` and `max`: `min` gets `grad` where `self < min` (and
/// `min < max` when both are given), `max` where `self > max` or `max < min` (the result is
/// then `max`).
pub(crate) fn clamp_backward_min_max(
    grad: &Tensor,
    self_: &Tensor,
    min: Option<&Tensor>,
    max: Option<&Tensor>,
    grad_input_mask: [bool; 2],
) -> Result<(Option<Tensor>, Option<Tensor>)> {
    let keep = |mask: &Tensor| ops::where_scalar_other(mask, grad, 0.0);
    let mut out = (None, None);
    match (min, max) {
        (Some(lo), Some(hi)) => {
            if grad_input_mask[0] {
                out.0 = Some(keep(&ops::logical_and(
                    &ops::lt(self_, lo)?,
                    &ops::lt(lo, hi)?,
                )?)?);
            }
            if grad_input_mask[1] {
                out.1 = Some(keep(&ops::logical_or(
                    &ops::gt(self_, hi)?,
                    &ops::lt(hi, lo)?,
                )?)?);
            }
        }
        (Some(lo), None) if grad_input_mask[0] => out.0 = Some(keep(&ops::lt(self_, lo)?)?),
        (None, Some(hi)) if grad_input_mask[1] => out.1 = Some(keep(&ops::gt(self_, hi)?)?),
        _ => {}
    }
    Ok(out)
}

/// The divisor of a division (`div.Tensor`'s tensor, `div.Scalar`'s number): PyTorch overloads
/// `div_tensor_self_backward` on both.
pub(crate) trait Divisor {
    /// `grad / self`.
    fn divide(self, grad: &Tensor) -> Result<Tensor>;
}

impl Divisor for &Tensor {
    fn divide(self, grad: &Tensor) -> Result<Tensor> {
        ops::div(grad, self)
    }
}

impl Divisor for Scalar {
    fn divide(self, grad: &Tensor) -> Result<Tensor> {
        ops::div_scalar(grad, self)
    }
}

/// The gradient of the dividend: `grad / other`, or zeros with a rounding mode (the result is
/// piecewise constant).
pub(crate) fn div_tensor_self_backward(
    grad: &Tensor,
    other: impl Divisor,
    self_scalar_type: ScalarType,
    rounding_mode: Option<&str>,
) -> Result<Tensor> {
    if rounding_mode.is_some() {
        return ops::zeros_like_with(
            grad,
            ops::ZerosLikeOptions::default().dtype(self_scalar_type),
        );
    }
    other.divide(grad)
}

/// The gradient of the divisor: `-grad * self / other²`, or zeros with a rounding mode.
pub(crate) fn div_tensor_other_backward(
    grad: &Tensor,
    self_: &Tensor,
    other: &Tensor,
    rounding_mode: Option<&str>,
) -> Result<Tensor> {
    if rounding_mode.is_some() {
        return ops::zeros_like_with(grad, ops::ZerosLikeOptions::default().dtype(other.dtype()));
    }
    ops::mul(
        &ops::neg(grad)?,
        &ops::div(&ops::div(self_, other)?, other)?,
    )
}

/// `atan2`'s gradients: `grad * other / (self² + other²)` for `self`,
/// `grad * -self / (self² + other²)` for `other`.
pub(crate) fn atan2_backward(
    grad: &Tensor,
    self_: &Tensor,
    other: &Tensor,
    grad_input_mask: [bool; 2],
) -> Result<(Option<Tensor>, Option<Tensor>)> {
    let recip = ops::reciprocal(&ops::add(
        &ops::mul(self_, self_)?,
        &ops::mul(other, other)?,
    )?)?;
    let self_grad = if grad_input_mask[0] {
        Some(ops::mul(&ops::mul(grad, other)?, &recip)?)
    } else {
        None
    };
    let other_grad = if grad_input_mask[1] {
        Some(ops::mul(&ops::mul(grad, &ops::neg(self_)?)?, &recip)?)
    } else {
        None
    };
    Ok((self_grad, other_grad))
}

/// `log1p`'s gradient: `grad / (self + 1)`.
pub(crate) fn log1p_backward(grad: &Tensor, self_: &Tensor) -> Result<Tensor> {
    ops::div(grad, &ops::add_scalar(self_, 1)?)
}

/// `pow.Tensor_Scalar`'s gradient: `grad * exponent * self^(exponent - 1)` (zeros for a zero
/// exponent).
pub(crate) fn pow_backward(grad: &Tensor, self_: &Tensor, exponent: Scalar) -> Result<Tensor> {
    let e = exponent.to_f64();
    if e == 0.0 {
        return ops::zeros_like(self_);
    }
    let d = ops::mul_scalar(&ops::pow_tensor_scalar(self_, e - 1.0)?, e)?;
    ops::mul(grad, &d)
}

/// `pow.Tensor_Tensor`'s gradient of the base: `grad * exponent * self^(exponent - 1)`, 0 where
/// the exponent is 0.
pub(crate) fn pow_backward_self(
    grad: &Tensor,
    self_: &Tensor,
    exponent: &Tensor,
) -> Result<Tensor> {
    let d = ops::mul(exponent, &ops::pow(self_, &ops::sub_scalar(exponent, 1)?)?)?;
    ops::where_scalar_self(&ops::eq_scalar(exponent, 0.0)?, 0.0, &ops::mul(grad, &d)?)
}

/// The base of a power (a tensor, or `pow.Scalar`'s number): PyTorch overloads
/// `pow_backward_exponent` on both.
pub(crate) trait PowBase {
    /// `grad * result * ln(base)`, 0 where the base is 0 and the exponent non-negative (the
    /// limit of `d(a^b)/db` as `a -> +0`; `-inf` for a negative exponent).
    fn exponent_grad(self, grad: &Tensor, exponent: &Tensor, result: &Tensor) -> Result<Tensor>;
}

impl PowBase for &Tensor {
    fn exponent_grad(self, grad: &Tensor, exponent: &Tensor, result: &Tensor) -> Result<Tensor> {
        let cond = ops::logical_and(&ops::eq_scalar(self, 0)?, &ops::ge_scalar(exponent, 0)?)?;
        let d = ops::mul(result, &ops::log(self)?)?;
        ops::mul(grad, &ops::where_scalar_self(&cond, 0.0, &d)?)
    }
}

impl PowBase for Scalar {
    fn exponent_grad(self, grad: &Tensor, exponent: &Tensor, result: &Tensor) -> Result<Tensor> {
        let d = ops::mul_scalar(result, self.to_f64().ln())?;
        if self.to_f64() == 0.0 {
            let cond = ops::ge_scalar(exponent, 0)?;
            return ops::mul(grad, &ops::where_scalar_self(&cond, 0.0, &d)?);
        }
        ops::mul(grad, &d)
    }
}

/// The gradient of a power's exponent.
pub(crate) fn pow_backward_exponent(
    grad: &Tensor,
    base: impl PowBase,
    exponent: &Tensor,
    result: &Tensor,
) -> Result<Tensor> {
    base.exponent_grad(grad, exponent, result)
}

/// `masked_fill.Tensor`'s gradient of the fill value: the sum of `grad` where the mask is set.
pub(crate) fn masked_fill_backward(grad: &Tensor, mask: &Tensor) -> Result<Tensor> {
    ops::sum(&ops::where_scalar_other(mask, grad, 0)?)
}

/// `t.masked_fill(mask, value)`, in place on `t` (a temporary of the formula) when grad mode is
/// off, out of place when the gradient is being recorded.
pub(crate) fn masked_fill_inplace_if_safe(
    t: &Tensor,
    mask: &Tensor,
    value: impl Into<Scalar>,
) -> Result<Tensor> {
    if crate::is_grad_enabled() {
        ops::masked_fill(t, mask, value)
    } else {
        ops::masked_fill_(t, mask, value)
    }
}

/// `_to_copy`'s gradient: `grad` back in the input's dtype and on its device.
pub(crate) fn _to_copy_backward(
    grad: &Tensor,
    dtype: ScalarType,
    device: Device,
) -> Result<Tensor> {
    // A real-to-complex copy's gradient is the real part, taken without the warning a
    // complex-to-real cast gives (PyTorch's handle_r_to_c).
    let real;
    let grad = if !dtype.is_complex() && grad.dtype().is_complex() {
        real = ops::real(grad)?;
        &real
    } else {
        grad
    };
    if grad.dtype() == dtype && grad.device() == device {
        return Ok(grad.clone());
    }
    ops::_to_copy_with(
        grad,
        ops::ToCopyOptions::default().dtype(dtype).device(device),
    )
}
