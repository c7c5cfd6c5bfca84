//! [`ScalarType`] (a tensor's dtype) and the [`Element`] trait of the Rust element types.

use std::fmt;
use std::str::FromStr;

use half::{bf16, f16};

use crate::error::TensorError;

/// A tensor's element type, with PyTorch's `c10::ScalarType` numbering.
///
/// ```
/// use switchboard_tensor::ScalarType;
/// assert_eq!(ScalarType::Float as i8, 6);
/// assert_eq!(ScalarType::Float.to_string(), "torch.float32");
/// assert_eq!("int64".parse::<ScalarType>().unwrap(), ScalarType::Long);
/// assert_eq!(ScalarType::BFloat16.element_size(), 2);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(i8)]
pub enum ScalarType {
    /// `torch.uint8` (`u8`).
    Byte = 0,
    /// `torch.int8` (`i8`).
    Char = 1,
    /// `torch.int16` (`i16`).
    Short = 2,
    /// `torch.int32` (`i32`).
    Int = 3,
    /// `torch.int64` (`i64`).
    Long = 4,
    /// `torch.float16` (`half::f16`).
    Half = 5,
    /// `torch.float32` (`f32`).
    Float = 6,
    /// `torch.float64` (`f64`).
    Double = 7,
    /// `torch.complex64` (`num_complex::Complex32`).
    ComplexFloat = 9,
    /// `torch.complex128` (`num_complex::Complex64`).
    ComplexDouble = 10,
    /// `torch.bool` (`bool`).
    Bool = 11,
    /// `torch.bfloat16` (`half::bf16`).
    BFloat16 = 15,
}

impl ScalarType {
    /// Every supported dtype, in numeric order.
    pub const ALL: [ScalarType; 12] = [
        Self::Byte,
        Self::Char,
        Self::Short,
        Self::Int,
        Self::Long,
        Self::Half,
        Self::Float,
        Self::Double,
        Self::ComplexFloat,
        Self::ComplexDouble,
        Self::Bool,
        Self::BFloat16,
    ];

    /// The dtype with PyTorch's numeric value `v`, if supported.
    pub fn from_i8(v: i8) -> Option<ScalarType> {
        Self::ALL.iter().copied().find(|s| *s as i8 == v)
    }

    /// Bytes per element.
    pub const fn element_size(self) -> usize {
        match self {
            Self::Byte | Self::Char | Self::Bool => 1,
            Self::Short | Self::Half | Self::BFloat16 => 2,
            Self::Int | Self::Float => 4,
            Self::Long | Self::Double | Self::ComplexFloat => 8,
            Self::ComplexDouble => 16,
        }
    }

    /// Half, BFloat16, Float, Double (not the complex types, as `c10::isFloatingType`).
    pub const fn is_floating_point(self) -> bool {
        matches!(
            self,
            Self::Half | Self::BFloat16 | Self::Float | Self::Double
        )
    }

    /// ComplexFloat, ComplexDouble (`c10::isComplexType`).
    pub const fn is_complex(self) -> bool {
        matches!(self, Self::ComplexFloat | Self::ComplexDouble)
    }

    /// The real dtype of a complex one's parts, `self` for the others
    /// (`c10::toRealValueType`): `ComplexFloat` -> `Float`.
    pub const fn to_real_value_type(self) -> ScalarType {
        match self {
            Self::ComplexFloat => Self::Float,
            Self::ComplexDouble => Self::Double,
            other => other,
        }
    }

    /// The complex dtype whose parts are `self` (`c10::toComplexType`): `Float` ->
    /// `ComplexFloat`, `Double` -> `ComplexDouble`, a complex dtype itself. `Half` would be
    /// `ComplexHalf`, which Switchboard does not have; the others have none.
    pub fn to_complex_type(self) -> Result<ScalarType, TensorError> {
        match self {
            Self::Float | Self::ComplexFloat => Ok(Self::ComplexFloat),
            Self::Double | Self::ComplexDouble => Ok(Self::ComplexDouble),
            Self::Half => Err(TensorError::invalid(
                "ComplexHalf (the complex type of Half) is not supported",
            )),
            other => Err(TensorError::invalid(format!(
                "Unknown Complex ScalarType for {}",
                other.c10_name()
            ))),
        }
    }

