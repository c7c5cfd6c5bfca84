//! Checked conversion of a [`Scalar`] to a dtype: `c10::checked_convert` and `c10::overflows`.

// Note [Checked scalar conversion]
// PyTorch converts a Scalar argument to a tensor's element type in two ways, and which one an
// operator uses is a property of its kernel:
// - checked (`Scalar::to<T>()`, `checked_convert`): a value the type cannot hold is an error,
//   "value cannot be converted to type int8_t without overflow". `fill_`, `full`,
//   `masked_fill`, `where` with a scalar (`scalar_tensor`: not into `float16`/`bfloat16`), the `alpha` of `add`/`sub`/`rsub`/`index_add`, the
//   `alpha`/`beta` of `addmm`, `threshold`, `clamp`'s bounds and `pow`'s exponent do this.
// - unchecked (the number wrapped in a 0-dim tensor and cast with the iterator's common
//   dtype, a C++ `static_cast`): `add.Scalar`'s `other`, `mul.Scalar`, comparisons with a
//   scalar. These wrap (`int8 + 300` adds 44) as PyTorch's do.
// The checked rule (`c10::overflows`): a bool always fits, and anything fits a bool (it is
// `!= 0`); an integer must lie in the type's range, except that a negative integer may wrap
// into an unsigned type when its magnitude does (`uint8` takes -1 as 255, not -256); a float
// must lie within `[lowest, max]` of the type, infinities and NaN fitting only floating types.

use crate::dtype::{Element, ScalarType};
use crate::error::{Result, TensorError};
use crate::scalar::Scalar;

impl ScalarType {
    /// The C++ element type's name, as PyTorch's messages print it (`int8_t`, `c10::Half`).
    pub const fn cpp_type_name(self) -> &'static str {
        match self {
            Self::Byte => "uint8_t",
            Self::Char => "int8_t",
            Self::Short => "int16_t",
            Self::Int => "int",
            Self::Long => "int64_t",
            Self::Half => "c10::Half",
            Self::Float => "float",
            Self::Double => "double",
            Self::ComplexFloat => "c10::complex<float>",
            Self::ComplexDouble => "c10::complex<double>",
            Self::Bool => "bool",
            Self::BFloat16 => "c10::BFloat16",
        }
    }

    /// The integer range `[lowest, max]` of an integral dtype (`None` for floating types and
    /// bool).
    pub const fn integer_range(self) -> Option<(i64, i64)> {
        match self {
            Self::Byte => Some((0, u8::MAX as i64)),
            Self::Char => Some((i8::MIN as i64, i8::MAX as i64)),
            Self::Short => Some((i16::MIN as i64, i16::MAX as i64)),
            Self::Int => Some((i32::MIN as i64, i32::MAX as i64)),
            Self::Long => Some((i64::MIN, i64::MAX)),
            _ => None,
        }
    }

    /// `std::numeric_limits<T>::lowest()` and `max()` as `f64` (bool: 0 and 1).
    pub fn finite_range(self) -> (f64, f64) {
        match self {
            Self::Half => (half::f16::MIN.to_f64(), half::f16::MAX.to_f64()),
            Self::BFloat16 => (half::bf16::MIN.to_f64(), half::bf16::MAX.to_f64()),
            Self::Float => (f32::MIN as f64, f32::MAX as f64),
            Self::Double => (f64::MIN, f64::MAX),
            Self::Bool => (0.0, 1.0),
            _ => {
                let (lo, hi) = self.integer_range().unwrap_or((0, 0));
                (lo as f64, hi as f64)
            }
        }
    }
}

