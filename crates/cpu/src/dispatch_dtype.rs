//! Element arithmetic: the [`Num`] and [`Float`] traits kernels are written against and
//! [`CpuElement`] (a stored element type and the type it computes in). The `dispatch_*!` macros
//! that pick the Rust type for a runtime dtype are in `dispatch_macros.rs`.

use std::fmt::Debug;

use switchboard_tensor::{bf16, f16, Element};

// Note [Compute types]
// A kernel is one generic function over `T: CpuElement`; it converts each loaded element to
// `T::Acc` (the "opmath" type), computes there and converts back when storing. `Acc` is the
// element type itself except for Half and BFloat16, which compute in f32 as in PyTorch
// (`at::opmath_type`). For f32/f64 and the integers the conversions are identities that the
// compiler removes, so the loops vectorise as if written by hand.

/// Arithmetic on a compute type: `bool`, the integers, `f32`, `f64`. Integer arithmetic wraps
/// (as C++ does in practice); `bool` addition is `or` and multiplication is `and` (PyTorch's
/// rules for bool tensors).
pub trait Num: Copy + Send + Sync + PartialOrd + Debug + Default + 'static {
    /// Zero.
    const ZERO: Self;
    /// One.
    const ONE: Self;
    /// The lowest value (`-inf` for floats): the identity of `max`.
    const LOWEST: Self;
    /// The highest value (`inf` for floats): the identity of `min`.
    const HIGHEST: Self;
    /// Whether this is a floating-point type.
    const IS_FLOAT: bool;
    /// Converts from `f64` (floats to ints truncate).
    fn from_f64(v: f64) -> Self;
    /// Converts from `i64`.
    fn from_i64(v: i64) -> Self;
    /// The value as `f64`.
    fn to_f64(self) -> f64;
    /// The value as `i64`.
    fn to_i64(self) -> i64;
    /// `self + o`.
    fn add(self, o: Self) -> Self;
    /// `self - o`.
    fn sub(self, o: Self) -> Self;
    /// `self * o`.
    fn mul(self, o: Self) -> Self;
    /// `self * a + b`, rounded once for floats (Note [Fused multiply-add]).
    #[inline]
    fn mul_add(self, a: Self, b: Self) -> Self {
        self.mul(a).add(b)
    }
    /// True division for floats; truncating division for integers (callers rule out zero).
    fn div(self, o: Self) -> Self;
    /// Division rounded toward zero (`rounding_mode="trunc"`).
    fn trunc_div(self, o: Self) -> Self;
    /// Division rounded down (`rounding_mode="floor"`, Python's `//`).
    fn floor_div(self, o: Self) -> Self;
    /// `-self` (wrapping for integers).
    fn neg(self) -> Self;
    /// `|self|`.
    fn abs(self) -> Self;
    /// `self ** e` (integers: by squaring, with PyTorch's rules for negative exponents).
    fn pow(self, e: Self) -> Self;
    /// Whether the value is NaN (never for integers).
    fn is_nan(self) -> bool;
    /// NaN-propagating maximum (`torch.maximum`).
    #[inline]
    fn max_nan(self, o: Self) -> Self {
        if self.is_nan() || self > o {
            self
        } else {
            o
        }
    }
    /// NaN-propagating minimum (`torch.minimum`).
    #[inline]
    fn min_nan(self, o: Self) -> Self {
        if self.is_nan() || self < o {
            self
        } else {
            o
        }
    }
}

