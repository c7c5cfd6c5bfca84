//! Shape rules: the output metadata of the hottest captured calls, computed directly instead
//! of through the shape cache (Note [Shape rules]).

use std::sync::Arc;

use switchboard_dispatcher::IValue;
use switchboard_graph::TensorMeta;
use switchboard_tensor::{contiguous_strides, DimVec, Tensor};

use crate::shapes::OutMeta;
use crate::storage::{same_dims, same_geometry, LazyStorage, DEVICE};

// Note [Shape rules]
// Most calls a training step captures are elementwise: `add`, `mul`, `relu`, their
// backwards, the optimizer's arithmetic. Their output metadata needs neither the Meta kernel
// nor the shape cache's key (Note [Shape cache]): when every tensor operand is a lazy tensor
// with the canonical contiguous strides of one set of sizes and one floating dtype, and the
// other arguments are numbers, the result is a fresh tensor of those sizes with contiguous
// strides and that dtype. This is the case the CPU kernels also take a shortcut for (Note
// [Dense binary loops] in switchboard-cpu), whose result is the general path's. Every other
// case (broadcasting, promotion, other layouts, integral or bool dtypes, a bad argument that
// must raise eager's error) returns `None` here and takes the shape cache, i.e. the Meta
// kernel. `tests/shape_rules.rs` checks the rules against the Meta kernels, case by case.
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

/// The operators with a rule (names as `OpInfo::name`).
const RULES: &[(&str, ShapeRule)] = &[
    ("aten::neg", ShapeRule::Unary),
    ("aten::exp", ShapeRule::Unary),
    ("aten::log", ShapeRule::Unary),
    ("aten::sqrt", ShapeRule::Unary),
    ("aten::rsqrt", ShapeRule::Unary),
    ("aten::abs", ShapeRule::Unary),
    ("aten::relu", ShapeRule::Unary),
    ("aten::sigmoid", ShapeRule::Unary),
    ("aten::tanh", ShapeRule::Unary),
    ("aten::silu", ShapeRule::Unary),
    ("aten::add.Scalar", ShapeRule::Unary),
    ("aten::sub.Scalar", ShapeRule::Unary),
    ("aten::mul.Scalar", ShapeRule::Unary),
    ("aten::div.Scalar", ShapeRule::Unary),
    ("aten::add.Tensor", ShapeRule::Binary),
    ("aten::sub.Tensor", ShapeRule::Binary),
    ("aten::mul.Tensor", ShapeRule::Binary),
    ("aten::div.Tensor", ShapeRule::Binary),
    ("aten::maximum", ShapeRule::Binary),
    ("aten::minimum", ShapeRule::Binary),
    ("aten::threshold_backward", ShapeRule::Binary),
    ("aten::sigmoid_backward", ShapeRule::Binary),
    ("aten::tanh_backward", ShapeRule::Binary),
];

/// The rule of operator `name`, if it has one.
pub(crate) fn rule_for(name: &str) -> Option<ShapeRule> {
    RULES.iter().find(|(n, _)| *n == name).map(|(_, r)| *r)
}

/// The names of the operators with a rule (for tests and reports).
pub fn operators_with_shape_rules() -> impl Iterator<Item = &'static str> {
    RULES.iter().map(|(n, _)| *n)
}

/// A call a rule applies to: its tensor operands (lazy tensors and their storages) and the
/// output's metadata.
pub(crate) struct RuledCall<'a> {
    operands: [(&'a Tensor, &'a LazyStorage); 2],
    len: usize,
    /// The metadata of the result, and its storage's size.
    pub out: OutMeta,
}

impl<'a> RuledCall<'a> {
    /// The tensor operands, in argument order (the other arguments follow them).
    pub fn operands(&self) -> &[(&'a Tensor, &'a LazyStorage)] {
        &self.operands[..self.len]
    }
}

/// Whether `v` is a plain lazy operand of a rule: a lazy tensor of a floating dtype with the
/// canonical contiguous strides of its sizes.
#[inline]
fn plain(v: &IValue) -> Option<(&Tensor, &LazyStorage)> {
    let IValue::Tensor(t) = v else { return None };
    let ls = t.payload_as::<LazyStorage>()?;
    let canonical = t.dtype().is_floating_point()
        && t.is_contiguous()
        && !t.is_wrapped_number()
        && contiguous_strides(t.sizes()).as_slice() == t.strides();
    canonical.then_some((t, ls))
}

/// The call of `args` under `rule`, or `None` when the rule does not apply (Note [Shape
/// rules]).
pub(crate) fn infer(rule: ShapeRule, args: &[IValue]) -> Option<RuledCall<'_>> {
    let len = match rule {
        ShapeRule::Unary => 1,
        ShapeRule::Binary => 2,
    };
    let (tensors, numbers) = args.split_at_checked(len)?;
    if !numbers
        .iter()
        .all(|v| matches!(v, IValue::Int(_) | IValue::Double(_)))
    {
        return None;
    }
    let first = plain(&tensors[0])?;
    let mut operands = [first; 2];
    if let Some(second) = tensors.get(1) {
        let (t, ls) = plain(second)?;
        if t.dtype() != first.0.dtype() || !same_dims(t.sizes(), first.0.sizes()) {
            return None;
        }
        operands[1] = (t, ls);
    }
    let (t, _) = first;
    let nbytes = t.numel() as usize * t.dtype().element_size();
    // An operand whose storage's base is the result's metadata lends it.
    let lent = operands[..len].iter().find_map(|(t, ls)| {
        let b = &ls.base;
        (b.storage_offset == 0 && b.dtype == t.dtype() && same_geometry(b, t)).then(|| b.clone())
    });
    let meta = lent.unwrap_or_else(|| {
        Arc::new(TensorMeta {
            sizes: DimVec::from_slice(t.sizes()),
            strides: DimVec::from_slice(t.strides()),
            storage_offset: 0,
            dtype: t.dtype(),
            device: DEVICE,
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
        for (name, _) in RULES {
            let bare = name.trim_end_matches(".default");
            assert!(registered.iter().any(|r| r == bare), "{name}");
        }
    }
}
