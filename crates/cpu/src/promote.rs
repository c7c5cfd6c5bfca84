//! Type promotion and broadcasting: [`promote_types`], [`result_type`], [`can_cast`] and
//! [`infer_size`], with PyTorch's rules (`c10::promoteTypes`, `at::native::result_type`,
//! `c10::canCast`, `at::infer_size`).
//!
//! These are local helpers: the tensor crate does not export them (yet).

use switchboard_tensor::{Scalar, ScalarType, Tensor, TensorError};

use crate::error::Result;

/// The default floating dtype (`torch.get_default_dtype()`).
pub const DEFAULT_FLOAT: ScalarType = ScalarType::Float;

/// `torch.promote_types(a, b)`: the smallest dtype both can be converted to without leaving
/// their category (bool < integer < floating).
///
/// ```
/// use switchboard_cpu::promote::promote_types;
/// use switchboard_tensor::ScalarType::*;
/// assert_eq!(promote_types(Byte, Char), Short);
/// assert_eq!(promote_types(Half, BFloat16), Float);
/// assert_eq!(promote_types(Long, Half), Half);
/// assert_eq!(promote_types(Bool, Int), Int);
/// ```
pub fn promote_types(a: ScalarType, b: ScalarType) -> ScalarType {
    use ScalarType::*;
    if a == b {
        return a;
    }
    if a == Bool {
        return b;
    }
    if b == Bool {
        return a;
    }
    match (a.is_floating_point(), b.is_floating_point()) {
        (true, true) => {
            if matches!((a, b), (Half, BFloat16) | (BFloat16, Half)) {
                Float
            } else if a.element_size() >= b.element_size() {
                a
            } else {
                b
            }
        }
        (true, false) => a,
        (false, true) => b,
        (false, false) => match (a, b) {
            (Byte, Char) | (Char, Byte) => Short,
            (Byte, o) | (o, Byte) => o,
            _ if a.element_size() >= b.element_size() => a,
            _ => b,
        },
    }
}

/// `c10::canCast(from, to)`: whether an op computing in `from` may write an output of dtype
/// `to` (no float to integer, nothing but bool to bool).
pub fn can_cast(from: ScalarType, to: ScalarType) -> bool {
    if from.is_floating_point() && to.is_integral(false) {
        return false;
    }
    !(from != ScalarType::Bool && to == ScalarType::Bool)
}

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

/// Broadcasts two shapes (`at::infer_size`): sizes are right-aligned and must be equal or 1.
///
/// ```
/// use switchboard_cpu::promote::infer_size;
/// assert_eq!(&infer_size(&[2, 1, 4], &[3, 1]).unwrap()[..], &[2, 3, 4]);
/// assert_eq!(
///     infer_size(&[2, 3], &[2, 4]).unwrap_err().to_string(),
///     "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1"
/// );
/// ```
pub fn infer_size(a: &[i64], b: &[i64]) -> Result<switchboard_tensor::DimVec> {
    let ndim = a.len().max(b.len());
    let mut out = switchboard_tensor::DimVec::from_elem(0, ndim);
    for i in (0..ndim).rev() {
        let offset = ndim - 1 - i;
        let sa = if offset < a.len() {
            a[a.len() - 1 - offset]
        } else {
            1
        };
        let sb = if offset < b.len() {
            b[b.len() - 1 - offset]
        } else {
            1
        };
        if sa != sb && sa != 1 && sb != 1 {
            return Err(TensorError::BroadcastMismatch {
                a: sa,
                b: sb,
                dim: i as i64,
            });
        }
        out[i] = if sa == 1 { sb } else { sa };
    }
    Ok(out)
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