/// Floating-point compute types (`f32`, `f64`): the transcendental functions, each the
/// standard library's (or libm's) function of that name.
pub trait Float: Num {
    /// `e^x`.
    fn exp(self) -> Self;
    /// `e^x - 1`, exact near 0.
    fn exp_m1(self) -> Self;
    /// Natural logarithm.
    fn ln(self) -> Self;
    /// `ln(1 + x)`.
    fn ln_1p(self) -> Self;
    /// Base-10 logarithm.
    fn log10(self) -> Self;
    /// Base-2 logarithm.
    fn log2(self) -> Self;
    /// Square root.
    fn sqrt(self) -> Self;
    /// Hyperbolic tangent.
    fn tanh(self) -> Self;
    /// Hyperbolic sine.
    fn sinh(self) -> Self;
    /// Hyperbolic cosine.
    fn cosh(self) -> Self;
    /// Inverse hyperbolic sine.
    fn asinh(self) -> Self;
    /// Inverse hyperbolic cosine.
    fn acosh(self) -> Self;
    /// Inverse hyperbolic tangent.
    fn atanh(self) -> Self;
    /// The error function.
    fn erf(self) -> Self;
    /// The error function as PyTorch's vectorized CPU kernels compute it: for `f32` a
    /// branch-free approximation that vectorises, for `f64` [`erf`](Self::erf) (Note
    /// [Vectorized erf and exp]).
    fn erf_vectorized(self) -> Self;
    /// `e^self` as PyTorch's vectorized CPU kernels compute it: for `f32` a branch-free
    /// polynomial within 1 ulp that vectorises, for `f64` [`exp`](Self::exp) (Note
    /// [Vectorized erf and exp]).
    fn exp_vectorized(self) -> Self;
    /// `self ** e` for real exponents.
    fn powf(self, e: Self) -> Self;
    /// Rounds toward negative infinity.
    fn floor(self) -> Self;
    /// Rounds toward positive infinity.
    fn ceil(self) -> Self;
    /// Rounds toward zero.
    fn trunc(self) -> Self;
    /// Rounds to the nearest integer, ties to even (C's `nearbyint`, PyTorch's `round`).
    fn round_ties_even(self) -> Self;
    /// Cosine.
    fn cos(self) -> Self;
    /// Sine.
    fn sin(self) -> Self;
    /// Tangent.
    fn tan(self) -> Self;
    /// Arc cosine.
    fn acos(self) -> Self;
    /// Arc sine.
    fn asin(self) -> Self;
    /// Arc tangent.
    fn atan(self) -> Self;
    /// The angle of the point `(other, self)` (C's `atan2(self, other)`).
    fn atan2(self, other: Self) -> Self;
    /// Whether finite.
    fn is_finite(self) -> bool;
    /// Whether infinite.
    fn is_infinite(self) -> bool;
    /// `1 / sqrt(x)`.
    #[inline]
    fn rsqrt(self) -> Self {
        Self::ONE.div(self.sqrt())
    }
}

/// Forwards [`Float`]'s methods to the inherent ones of `f32`/`f64`, libm's `erf`, and the
/// vectorized `erf` and `exp` (Note [Vectorized erf and exp]).
macro_rules! float_impl {
    ($t:ident, $erf:path, $erf_vectorized:path, $exp_vectorized:path;
     $($f:ident($($a:ident),*) -> $r:ty;)*) => {
        impl Float for $t {
            $(
                #[inline]
                fn $f(self $(, $a: Self)*) -> $r {
                    $t::$f(self $(, $a)*)
                }
            )*
            #[inline]
            fn erf(self) -> Self {
                $erf(self)
            }
            #[inline(always)]
            fn erf_vectorized(self) -> Self {
                $erf_vectorized(self)
            }
            #[inline(always)]
            fn exp_vectorized(self) -> Self {
                $exp_vectorized(self)
            }
        }
    };
}

macro_rules! float_impls {
    ($($t:ident, $erf:path, $erf_vectorized:path, $exp_vectorized:path);*) => {$(
        float_impl!($t, $erf, $erf_vectorized, $exp_vectorized;
            exp() -> Self; exp_m1() -> Self; ln() -> Self; ln_1p() -> Self; log10() -> Self;
            log2() -> Self; sqrt() -> Self; tanh() -> Self; sinh() -> Self; cosh() -> Self;
            asinh() -> Self; acosh() -> Self; atanh() -> Self; powf(e) -> Self;
            floor() -> Self; ceil() -> Self; trunc() -> Self; round_ties_even() -> Self;
            cos() -> Self; sin() -> Self; tan() -> Self; acos() -> Self; asin() -> Self;
            atan() -> Self; atan2(other) -> Self; is_finite() -> bool; is_infinite() -> bool;
        );
    )*};
}
float_impls!(
    f32, libm::erff, crate::vectorized_math::erf_f32, crate::vectorized_math::exp_f32;
    f64, libm::erf, libm::erf, f64::exp
);

/// A stored element type and its compute type ([`Num`]); see Note [Compute types].
pub trait CpuElement: Element {
    /// The type this element computes in.
    type Acc: Num;
    /// Widens to the compute type.
    fn to_acc(self) -> Self::Acc;
    /// Narrows from the compute type (rounding to nearest for Half/BFloat16).
    fn from_acc(v: Self::Acc) -> Self;
}

