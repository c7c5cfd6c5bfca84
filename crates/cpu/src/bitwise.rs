//! Bitwise operators on bool and integer tensors: `bitwise_not`, and `bitwise_and`,
//! `bitwise_or`, `bitwise_xor` (their Tensor overloads; the Scalar ones are composites over
//! them, as in PyTorch), each with its `out=` and in-place forms. Floating tensors have no
//! bitwise kernel ("bitwise_and_cpu" not implemented for 'Float').

use switchboard_tensor::Tensor;

use crate::binary::binary_op;
use crate::dispatch_dtype::CpuElement;
use crate::error::Result;
use crate::iter::{BinaryLoop, IterConfig};

/// Bitwise arithmetic on bool and the integers (`!`, `&`, `|`, `^`; logical on bool).
pub trait Bitwise: CpuElement + Copy {
    /// `!self` (`~self` in C++).
    fn not(self) -> Self;
    /// `self & other`.
    fn and(self, other: Self) -> Self;
    /// `self | other`.
    fn or(self, other: Self) -> Self;
    /// `self ^ other`.
    fn xor(self, other: Self) -> Self;
}

macro_rules! bitwise_impl {
    ($($t:ty),*) => {$(
        impl Bitwise for $t {
            #[inline(always)]
            fn not(self) -> Self {
                !self
            }
            #[inline(always)]
            fn and(self, other: Self) -> Self {
                self & other
            }
            #[inline(always)]
            fn or(self, other: Self) -> Self {
                self | other
            }
            #[inline(always)]
            fn xor(self, other: Self) -> Self {
                self ^ other
            }
        }
    )*};
}
bitwise_impl!(bool, u8, i8, i16, i32, i64);

/// Runs `$body` with `$T` bound to the element type of `$dtype` among bool and the
/// integers, or fails with PyTorch's "NAME" not implemented for 'Float'.
macro_rules! dispatch_integral_types_and_bool {
    ($dtype:expr, $name:expr, $T:ident => $body:expr) => {{
        match $dtype {
            ::switchboard_tensor::ScalarType::Bool => {
                type $T = bool;
                $body
            }
            dt => $crate::dispatch_integral_types!(dt, $name, $T => $body),
        }
    }};
}

fn bitwise_not_impl(self_: &Tensor, out: Option<&Tensor>) -> Result<Tensor> {
    let iter = IterConfig::new("bitwise_not_cpu")
        .maybe_out(out)
        .input(self_)
        .all_same_dtype(true)
        .build()?;
    dispatch_integral_types_and_bool!(iter.common_dtype(), "bitwise_not_cpu", T => {
        iter.for_each1(|a: T| a.not())
    })?;
    iter.finish()
}

/// `bitwise_not(Tensor self)`: `~x` (logical not on bool).
///
/// ```
/// use switchboard_cpu::bitwise_not;
/// use switchboard_tensor::Tensor;
/// let t = Tensor::from_vec(vec![0i64, -2], &[2]).unwrap();
/// assert_eq!(bitwise_not(&t).unwrap().to_vec::<i64>().unwrap(), [-1, 1]);
/// ```
pub fn bitwise_not(self_: &Tensor) -> Result<Tensor> {
    bitwise_not_impl(self_, None)
}

/// `bitwise_not.out(Tensor self, *, Tensor(a!) out)`.
pub fn bitwise_not_out(self_: &Tensor, out: &Tensor) -> Result<Tensor> {
    bitwise_not_impl(self_, Some(out))
}

/// `bitwise_not_(Tensor(a!) self)`.
pub fn bitwise_not_(self_: &Tensor) -> Result<Tensor> {
    bitwise_not_impl(self_, Some(self_))
}

/// A bitwise binary operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BitOp {
    And,
    Or,
    Xor,
}

impl BitOp {
    fn kernel_name(self) -> &'static str {
        match self {
            BitOp::And => "bitwise_and_cpu",
            BitOp::Or => "bitwise_or_cpu",
            BitOp::Xor => "bitwise_xor_cpu",
        }
    }
}

