//! Boolean-valued pointwise operators: `isnan`, and `logical_not.out`, `logical_and.out`,
//! `logical_or.out`, `logical_xor.out` (nonzero is true), whose result is
//! computed as bool and written in any output dtype (bool for the functional form, `self`'s
//! in place), as PyTorch's `check_all_same_dtype(false)` iterator does.

use switchboard_tensor::{ScalarType, Tensor};

use crate::dispatch_all_types_and_bool;
use crate::dispatch_dtype::{CpuElement, Num};
use crate::error::Result;
use crate::iter::IterConfig;

/// `isnan(Tensor self)`: a bool tensor, true where `self` is NaN (never for integers).
pub fn isnan(self_: &Tensor) -> Result<Tensor> {
    let iter = IterConfig::new("isnan")
        .input(self_)
        .out_dtype(ScalarType::Bool)
        .build()?;
    dispatch_all_types_and_bool!(iter.common_dtype(), "isnan", T => {
        iter.for_each1(|a: T| a.to_acc().is_nan())
    })?;
    iter.finish()
}

/// `logical_not.out(Tensor self, *, Tensor(a!) out)`: `out = !self`, written in `out`'s
/// dtype (0 and 1).
pub fn logical_not_out(self_: &Tensor, out: &Tensor) -> Result<Tensor> {
    let iter = IterConfig::new("logical_not_cpu")
        .out(out)
        .input(self_)
        .out_dtype(ScalarType::Bool)
        .build()?;
    dispatch_all_types_and_bool!(iter.common_dtype(), "logical_not_cpu", T => {
        iter.for_each1(|a: T| a.to_acc() == <T as CpuElement>::Acc::ZERO)
    })?;
    iter.finish()
}

/// A logical binary operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LogicalOp {
    And,
    Or,
    Xor,
}

/// `out = a op b` on truth values (nonzero is true), computed in the promoted dtype and
/// written as 0/1 in `out`'s dtype: PyTorch's `comparison_op_out`.
fn logical_binary(op: LogicalOp, a: &Tensor, b: &Tensor, out: &Tensor) -> Result<Tensor> {
    let name = match op {
        LogicalOp::And => "logical_and_cpu",
        LogicalOp::Or => "logical_or_cpu",
        LogicalOp::Xor => "logical_xor_cpu",
    };
    let iter = IterConfig::new(name)
        .out(out)
        .input(a)
        .input(b)
        .out_dtype(ScalarType::Bool)
        .build()?;
    dispatch_all_types_and_bool!(iter.common_dtype(), name, T => {
        let truth = |x: T| x.to_acc() != <T as CpuElement>::Acc::ZERO;
        match op {
            LogicalOp::And => iter.for_each2(|a: T, b: T| truth(a) && truth(b)),
            LogicalOp::Or => iter.for_each2(|a: T, b: T| truth(a) || truth(b)),
            LogicalOp::Xor => iter.for_each2(|a: T, b: T| truth(a) != truth(b)),
        }
    })?;
    iter.finish()
}

/// `logical_and.out(Tensor self, Tensor other, *, Tensor(a!) out)`.
pub fn logical_and_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Result<Tensor> {
    logical_binary(LogicalOp::And, self_, other, out)
}

/// `logical_or.out(Tensor self, Tensor other, *, Tensor(a!) out)`.
pub fn logical_or_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Result<Tensor> {
    logical_binary(LogicalOp::Or, self_, other, out)
}

/// `logical_xor.out(Tensor self, Tensor other, *, Tensor(a!) out)`.
pub fn logical_xor_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Result<Tensor> {
    logical_binary(LogicalOp::Xor, self_, other, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nan_and_not() {
        let f = Tensor::from_vec(vec![f32::NAN, 0.0, -0.0, 2.0], &[4]).unwrap();
        assert_eq!(
            isnan(&f).unwrap().to_vec::<bool>().unwrap(),
            [true, false, false, false]
        );
        let out = Tensor::empty(&[0], ScalarType::Float).unwrap();
        let r = logical_not_out(&f, &out).unwrap();
        assert_eq!(r.to_vec::<f32>().unwrap(), [0.0, 1.0, 1.0, 0.0]);
        let i = Tensor::from_vec(vec![3i64, 0], &[2]).unwrap();
        assert_eq!(isnan(&i).unwrap().to_vec::<bool>().unwrap(), [false, false]);
    }
}
