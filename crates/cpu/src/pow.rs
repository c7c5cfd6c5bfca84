//! `pow` in all its overloads: tensor and scalar bases and exponents, `out=` and in-place
//! forms.

use switchboard_tensor::{Scalar, ScalarType, Tensor};

use crate::binary::{acc_loop2, binary_general, binary_op};
use crate::dispatch_all_types;
use crate::dispatch_dtype::{Float, FloatElement, Num};
use crate::error::{invalid, Result};
use crate::iter::BinaryLoop;

// Note [Special scalar exponents]
// PyTorch's `pow.Tensor_Scalar` kernel does not call `pow` for some exponents of float,
// double and bfloat16 tensors: 0.5 is `sqrt`, -1 `reciprocal`, 2 `x * x`, 3 `x * x * x` and
// -2 `1 / (x * x)`, each product rounded to the element type (bfloat16 multiplies in
// bfloat16). These differ from a correctly rounded `pow` in the last bit for about a quarter
// of the inputs (`x ** 3` in float32), so they are reproduced here; float16 and the other
// exponents use `pow` in the op math type.

/// An exponent `pow.Tensor_Scalar` computes without `pow` (Note [Special scalar exponents]).
#[derive(Clone, Copy)]
enum SpecialPower {
    Sqrt,
    Reciprocal,
    Square,
    Cube,
    InverseSquare,
}

fn special_power(dtype: ScalarType, exponent: Scalar) -> Option<SpecialPower> {
    if !matches!(
        dtype,
        ScalarType::Float | ScalarType::Double | ScalarType::BFloat16
    ) {
        return None;
    }
    match exponent.to_f64() {
        0.5 => Some(SpecialPower::Sqrt),
        -1.0 => Some(SpecialPower::Reciprocal),
        2.0 => Some(SpecialPower::Square),
        3.0 => Some(SpecialPower::Cube),
        -2.0 => Some(SpecialPower::InverseSquare),
        _ => None,
    }
}

fn special_power_loop<T: FloatElement>(iter: &impl BinaryLoop, p: SpecialPower) -> Result<()> {
    // A product rounded to the element type, as PyTorch's element-type arithmetic rounds.
    let round = |v: T::F| T::from_acc(v).to_acc();
    iter.for_each2(move |x: T, _: T| {
        let x = x.to_acc();
        T::from_acc(match p {
            SpecialPower::Sqrt => x.sqrt(),
            SpecialPower::Reciprocal => T::F::ONE.div(x),
            SpecialPower::Square => x.mul(x),
            SpecialPower::Cube => round(x.mul(x)).mul(x),
            SpecialPower::InverseSquare => T::F::ONE.div(round(x.mul(x))),
        })
    })
}

/// The kernel of `pow.Tensor_Scalar`, `exponent` the scalar the iterator's second operand
/// holds.
fn pow_scalar_kernel(iter: &impl BinaryLoop, exponent: Scalar) -> Result<()> {
    let dtype = iter.common_dtype();
    match special_power(dtype, exponent) {
        Some(p) => {
            crate::dispatch_floating_types!(dtype, "pow", T => special_power_loop::<T>(iter, p))
        }
        None => pow_kernel(iter),
    }
}

pub(crate) fn pow_kernel(iter: &impl BinaryLoop) -> Result<()> {
    dispatch_all_types!(iter.common_dtype(), "pow", T => acc_loop2::<T>(iter, Num::pow))
}

fn check_int_pow(base: ScalarType, exponent: Scalar) -> Result<()> {
    if base.is_integral(true) && exponent.is_integral(false) && exponent.to_i64() < 0 {
        return Err(invalid(
            "Integers to negative integer powers are not allowed.",
        ));
    }
    Ok(())
}

/// PyTorch's `pow_tensor_scalar` kernel converts the exponent to the result's element type
/// with the checked conversion (Note [Checked scalar conversion]), except for float and
/// double results, which take it as a double.
fn check_pow_exponent(self_: &Tensor, exponent: Scalar) -> Result<()> {
    let dtype = switchboard_tensor::result_type(&[self_], &[exponent]).unwrap_or(self_.dtype());
    if matches!(dtype, ScalarType::Float | ScalarType::Double) {
        return Ok(());
    }
    exponent.check_fits(dtype)
}

/// `pow.Tensor_Tensor(Tensor self, Tensor exponent)`.
pub fn pow_tensor_tensor(self_: &Tensor, exponent: &Tensor) -> Result<Tensor> {
    binary_op!("pow", self_, exponent, None, false, pow_kernel)
}

/// `pow.Tensor_Tensor_out(Tensor self, Tensor exponent, *, Tensor(a!) out)`.
pub fn pow_tensor_tensor_out(self_: &Tensor, exponent: &Tensor, out: &Tensor) -> Result<Tensor> {
    binary_general("pow", self_, exponent, Some(out), false, pow_kernel)
}

/// `pow.Tensor_Scalar(Tensor self, Scalar exponent)`.
///
/// ```
/// use switchboard_cpu::pow_tensor_scalar;
/// use switchboard_tensor::{Scalar, Tensor};
/// let t = Tensor::from_vec(vec![2i32, 3], &[2]).unwrap();
/// assert_eq!(pow_tensor_scalar(&t, Scalar::Int(3)).unwrap().to_vec::<i32>().unwrap(), [8, 27]);
/// assert!(pow_tensor_scalar(&t, Scalar::Int(-1)).is_err());
/// ```
pub fn pow_tensor_scalar(self_: &Tensor, exponent: Scalar) -> Result<Tensor> {
    check_int_pow(self_.dtype(), exponent)?;
    check_pow_exponent(self_, exponent)?;
    let e = Tensor::wrapped_scalar(exponent);
    binary_op!("pow", self_, &e, None, false, |it| pow_scalar_kernel(
        it, exponent
    ))
}

/// `pow.Tensor_Scalar_out(Tensor self, Scalar exponent, *, Tensor(a!) out)`.
pub fn pow_tensor_scalar_out(self_: &Tensor, exponent: Scalar, out: &Tensor) -> Result<Tensor> {
    check_int_pow(self_.dtype(), exponent)?;
    check_pow_exponent(self_, exponent)?;
    let e = Tensor::wrapped_scalar(exponent);
    binary_general("pow", self_, &e, Some(out), false, |it| {
        pow_scalar_kernel(it, exponent)
    })
}

/// `pow.Scalar(Scalar self, Tensor exponent)`: a contiguous result (PyTorch's meta function
/// does not follow the exponent's layout), of the promoted dtype.
pub fn pow_scalar(self_: Scalar, exponent: &Tensor) -> Result<Tensor> {
    let base = Tensor::wrapped_scalar(self_);
    let dtype = crate::promote::result_type(&[exponent], &[self_]).unwrap_or(exponent.dtype());
    let out = Tensor::empty_on(exponent.sizes(), dtype, exponent.device())?;
    pow_tensor_tensor_out(&base, exponent, &out)
}

/// `pow_.Scalar(Tensor(a!) self, Scalar exponent)`.
pub fn pow_scalar_(self_: &Tensor, exponent: Scalar) -> Result<Tensor> {
    pow_tensor_scalar_out(self_, exponent, self_)
}

/// `pow_.Tensor(Tensor(a!) self, Tensor exponent)`.
pub fn pow_(self_: &Tensor, exponent: &Tensor) -> Result<Tensor> {
    pow_tensor_tensor_out(self_, exponent, self_)
}
