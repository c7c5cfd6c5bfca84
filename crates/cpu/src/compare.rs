//! Comparisons: `eq`, `ne`, `lt`, `le`, `gt`, `ge` with Tensor and Scalar overloads,
//! `out=` and in-place forms. Operands are compared in their promoted dtype; the result is
//! `Bool` (in-place forms write 0/1 in `self`'s dtype).

use switchboard_tensor::{Scalar, ScalarType, Tensor};

use crate::dispatch_all_types_and_bool;
use crate::dispatch_dtype::CpuElement;
use crate::error::Result;
use crate::iter::{IterConfig, TensorIter};

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

fn cmp_loop<T: CpuElement>(iter: &TensorIter, op: Cmp) -> Result<()> {
    match op {
        Cmp::Eq => iter.for_each2(|a: T, b: T| a.to_acc() == b.to_acc()),
        Cmp::Ne => iter.for_each2(|a: T, b: T| a.to_acc() != b.to_acc()),
        Cmp::Lt => iter.for_each2(|a: T, b: T| a.to_acc() < b.to_acc()),
        Cmp::Le => iter.for_each2(|a: T, b: T| a.to_acc() <= b.to_acc()),
        Cmp::Gt => iter.for_each2(|a: T, b: T| a.to_acc() > b.to_acc()),
        Cmp::Ge => iter.for_each2(|a: T, b: T| a.to_acc() >= b.to_acc()),
    }
}

/// Compares `a` and `b` elementwise with `op` (broadcasting, promoting), into `out` if given.
pub fn compare(op: Cmp, a: &Tensor, b: &Tensor, out: Option<&Tensor>) -> Result<Tensor> {
    let name = match op {
        Cmp::Eq => "eq_cpu",
        Cmp::Ne => "ne_cpu",
        Cmp::Lt => "lt_cpu",
        Cmp::Le => "le_cpu",
        Cmp::Gt => "gt_cpu",
        Cmp::Ge => "ge_cpu",
    };
    let iter = IterConfig::new(name)
        .maybe_out(out)
        .input(a)
        .input(b)
        .out_dtype(ScalarType::Bool)
        .build()?;
    dispatch_all_types_and_bool!(iter.common_dtype(), name, T => cmp_loop::<T>(&iter, op))?;
    iter.finish()
}

macro_rules! comparison {
    ($op:ident, $name:literal, $tensor:ident, $scalar:ident, $out:ident, $scalar_out:ident,
     $inplace:ident, $scalar_inplace:ident) => {
        #[doc = concat!("`", $name, ".Tensor(Tensor self, Tensor other) -> Tensor`: a `Bool` tensor.")]
        pub fn $tensor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
            compare(Cmp::$op, self_, other, None)
        }
        #[doc = concat!("`", $name, ".Scalar(Tensor self, Scalar other) -> Tensor`.")]
        pub fn $scalar(self_: &Tensor, other: Scalar) -> Result<Tensor> {
            compare(Cmp::$op, self_, &Tensor::wrapped_scalar(other), None)
        }
        #[doc = concat!("`", $name, ".Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out)`.")]
        pub fn $out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Result<Tensor> {
            compare(Cmp::$op, self_, other, Some(out))
        }
        #[doc = concat!("`", $name, ".Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out)`.")]
        pub fn $scalar_out(self_: &Tensor, other: Scalar, out: &Tensor) -> Result<Tensor> {
            compare(Cmp::$op, self_, &Tensor::wrapped_scalar(other), Some(out))
        }
        #[doc = concat!("`", $name, "_.Tensor(Tensor(a!) self, Tensor other)`: writes 0/1 in `self`'s dtype.")]
        pub fn $inplace(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
            compare(Cmp::$op, self_, other, Some(self_))
        }
        #[doc = concat!("`", $name, "_.Scalar(Tensor(a!) self, Scalar other)`.")]
        pub fn $scalar_inplace(self_: &Tensor, other: Scalar) -> Result<Tensor> {
            compare(Cmp::$op, self_, &Tensor::wrapped_scalar(other), Some(self_))
        }
    };
}