    /// The integer types; `Bool` too when `include_bool` (`c10::isIntegralType`).
    pub const fn is_integral(self, include_bool: bool) -> bool {
        match self {
            Self::Byte | Self::Char | Self::Short | Self::Int | Self::Long => true,
            Self::Bool => include_bool,
            _ => false,
        }
    }

    /// Signed types (every type but `Byte` and `Bool`).
    pub const fn is_signed(self) -> bool {
        !matches!(self, Self::Byte | Self::Bool)
    }

    /// The short Python name: `float32`, `int64`, `bool`, ...
    pub const fn name(self) -> &'static str {
        match self {
            Self::Byte => "uint8",
            Self::Char => "int8",
            Self::Short => "int16",
            Self::Int => "int32",
            Self::Long => "int64",
            Self::Half => "float16",
            Self::Float => "float32",
            Self::Double => "float64",
            Self::ComplexFloat => "complex64",
            Self::ComplexDouble => "complex128",
            Self::Bool => "bool",
            Self::BFloat16 => "bfloat16",
        }
    }

    /// The short name of FX's annotations and PyTorch's logs (`torch.fx`'s `dtype_abbrs`):
    /// `f32`, `i64`, `b8`, `c64`, ...
    pub const fn abbreviation(self) -> &'static str {
        match self {
            Self::Byte => "u8",
            Self::Char => "i8",
            Self::Short => "i16",
            Self::Int => "i32",
            Self::Long => "i64",
            Self::Half => "f16",
            Self::Float => "f32",
            Self::Double => "f64",
            Self::ComplexFloat => "c64",
            Self::ComplexDouble => "c128",
            Self::Bool => "b8",
            Self::BFloat16 => "bf16",
        }
    }

    /// The C++ element type's name as PyTorch's `TypeMeta::name()` prints it (`dtype().name()`
    /// in messages such as conv's bias check): `float`, `long int`, `c10::Half`, ...
    pub const fn type_meta_name(self) -> &'static str {
        match self {
            Self::Byte => "unsigned char",
            Self::Char => "signed char",
            Self::Short => "short int",
            Self::Int => "int",
            Self::Long => "long int",
            Self::Half => "c10::Half",
            Self::Float => "float",
            Self::Double => "double",
            Self::ComplexFloat => "c10::complex<float>",
            Self::ComplexDouble => "c10::complex<double>",
            Self::Bool => "bool",
            Self::BFloat16 => "c10::BFloat16",
        }
    }

    /// The C++ name (`c10::toString`): `Float`, `Long`, `BFloat16`, ...
    pub const fn c10_name(self) -> &'static str {
        match self {
            Self::Byte => "Byte",
            Self::Char => "Char",
            Self::Short => "Short",
            Self::Int => "Int",
            Self::Long => "Long",
            Self::Half => "Half",
            Self::Float => "Float",
            Self::Double => "Double",
            Self::ComplexFloat => "ComplexFloat",
            Self::ComplexDouble => "ComplexDouble",
            Self::Bool => "Bool",
            Self::BFloat16 => "BFloat16",
        }
    }
}

impl fmt::Display for ScalarType {
    /// `torch.float32`, like `str(torch.float32)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "torch.{}", self.name())
    }
}

impl FromStr for ScalarType {
    type Err = TensorError;
    /// Accepts the Python names and aliases (`float32`, `float`, `half`, `long`, `int`, ...),
    /// optionally prefixed with `torch.`, and the C++ names (`Float`, `Long`, ...).
    fn from_str(s: &str) -> Result<Self, TensorError> {
        let name = s.strip_prefix("torch.").unwrap_or(s);
        let t = match name {
            "uint8" | "Byte" => Self::Byte,
            "int8" | "Char" => Self::Char,
            "int16" | "short" | "Short" => Self::Short,
            "int32" | "int" | "Int" => Self::Int,
            "int64" | "long" | "Long" => Self::Long,
            "float16" | "half" | "Half" => Self::Half,
            "float32" | "float" | "Float" => Self::Float,
            "float64" | "double" | "Double" => Self::Double,
            "complex64" | "cfloat" | "ComplexFloat" => Self::ComplexFloat,
            "complex128" | "cdouble" | "ComplexDouble" => Self::ComplexDouble,
            "bool" | "Bool" => Self::Bool,
            "bfloat16" | "BFloat16" => Self::BFloat16,
            _ => return Err(TensorError::Parse(format!("invalid dtype: '{s}'"))),
        };
        Ok(t)
    }
}

