//! [`Scalar`]: PyTorch's `c10::Scalar` (a number not in a tensor).

use std::fmt;

use crate::dtype::{Element, ScalarType};

/// A boolean, integer or floating-point number, like `c10::Scalar` (complex and symbolic
/// scalars are not supported).
///
/// Its [`dtype`](Scalar::dtype) is the default dtype of its kind (`Bool`, `Long`, `Double`);
/// type promotion treats a scalar like a wrapped number (see [`crate::result_type`]).
///
/// ```
/// use switchboard_tensor::{Scalar, ScalarType};
/// let s = Scalar::from(2.5);
/// assert_eq!(s.to_i64(), 2);
/// assert_eq!(s.to_string(), "2.5");
/// assert_eq!(Scalar::from(1.0).to_string(), "1");
/// assert_eq!(Scalar::from(true).dtype(), ScalarType::Bool);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    /// A boolean.
    Bool(bool),
    /// An integer (Python `int`).
    Int(i64),
    /// A floating-point number (Python `float`).
    Float(f64),
}

impl Scalar {
    /// The value as `f64`.
    pub fn to_f64(self) -> f64 {
        match self {
            Scalar::Bool(b) => b as u8 as f64,
            Scalar::Int(i) => i as f64,
            Scalar::Float(f) => f,
        }
    }

    /// The value as `i64` (floats truncate toward zero, saturating).
    pub fn to_i64(self) -> i64 {
        match self {
            Scalar::Bool(b) => b as i64,
            Scalar::Int(i) => i,
            Scalar::Float(f) => f as i64,
        }
    }

    /// The value as `bool` (`!= 0`).
    pub fn to_bool(self) -> bool {
        match self {
            Scalar::Bool(b) => b,
            Scalar::Int(i) => i != 0,
            Scalar::Float(f) => f != 0.0,
        }
    }

    /// The value converted to the element type `T`.
    pub fn to<T: Element>(self) -> T {
        match self {
            Scalar::Bool(b) => T::from_bool(b),
            Scalar::Int(i) => T::from_i64(i),
            Scalar::Float(f) => T::from_f64(f),
        }
    }

    /// The value as a complex number (imaginary part 0), for complex tensors.
    pub fn to_complex(self) -> num_complex::Complex64 {
        num_complex::Complex64::new(self.to_f64(), 0.0)
    }

    /// The default dtype of the scalar's kind: `Bool`, `Long` or `Double`.
    pub fn dtype(self) -> ScalarType {
        match self {
            Scalar::Bool(_) => ScalarType::Bool,
            Scalar::Int(_) => ScalarType::Long,
            Scalar::Float(_) => ScalarType::Double,
        }
    }

    /// Whether it holds a float.
    pub fn is_floating_point(self) -> bool {
        matches!(self, Scalar::Float(_))
    }

    /// Whether it holds an integer (or a bool when `include_bool`).
    pub fn is_integral(self, include_bool: bool) -> bool {
        match self {
            Scalar::Int(_) => true,
            Scalar::Bool(_) => include_bool,
            Scalar::Float(_) => false,
        }
    }

    /// Whether it holds a bool.
    pub fn is_boolean(self) -> bool {
        matches!(self, Scalar::Bool(_))
    }
}

impl fmt::Display for Scalar {
    /// As `c10::Scalar`'s `operator<<`: `true`/`false`, integers in full, floats like C++'s
    /// default stream formatting (`%g`: `1`, `0.1`, `1e+20`, `inf`, `nan`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Bool(b) => write!(f, "{b}"),
            Scalar::Int(i) => write!(f, "{i}"),
            Scalar::Float(x) => f.write_str(&format_g(*x, 6)),
        }
    }
}

impl std::ops::Neg for Scalar {
    type Output = Scalar;

    /// `-s` (`c10::Scalar::operator-`), as `sub` negates its `alpha`: an integer wraps
    /// (`-i64::MIN` is `i64::MIN`, as C++ computes it, never a panic); a bool negates as the
    /// integer it stands for, as Python's `-True` is `-1`.
    ///
    /// ```
    /// use switchboard_tensor::Scalar;
    /// assert_eq!(-Scalar::Int(2), Scalar::Int(-2));
    /// assert_eq!(-Scalar::Float(0.5), Scalar::Float(-0.5));
    /// assert_eq!(-Scalar::Bool(true), Scalar::Int(-1));
    /// assert_eq!(-Scalar::Int(i64::MIN), Scalar::Int(i64::MIN));
    /// ```
    #[inline]
    fn neg(self) -> Scalar {
        match self {
            Scalar::Int(i) => Scalar::Int(i.wrapping_neg()),
            Scalar::Float(f) => Scalar::Float(-f),
            Scalar::Bool(b) => Scalar::Int(-i64::from(b)),
        }
    }
}

/// Formats `v` like C's `%.{precision}g` (C++'s default stream output for precision 6).
pub(crate) fn format_g(v: f64, precision: usize) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    let p = precision.max(1);
    let sci = format!("{:.*e}", p - 1, v);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= p as i32 {
        let m = strip_zeros(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{m}e{sign}{:02}", exp.abs())
    } else {
        let fixed = format!("{:.*}", (p as i32 - 1 - exp).max(0) as usize, v);
        strip_zeros(&fixed).to_string()
    }
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

impl From<bool> for Scalar {
    fn from(v: bool) -> Self {
        Scalar::Bool(v)
    }
}

macro_rules! from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for Scalar {
            fn from(v: $t) -> Self { Scalar::Int(v as i64) }
        }
    )*};
}
from_int!(u8, i8, i16, i32, i64);

impl From<f64> for Scalar {
    fn from(v: f64) -> Self {
        Scalar::Float(v)
    }
}

impl From<f32> for Scalar {
    fn from(v: f32) -> Self {
        Scalar::Float(v as f64)
    }
}

impl From<half::f16> for Scalar {
    fn from(v: half::f16) -> Self {
        Scalar::Float(v.to_f64())
    }
}

impl From<half::bf16> for Scalar {
    fn from(v: half::bf16) -> Self {
        Scalar::Float(v.to_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display() {
        let cases = [
            (1.0, "1"),
            (0.1, "0.1"),
            (2.5, "2.5"),
            (1e20, "1e+20"),
            (1e-5, "1e-05"),
            (123456789.0, "1.23457e+08"),
            (0.0001, "0.0001"),
            (-0.0, "-0"),
            (f64::INFINITY, "inf"),
            (f64::NAN, "nan"),
            (100000.0, "100000"),
            (999999.5, "1e+06"),
        ];
        for (v, s) in cases {
            assert_eq!(Scalar::Float(v).to_string(), s, "{v}");
        }
        assert_eq!(Scalar::Int(-3).to_string(), "-3");
        assert_eq!(Scalar::Bool(true).to_string(), "true");
    }

    #[test]
    fn conversions() {
        assert_eq!(Scalar::from(3u8), Scalar::Int(3));
        assert_eq!(Scalar::Float(-2.5).to_i64(), -2);
        assert!(Scalar::Int(2).to_bool());
        assert_eq!(Scalar::Bool(true).to::<f32>(), 1.0);
        assert_eq!(Scalar::Float(2.9).to::<i32>(), 2);
        assert!(Scalar::Bool(false).is_integral(true));
        assert!(!Scalar::Bool(false).is_integral(false));
        assert_eq!(Scalar::Int(1).dtype(), ScalarType::Long);
        assert_eq!(Scalar::Float(1.0).dtype(), ScalarType::Double);
    }
}