comparison!(
    Eq,
    "eq",
    eq_tensor,
    eq_scalar,
    eq_tensor_out,
    eq_scalar_out,
    eq_tensor_,
    eq_scalar_
);
comparison!(
    Ne,
    "ne",
    ne_tensor,
    ne_scalar,
    ne_tensor_out,
    ne_scalar_out,
    ne_tensor_,
    ne_scalar_
);
comparison!(
    Lt,
    "lt",
    lt_tensor,
    lt_scalar,
    lt_tensor_out,
    lt_scalar_out,
    lt_tensor_,
    lt_scalar_
);
comparison!(
    Le,
    "le",
    le_tensor,
    le_scalar,
    le_tensor_out,
    le_scalar_out,
    le_tensor_,
    le_scalar_
);
comparison!(
    Gt,
    "gt",
    gt_tensor,
    gt_scalar,
    gt_tensor_out,
    gt_scalar_out,
    gt_tensor_,
    gt_scalar_
);
comparison!(
    Ge,
    "ge",
    ge_tensor,
    ge_scalar,
    ge_tensor_out,
    ge_scalar_out,
    ge_tensor_,
    ge_scalar_
);

/// `equal(Tensor self, Tensor other) -> bool`: whether the tensors have the same sizes and
/// equal elements, compared in their promoted dtype (so a NaN is never equal). PyTorch's
/// `cpu_equal`; both tensors must be on one device.
///
/// ```
/// use switchboard_tensor::{RawOps, Tensor};
/// let a = Tensor::from_vec(vec![1i64, 2], &[2]).unwrap();
/// let b = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
/// assert!(switchboard_cpu::equal(&a, &b).unwrap());
/// assert!(!switchboard_cpu::equal(&a, &b.view(&[1, 2]).unwrap()).unwrap());
/// ```
pub fn equal(self_: &Tensor, other: &Tensor) -> Result<bool> {
    if self_.device() != other.device() {
        return Err(crate::error::invalid(format!(
            "Cannot compare two tensors on different devices. Got: {} and {}",
            self_.device(),
            other.device()
        )));
    }
    if self_.sizes() != other.sizes() {
        return Ok(false);
    }
    let same = compare(Cmp::Eq, self_, other, None)?;
    Ok(same.to_vec::<bool>()?.iter().all(|&b| b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compares_in_promoted_dtype() {
        let a = Tensor::from_vec(vec![1i64, 2, 3], &[3]).unwrap();
        let r = lt_scalar(&a, Scalar::Float(2.5)).unwrap();
        assert_eq!(r.dtype(), ScalarType::Bool);
        assert_eq!(r.to_vec::<bool>().unwrap(), [true, true, false]);
        let f = Tensor::from_vec(vec![f32::NAN, 2.0], &[2, 1]).unwrap();
        let b = Tensor::from_vec(vec![2.0f64, 3.0], &[2]).unwrap();
        let e = eq_tensor(&f, &b).unwrap();
        assert_eq!(e.sizes(), &[2, 2]);
        assert_eq!(e.to_vec::<bool>().unwrap(), [false, false, true, false]);
        let n = ne_tensor(&f, &b).unwrap();
        assert_eq!(n.to_vec::<bool>().unwrap(), [true, true, false, true]);
    }

    #[test]
    fn in_place_keeps_dtype() {
        let a = Tensor::from_vec(vec![1.0f32, 5.0], &[2]).unwrap();
        ge_scalar_(&a, Scalar::Int(3)).unwrap();
        assert_eq!(a.to_vec::<f32>().unwrap(), [0.0, 1.0]);
        let out = Tensor::zeros(&[2], ScalarType::Bool).unwrap();
        gt_scalar_out(&a, Scalar::Float(0.5), &out).unwrap();
        assert_eq!(out.to_vec::<bool>().unwrap(), [false, true]);
    }
}