pub(crate) mod sealed {
    pub trait Sealed {}
}

/// A Rust type whose values a tensor's storage holds: every [`Element`] and the complex
/// types `Complex32` (`complex64`) and `Complex64` (`complex128`) of the `num-complex` crate.
/// Sealed: the storage reinterprets bytes as these types (Note [Element bit patterns]).
///
/// Conversions to and from `Complex<f64>` are C++'s `static_cast` between complex and real
/// types as PyTorch uses them: a real value becomes the real part (imaginary part 0); a complex
/// value cast to a real type keeps its real part.
///
/// ```
/// use switchboard_tensor::{Complex32, ScalarType, StorageElement};
/// assert_eq!(Complex32::DTYPE, ScalarType::ComplexFloat);
/// assert_eq!(f32::from_complex(Complex32::new(1.5, 2.0).to_complex()), 1.5);
/// ```
pub trait StorageElement:
    sealed::Sealed + Copy + Send + Sync + fmt::Debug + PartialEq + Default + 'static
{
    /// The element type's dtype.
    const DTYPE: ScalarType;
    /// The value as a `Complex<f64>`.
    fn to_complex(self) -> num_complex::Complex64;
    /// Converts from a `Complex<f64>`.
    fn from_complex(v: num_complex::Complex64) -> Self;
}

/// A real Rust element type of a tensor: `bool`, `u8`, `i8`, `i16`, `i32`, `i64`, `f16`, `bf16`,
/// `f32`, `f64`. Sealed: the storage reinterprets bytes as these types (see
/// Note [Element bit patterns] in the source).
///
/// Conversions follow C++ `static_cast` as PyTorch uses it (floats to ints truncate toward
/// zero and saturate here, where C++ is undefined; anything to bool is `!= 0`).
///
/// ```
/// use switchboard_tensor::{Element, ScalarType, StorageElement};
/// assert_eq!(<f32 as StorageElement>::DTYPE, ScalarType::Float);
/// assert_eq!(i32::from_f64(2.7), 2);
/// assert!(bool::from_i64(5));
/// ```
pub trait Element: StorageElement + PartialOrd {
    /// Zero (`false`).
    const ZERO: Self;
    /// One (`true`).
    const ONE: Self;
    /// The value as `f64`.
    fn to_f64(self) -> f64;
    /// The value as `i64` (floats truncate toward zero).
    fn to_i64(self) -> i64;
    /// The value as `bool` (`!= 0`).
    fn to_bool(self) -> bool;
    /// Converts from `f64`.
    fn from_f64(v: f64) -> Self;
    /// Converts from `i64`.
    fn from_i64(v: i64) -> Self;
    /// Converts from `bool`.
    fn from_bool(v: bool) -> Self {
        if v {
            Self::ONE
        } else {
            Self::ZERO
        }
    }
}

// Note [Element bit patterns]
// Storage is untyped bytes; typed access reinterprets them as `T: Element`. Every bit pattern is
// a valid value of the integer and float types, so reinterpreting any initialised bytes is
// sound. `bool` is the exception (only 0 and 1 are valid). So a storage records whether it
// holds bools (`Storage::holds_bool`, fixed at creation: `zeros_for(.., Bool)`,
// `from_vec::<bool>`, `bool_from_bytes`, which checks each byte), and `TensorBuilder::build`
// puts bool tensors only on bool storages and other dtypes only on other storages. Bool
// storages are written only through bool tensors, with valid bools. Storage is always
// initialised (zeroed on allocation).