macro_rules! int_num {
    ($($t:ty),*) => {$(
        impl Num for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            const LOWEST: Self = <$t>::MIN;
            const HIGHEST: Self = <$t>::MAX;
            const IS_FLOAT: bool = false;
            #[inline] fn from_f64(v: f64) -> Self { v as i64 as $t }
            #[inline] fn from_i64(v: i64) -> Self { v as $t }
            #[inline] fn to_f64(self) -> f64 { self as f64 }
            #[inline] fn to_i64(self) -> i64 { self as i64 }
            #[inline] fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            #[inline] fn sub(self, o: Self) -> Self { self.wrapping_sub(o) }
            #[inline] fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
            #[inline] fn div(self, o: Self) -> Self {
                if o == 0 { 0 } else { self.wrapping_div(o) }
            }
            #[inline] fn trunc_div(self, o: Self) -> Self { self.div(o) }
            #[inline] fn floor_div(self, o: Self) -> Self {
                if o == 0 {
                    return 0;
                }
                let q = self.wrapping_div(o);
                let r = self.wrapping_rem(o);
                #[allow(unused_comparisons)]
                let neg = (r < 0) != (o < 0);
                if r != 0 && neg { q.wrapping_sub(1) } else { q }
            }
            #[inline] fn neg(self) -> Self { self.wrapping_neg() }
            #[inline]
            #[allow(unused_comparisons)]
            fn abs(self) -> Self { if self < 0 { self.wrapping_neg() } else { self } }
            #[inline]
            #[allow(unused_comparisons)]
            fn pow(self, e: Self) -> Self {
                // c10's powi: negative exponents give 0 except for bases 1 and -1.
                if e < 0 {
                    let one: $t = 1;
                    return if self == one {
                        one
                    } else if self == one.wrapping_neg() {
                        if e.wrapping_rem(2) == 0 { one } else { self }
                    } else {
                        0
                    };
                }
                let (mut base, mut e, mut acc): ($t, $t, $t) = (self, e, 1);
                while e > 0 {
                    if e & 1 == 1 {
                        acc = acc.wrapping_mul(base);
                    }
                    base = base.wrapping_mul(base);
                    e >>= 1;
                }
                acc
            }
            #[inline] fn is_nan(self) -> bool { false }
        }
    )*};
}
int_num!(u8, i8, i16, i32, i64);

impl Num for bool {
    const ZERO: Self = false;
    const ONE: Self = true;
    const LOWEST: Self = false;
    const HIGHEST: Self = true;
    const IS_FLOAT: bool = false;
    #[inline]
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    #[inline]
    fn from_i64(v: i64) -> Self {
        v != 0
    }
    #[inline]
    fn to_f64(self) -> f64 {
        self as u8 as f64
    }
    #[inline]
    fn to_i64(self) -> i64 {
        self as i64
    }
    #[inline]
    fn add(self, o: Self) -> Self {
        self | o
    }
    #[inline]
    fn sub(self, o: Self) -> Self {
        self ^ o
    }
    #[inline]
    fn mul(self, o: Self) -> Self {
        self & o
    }
    #[inline]
    fn div(self, o: Self) -> Self {
        self & o
    }
    #[inline]
    fn trunc_div(self, o: Self) -> Self {
        self & o
    }
    #[inline]
    fn floor_div(self, o: Self) -> Self {
        self & o
    }
    #[inline]
    fn neg(self) -> Self {
        self
    }
    #[inline]
    fn abs(self) -> Self {
        self
    }
    #[inline]
    fn pow(self, e: Self) -> Self {
        self | !e
    }
    #[inline]
    fn is_nan(self) -> bool {
        false
    }
}

macro_rules! float_num {
    ($($t:ident),*) => {$(
        impl Num for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const LOWEST: Self = $t::NEG_INFINITY;
            const HIGHEST: Self = $t::INFINITY;
            const IS_FLOAT: bool = true;
            #[inline] fn from_f64(v: f64) -> Self { v as $t }
            #[inline] fn from_i64(v: i64) -> Self { v as $t }
            #[inline] fn to_f64(self) -> f64 { self as f64 }
            #[inline] fn to_i64(self) -> i64 { self as i64 }
            #[inline] fn add(self, o: Self) -> Self { self + o }
            #[inline] fn sub(self, o: Self) -> Self { self - o }
            #[inline] fn mul(self, o: Self) -> Self { self * o }
            #[inline] fn mul_add(self, a: Self, b: Self) -> Self { $t::mul_add(self, a, b) }
            #[inline] fn div(self, o: Self) -> Self { self / o }
            #[inline] fn trunc_div(self, o: Self) -> Self { (self / o).trunc() }
            #[inline]
            fn floor_div(self, o: Self) -> Self {
                // c10's floor_div_floating: exact for integral quotients, Python semantics.
                if o == 0.0 {
                    return self / o;
                }
                let m = self % o;
                let mut d = (self - m) / o;
                if m != 0.0 && ((o < 0.0) != (m < 0.0)) {
                    d -= 1.0;
                }
                if d != 0.0 {
                    let mut f = d.floor();
                    if d - f > 0.5 {
                        f += 1.0;
                    }
                    f
                } else {
                    (0.0 as $t).copysign(self / o)
                }
            }
            #[inline] fn neg(self) -> Self { -self }
            #[inline] fn abs(self) -> Self { self.abs() }
            #[inline] fn pow(self, e: Self) -> Self { self.powf(e) }
            #[inline] fn is_nan(self) -> bool { self.is_nan() }
        }
    )*};
}
float_num!(f32, f64);

