//! Binary arithmetic: `add`, `sub`, `mul`, `div` (with `rounding_mode`), `maximum`,
//! `minimum`, each with its Tensor and Scalar overloads, `out=` and in-place forms.
//!
//! Naming: `add_tensor` is `add.Tensor`, `add_scalar` is `add.Scalar`, `add_out` is
//! `add.out`, `add_` is `add_.Tensor` and `add_scalar_` is `add_.Scalar`; the other ops
//! follow the same scheme. Arguments are in schema order, `out` last.

use switchboard_tensor::{Scalar, ScalarType, Tensor};

use crate::dispatch_dtype::{Acc, CpuElement, Num};
use crate::error::{invalid, Result};
use crate::iter::{BinaryLoop, DenseBinary, IterConfig, TensorIter, DENSE_IN_PLACE, DENSE_SCALAR};
use crate::{dispatch_all_types, dispatch_all_types_and_bool};

/// Runs a binary elementwise kernel, written `|it| body` (or as a function path) against
/// [`BinaryLoop`], and returns the result: on a [`DenseBinary`] loop when no `out` is given (or
/// `out` is `a`: in place) and the operands qualify (Note [Dense binary loops]), else on a
/// [`TensorIter`] (the body is compiled for each). Arguments: op name, `a`, `b`,
/// `out: Option<&Tensor>`, `int_to_float`.
macro_rules! binary_op {
    ($op:expr, $a:expr, $b:expr, $out:expr, $int_to_float:expr, |$it:ident| $body:expr $(,)?) => {{
        let (a, b, out, int_to_float): (
            &switchboard_tensor::Tensor,
            &switchboard_tensor::Tensor,
            Option<&switchboard_tensor::Tensor>,
            bool,
        ) = ($a, $b, $out, $int_to_float);
        'op: {
            // Each dense form runs its own copy of the body (a different loop type).
            match out {
                None => {
                    if let Some(dense) = $crate::iter::DenseBinary::try_new(a, b, int_to_float)? {
                        break 'op $crate::binary::run_dense(dense, |$it| $body);
                    }
                    if let Some(s) = $crate::iter::scalar_operand(a, b, int_to_float)? {
                        break 'op $crate::binary::binary_scalar(a, &s, |$it| $body);
                    }
                }
                Some(out) if out.is_same(a) => {
                    if let Some(dense) = $crate::iter::DenseBinary::try_in_place(a, b, int_to_float)
                    {
                        break 'op $crate::binary::run_dense(dense, |$it| $body);
                    }
                    if let Some(s) = $crate::iter::scalar_operand(a, b, int_to_float)? {
                        break 'op $crate::binary::binary_scalar_in_place(a, &s, |$it| $body);
                    }
                }
                Some(_) => {}
            }
            $crate::binary::binary_general($op, a, b, out, int_to_float, |$it| $body)
        }
    }};
    ($op:expr, $a:expr, $b:expr, $out:expr, $int_to_float:expr, $kernel:path $(,)?) => {
        $crate::binary::binary_op!($op, $a, $b, $out, $int_to_float, |it| $kernel(it))
    };
}
pub(crate) use binary_op;