impl Scalar {
    /// Whether converting to `dtype` overflows, as `c10::overflows` decides (Note [Checked
    /// scalar conversion]).
    ///
    /// ```
    /// use switchboard_tensor::{Scalar, ScalarType};
    /// assert!(Scalar::Int(300).overflows(ScalarType::Char));
    /// assert!(!Scalar::Int(-1).overflows(ScalarType::Byte)); // wraps to 255
    /// assert!(Scalar::Float(-0.5).overflows(ScalarType::Byte));
    /// assert!(Scalar::Float(70000.0).overflows(ScalarType::Half));
    /// assert!(!Scalar::Float(f64::INFINITY).overflows(ScalarType::Float));
    /// assert!(!Scalar::Float(f64::NAN).overflows(ScalarType::Bool));
    /// ```
    pub fn overflows(self, dtype: ScalarType) -> bool {
        // A real value fits a complex type when it fits the type of its parts.
        let dtype = dtype.to_real_value_type();
        if dtype == ScalarType::Bool {
            return false;
        }
        match self {
            Scalar::Bool(_) => false,
            Scalar::Int(i) => match dtype.integer_range() {
                Some((0, max)) if i < 0 => i.unsigned_abs() > max as u64,
                Some((lo, hi)) => i < lo || i > hi,
                None => {
                    let (lo, hi) = dtype.finite_range();
                    (i as f64) < lo || (i as f64) > hi
                }
            },
            Scalar::Float(f) => {
                let floating = dtype.is_floating_point();
                if f.is_infinite() && floating {
                    return false;
                }
                if f.is_nan() {
                    return !floating;
                }
                let (lo, hi) = dtype.finite_range();
                f < lo || f > hi
            }
        }
    }

    /// Fails with PyTorch's message when the value overflows `dtype` (`checked_convert`).
    pub fn check_fits(self, dtype: ScalarType) -> Result<()> {
        if self.overflows(dtype) {
            return Err(TensorError::invalid(format!(
                "value cannot be converted to type {} without overflow",
                dtype.cpp_type_name()
            )));
        }
        Ok(())
    }

    /// Checks the conversion `at::scalar_tensor(value, dtype)` makes (`where` with a scalar):
    /// checked, except into `float16` and `bfloat16`, which PyTorch fills unchecked (an
    /// out-of-range value becomes an infinity).
    ///
    /// ```
    /// use switchboard_tensor::{Scalar, ScalarType};
    /// assert!(Scalar::Float(70000.0).check_fits_scalar_tensor(ScalarType::Half).is_ok());
    /// assert!(Scalar::Int(300).check_fits_scalar_tensor(ScalarType::Char).is_err());
    /// ```
    pub fn check_fits_scalar_tensor(self, dtype: ScalarType) -> Result<()> {
        if matches!(dtype, ScalarType::Half | ScalarType::BFloat16) {
            return Ok(());
        }
        self.check_fits(dtype)
    }

    /// The value converted to `T`, or PyTorch's overflow error (`Scalar::to<T>()`).
    ///
    /// ```
    /// use switchboard_tensor::Scalar;
    /// assert_eq!(Scalar::Int(-1).checked_to::<u8>().unwrap(), 255);
    /// assert_eq!(
    ///     Scalar::Int(300).checked_to::<i8>().unwrap_err().to_string(),
    ///     "value cannot be converted to type int8_t without overflow"
    /// );
    /// ```
    pub fn checked_to<T: Element>(self) -> Result<T> {
        self.check_fits(T::DTYPE)?;
        Ok(self.to::<T>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ScalarType::*;

    #[test]
    fn overflow_rule_matches_c10() {
        // (value, dtype, overflows), from PyTorch 2.15's masked_fill.
        let cases = [
            (Scalar::Int(-256), Byte, true),
            (Scalar::Int(-255), Byte, false),
            (Scalar::Int(256), Byte, true),
            (Scalar::Int(-129), Char, true),
            (Scalar::Int(70000), Short, true),
            (Scalar::Int(1 << 40), Int, true),
            (Scalar::Int(1 << 40), Half, true),
            (Scalar::Int(1 << 40), BFloat16, false),
            (Scalar::Int(65504), Half, false),
            (Scalar::Int(65505), Half, true),
            (Scalar::Float(-0.5), Char, false),
            (Scalar::Float(1.5), Byte, false),
            (Scalar::Float(f64::NAN), Long, true),
            (Scalar::Float(f64::INFINITY), Long, true),
            (Scalar::Float(f64::NAN), Half, false),
            (Scalar::Float(1e308), Float, true),
            (Scalar::Float(1e308), Double, false),
            (Scalar::Float(1e308), Bool, false),
            (Scalar::Bool(true), Byte, false),
        ];
        for (v, dt, expected) in cases {
            assert_eq!(v.overflows(dt), expected, "{v:?} -> {dt:?}");
        }
        assert_eq!(
            Scalar::Float(70000.0)
                .check_fits(Half)
                .unwrap_err()
                .to_string(),
            "value cannot be converted to type c10::Half without overflow"
        );
    }
}
