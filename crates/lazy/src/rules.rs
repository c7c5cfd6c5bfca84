//! Shape rules: the output metadata of the hottest captured calls, computed directly instead
//! of by the Meta kernel (Note [Shape rules]).

use std::sync::Arc;

use switchboard_dispatcher::IValue;
use switchboard_graph::TensorMeta;
use switchboard_tensor::{same_dims, DimVec, Tensor};

use crate::shapes::OutMeta;
use crate::storage::{at_base, LazyStorage};

// Note [Shape rules]
// Most calls a training step captures are elementwise: `add`, `mul`, `relu`, their
// backwards, the optimizer's arithmetic. Their output metadata does not need the Meta kernel
// (Note [Output metadata of a capture]): when every tensor operand is a lazy tensor
// with the canonical contiguous strides of one set of sizes and one floating dtype, and the
// other arguments are numbers, the result is a fresh tensor of those sizes with contiguous
// strides and that dtype. This is the case the CPU kernels also take a shortcut for (Note
// [Dense binary loops] in switchboard-cpu), whose result is the general path's. Every other
// case (broadcasting, promotion, other layouts, integral or bool dtypes, a bad argument that
// must raise eager's error) returns `None` here and takes the Meta kernel. `tests/shape_rules.rs` checks the rules against the Meta kernels, case by case.
// The result shares the metadata of an operand whose storage has exactly that geometry (the
// usual case), so a rule allocates nothing.

/// Which rule gives an operator's output metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ShapeRule {
    /// `op(Tensor self, ...numbers)`: `exp`, `relu`, ...
    Unary,
    /// `op(Tensor a, Tensor b, ...numbers)`: `add.Tensor`, `threshold_backward`, ...
    Binary,
}

impl ShapeRule {
    /// The number of tensor operands (the first arguments).
    pub fn operands(self) -> usize {
        match self {
            ShapeRule::Unary => 1,
            ShapeRule::Binary => 2,
        }
    }
}

/// The operators with a rule (names as `InterceptedOp::name`), and how many `Scalar` arguments
/// follow their tensor operands (their typed kernel's signature, Note [Unboxed capture]).
const RULES: &[(&str, ShapeRule, usize)] = &[
    ("aten::neg", ShapeRule::Unary, 0),
    ("aten::exp", ShapeRule::Unary, 0),
    ("aten::log", ShapeRule::Unary, 0),
    ("aten::sqrt", ShapeRule::Unary, 0),
    ("aten::rsqrt", ShapeRule::Unary, 0),
    ("aten::abs", ShapeRule::Unary, 0),
    ("aten::relu", ShapeRule::Unary, 0),
    ("aten::sigmoid", ShapeRule::Unary, 0),
    ("aten::tanh", ShapeRule::Unary, 0),
    ("aten::silu", ShapeRule::Unary, 0),
    ("aten::add.Scalar", ShapeRule::Unary, 2),
    ("aten::sub.Scalar", ShapeRule::Unary, 2),
    ("aten::mul.Scalar", ShapeRule::Unary, 1),
    ("aten::div.Scalar", ShapeRule::Unary, 1),
    ("aten::add.Tensor", ShapeRule::Binary, 1),
    ("aten::sub.Tensor", ShapeRule::Binary, 1),
    ("aten::mul.Tensor", ShapeRule::Binary, 0),
    ("aten::div.Tensor", ShapeRule::Binary, 0),
    ("aten::maximum", ShapeRule::Binary, 0),
    ("aten::minimum", ShapeRule::Binary, 0),
    ("aten::threshold_backward", ShapeRule::Binary, 1),
    ("aten::sigmoid_backward", ShapeRule::Binary, 0),
    ("aten::tanh_backward", ShapeRule::Binary, 0),
];

/// The rule of operator `name`, if it has one.
pub(crate) fn rule_for(name: &str) -> Option<ShapeRule> {
    RULES.iter().find(|(n, ..)| *n == name).map(|(_, r, _)| *r)
}

/// The rule of operator `name` and the number of its `Scalar` arguments, if it has a rule.
pub(crate) fn signature_of(name: &str) -> Option<(ShapeRule, usize)> {
    RULES
        .iter()
        .find(|(n, ..)| *n == name)
        .map(|(_, r, scalars)| (*r, *scalars))
}

/// The names of the operators with a rule (for tests and reports).
pub fn operators_with_shape_rules() -> impl Iterator<Item = &'static str> {
    RULES.iter().map(|(n, ..)| *n)
}

/// A call a rule applies to: its tensor operands (lazy tensors and their storages) and the
/// output's metadata.
pub(crate) struct RuledCall<'a> {
    operands: [Operand<'a>; 2],
    len: usize,
    /// The metadata of the result, and its storage's size.
    pub out: OutMeta,
}

/// A tensor operand of a ruled call: the lazy tensor, its storage, and whether the tensor has
/// the storage's base geometry (found once, by the rule, for reading its value).
pub(crate) type Operand<'a> = (&'a Tensor, &'a LazyStorage, bool);

