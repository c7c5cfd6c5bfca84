//! [`CheckedSize`]: overflow-checked `i64` arithmetic for sizes, strides and offsets computed
//! from user input (output shapes, storage extents, window bounds), and [`to_int32`], c10's
//! checked narrowing to `int`.

use std::fmt;
use std::ops::{Add, Mul, Sub};

use crate::error::{Result, TensorError};

// Note [Checked size arithmetic]
// Output shapes, storage extents and offsets are computed from numbers a user gave: sizes read
// from a file, padding, dilation, a step, an offset. In `i64` such a formula can overflow, and
// a wrapped result is worse than a crash: `input + 2 * padding` with a padding near
// `i64::MAX` wraps to a small size and the convolution "succeeds" with a wrong tiny output.
// Every such formula is written with `CheckedSize`: each `+`, `-`, `*` and division is checked,
// an overflow poisons the whole expression, and `get` turns a poisoned result into one error
// naming the quantity ("conv2d: the padded input size overflows int64"), so a call site
// reads like the formula it computes and cannot forget a step. The arithmetic compiles to
// the same checked instructions one would write by hand. Values PyTorch narrows to C++ `int`
// (pooling parameters) go through `to_int32`, with c10's `checked_convert` message.

/// An `i64` computed with overflow-checked arithmetic (Note [Checked size arithmetic]):
/// `None` once any step overflowed (or divided by zero).
///
/// ```
/// use switchboard_tensor::CheckedSize;
/// let (size, pad, k) = (5i64, 1i64, 3i64);
/// let out = (CheckedSize::new(size) + CheckedSize::new(pad) * 2 - k).div_floor(1) + 1;
/// assert_eq!(out.get(|| "the output size".into()).unwrap(), 5);
/// let huge = CheckedSize::new(size) + CheckedSize::new(i64::MAX - 1) * 2;
/// let err = huge.get(|| "conv2d: the padded input size".into()).unwrap_err();
/// assert_eq!(err.to_string(), "conv2d: the padded input size overflows int64");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub struct CheckedSize(Option<i64>);

impl CheckedSize {
    /// A known value.
    #[inline]
    pub const fn new(v: i64) -> CheckedSize {
        CheckedSize(Some(v))
    }

    /// The product of `values` (1 for none): a numel, a plane size.
    #[inline]
    pub fn product(values: impl IntoIterator<Item = i64>) -> CheckedSize {
        values
            .into_iter()
            .fold(CheckedSize::new(1), |acc, v| acc * v)
    }

    /// The value, or `None` if a step overflowed.
    #[inline]
    pub const fn value(self) -> Option<i64> {
        self.0
    }

    /// The value, or the error "`what()` overflows int64".
    #[inline]
    pub fn get(self, what: impl FnOnce() -> String) -> Result<i64> {
        self.0.ok_or_else(|| overflow_error(what()))
    }

    /// The value as a `usize` (it must also be non-negative), or the error of
    /// [`get`](Self::get).
    #[inline]
    pub fn get_usize(self, what: impl FnOnce() -> String) -> Result<usize> {
        match self.0.map(usize::try_from) {
            Some(Ok(v)) => Ok(v),
            Some(Err(_)) => Err(TensorError::invalid(format!(
                "{} is negative: {}",
                what(),
                self.0.unwrap_or_default()
            ))),
            None => Err(overflow_error(what())),
        }
    }

    /// Division rounding towards negative infinity (c10's `div_rtn`); `None` for a zero
    /// divisor.
    #[inline]
    pub fn div_floor(self, rhs: impl Into<CheckedSize>) -> CheckedSize {
        let (a, b) = (self.0, rhs.into().0);
        CheckedSize(match (a, b) {
            (Some(a), Some(b)) if b != 0 => a.checked_div(b).map(|q| {
                if (a % b != 0) && ((a < 0) != (b < 0)) {
                    q - 1
                } else {
                    q
                }
            }),
            _ => None,
        })
    }

    /// Division rounding towards zero (C++'s `/`); `None` for a zero divisor.
    #[inline]
    pub fn div_trunc(self, rhs: impl Into<CheckedSize>) -> CheckedSize {
        CheckedSize(match (self.0, rhs.into().0) {
            (Some(a), Some(b)) => a.checked_div(b),
            _ => None,
        })
    }