macro_rules! int_element {
    ($($t:ty => $dt:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl StorageElement for $t {
            const DTYPE: ScalarType = ScalarType::$dt;
            #[inline]
            fn to_complex(self) -> num_complex::Complex64 {
                num_complex::Complex64::new(Element::to_f64(self), 0.0)
            }
            #[inline]
            fn from_complex(v: num_complex::Complex64) -> Self {
                <Self as Element>::from_f64(v.re)
            }
        }
        impl Element for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            #[inline]
            fn to_f64(self) -> f64 { self as f64 }
            #[inline]
            fn to_i64(self) -> i64 { self as i64 }
            #[inline]
            fn to_bool(self) -> bool { self != 0 }
            #[inline]
            fn from_f64(v: f64) -> Self { v as i64 as Self }
            #[inline]
            fn from_i64(v: i64) -> Self { v as Self }
        }
    )*};
}
int_element!(u8 => Byte, i8 => Char, i16 => Short, i32 => Int, i64 => Long);

macro_rules! float_element {
    ($($t:ty => $dt:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl StorageElement for $t {
            const DTYPE: ScalarType = ScalarType::$dt;
            #[inline]
            fn to_complex(self) -> num_complex::Complex64 {
                num_complex::Complex64::new(Element::to_f64(self), 0.0)
            }
            #[inline]
            fn from_complex(v: num_complex::Complex64) -> Self {
                <Self as Element>::from_f64(v.re)
            }
        }
        impl Element for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            #[inline]
            fn to_f64(self) -> f64 { self as f64 }
            #[inline]
            fn to_i64(self) -> i64 { self as i64 }
            #[inline]
            fn to_bool(self) -> bool { self != 0.0 }
            #[inline]
            fn from_f64(v: f64) -> Self { v as Self }
            #[inline]
            fn from_i64(v: i64) -> Self { v as Self }
        }
    )*};
}
float_element!(f32 => Float, f64 => Double);

macro_rules! half_element {
    ($($t:ty => $dt:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl StorageElement for $t {
            const DTYPE: ScalarType = ScalarType::$dt;
            #[inline]
            fn to_complex(self) -> num_complex::Complex64 {
                num_complex::Complex64::new(Element::to_f64(self), 0.0)
            }
            #[inline]
            fn from_complex(v: num_complex::Complex64) -> Self {
                <Self as Element>::from_f64(v.re)
            }
        }
        impl Element for $t {
            const ZERO: Self = <$t>::ZERO;
            const ONE: Self = <$t>::ONE;
            #[inline]
            fn to_f64(self) -> f64 { <$t>::to_f64(self) }
            #[inline]
            fn to_i64(self) -> i64 { <$t>::to_f32(self) as i64 }
            #[inline]
            fn to_bool(self) -> bool { <$t>::to_f32(self) != 0.0 }
            #[inline]
            fn from_f64(v: f64) -> Self { <$t>::from_f64(v) }
            #[inline]
            fn from_i64(v: i64) -> Self { <$t>::from_f64(v as f64) }
        }
    )*};
}
half_element!(f16 => Half, bf16 => BFloat16);

impl sealed::Sealed for bool {}
impl StorageElement for bool {
    const DTYPE: ScalarType = ScalarType::Bool;
    #[inline]
    fn to_complex(self) -> num_complex::Complex64 {
        num_complex::Complex64::new(self as u8 as f64, 0.0)
    }
    /// `static_cast<bool>(c10::complex)`: true unless both parts are zero.
    #[inline]
    fn from_complex(v: num_complex::Complex64) -> Self {
        v.re != 0.0 || v.im != 0.0
    }
}
impl Element for bool {
    const ZERO: Self = false;
    const ONE: Self = true;
    #[inline]
    fn to_f64(self) -> f64 {
        self as u8 as f64
    }
    #[inline]
    fn to_i64(self) -> i64 {
        self as i64
    }
    #[inline]
    fn to_bool(self) -> bool {
        self
    }
    #[inline]
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    #[inline]
    fn from_i64(v: i64) -> Self {
        v != 0
    }
}

