//! The remainders of division: `fmod` (C's `fmod`, the sign of the dividend) and `remainder`
//! (Python's `%`, the sign of the divisor), with their Tensor and Scalar overloads, `out=`
//! and in-place forms. An integer division by zero fails with `ZeroDivisionError`, as in
//! PyTorch; a float one is NaN.

use switchboard_tensor::Tensor;

use crate::binary::{binary_op, has_zero};
use crate::dispatch_all_types;
use crate::dispatch_dtype::CpuElement;
use crate::error::{invalid, Result};
use crate::iter::BinaryLoop;

/// The two remainders on a compute type.
pub trait Modulo: Copy {
    /// `a - trunc(a / b) * b` (C's `%` and `fmod`).
    fn fmod(self, b: Self) -> Self;
    /// `a - floor(a / b) * b` (Python's `%`), as PyTorch computes it: `fmod`, moved by `b`
    /// when nonzero and of the other sign.
    fn remainder(self, b: Self) -> Self;
}

macro_rules! int_modulo {
    ($($t:ty),*) => {$(
        impl Modulo for $t {
            #[inline(always)]
            fn fmod(self, b: Self) -> Self {
                // `MIN % -1` overflows in Rust; its remainder is 0.
                self.wrapping_rem(b)
            }
            #[inline(always)]
            fn remainder(self, b: Self) -> Self {
                let r = self.wrapping_rem(b);
                if r != 0 && ((r < 0) != (b < 0)) {
                    r.wrapping_add(b)
                } else {
                    r
                }
            }
        }
    )*};
}
int_modulo!(i8, i16, i32, i64);

impl Modulo for u8 {
    #[inline(always)]
    fn fmod(self, b: Self) -> Self {
        self % b
    }
    #[inline(always)]
    fn remainder(self, b: Self) -> Self {
        self % b
    }
}

macro_rules! float_modulo {
    ($($t:ty),*) => {$(
        impl Modulo for $t {
            #[inline(always)]
            fn fmod(self, b: Self) -> Self {
                self % b
            }
            #[inline(always)]
            fn remainder(self, b: Self) -> Self {
                let m = self % b;
                if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
                    m + b
                } else {
                    m
                }
            }
        }
    )*};
}
float_modulo!(f32, f64);

/// Which remainder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Fmod,
    Remainder,
}

fn modulo_kernel(iter: &impl BinaryLoop, kind: Kind) -> Result<()> {
    let dtype = iter.common_dtype();
    if dtype.is_integral(false) && has_zero(iter.input(1))? {
        return Err(invalid("ZeroDivisionError"));
    }
    match kind {
        Kind::Fmod => dispatch_all_types!(dtype, "fmod_cpu", T => {
            iter.for_each2(|a: T, b: T| T::from_acc(a.to_acc().fmod(b.to_acc())))
        }),
        Kind::Remainder => dispatch_all_types!(dtype, "remainder_cpu", T => {
            iter.for_each2(|a: T, b: T| T::from_acc(a.to_acc().remainder(b.to_acc())))
        }),
    }
}

fn modulo(kind: Kind, a: &Tensor, b: &Tensor, out: Option<&Tensor>) -> Result<Tensor> {
    let name = match kind {
        Kind::Fmod => "fmod",
        Kind::Remainder => "remainder",
    };
    binary_op!(name, a, b, out, false, |it| modulo_kernel(it, kind))
}

macro_rules! modulo_family {
    ($kind:ident, $name:literal, $tensor:ident, $out:ident, $inplace:ident) => {
        #[doc = concat!("`", $name, ".Tensor(Tensor self, Tensor other)` (the `.Scalar` overloads")]
        #[doc = "wrap their number and come here, as PyTorch's composites do)."]
        pub fn $tensor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
            modulo(Kind::$kind, self_, other, None)
        }
        #[doc = concat!("`", $name, ".Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out)`.")]
        pub fn $out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Result<Tensor> {
            modulo(Kind::$kind, self_, other, Some(out))
        }
        #[doc = concat!("`", $name, "_.Tensor(Tensor(a!) self, Tensor other)`.")]
        pub fn $inplace(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
            modulo(Kind::$kind, self_, other, Some(self_))
        }
    };
}

modulo_family!(Fmod, "fmod", fmod_tensor, fmod_tensor_out, fmod_tensor_);
modulo_family!(
    Remainder,
    "remainder",
    remainder_tensor,
    remainder_tensor_out,
    remainder_tensor_
);

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_tensor::Scalar;

    #[test]
    fn signs_follow_dividend_or_divisor() {
        let i = Tensor::from_vec(vec![5i64, -5, 7, i64::MIN], &[4]).unwrap();
        let j = Tensor::from_vec(vec![3i64, 3, -2, -1], &[4]).unwrap();
        assert_eq!(
            fmod_tensor(&i, &j).unwrap().to_vec::<i64>().unwrap(),
            [2, -2, 1, 0]
        );
        assert_eq!(
            remainder_tensor(&i, &j).unwrap().to_vec::<i64>().unwrap(),
            [2, 1, -1, 0]
        );
        let f = Tensor::from_vec(vec![5.5f64, -5.5, -3.0, 1.0], &[4]).unwrap();
        let g = Tensor::from_vec(vec![2.0f64, 2.0, f64::INFINITY, 0.0], &[4]).unwrap();
        let r = remainder_tensor(&f, &g).unwrap().to_vec::<f64>().unwrap();
        assert_eq!(&r[..3], [1.5, 0.5, f64::INFINITY]);
        assert!(r[3].is_nan());
        let r = fmod_tensor(&f, &g).unwrap().to_vec::<f64>().unwrap();
        assert_eq!(&r[..3], [1.5, -1.5, -3.0]);
    }

    #[test]
    fn integer_division_by_zero_and_bool() {
        let i = Tensor::from_vec(vec![5i64, 6], &[2]).unwrap();
        assert_eq!(
            fmod_tensor(&i, &Tensor::wrapped_scalar(Scalar::Int(0)))
                .unwrap_err()
                .to_string(),
            "ZeroDivisionError"
        );
        let z = Tensor::from_vec(vec![1i64, 0], &[2]).unwrap();
        assert_eq!(
            remainder_tensor(&i, &z).unwrap_err().to_string(),
            "ZeroDivisionError"
        );
        let b = Tensor::from_vec(vec![true], &[1]).unwrap();
        assert_eq!(
            fmod_tensor(&b, &b).unwrap_err().to_string(),
            "\"fmod_cpu\" not implemented for 'Bool'"
        );
        // A float divisor promotes: no integer division.
        let r = fmod_tensor(&i, &Tensor::wrapped_scalar(Scalar::Float(2.5))).unwrap();
        assert_eq!(r.to_vec::<f32>().unwrap(), [0.0, 1.0]);
    }
}