impl<'a> RuledCall<'a> {
    /// The tensor operands, in argument order (the other arguments follow them).
    pub fn operands(&self) -> &[Operand<'a>] {
        &self.operands[..self.len]
    }
}

/// Whether `t` is a plain lazy operand of a rule: a lazy tensor of a floating dtype with the
/// canonical contiguous strides of its sizes.
#[inline(always)]
fn plain(t: &Tensor) -> Option<Operand<'_>> {
    let ls = t.payload_as::<LazyStorage>()?;
    // The usual operand (a result of an earlier capture) has its storage's base geometry,
    // already checked when the storage was made (and is no wrapped number).
    let at_base = at_base(ls, t);
    if at_base && ls.plain_base {
        return Some((t, ls, true));
    }
    if t.is_wrapped_number() {
        return None;
    }
    let canonical = t.dtype().is_floating_point() && canonical_strides(t.sizes(), t.strides());
    canonical.then_some((t, ls, at_base))
}

/// Whether a tensor with metadata `m` is a plain operand of a rule (see [`plain`]) at offset
/// 0 (so that a result can share `m`).
pub(crate) fn plain_geometry(m: &TensorMeta) -> bool {
    m.dtype.is_floating_point() && m.storage_offset == 0 && canonical_strides(&m.sizes, &m.strides)
}

/// Whether `strides` are the contiguous strides of `sizes` (`contiguous_strides(sizes)`,
/// compared without building them).
#[inline]
fn canonical_strides(sizes: &[i64], strides: &[i64]) -> bool {
    let mut expected = 1i64;
    for (size, stride) in sizes.iter().zip(strides).rev() {
        if *stride != expected {
            return false;
        }
        expected = expected.saturating_mul((*size).max(1));
    }
    sizes.len() == strides.len()
}

/// The call of `args` (boxed) under `rule`, or `None` when the rule does not apply (Note
/// [Shape rules]).
pub(crate) fn infer(rule: ShapeRule, args: &[IValue]) -> Option<RuledCall<'_>> {
    let (tensors, numbers) = args.split_at_checked(rule.operands())?;
    if !numbers
        .iter()
        .all(|v| matches!(v, IValue::Int(_) | IValue::Double(_)))
    {
        return None;
    }
    fn tensor(v: &IValue) -> Option<&Tensor> {
        match v {
            IValue::Tensor(t) => Some(t),
            _ => None,
        }
    }
    let first = tensor(&tensors[0])?;
    let second = match tensors.get(1) {
        Some(v) => Some(tensor(v)?),
        None => None,
    };
    infer_operands(first, second)
}

/// The call of the tensor operands `first` and `second` (binary rules), or `None` when the
/// rule does not apply (Note [Shape rules]); the caller checks the other arguments.
// Inlined into its callers (see `record_ruled`).
#[inline(always)]
pub(crate) fn infer_operands<'a>(
    first: &'a Tensor,
    second: Option<&'a Tensor>,
) -> Option<RuledCall<'a>> {
    let first = plain(first)?;
    let mut operands = [first; 2];
    let mut len = 1;
    if let Some(second) = second {
        let second = plain(second)?;
        let t = second.0;
        // Operands of two lazy devices take the general path, which reports eager's error.
        if !std::ptr::eq(first.1.backend, second.1.backend) {
            return None;
        }
        // Operands of one storage base (a result and its operand often share it) match.
        let same_base = first.2 && second.2 && Arc::ptr_eq(&first.1.base, &second.1.base);
        if !same_base && (t.dtype() != first.0.dtype() || !same_dims(t.sizes(), first.0.sizes())) {
            return None;
        }
        operands[1] = second;
        len = 2;
    }
    let t = first.0;
    let nbytes = t.numel() as usize * t.dtype().element_size();
    // An operand whose storage's base is the result's metadata (the operand's own geometry,
    // contiguous, at offset 0) lends it.
    // (`at_base` already compared the dtypes.)
    let lent = operands[..len].iter().find_map(|(_, ls, at_base)| {
        (*at_base && ls.base.storage_offset == 0).then(|| ls.base.clone())
    });
    let meta = lent.unwrap_or_else(|| {
        Arc::new(TensorMeta {
            sizes: DimVec::from_slice(t.sizes()),
            strides: DimVec::from_slice(t.strides()),
            storage_offset: 0,
            dtype: t.dtype(),
            device: first.1.backend.device(),
        })
    });
    Some(RuledCall {
        operands,
        len,
        out: (meta, nbytes),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_name_registered_operators() {
        let registered: Vec<String> = crate::REGISTERED_OPS
            .iter()
            .map(|n| format!("aten::{n}"))
            .collect();
        for (name, ..) in RULES {
            let bare = name.trim_end_matches(".default");
            assert!(registered.iter().any(|r| r == bare), "{name}");
        }
    }
}
