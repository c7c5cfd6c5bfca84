//! Type promotion: [`promote_types`] (PyTorch's table) and [`result_type`] /
//! [`ResultTypeState`] (PyTorch's category rules: dimensioned tensors > zero-dim tensors >
//! wrapped numbers, bool < integral < floating).

use crate::dtype::ScalarType;
use crate::scalar::Scalar;
use crate::tensor::Tensor;

/// A dtype category for type promotion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Category {
    /// `torch.bool`.
    Bool,
    /// The integer types.
    Integral,
    /// The floating-point types.
    Floating,
    /// The complex types.
    Complex,
}

impl ScalarType {
    /// The dtype's promotion category.
    pub fn category(self) -> Category {
        if self == ScalarType::Bool {
            Category::Bool
        } else if self.is_complex() {
            Category::Complex
        } else if self.is_floating_point() {
            Category::Floating
        } else {
            Category::Integral
        }
    }
}

impl Scalar {
    /// The scalar's promotion category.
    pub fn category(self) -> Category {
        self.dtype().category()
    }
}

/// PyTorch's default dtype for floating-point numbers (`torch.get_default_dtype()`).
pub const DEFAULT_DTYPE: ScalarType = ScalarType::Float;

/// PyTorch's default complex dtype, the complex type of [`DEFAULT_DTYPE`]
/// (`torch.get_default_dtype()` made complex: `complex64`).
pub const DEFAULT_COMPLEX_DTYPE: ScalarType = ScalarType::ComplexFloat;

/// The smallest dtype both `a` and `b` can be represented in (`torch.promote_types`).
///
/// ```
/// use switchboard_tensor::{promote_types, ScalarType as S};
/// assert_eq!(promote_types(S::Byte, S::Char), S::Short);
/// assert_eq!(promote_types(S::Half, S::BFloat16), S::Float);
/// assert_eq!(promote_types(S::Bool, S::Int), S::Int);
/// assert_eq!(promote_types(S::Long, S::Half), S::Half);
/// assert_eq!(promote_types(S::Double, S::ComplexFloat), S::ComplexDouble);
/// ```
pub fn promote_types(a: ScalarType, b: ScalarType) -> ScalarType {
    use ScalarType::*;
    // PyTorch's table for the complex types: a complex type with anything is complex, of the
    // wider of its part type and the other's (float64 with complex64 is complex128).
    if a.is_complex() || b.is_complex() {
        let wide = a == ComplexDouble || b == ComplexDouble || a == Double || b == Double;
        return if wide { ComplexDouble } else { ComplexFloat };
    }
    // Rows and columns in ScalarType::ALL order: u1 i1 i2 i4 i8 f2 f4 f8 b1 bf.
    const T: [[ScalarType; 10]; 10] = [
        /* u1 */
        [
            Byte, Short, Short, Int, Long, Half, Float, Double, Byte, BFloat16,
        ],
        /* i1 */
        [
            Short, Char, Short, Int, Long, Half, Float, Double, Char, BFloat16,
        ],
        /* i2 */
        [
            Short, Short, Short, Int, Long, Half, Float, Double, Short, BFloat16,
        ],
        /* i4 */ [Int, Int, Int, Int, Long, Half, Float, Double, Int, BFloat16],
        /* i8 */
        [
            Long, Long, Long, Long, Long, Half, Float, Double, Long, BFloat16,
        ],
        /* f2 */
        [
            Half, Half, Half, Half, Half, Half, Float, Double, Half, Float,
        ],
        /* f4 */
        [
            Float, Float, Float, Float, Float, Float, Float, Double, Float, Float,
        ],
        /* f8 */
        [
            Double, Double, Double, Double, Double, Double, Double, Double, Double, Double,
        ],
        /* b1 */
        [
            Byte, Char, Short, Int, Long, Half, Float, Double, Bool, BFloat16,
        ],
        /* bf */
        [
            BFloat16, BFloat16, BFloat16, BFloat16, BFloat16, Float, Float, Double, BFloat16,
            BFloat16,
        ],
    ];
    T[index(a)][index(b)]
}

fn index(t: ScalarType) -> usize {
    match t {
        ScalarType::Bool => 8,
        ScalarType::BFloat16 => 9,
        // `promote_types` answers for the complex types before reading the table.
        ScalarType::ComplexFloat | ScalarType::ComplexDouble => 7,
        other => other as i8 as usize,
    }
}

fn promote_opt(a: Option<ScalarType>, b: ScalarType) -> Option<ScalarType> {
    Some(match a {
        None => b,
        Some(a) => promote_types(a, b),
    })
}

