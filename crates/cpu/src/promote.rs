//! Type promotion for kernels: [`result_type`] over a mix of tensors and scalars
//! ([`PromoteArg`], as `at::native::result_type` / TensorIterator compute it). The dtype
//! table ([`promote_types`], [`can_cast`]) and broadcasting ([`infer_size`]) are the tensor
//! crate's, re-exported here.

use switchboard_tensor::{Scalar, ScalarType, Tensor};

/// The default floating dtype (`torch.get_default_dtype()`).
pub const DEFAULT_FLOAT: ScalarType = switchboard_tensor::DEFAULT_DTYPE;

pub use switchboard_tensor::{can_cast, infer_size, promote_types};

/// An operand of type promotion: its dtype and priority class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PromoteArg {
    /// The operand's dtype.
    pub dtype: ScalarType,
    /// Priority: 2 for tensors with dimensions, 1 for zero-dim tensors, 0 for wrapped numbers
    /// (Python scalars).
    pub priority: u8,
}

impl PromoteArg {
    /// The promotion class of a tensor.
    pub fn of_tensor(t: &Tensor) -> PromoteArg {
        let priority = if t.is_wrapped_number() {
            0
        } else if t.dim() == 0 {
            1
        } else {
            2
        };
        PromoteArg {
            dtype: t.dtype(),
            priority,
        }
    }

    /// The promotion class of a Python scalar (a wrapped number).
    pub fn of_scalar(s: Scalar) -> PromoteArg {
        PromoteArg {
            dtype: s.dtype(),
            priority: 0,
        }
    }
}

fn combine_categories(higher: Option<ScalarType>, lower: Option<ScalarType>) -> Option<ScalarType> {
    let Some(h) = higher else { return lower };
    let Some(l) = lower else { return higher };
    if h.is_floating_point() {
        return Some(h);
    }
    if h == ScalarType::Bool || l.is_floating_point() {
        return Some(promote_types(h, l));
    }
    Some(h)
}

/// `torch.result_type` over operands: dtypes promote within each priority class (tensors with
/// dimensions, zero-dim tensors, wrapped numbers), and a lower class only matters when its
/// category (bool < integer < floating) is higher. A floating wrapped number counts as the
/// default dtype (Float). With no operands the result is the default dtype.
///
/// ```
/// use switchboard_cpu::promote::{result_type, PromoteArg};
/// use switchboard_tensor::{Scalar, ScalarType::*};
/// let int_tensor = PromoteArg { dtype: Int, priority: 2 };
/// assert_eq!(result_type(&[int_tensor, PromoteArg::of_scalar(Scalar::Int(5))]), Int);
/// assert_eq!(result_type(&[int_tensor, PromoteArg::of_scalar(Scalar::Float(0.5))]), Float);
/// let zero_dim_double = PromoteArg { dtype: Double, priority: 1 };
/// assert_eq!(result_type(&[int_tensor, zero_dim_double]), Double);
/// let half = PromoteArg { dtype: Half, priority: 2 };
/// assert_eq!(result_type(&[half, zero_dim_double]), Half);
/// ```
pub fn result_type(args: &[PromoteArg]) -> ScalarType {
    let mut classes: [Option<ScalarType>; 3] = [None; 3];
    for a in args {
        let dtype = if a.priority == 0 && a.dtype.is_floating_point() {
            DEFAULT_FLOAT
        } else {
            a.dtype
        };
        let slot = &mut classes[a.priority.min(2) as usize];
        *slot = Some(match *slot {
            None => dtype,
            Some(cur) => promote_types(cur, dtype),
        });
    }
    let [wrapped, zero, dim] = classes;
    combine_categories(dim, combine_categories(zero, wrapped)).unwrap_or(DEFAULT_FLOAT)
}

/// `torch.result_type` of tensors.
pub fn result_type_of(tensors: &[&Tensor]) -> ScalarType {
    let args: smallvec::SmallVec<[PromoteArg; 4]> =
        tensors.iter().map(|t| PromoteArg::of_tensor(t)).collect();
    result_type(&args)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ScalarType::*;

    #[test]
    fn promotion_table() {
        let ints = [Byte, Char, Short, Int, Long];
        for a in ScalarType::ALL {
            assert_eq!(promote_types(a, a), a);
            assert_eq!(promote_types(Bool, a), a);
            for b in ScalarType::ALL {
                assert_eq!(promote_types(a, b), promote_types(b, a), "{a:?} {b:?}");
            }
        }
        assert_eq!(promote_types(Char, Short), Short);
        assert_eq!(promote_types(Byte, Long), Long);
        for i in ints {
            assert_eq!(promote_types(i, BFloat16), BFloat16);
            assert_eq!(promote_types(i, Double), Double);
        }
        assert_eq!(promote_types(Half, Double), Double);
        assert_eq!(promote_types(BFloat16, Float), Float);
    }

    #[test]
    fn result_types() {
        let t = |dtype| PromoteArg { dtype, priority: 2 };
        let z = |dtype| PromoteArg { dtype, priority: 1 };
        let s = PromoteArg::of_scalar;
        assert_eq!(result_type(&[t(Byte), s(Scalar::Int(1000))]), Byte);
        assert_eq!(result_type(&[t(Bool), s(Scalar::Int(1))]), Long);
        assert_eq!(result_type(&[t(Bool), s(Scalar::Bool(true))]), Bool);
        assert_eq!(result_type(&[t(Long), s(Scalar::Float(1.0))]), Float);
        assert_eq!(result_type(&[t(Double), s(Scalar::Float(1.0))]), Double);
        assert_eq!(result_type(&[t(Float), z(Double)]), Float);
        assert_eq!(result_type(&[t(Int), z(Long)]), Int);
        assert_eq!(result_type(&[z(Int), z(Long)]), Long);
        assert_eq!(result_type(&[z(Int), s(Scalar::Float(2.0))]), Float);
        assert_eq!(result_type(&[t(Bool), z(Int)]), Int);
        assert_eq!(
            result_type(&[s(Scalar::Int(1)), s(Scalar::Float(1.0))]),
            Float
        );
        assert_eq!(result_type(&[]), Float);
    }

    #[test]
    fn casting() {
        assert!(!can_cast(Float, Long));
        assert!(!can_cast(Long, Bool));
        assert!(can_cast(Bool, Long));
        assert!(can_cast(Long, Half));
        assert!(can_cast(Double, Half));
        assert!(!can_cast(Float, Bool));
    }

    #[test]
    fn broadcasting() {
        assert_eq!(&infer_size(&[], &[3]).unwrap()[..], &[3]);
        assert_eq!(&infer_size(&[0], &[1]).unwrap()[..], &[0]);
        assert_eq!(&infer_size(&[5, 1, 3], &[4, 1]).unwrap()[..], &[5, 4, 3]);
        assert!(infer_size(&[0], &[2]).is_err());
    }
}
