//! Batching rules (functorch's `BatchRules*.cpp`): an operator on batched tensors computed by
//! one call of an operator on the physical tensors. Most are derived from the operator's kind
//! (pointwise with broadcasting, operators with `dim` arguments, views); the matrix family,
//! convolution, indexing and losses have written ones.

mod dims;
mod linalg;
mod loss;
mod pointwise;
mod shared_matmul;

use std::cell::RefCell;
use std::collections::HashMap;

use switchboard_dispatcher::{
    Dispatcher, IValue, OperatorHandle, OperatorSemantics, Result, SchemaKind, Tag,
};
use switchboard_tensor::Tensor;

use crate::batched_tensor::{front_value, make_batched};
use crate::fallback::BatchedCall;

/// A batching rule: the call's returns (batched at the call's level where batched).
pub(crate) type Rule = fn(&BatchedCall<'_>) -> Result<Vec<IValue>>;

thread_local! {
    static RULES: RefCell<HashMap<usize, Option<Rule>>> = RefCell::new(HashMap::new());
}

/// The batching rule of `op`, if it has one (looked up once per operator and thread).
pub(crate) fn find(op: &OperatorHandle, semantics: &OperatorSemantics) -> Option<Rule> {
    if let Some(rule) = RULES.with(|r| r.borrow().get(&op.id()).copied()) {
        return rule;
    }
    // Derived outside the borrow: a view's copy form derives the view's rule first.
    let rule = derive(op, semantics);
    RULES.with(|r| r.borrow_mut().insert(op.id(), rule));
    rule
}

/// Composite operators that run their decomposition under vmap although their kind would
/// derive a rule (functorch's `OP_DECOMPOSE` list): the `torch.fft` functions' `n`, `s` and
/// `dim` (`None`: the last or every logical dimension) are not the dim rule's, nor is
/// `repeat_interleave`'s `dim` (`None`: the input flattened).
const DECOMPOSED: &[&str] = &[
    "repeat_interleave",
    "fft_fft",
    "fft_ifft",
    "fft_rfft",
    "fft_irfft",
    "fft_rfftn",
    "fft_irfftn",
];

fn derive(op: &OperatorHandle, semantics: &OperatorSemantics) -> Option<Rule> {
    let name = op.name();
    let (base, overload) = (name.base_name(), name.overload_name());
    if DECOMPOSED.contains(&base) {
        return None;
    }
    let written: Option<Rule> = match (base, overload) {
        ("mm" | "bmm" | "matmul" | "mv" | "dot", "") => Some(linalg::matmul_rule),
        ("addmm", "") => Some(linalg::addmm_rule),
        ("convolution", "") => Some(linalg::convolution_rule),
        ("nll_loss_forward", "") => Some(loss::nll_loss_forward_rule),
        ("mse_loss", "") => Some(loss::mse_loss_rule),
        ("view" | "_unsafe_view" | "reshape", "") => Some(dims::view_rule),
        ("expand", "") => Some(dims::expand_rule),
        ("permute", "") => Some(dims::permute_rule),
        ("t", "") => Some(dims::t_rule),
        ("stack" | "cat", "") => Some(dims::list_dim_rule),
        ("sum" | "mean", "") => Some(dims::full_reduction_rule),
        ("copy_", "") => Some(pointwise::pointwise_rule),
        ("_to_copy" | "contiguous" | "clone", _) | ("view", "dtype") | ("alias", "") => {
            Some(dims::same_shape_rule)
        }
        ("squeeze", "") => Some(dims::squeeze_rule),
        ("as_strided", "") => Some(dims::as_strided_rule),
        ("narrow", "Tensor") => Some(dims::narrow_tensor_rule),
        ("embedding", "") => Some(linalg::embedding_rule),
        ("_fused_sdp_choice", "") => Some(linalg::fused_sdp_choice_rule),
        ("gather" | "scatter" | "scatter_add", _) => Some(dims::index_like_rule),
        // The batch in front leaves the last dimension (the real and imaginary parts) alone.
        ("view_as_real" | "view_as_complex", "") => Some(dims::same_shape_rule),
        _ => None,
    };
    if written.is_some() {
        return written;
    }
    // A view's `*_copy` form batches as the view does, then copies (functorch registers the
    // view rules for the copy forms too).
    if let Some(view) = Dispatcher::global().view_of_copy_form(op) {
        let record = view.schema()?;
        return find(&view, &record.semantics).map(|_| view_copy_rule as Rule);
    }
    let is_pointwise = op.has_tag(Tag::Pointwise);
    if is_pointwise && matches!(semantics.kind, SchemaKind::Functional | SchemaKind::Inplace) {
        return Some(pointwise::pointwise_rule);
    }
    if dims::has_dim_arguments(op) && matches!(semantics.kind, SchemaKind::Functional) {
        return Some(dims::dim_rule);
    }
    None
}

/// The `*_copy` form of a view: the view's rule on the same arguments, each returned tensor
/// then copied into a fresh contiguous one.
fn view_copy_rule(call: &BatchedCall<'_>) -> Result<Vec<IValue>> {
    let view = Dispatcher::global()
        .view_of_copy_form(call.op)
        .expect("the rule is only found for view copy forms");
    let record = view.schema().expect("found views have a schema");
    let rule = find(&view, &record.semantics).expect("the rule is only found for views with one");
    let view_call = BatchedCall {
        op: &view,
        args: call.args.clone(),
        level: call.level,
        batch_size: call.batch_size,
    };
    let mut returns = rule(&view_call)?;
    for v in &mut returns {
        v.try_map_tensors(|t| match front_value(t, call.level)? {
            Some(p) => make_batched(
                switchboard_ops::clone_with(
                    &p,
                    switchboard_ops::CloneOptions {
                        memory_format: Some(switchboard_tensor::MemoryFormat::Contiguous),
                    },
                )?,
                0,
                call.level,
            ),
            None => switchboard_ops::clone(t),
        })?;
    }
    Ok(returns)
}

/// The tensor of argument `i`, if it is one.
pub(crate) fn tensor_arg<'a>(call: &'a BatchedCall<'_>, i: usize) -> Option<&'a Tensor> {
    call.args.get(i).and_then(IValue::as_tensor)
}

/// The physical tensor of `t` at the call's level with the batch in front, or `None`.
pub(crate) fn front(call: &BatchedCall<'_>, t: &Tensor) -> Result<Option<Tensor>> {
    front_value(t, call.level)
}

/// A physical result with the batch in front, batched at the call's level.
pub(crate) fn batched(call: &BatchedCall<'_>, physical: Tensor) -> Result<IValue> {
    Ok(IValue::Tensor(make_batched(physical, 0, call.level)?))
}

/// Batches every tensor of a boxed return (tensors and tensor lists) at the call's level,
/// batch in front.
pub(crate) fn batch_returns(call: &BatchedCall<'_>, returns: Vec<IValue>) -> Result<Vec<IValue>> {
    returns
        .into_iter()
        .map(|mut v| {
            v.try_map_tensors(|t| make_batched(t.clone(), 0, call.level))?;
            Ok(v)
        })
        .collect()
}

/// `t` with size-1 dimensions inserted after the batch until it has `rank` dimensions besides
/// the batch (`maybePadToLogicalRank`).
pub(crate) fn pad_to_logical_rank(physical: Tensor, rank: usize) -> Result<Tensor> {
    let mut t = physical;
    while t.dim() < rank + 1 {
        t = switchboard_ops::unsqueeze(&t, 1)?;
    }
    Ok(t)
}

/// Wraps a logical dimension `dim` of a tensor with `rank` dimensions, with PyTorch's error.
pub(crate) fn wrap_logical_dim(dim: i64, rank: usize) -> Result<i64> {
    let r = rank.max(1) as i64;
    if dim < -r || dim >= r {
        return Err(crate::fallback::vmap_error(format!(
            "Dimension out of range (expected to be in range of [{}, {}], but got {dim})",
            -r,
            r - 1
        )));
    }
    Ok(if dim < 0 { dim + r } else { dim })
}