/// Runs `kernel` on a dense loop and returns the loop's result (inlined: each op's dense path).
#[inline(always)]
pub(crate) fn run_dense<const MODE: u8>(
    dense: DenseBinary<'_, MODE>,
    kernel: impl FnOnce(&DenseBinary<'_, MODE>) -> Result<()>,
) -> Result<Tensor> {
    kernel(&dense)?;
    dense.finish()
}

/// The scalar path of [`binary_op!`]: `a op s`, `s` from [`scalar_operand`](crate::iter::scalar_operand).
/// Out of line, like the general path, so that the tensor-tensor paths inlined in each op
/// keep their code.
#[inline(never)]
pub(crate) fn binary_scalar(
    a: &Tensor,
    s: &Tensor,
    kernel: impl FnOnce(&DenseBinary<'_, DENSE_SCALAR>) -> Result<()>,
) -> Result<Tensor> {
    run_dense(DenseBinary::with_scalar(a, s)?, kernel)
}

/// [`binary_scalar`] in place: `a op= s`.
#[inline(never)]
pub(crate) fn binary_scalar_in_place(
    a: &Tensor,
    s: &Tensor,
    kernel: impl FnOnce(&DenseBinary<'_, { DENSE_IN_PLACE | DENSE_SCALAR }>) -> Result<()>,
) -> Result<Tensor> {
    run_dense(DenseBinary::in_place_with_scalar(a, s), kernel)
}

/// The general path of [`binary_op!`]: builds a two-input iterator, runs `kernel` on it and
/// returns the result.
#[inline(never)]
pub(crate) fn binary_general(
    op: &'static str,
    a: &Tensor,
    b: &Tensor,
    out: Option<&Tensor>,
    int_to_float: bool,
    kernel: impl FnOnce(&TensorIter) -> Result<()>,
) -> Result<Tensor> {
    let iter = IterConfig::new(op)
        .maybe_out(out)
        .input(a)
        .input(b)
        .int_to_float(int_to_float)
        .build()?;
    kernel(&iter)?;
    iter.finish()
}

/// PyTorch's `alpha_check`.
#[inline]
fn alpha_check(dtype: ScalarType, alpha: Scalar) -> Result<()> {
    if alpha.is_boolean() && dtype != ScalarType::Bool {
        return Err(invalid("Boolean alpha only supported for Boolean results."));
    }
    if dtype.is_integral(true) && alpha.is_floating_point() {
        return Err(invalid(
            "For integral input tensors, argument alpha must not be a floating point number.",
        ));
    }
    Ok(())
}

fn add_kernel(iter: &impl BinaryLoop, alpha: Scalar) -> Result<()> {
    alpha_check(iter.common_dtype(), alpha)?;
    dispatch_all_types_and_bool!(iter.common_dtype(), "add_cpu", T => add_loop::<T>(iter, alpha))
}

fn add_loop<T: CpuElement>(iter: &impl BinaryLoop, alpha: Scalar) -> Result<()> {
    // `alpha.to<scalar_t>()`: checked, and narrowed to the element type before computing
    // (Note [Checked scalar conversion]); the default alpha fits every dtype, and skips the
    // check on the hot path.
    let alpha = match alpha {
        Scalar::Int(1) => Acc::<T>::ONE,
        _ => alpha.checked_to::<T>()?.to_acc(),
    };
    if alpha == Acc::<T>::ONE {
        iter.for_each2(|a: T, b: T| T::from_acc(a.to_acc().add(b.to_acc())))
    } else {
        // One rounding, as PyTorch's kernel (Note [Fused multiply-add]).
        iter.for_each2_fused(move |a: T, b: T| T::from_acc(b.to_acc().mul_add(alpha, a.to_acc())))
    }
}

fn sub_check(a: &Tensor, b: &Tensor) -> Result<()> {
    if a.dtype() == ScalarType::Bool && b.dtype() == ScalarType::Bool {
        return Err(invalid(
            "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` \
             or `logical_xor()` operator instead.",
        ));
    }
    if a.dtype() == ScalarType::Bool || b.dtype() == ScalarType::Bool {
        return Err(invalid(
            "Subtraction, the `-` operator, with a bool tensor is not supported. If you are \
             trying to invert a mask, use the `~` or `logical_not()` operator instead.",
        ));
    }
    Ok(())
}

/// Runs `out = T::from_acc(f(a, b))` over an iterator of `T`s, computing in `Acc<T>`.
pub(crate) fn acc_loop2<T: CpuElement>(
    iter: &impl BinaryLoop,
    f: impl Fn(Acc<T>, Acc<T>) -> Acc<T> + Sync,
) -> Result<()> {
    iter.for_each2(move |a: T, b: T| T::from_acc(f(a.to_acc(), b.to_acc())))
}

/// [`acc_loop2`] for an `f` built on `mul_add` (Note [Fused multiply-add]).
pub(crate) fn acc_loop2_fused<T: CpuElement>(
    iter: &impl BinaryLoop,
    f: impl Fn(Acc<T>, Acc<T>) -> Acc<T> + Sync,
) -> Result<()> {
    // Inlined whole into the loop compiled with FMA, so that `f`'s `mul_add`s are instructions
    // there (Note [Fused multiply-add]).
    iter.for_each2_fused(
        #[inline(always)]
        move |a: T, b: T| T::from_acc(f(a.to_acc(), b.to_acc())),
    )
}

// Note [Reduced-precision scalar operands]
// For a float16/bfloat16 result, PyTorch's `mul` and `div` (every rounding mode) read a
// second operand that is a single value (`iter.is_scalar(2)`: a Python number or any
// one-element tensor) at its original precision, in the op math type (float), instead of
// the value cast to the result dtype: `float16 * 70000` is `0 * 70000.0f = 0` at element 0,
// not `0 * inf = NaN`, and `x / 0.3` divides by `0.3f`, not by `0.2998`. `add`/`sub` (whose
// `other` goes through the common dtype) and the other binary kernels have no such path.

/// The second operand's original value in the op math type, when the result is a reduced
/// float and that operand is a single value (Note [Reduced-precision scalar operands]).
fn reduced_float_scalar(dtype: ScalarType, b: &Tensor) -> Result<Option<f64>> {
    if !matches!(dtype, ScalarType::Half | ScalarType::BFloat16) || b.numel() != 1 {
        return Ok(None);
    }
    Ok(Some(b.item()?.to_f64()))
}

/// Runs `out = f(a, b)` over the first input only, `b` the scalar of
/// [`reduced_float_scalar`] in the op math type.
fn scalar_acc_loop<T: CpuElement>(
    iter: &impl BinaryLoop,
    b: f64,
    f: impl Fn(Acc<T>, Acc<T>) -> Acc<T> + Sync,
) -> Result<()> {
    let b = <Acc<T> as Num>::from_f64(b);
    iter.for_each2(move |a: T, _: T| T::from_acc(f(a.to_acc(), b)))
}

fn mul_kernel(iter: &impl BinaryLoop, b: &Tensor) -> Result<()> {
    let dtype = iter.common_dtype();
    if let Some(b) = reduced_float_scalar(dtype, b)? {
        return dispatch_all_types!(dtype, "mul_cpu_reduced_float", T => {
            scalar_acc_loop::<T>(iter, b, Num::mul)
        });
    }
    dispatch_all_types_and_bool!(dtype, "mul_cpu", T => {
        acc_loop2::<T>(iter, Num::mul)
    })
}

/// The rounding mode of `div`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rounding {
    True,
    Trunc,
    Floor,
}

fn parse_rounding(mode: Option<&str>) -> Result<Rounding> {
    match mode {
        None => Ok(Rounding::True),
        Some("trunc") => Ok(Rounding::Trunc),
        Some("floor") => Ok(Rounding::Floor),
        Some(m) => Err(invalid(format!(
            "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{m}'"
        ))),
    }
}

fn div_kernel(iter: &impl BinaryLoop, mode: Rounding, b: &Tensor) -> Result<()> {
    let dt = iter.common_dtype();
    if mode != Rounding::True && dt.is_integral(false) && has_zero(iter.input(1))? {
        return Err(invalid("ZeroDivisionError"));
    }
    if let Some(b) = reduced_float_scalar(dt, b)? {
        return dispatch_all_types!(dt, "div_cpu_reduced_float", T => match mode {
            Rounding::True => scalar_acc_loop::<T>(iter, b, Num::div),
            Rounding::Trunc => scalar_acc_loop::<T>(iter, b, Num::trunc_div),
            Rounding::Floor => scalar_acc_loop::<T>(iter, b, Num::floor_div),
        });
    }
    match mode {
        Rounding::True => dispatch_all_types!(dt, "div_true_cpu", T => {
            iter.for_each2(|a: T, b: T| T::from_acc(a.to_acc().div(b.to_acc())))
        }),
        Rounding::Trunc => dispatch_all_types!(dt, "trunc_div_cpu", T => {
            iter.for_each2(|a: T, b: T| T::from_acc(a.to_acc().trunc_div(b.to_acc())))
        }),
        Rounding::Floor => dispatch_all_types!(dt, "floor_div_cpu", T => {
            iter.for_each2(|a: T, b: T| T::from_acc(a.to_acc().floor_div(b.to_acc())))
        }),
    }
}

/// Whether an integer tensor holds a zero.
pub(crate) fn has_zero(t: &Tensor) -> Result<bool> {
    dispatch_all_types_and_bool!(t.dtype(), "div", T => has_zero_typed::<T>(t))
}

fn has_zero_typed<T: CpuElement>(t: &Tensor) -> Result<bool> {
    Ok(t.to_vec::<T>()?
        .iter()
        .any(|x| x.to_acc() == Acc::<T>::ZERO))
}

pub(crate) fn max_min_kernel(iter: &impl BinaryLoop, max: bool) -> Result<()> {
    let name = if max { "maximum_cpu" } else { "minimum_cpu" };
    dispatch_all_types_and_bool!(iter.common_dtype(), name, T => {
        if max {
            acc_loop2::<T>(iter, Num::max_nan)
        } else {
            acc_loop2::<T>(iter, Num::min_nan)
        }
    })
}

macro_rules! binary_family {
    (
        $(#[$doc:meta])*
        $tensor:ident, $scalar:ident, $out:ident, $scalar_out:ident, $inplace:ident,
        $scalar_inplace:ident, $name:literal, |$it:ident, $a:ident, $b:ident, $alpha:ident| $body:expr
    ) => {
        $(#[$doc])*
        pub fn $tensor(self_: &Tensor, other: &Tensor, alpha: Scalar) -> Result<Tensor> {
            let ($a, $b, $alpha) = (self_, other, alpha);
            binary_op!($name, $a, $b, None, false, |$it| $body)
        }
        #[doc = concat!("`", $name, ".Scalar(Tensor self, Scalar other, Scalar alpha=1)`.")]
        pub fn $scalar(self_: &Tensor, other: Scalar, alpha: Scalar) -> Result<Tensor> {
            $tensor(self_, &Tensor::wrapped_scalar(other), alpha)
        }
        #[doc = concat!("`", $name, ".out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out)`.")]
        pub fn $out(self_: &Tensor, other: &Tensor, alpha: Scalar, out: &Tensor) -> Result<Tensor> {
            let ($a, $b, $alpha) = (self_, other, alpha);
            binary_op!($name, $a, $b, Some(out), false, |$it| $body)
        }
        #[doc = concat!("`", $name, ".Scalar_out(Tensor self, Scalar other, Scalar alpha=1, *, Tensor(a!) out)`.")]
        pub fn $scalar_out(self_: &Tensor, other: Scalar, alpha: Scalar, out: &Tensor) -> Result<Tensor> {
            $out(self_, &Tensor::wrapped_scalar(other), alpha, out)
        }
        #[doc = concat!("`", $name, "_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1)`.")]
        pub fn $inplace(self_: &Tensor, other: &Tensor, alpha: Scalar) -> Result<Tensor> {
            $out(self_, other, alpha, self_)
        }
        #[doc = concat!("`", $name, "_.Scalar(Tensor(a!) self, Scalar other, Scalar alpha=1)`.")]
        pub fn $scalar_inplace(self_: &Tensor, other: Scalar, alpha: Scalar) -> Result<Tensor> {
            $out(self_, &Tensor::wrapped_scalar(other), alpha, self_)
        }
    };
}

binary_family!(
    /// `add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1)`: `self + alpha * other`,
    /// broadcasting, with type promotion; bool addition is logical or.
    ///
    /// ```
    /// use switchboard_cpu::add_tensor;
    /// use switchboard_tensor::{Scalar, Tensor};
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
    /// let b = Tensor::from_vec(vec![10i64], &[1]).unwrap();
    /// let c = add_tensor(&a, &b, Scalar::Int(2)).unwrap();
    /// assert_eq!(c.to_vec::<f32>().unwrap(), [21.0, 22.0]);
    /// ```
    add_tensor, add_scalar, add_out, add_scalar_out, add_, add_scalar_, "add",
    |iter, _a, _b, alpha| add_kernel(iter, alpha)
);

binary_family!(
    /// `sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1)`: `self - alpha * other`
    /// (bool tensors are rejected, as in PyTorch).
    sub_tensor, sub_scalar, sub_out, sub_scalar_out, sub_, sub_scalar_, "sub",
    |iter, a, b, alpha| {
        sub_check(a, b)?;
        add_kernel(iter, -alpha)
    }
);

/// `rsub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1)`: `other - alpha * self`.
pub fn rsub_tensor(self_: &Tensor, other: &Tensor, alpha: Scalar) -> Result<Tensor> {
    sub_tensor(other, self_, alpha)
}

/// `mul.Tensor(Tensor self, Tensor other)`: the elementwise product (bool: logical and).
pub fn mul_tensor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    binary_op!("mul", self_, other, None, false, |it| mul_kernel(it, other))
}

/// `mul.Scalar(Tensor self, Scalar other)`.
pub fn mul_scalar(self_: &Tensor, other: Scalar) -> Result<Tensor> {
    mul_tensor(self_, &Tensor::wrapped_scalar(other))
}

/// `mul.out(Tensor self, Tensor other, *, Tensor(a!) out)`.
pub fn mul_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Result<Tensor> {
    binary_op!("mul", self_, other, Some(out), false, |it| mul_kernel(
        it, other
    ))
}

/// `mul_.Tensor(Tensor(a!) self, Tensor other)`.
pub fn mul_(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    mul_out(self_, other, self_)
}

/// `mul_.Scalar(Tensor(a!) self, Scalar other)`.
pub fn mul_scalar_(self_: &Tensor, other: Scalar) -> Result<Tensor> {
    mul_out(self_, &Tensor::wrapped_scalar(other), self_)
}

fn div_impl(a: &Tensor, b: &Tensor, mode: Option<&str>, out: Option<&Tensor>) -> Result<Tensor> {
    let mode = parse_rounding(mode)?;
    binary_op!("div", a, b, out, mode == Rounding::True, |it| {
        div_kernel(it, mode, b)
    })
}

/// `div.Tensor(Tensor self, Tensor other)`: true division (integers promote to the default
/// float dtype).
///
/// ```
/// use switchboard_cpu::{div_tensor, div_tensor_mode};
/// use switchboard_tensor::Tensor;
/// let a = Tensor::from_vec(vec![7i64, -7], &[2]).unwrap();
/// let b = Tensor::from_vec(vec![2i64], &[1]).unwrap();
/// assert_eq!(div_tensor(&a, &b).unwrap().to_vec::<f32>().unwrap(), [3.5, -3.5]);
/// let f = div_tensor_mode(&a, &b, Some("floor")).unwrap();
/// assert_eq!(f.to_vec::<i64>().unwrap(), [3, -4]);
/// ```
pub fn div_tensor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    div_impl(self_, other, None, None)
}

/// `div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode)`: `None` (true
/// division), `"trunc"` or `"floor"` (integer inputs stay integers; dividing by an integer
/// zero fails with `ZeroDivisionError`).
pub fn div_tensor_mode(
    self_: &Tensor,
    other: &Tensor,
    rounding_mode: Option<&str>,
) -> Result<Tensor> {
    div_impl(self_, other, rounding_mode, None)
}

/// `div.Scalar(Tensor self, Scalar other)`.
pub fn div_scalar(self_: &Tensor, other: Scalar) -> Result<Tensor> {
    div_impl(self_, &Tensor::wrapped_scalar(other), None, None)
}

/// `div.Scalar_mode(Tensor self, Scalar other, *, str? rounding_mode)`.
pub fn div_scalar_mode(
    self_: &Tensor,
    other: Scalar,
    rounding_mode: Option<&str>,
) -> Result<Tensor> {
    div_impl(self_, &Tensor::wrapped_scalar(other), rounding_mode, None)
}

/// `div.out(Tensor self, Tensor other, *, Tensor(a!) out)`.
pub fn div_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Result<Tensor> {
    div_impl(self_, other, None, Some(out))
}

/// `div.out_mode(Tensor self, Tensor other, *, str? rounding_mode, Tensor(a!) out)`.
pub fn div_out_mode(
    self_: &Tensor,
    other: &Tensor,
    rounding_mode: Option<&str>,
    out: &Tensor,
) -> Result<Tensor> {
    div_impl(self_, other, rounding_mode, Some(out))
}

/// `div_.Tensor(Tensor(a!) self, Tensor other)`.
pub fn div_(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    div_impl(self_, other, None, Some(self_))
}

/// `div_.Tensor_mode(Tensor(a!) self, Tensor other, *, str? rounding_mode)`.
pub fn div_mode_(self_: &Tensor, other: &Tensor, rounding_mode: Option<&str>) -> Result<Tensor> {
    div_impl(self_, other, rounding_mode, Some(self_))
}

/// `div_.Scalar(Tensor(a!) self, Scalar other)`.
pub fn div_scalar_(self_: &Tensor, other: Scalar) -> Result<Tensor> {
    div_impl(self_, &Tensor::wrapped_scalar(other), None, Some(self_))
}

/// `maximum(Tensor self, Tensor other)`: elementwise maximum, propagating NaN.
pub fn maximum(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    binary_op!("maximum", self_, other, None, false, |it| {
        max_min_kernel(it, true)
    })
}

/// `maximum.out(Tensor self, Tensor other, *, Tensor(a!) out)`.
pub fn maximum_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Result<Tensor> {
    binary_general("maximum", self_, other, Some(out), false, |it| {
        max_min_kernel(it, true)
    })
}

/// `minimum(Tensor self, Tensor other)`: elementwise minimum, propagating NaN.
pub fn minimum(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    binary_op!("minimum", self_, other, None, false, |it| {
        max_min_kernel(it, false)
    })
}

/// `minimum.out(Tensor self, Tensor other, *, Tensor(a!) out)`.
pub fn minimum_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Result<Tensor> {
    binary_general("minimum", self_, other, Some(out), false, |it| {
        max_min_kernel(it, false)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{pow_scalar, pow_tensor_scalar};

    fn f32s(v: &[f32], s: &[i64]) -> Tensor {
        Tensor::from_vec(v.to_vec(), s).unwrap()
    }

    #[test]
    fn add_broadcast_and_promotion() {
        let a = f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
        let b = Tensor::from_vec(vec![1i32, 2, 3], &[3]).unwrap();
        let c = add_tensor(&a, &b, Scalar::Int(1)).unwrap();
        assert_eq!(c.dtype(), ScalarType::Float);
        assert_eq!(c.to_vec::<f32>().unwrap(), [2.0, 4.0, 6.0, 5.0, 7.0, 9.0]);
        let i = add_scalar(&b, Scalar::Float(0.5), Scalar::Int(1)).unwrap();
        assert_eq!(i.dtype(), ScalarType::Float);
        let j = add_scalar(&b, Scalar::Int(1), Scalar::Int(1)).unwrap();
        assert_eq!(j.dtype(), ScalarType::Int);
        let err = add_tensor(&a, &f32s(&[1.0; 4], &[4]), Scalar::Int(1)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "The size of tensor a (3) must match the size of tensor b (4) at non-singleton \
             dimension 1"
        );
        assert!(add_tensor(&b, &b, Scalar::Float(1.5)).is_err());
    }

    #[test]
    fn in_place_and_out() {
        let a = f32s(&[1.0, 2.0], &[2]);
        add_scalar_(&a, Scalar::Float(1.0), Scalar::Int(1)).unwrap();
        assert_eq!(a.to_vec::<f32>().unwrap(), [2.0, 3.0]);
        let i = Tensor::from_vec(vec![1i64, 2], &[2]).unwrap();
        assert_eq!(
            add_(&i, &a, Scalar::Int(1)).unwrap_err().to_string(),
            "result type Float can't be cast to the desired output type Long"
        );
        let out = Tensor::zeros(&[2], ScalarType::Double).unwrap();
        mul_out(&a, &i, &out).unwrap();
        assert_eq!(out.to_vec::<f64>().unwrap(), [2.0, 6.0]);
        let small = Tensor::zeros(&[2], ScalarType::Float).unwrap();
        let err = add_(&small, &f32s(&[1.0; 4], &[2, 2]), Scalar::Int(1)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "output with shape [2] doesn't match the broadcast shape [2, 2]"
        );
    }

    #[test]
    fn bool_rules() {
        let t = Tensor::from_vec(vec![true, false], &[2]).unwrap();
        let s = add_tensor(&t, &t, Scalar::Int(1)).unwrap();
        assert_eq!(s.to_vec::<bool>().unwrap(), [true, false]);
        assert!(sub_tensor(&t, &t, Scalar::Int(1))
            .unwrap_err()
            .to_string()
            .contains("two bool tensors"));
        let d = div_tensor(&t, &t).unwrap();
        assert_eq!(d.dtype(), ScalarType::Float);
    }

    #[test]
    fn division_modes() {
        let a = Tensor::from_vec(vec![7i32, -7, 7, -7], &[4]).unwrap();
        let b = Tensor::from_vec(vec![2i32, 2, -2, -2], &[4]).unwrap();
        let t = div_tensor_mode(&a, &b, Some("trunc")).unwrap();
        assert_eq!(t.to_vec::<i32>().unwrap(), [3, -3, -3, 3]);
        let f = div_tensor_mode(&a, &b, Some("floor")).unwrap();
        assert_eq!(f.to_vec::<i32>().unwrap(), [3, -4, -4, 3]);
        let z = Tensor::from_vec(vec![0i32], &[1]).unwrap();
        assert_eq!(
            div_tensor_mode(&a, &z, Some("floor"))
                .unwrap_err()
                .to_string(),
            "ZeroDivisionError"
        );
        assert!(div_tensor_mode(&a, &b, Some("round")).is_err());
        let x = f32s(&[-7.5], &[1]);
        let q = div_scalar_mode(&x, Scalar::Float(2.0), Some("floor")).unwrap();
        assert_eq!(q.to_vec::<f32>().unwrap(), [-4.0]);
    }

    #[test]
    fn pow_and_extrema() {
        let a = f32s(&[4.0, f32::NAN], &[2]);
        let p = pow_tensor_scalar(&a, Scalar::Float(0.5)).unwrap();
        assert_eq!(p.to_vec::<f32>().unwrap()[0], 2.0);
        let b = f32s(&[5.0, 1.0], &[2]);
        let m = maximum(&a, &b).unwrap().to_vec::<f32>().unwrap();
        assert_eq!(m[0], 5.0);
        assert!(m[1].is_nan());
        let s = pow_scalar(Scalar::Int(2), &Tensor::from_vec(vec![3i64], &[1]).unwrap()).unwrap();
        assert_eq!(s.to_vec::<i64>().unwrap(), [8]);
    }
}

#[cfg(test)]
#[path = "binary_dense_tests.rs"]
mod dense_tests;