macro_rules! identity_element {
    ($($t:ty),*) => {$(
        impl CpuElement for $t {
            type Acc = $t;
            #[inline(always)] fn to_acc(self) -> $t { self }
            #[inline(always)] fn from_acc(v: $t) -> $t { v }
        }
    )*};
}
identity_element!(bool, u8, i8, i16, i32, i64, f32, f64);

impl CpuElement for f16 {
    type Acc = f32;
    #[inline(always)]
    fn to_acc(self) -> f32 {
        self.to_f32()
    }
    #[inline(always)]
    fn from_acc(v: f32) -> f16 {
        f16::from_f32(v)
    }
}

impl CpuElement for bf16 {
    type Acc = f32;
    #[inline(always)]
    fn to_acc(self) -> f32 {
        self.to_f32()
    }
    #[inline(always)]
    fn from_acc(v: f32) -> bf16 {
        bf16::from_f32(v)
    }
}

/// The compute type of `T` (`<T as CpuElement>::Acc`).
pub type Acc<T> = <T as CpuElement>::Acc;

/// A floating stored type (`f16`, `bf16`, `f32`, `f64`) whose compute type is a [`Float`].
pub trait FloatElement: CpuElement<Acc = <Self as FloatElement>::F> {
    /// The compute type (same as `Acc`).
    type F: Float;
}
impl FloatElement for f32 {
    type F = f32;
}
impl FloatElement for f64 {
    type F = f64;
}
impl FloatElement for f16 {
    type F = f32;
}
impl FloatElement for bf16 {
    type F = f32;
}

/// A scalar argument as PyTorch's kernels read it, `scalar.to<opmath_t>()`: checked, and for
/// float16/bfloat16 the float value (not rounded to the element type); other dtypes narrow to
/// their own type.
pub(crate) fn scalar_in_opmath<T: CpuElement>(
    s: switchboard_tensor::Scalar,
) -> crate::error::Result<Acc<T>> {
    if matches!(
        T::DTYPE,
        switchboard_tensor::ScalarType::Half | switchboard_tensor::ScalarType::BFloat16
    ) {
        let v = s.checked_to::<f32>()?;
        return Ok(<Acc<T> as Num>::from_f64(f64::from(v)));
    }
    Ok(s.checked_to::<T>()?.to_acc())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{dispatch_all_types, dispatch_all_types_and_bool, dispatch_floating_types};
    use switchboard_tensor::ScalarType;

    #[test]
    fn integer_rules() {
        assert_eq!(7i64.floor_div(-2), -4);
        assert_eq!((-7i64).floor_div(2), -4);
        assert_eq!((-7i64).trunc_div(2), -3);
        assert_eq!(6i64.floor_div(3), 2);
        assert_eq!(Num::pow(2i32, 10), 1024);
        assert_eq!(Num::pow(2i32, -1), 0);
        assert_eq!(Num::pow(-1i32, -3), -1);
        assert_eq!(200u8.add(100), 44);
        assert_eq!(Num::abs(i8::MIN), i8::MIN);
        assert!(true.add(false));
        assert!(!true.mul(false));
    }

    #[test]
    fn float_rules() {
        assert_eq!(7.0f64.floor_div(-2.0), -4.0);
        assert_eq!((-7.5f32).floor_div(2.0), -4.0);
        assert_eq!(1.0f64.floor_div(0.0), f64::INFINITY);
        assert!((-0.0f64).floor_div(5.0).is_sign_negative());
        assert!(f32::NAN.max_nan(1.0).is_nan());
        assert!(1.0f32.min_nan(f32::NAN).is_nan());
        assert_eq!(2.0f32.max_nan(3.0), 3.0);
        assert!((Float::erf(1.0f64) - 0.842_700_792_949_714_9).abs() < 1e-15);
        assert_eq!(f16::from_f32(1.5).to_acc(), 1.5f32);
    }

    #[test]
    fn dispatch_macros() {
        fn size(dt: ScalarType) -> crate::error::Result<usize> {
            dispatch_all_types!(dt, "size", T => Ok(std::mem::size_of::<T>()))
        }
        assert_eq!(size(ScalarType::Half).unwrap(), 2);
        assert_eq!(
            size(ScalarType::Bool).unwrap_err().to_string(),
            "\"size\" not implemented for 'Bool'"
        );
        let r: crate::error::Result<ScalarType> = dispatch_all_types_and_bool!(ScalarType::Bool, "x", T => Ok(<T as switchboard_tensor::StorageElement>::DTYPE));
        assert_eq!(r.unwrap(), ScalarType::Bool);
        let r: crate::error::Result<()> = dispatch_floating_types!(ScalarType::Long, "GeluKernelImpl", T => {
            let _ = <T as Element>::ONE;
            Ok(())
        });
        assert_eq!(
            r.unwrap_err().to_string(),
            "\"GeluKernelImpl\" not implemented for 'Long'"
        );
    }
}
