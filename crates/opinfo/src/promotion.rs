//! PyTorch's documented type promotion (`torch.result_type`, "Type promotion" in the tensor
//! attributes docs), written out independently of the kernels so the promotion test has
//! something to compare them with.

use switchboard_tensor::ScalarType;

/// One participant of a promotion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operand {
    /// A tensor with at least one dimension.
    Dimensioned(ScalarType),
    /// A zero-dimensional tensor.
    ZeroDim(ScalarType),
    /// A Python number: `Long` for an int, `Double` for a float, `Bool` for a bool.
    Number(ScalarType),
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Category {
    Bool,
    Integral,
    Floating,
}

fn category(t: ScalarType) -> Category {
    if t == ScalarType::Bool {
        Category::Bool
    } else if t.is_floating_point() {
        Category::Floating
    } else {
        Category::Integral
    }
}

/// `torch.promote_types(a, b)`: the smallest dtype both convert to without losing their kind.
pub fn promote_types(a: ScalarType, b: ScalarType) -> ScalarType {
    use ScalarType::*;
    if a == b {
        return a;
    }
    match (a, b) {
        (Bool, x) | (x, Bool) => x,
        (Half, BFloat16) | (BFloat16, Half) => Float,
        (x, y) if x.is_floating_point() && y.is_floating_point() => {
            if x.element_size() >= y.element_size() {
                x
            } else {
                y
            }
        }
        // A floating type wins over an integral one.
        (x, _) if x.is_floating_point() => x,
        (_, y) if y.is_floating_point() => y,
        // Both integral. uint8 with a signed type needs the next wider signed type.
        (Byte, Char) | (Char, Byte) => Short,
        (Byte, x) | (x, Byte) => x,
        (x, y) => {
            if x.element_size() >= y.element_size() {
                x
            } else {
                y
            }
        }
    }
}

/// `torch.result_type` of the operands: dimensioned tensors first, then zero-dimensional
/// tensors, then numbers, a lower class counting only when it is of a higher category (a float
/// number makes an integer tensor's result the default float dtype, float32).
pub fn result_type(operands: &[Operand]) -> ScalarType {
    let fold = |pick: &dyn Fn(&Operand) -> Option<ScalarType>| {
        operands.iter().filter_map(pick).reduce(promote_types)
    };
    let dim = fold(&|o| match o {
        Operand::Dimensioned(t) => Some(*t),
        _ => None,
    });
    let zero = fold(&|o| match o {
        Operand::ZeroDim(t) => Some(*t),
        _ => None,
    });
    let number = fold(&|o| match o {
        // A float number takes the default dtype.
        Operand::Number(t) if t.is_floating_point() => Some(ScalarType::Float),
        Operand::Number(t) => Some(*t),
        _ => None,
    });
    // c10's combine_categories(higher, lower): the lower class counts only when its category
    // is higher.
    let combine = |higher: Option<ScalarType>, lower: Option<ScalarType>| match (higher, lower) {
        (None, l) => l,
        (h, None) => h,
        (Some(h), Some(l)) if category(h) >= category(l) => Some(h),
        (Some(h), Some(l)) => Some(promote_types(h, l)),
    };
    combine(dim, combine(zero, number)).unwrap_or(ScalarType::Float)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ScalarType::*;

    #[test]
    fn documented_examples() {
        // From PyTorch's "Type promotion" documentation.
        assert_eq!(promote_types(Byte, Char), Short);
        assert_eq!(promote_types(Half, BFloat16), Float);
        assert_eq!(promote_types(Int, Long), Long);
        assert_eq!(promote_types(Bool, Char), Char);
        let r = |o: &[Operand]| result_type(o);
        use Operand::*;
        // int tensor + 5 -> int64 tensor; int tensor + 5.5 -> float32.
        assert_eq!(r(&[Dimensioned(Long), Number(Long)]), Long);
        assert_eq!(r(&[Dimensioned(Int), Number(Long)]), Int);
        assert_eq!(r(&[Dimensioned(Long), Number(Double)]), Float);
        // A zero-dim double does not widen a dimensioned float; it does make ints floating.
        assert_eq!(r(&[Dimensioned(Float), ZeroDim(Double)]), Float);
        assert_eq!(r(&[Dimensioned(Long), ZeroDim(Double)]), Double);
        assert_eq!(r(&[Dimensioned(Int), ZeroDim(Long)]), Int);
        assert_eq!(r(&[Dimensioned(Bool), ZeroDim(Long)]), Long);
        assert_eq!(r(&[Dimensioned(Bool), Number(Bool)]), Bool);
        assert_eq!(r(&[ZeroDim(Float), Number(Double)]), Float);
        assert_eq!(r(&[Number(Long), Number(Double)]), Float);
    }
}