fn bitwise_kernel(iter: &impl BinaryLoop, op: BitOp) -> Result<()> {
    dispatch_integral_types_and_bool!(iter.common_dtype(), op.kernel_name(), T => match op {
        BitOp::And => iter.for_each2(|a: T, b: T| a.and(b)),
        BitOp::Or => iter.for_each2(|a: T, b: T| a.or(b)),
        BitOp::Xor => iter.for_each2(|a: T, b: T| a.xor(b)),
    })
}

fn bitwise_binary(op: BitOp, a: &Tensor, b: &Tensor, out: Option<&Tensor>) -> Result<Tensor> {
    binary_op!(op.kernel_name(), a, b, out, false, |it| bitwise_kernel(
        it, op
    ))
}

macro_rules! bitwise_family {
    ($op:ident, $name:literal, $tensor:ident, $out:ident, $inplace:ident) => {
        #[doc = concat!("`", $name, ".Tensor(Tensor self, Tensor other)`.")]
        pub fn $tensor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
            bitwise_binary(BitOp::$op, self_, other, None)
        }
        #[doc = concat!("`", $name, ".Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out)`.")]
        pub fn $out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Result<Tensor> {
            bitwise_binary(BitOp::$op, self_, other, Some(out))
        }
        #[doc = concat!("`", $name, "_.Tensor(Tensor(a!) self, Tensor other)`.")]
        pub fn $inplace(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
            bitwise_binary(BitOp::$op, self_, other, Some(self_))
        }
    };
}

bitwise_family!(
    And,
    "bitwise_and",
    bitwise_and_tensor,
    bitwise_and_tensor_out,
    bitwise_and_tensor_
);
bitwise_family!(
    Or,
    "bitwise_or",
    bitwise_or_tensor,
    bitwise_or_tensor_out,
    bitwise_or_tensor_
);
bitwise_family!(
    Xor,
    "bitwise_xor",
    bitwise_xor_tensor,
    bitwise_xor_tensor_out,
    bitwise_xor_tensor_
);

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_tensor::ScalarType;

    #[test]
    fn integers_and_bools() {
        let i = Tensor::from_vec(vec![5i64, -5, 7], &[3]).unwrap();
        let j = Tensor::from_vec(vec![3i64, 3, -2], &[3]).unwrap();
        let v = |r: Tensor| r.to_vec::<i64>().unwrap();
        assert_eq!(v(bitwise_and_tensor(&i, &j).unwrap()), [1, 3, 6]);
        assert_eq!(v(bitwise_or_tensor(&i, &j).unwrap()), [7, -5, -1]);
        assert_eq!(v(bitwise_xor_tensor(&i, &j).unwrap()), [6, -8, -7]);
        let u = Tensor::from_vec(vec![1u8, 2], &[2]).unwrap();
        let s = Tensor::from_vec(vec![1i8, 2], &[2]).unwrap();
        assert_eq!(
            bitwise_and_tensor(&u, &s).unwrap().dtype(),
            ScalarType::Short
        );
        let b = Tensor::from_vec(vec![true, false], &[2]).unwrap();
        assert_eq!(
            bitwise_xor_tensor(&b, &b)
                .unwrap()
                .to_vec::<bool>()
                .unwrap(),
            [false, false]
        );
        assert_eq!(
            bitwise_not(&b).unwrap().to_vec::<bool>().unwrap(),
            [false, true]
        );
    }

    #[test]
    fn floats_have_no_kernel() {
        let f = Tensor::from_vec(vec![1.0f32], &[1]).unwrap();
        assert_eq!(
            bitwise_and_tensor(&f, &f).unwrap_err().to_string(),
            "\"bitwise_and_cpu\" not implemented for 'Float'"
        );
        assert_eq!(
            bitwise_not(&f).unwrap_err().to_string(),
            "\"bitwise_not_cpu\" not implemented for 'Float'"
        );
    }
}