    /// The smaller of two values (poisoned if either is).
    #[inline]
    pub fn min(self, rhs: impl Into<CheckedSize>) -> CheckedSize {
        CheckedSize(match (self.0, rhs.into().0) {
            (Some(a), Some(b)) => Some(a.min(b)),
            _ => None,
        })
    }
}

#[cold]
fn overflow_error(what: String) -> TensorError {
    TensorError::invalid(format!("{what} overflows int64"))
}

impl From<i64> for CheckedSize {
    #[inline]
    fn from(v: i64) -> CheckedSize {
        CheckedSize::new(v)
    }
}

impl fmt::Display for CheckedSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(v) => write!(f, "{v}"),
            None => f.write_str("<overflow>"),
        }
    }
}

macro_rules! checked_op {
    ($trait:ident, $method:ident, $checked:ident) => {
        impl<R: Into<CheckedSize>> $trait<R> for CheckedSize {
            type Output = CheckedSize;
            #[inline]
            fn $method(self, rhs: R) -> CheckedSize {
                CheckedSize(match (self.0, rhs.into().0) {
                    (Some(a), Some(b)) => a.$checked(b),
                    _ => None,
                })
            }
        }
    };
}

checked_op!(Add, add, checked_add);
checked_op!(Sub, sub, checked_sub);
checked_op!(Mul, mul, checked_mul);

/// `v` as a C++ `int`, failing as c10's `checked_convert<int>` does ("value cannot be
/// converted to type int without overflow"): for the arguments PyTorch narrows (pooling
/// windows).
///
/// ```
/// use switchboard_tensor::to_int32;
/// assert_eq!(to_int32(-5).unwrap(), -5);
/// let err = to_int32(1 << 40).unwrap_err();
/// assert_eq!(err.to_string(), "value cannot be converted to type int without overflow");
/// ```
pub fn to_int32(v: i64) -> Result<i32> {
    i32::try_from(v)
        .map_err(|_| TensorError::invalid("value cannot be converted to type int without overflow"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(v: i64) -> CheckedSize {
        CheckedSize::new(v)
    }

    #[test]
    fn arithmetic_and_poisoning() {
        assert_eq!((c(2) + 3) * 4 - 1, c(19));
        assert_eq!((c(i64::MAX) + 1).value(), None);
        assert_eq!((c(i64::MIN) - 1).value(), None);
        assert_eq!((c(1 << 62) * 2).value(), None);
        // Poison survives later steps that would bring the value back in range.
        assert_eq!(((c(i64::MAX) + 1) - 10).value(), None);
        assert_eq!(CheckedSize::product([2, 3, 4]), c(24));
        assert_eq!(CheckedSize::product([]), c(1));
        assert_eq!(CheckedSize::product([1 << 32, 1 << 32]).value(), None);
        assert_eq!(c(3).min(c(2)), c(2));
        assert_eq!(c(3).min(CheckedSize(None)).value(), None);
    }

    #[test]
    fn divisions() {
        assert_eq!(c(7).div_floor(2), c(3));
        assert_eq!(c(-7).div_floor(2), c(-4));
        assert_eq!(c(-8).div_floor(2), c(-4));
        assert_eq!(c(7).div_floor(-2), c(-4));
        assert_eq!(c(-7).div_trunc(2), c(-3));
        assert_eq!(c(1).div_floor(0).value(), None);
        assert_eq!(c(1).div_trunc(0).value(), None);
        assert_eq!(c(i64::MIN).div_floor(-1).value(), None);
    }

    #[test]
    fn errors() {
        let e = (c(i64::MAX) * 2).get(|| "x".into()).unwrap_err();
        assert_eq!(e.to_string(), "x overflows int64");
        assert_eq!(c(5).get_usize(|| "n".into()).unwrap(), 5);
        let e = c(-1).get_usize(|| "n".into()).unwrap_err();
        assert_eq!(e.to_string(), "n is negative: -1");
        assert_eq!(to_int32(i32::MAX as i64).unwrap(), i32::MAX);
        assert!(to_int32(i32::MIN as i64 - 1).is_err());
    }
}