/// `combine_categories`: a higher-priority result wins unless the lower one is of a higher
/// category.
fn combine(higher: Option<ScalarType>, lower: Option<ScalarType>) -> Option<ScalarType> {
    match (higher, lower) {
        (Some(h), _) if h.is_complex() => Some(h),
        // A complex lower class keeps the higher one's floating part type (a float64 tensor
        // and a complex64 zero-dim tensor give complex128).
        (Some(h), Some(l)) if l.is_complex() => match h.to_complex_type() {
            Ok(c) if h.is_floating_point() => Some(c),
            _ => Some(l),
        },
        (Some(h), _) if h.is_floating_point() => Some(h),
        (Some(h), Some(l)) if h == ScalarType::Bool || l.is_floating_point() => {
            Some(promote_types(h, l))
        }
        (Some(h), _) => Some(h),
        (None, l) => l,
    }
}

/// The running state of `at::result_type` over a list of tensors and scalars.
///
/// ```
/// use switchboard_tensor::{ResultTypeState, Scalar, ScalarType as S, Tensor};
/// let ints = Tensor::zeros(&[3], S::Int).unwrap();
/// let mut st = ResultTypeState::default();
/// st.update_tensor(&ints);
/// st.update_scalar(Scalar::Int(5));
/// assert_eq!(st.result(), Some(S::Int)); // a Python int does not widen an int32 tensor
/// st.update_scalar(Scalar::Float(0.5));
/// assert_eq!(st.result(), Some(S::Float)); // a float scalar lifts the category
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResultTypeState {
    dim_result: Option<ScalarType>,
    zero_result: Option<ScalarType>,
    wrapped_result: Option<ScalarType>,
}

impl ResultTypeState {
    /// Adds a tensor: dimensioned, zero-dim, or a wrapped number (whose floating dtype counts
    /// as the default dtype, its complex dtype as the default complex dtype).
    pub fn update_tensor(&mut self, t: &Tensor) {
        let mut current = t.dtype();
        if t.is_wrapped_number() && current.is_complex() {
            current = DEFAULT_COMPLEX_DTYPE;
        } else if t.is_wrapped_number() && current.is_floating_point() {
            current = DEFAULT_DTYPE;
        }
        if t.dim() > 0 {
            self.dim_result = promote_opt(self.dim_result, current);
        } else if t.is_wrapped_number() {
            self.wrapped_result = promote_opt(self.wrapped_result, current);
        } else {
            self.zero_result = promote_opt(self.zero_result, current);
        }
    }

    /// Adds a scalar (a wrapped number: `Bool`, `Long`, or the default dtype for floats).
    pub fn update_scalar(&mut self, s: Scalar) {
        let current = if s.is_floating_point() {
            DEFAULT_DTYPE
        } else {
            s.dtype()
        };
        self.wrapped_result = promote_opt(self.wrapped_result, current);
    }

    /// The result dtype so far (`None` before any update).
    pub fn result(&self) -> Option<ScalarType> {
        combine(
            self.dim_result,
            combine(self.zero_result, self.wrapped_result),
        )
    }
}

/// `torch.result_type` over tensors and scalars: the dtype an elementwise op on them computes
/// in. `None` only when both lists are empty.
///
/// ```
/// use switchboard_tensor::{result_type, Scalar, ScalarType as S, Tensor};
/// let a = Tensor::zeros(&[2], S::Byte).unwrap();
/// let b = Tensor::scalar_tensor(1, S::Long); // zero-dim: lower priority than `a`
/// assert_eq!(result_type(&[&a, &b], &[]), Some(S::Byte));
/// let f = Tensor::scalar_tensor(1.0, S::Double); // but a higher category wins
/// assert_eq!(result_type(&[&a, &f], &[]), Some(S::Double));
/// let bools = Tensor::zeros(&[2], S::Bool).unwrap();
/// assert_eq!(result_type(&[&bools], &[Scalar::Int(5)]), Some(S::Long));
/// ```
pub fn result_type(tensors: &[&Tensor], scalars: &[Scalar]) -> Option<ScalarType> {
    let mut st = ResultTypeState::default();
    for t in tensors {
        st.update_tensor(t);
    }
    for s in scalars {
        st.update_scalar(*s);
    }
    st.result()
}