/// Runs `$body` with `$T` bound to the Rust [`Element`] type of a real dtype `$dtype` (like
/// `AT_DISPATCH_ALL_TYPES_AND3(Half, BFloat16, Bool, ...)`), or `$complex_body` with `$C`
/// bound to the [`ComplexElement`](crate::ComplexElement) type of a complex one: every
/// caller says what complex dtypes do.
///
/// ```
/// use switchboard_tensor::{dispatch_dtype, Element, ScalarType};
/// let size = |dtype| dispatch_dtype!(dtype, T => std::mem::size_of::<T>(), C => std::mem::size_of::<C>());
/// assert_eq!(size(ScalarType::Int), 4);
/// assert_eq!(size(ScalarType::ComplexDouble), 16);
/// ```
#[macro_export]
macro_rules! dispatch_dtype {
    ($dtype:expr, $T:ident => $body:expr, $C:ident => $complex_body:expr) => {{
        match $dtype {
            $crate::ScalarType::ComplexFloat => {
                type $C = $crate::Complex32;
                $complex_body
            }
            $crate::ScalarType::ComplexDouble => {
                type $C = $crate::Complex64;
                $complex_body
            }
            $crate::ScalarType::Byte => {
                type $T = u8;
                $body
            }
            $crate::ScalarType::Char => {
                type $T = i8;
                $body
            }
            $crate::ScalarType::Short => {
                type $T = i16;
                $body
            }
            $crate::ScalarType::Int => {
                type $T = i32;
                $body
            }
            $crate::ScalarType::Long => {
                type $T = i64;
                $body
            }
            $crate::ScalarType::Half => {
                type $T = $crate::f16;
                $body
            }
            $crate::ScalarType::Float => {
                type $T = f32;
                $body
            }
            $crate::ScalarType::Double => {
                type $T = f64;
                $body
            }
            $crate::ScalarType::Bool => {
                type $T = bool;
                $body
            }
            $crate::ScalarType::BFloat16 => {
                type $T = $crate::bf16;
                $body
            }
        }
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbering_and_sizes() {
        let nums: Vec<i8> = ScalarType::ALL.iter().map(|s| *s as i8).collect();
        assert_eq!(nums, [0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 15]);
        for s in ScalarType::ALL {
            assert_eq!(ScalarType::from_i8(s as i8), Some(s));
            let size =
                dispatch_dtype!(s, T => std::mem::size_of::<T>(), C => std::mem::size_of::<C>());
            assert_eq!(size, s.element_size());
            let dt = dispatch_dtype!(s, T => T::DTYPE, C => C::DTYPE);
            assert_eq!(dt, s);
            assert_eq!(s.name().parse::<ScalarType>().unwrap(), s);
            assert_eq!(s.to_string().parse::<ScalarType>().unwrap(), s);
            assert_eq!(s.c10_name().parse::<ScalarType>().unwrap(), s);
        }
        assert_eq!(ScalarType::from_i8(8), None);
    }

    #[test]
    fn categories() {
        assert!(ScalarType::Half.is_floating_point());
        assert!(!ScalarType::Long.is_floating_point());
        assert!(ScalarType::Bool.is_integral(true));
        assert!(!ScalarType::Bool.is_integral(false));
        assert!(ScalarType::Byte.is_integral(false));
        assert!(!ScalarType::Float.is_integral(true));
        assert_eq!(ScalarType::Bool.to_string(), "torch.bool");
        assert_eq!("half".parse::<ScalarType>().unwrap(), ScalarType::Half);
        assert_eq!(
            "float8".parse::<ScalarType>().unwrap_err().to_string(),
            "invalid dtype: 'float8'"
        );
    }

    #[test]
    fn conversions() {
        assert_eq!(u8::from_i64(257), 1);
        assert_eq!(i64::from_f64(-2.9), -2);
        assert_eq!(f16::from_i64(3).to_f64(), 3.0);
        assert_eq!(bf16::from_f64(1.5).to_i64(), 1);
        assert!(!bool::from_f64(0.0));
        assert_eq!(true.to_f64(), 1.0);
        assert_eq!(f32::from_bool(true), 1.0);
        assert!(f16::ONE.to_bool());
    }
}