/// Whether a value of dtype `from` may be cast to `to` by an in-place or `out=` op
/// (`torch.can_cast`): not complex to real, not floating to integral, not non-bool to bool.
pub fn can_cast(from: ScalarType, to: ScalarType) -> bool {
    !(from.is_complex() && !to.is_complex()
        || from.is_floating_point() && to.is_integral(false)
        || from != ScalarType::Bool && to == ScalarType::Bool)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ScalarType as S;

    #[test]
    fn table_is_symmetric_and_idempotent() {
        for a in S::ALL {
            assert_eq!(promote_types(a, a), a);
            for b in S::ALL {
                assert_eq!(promote_types(a, b), promote_types(b, a), "{a} {b}");
                let p = promote_types(a, b);
                assert!(p.category() >= a.category().max(b.category()));
            }
        }
        assert_eq!(promote_types(S::Byte, S::Long), S::Long);
        assert_eq!(promote_types(S::BFloat16, S::Int), S::BFloat16);
        assert_eq!(promote_types(S::Double, S::BFloat16), S::Double);
    }

    /// The complex rows of PyTorch 2.15's `torch.promote_types`, in `ScalarType::ALL` order.
    #[test]
    fn complex_promotion_matches_pytorch() {
        use S::{ComplexDouble as C8, ComplexFloat as C4};
        let with_c4 = [C4, C4, C4, C4, C4, C4, C4, C8, C4, C8, C4, C4];
        for (a, expected) in S::ALL.into_iter().zip(with_c4) {
            assert_eq!(promote_types(a, C4), expected, "{a}");
            assert_eq!(promote_types(a, C8), C8, "{a}");
        }
        let t = |dtype| Tensor::zeros(&[2], dtype).unwrap();
        let z = |dtype| Tensor::scalar_tensor(0, dtype);
        assert_eq!(result_type(&[&t(S::Double), &z(C4)], &[]), Some(C8));
        assert_eq!(result_type(&[&t(S::Long), &z(C8)], &[]), Some(C8));
        assert_eq!(result_type(&[&t(C4), &z(S::Double)], &[]), Some(C4));
        assert_eq!(result_type(&[&t(C4)], &[Scalar::Float(1.0)]), Some(C4));
        assert!(!can_cast(C4, S::Double));
        assert!(can_cast(S::Double, C4));
    }

    /// Priority classes: dimensioned tensors, then zero-dim tensors, then wrapped numbers
    /// (Python scalars); a lower class only counts when its category is higher.
    #[test]
    fn priority_classes() {
        let t = |dtype| Tensor::zeros(&[2], dtype).unwrap();
        let z = |dtype| Tensor::scalar_tensor(0, dtype);
        let rt =
            |ts: &[Tensor], ss: &[Scalar]| result_type(&ts.iter().collect::<Vec<_>>(), ss).unwrap();
        assert_eq!(rt(&[t(S::Byte)], &[Scalar::Int(1000)]), S::Byte);
        assert_eq!(rt(&[t(S::Bool)], &[Scalar::Int(1)]), S::Long);
        assert_eq!(rt(&[t(S::Bool)], &[Scalar::Bool(true)]), S::Bool);
        assert_eq!(rt(&[t(S::Long)], &[Scalar::Float(1.0)]), S::Float);
        assert_eq!(rt(&[t(S::Double)], &[Scalar::Float(1.0)]), S::Double);
        assert_eq!(rt(&[t(S::Float), z(S::Double)], &[]), S::Float);
        assert_eq!(rt(&[t(S::Int), z(S::Long)], &[]), S::Int);
        assert_eq!(rt(&[z(S::Int), z(S::Long)], &[]), S::Long);
        assert_eq!(rt(&[z(S::Int)], &[Scalar::Float(2.0)]), S::Float);
        assert_eq!(rt(&[t(S::Bool), z(S::Int)], &[]), S::Int);
        assert_eq!(rt(&[], &[Scalar::Int(1), Scalar::Float(1.0)]), S::Float);
    }

    #[test]
    fn categories() {
        let long = Tensor::zeros(&[2], S::Long).unwrap();
        let half = Tensor::zeros(&[2], S::Half).unwrap();
        assert_eq!(result_type(&[&long], &[Scalar::Float(1.0)]), Some(S::Float));
        assert_eq!(result_type(&[&half], &[Scalar::Float(1.0)]), Some(S::Half));
        assert_eq!(result_type(&[&half, &long], &[]), Some(S::Half));
        let wrapped = Tensor::wrapped_scalar(2.5);
        assert_eq!(wrapped.dtype(), S::Double);
        assert_eq!(result_type(&[&long, &wrapped], &[]), Some(S::Float));
        let zd = Tensor::scalar_tensor(2.5, S::Double);
        assert_eq!(result_type(&[&long, &zd], &[]), Some(S::Double));
        assert_eq!(result_type(&[&wrapped], &[]), Some(S::Float));
        assert_eq!(
            result_type(&[], &[Scalar::Int(1), Scalar::Bool(true)]),
            Some(S::Long)
        );
        assert_eq!(result_type(&[], &[]), None);
        assert!(can_cast(S::Int, S::Float));
        assert!(!can_cast(S::Float, S::Int));
        assert!(!can_cast(S::Int, S::Bool));
        assert!(can_cast(S::Bool, S::Bool));
        assert!(can_cast(S::Double, S::Half));
    }
}
