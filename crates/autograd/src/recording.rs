//! The recorder: what the generated Autograd and ADInplaceOrView kernels call to record nodes,
//! rebase the history of tensors modified in place, and make views (PyTorch's
//! `VariableTypeUtils.h` and `functions/utils.h`).

use std::sync::Arc;

use smallvec::SmallVec;
use switchboard_dispatcher::{DispatchKey, DispatchKeySet, Result};
use switchboard_tensor::Tensor;

use crate::autograd_meta;
use crate::node::{err, Edge, Edges, FnNode, Formula, InputMeta, Inputs, Node, SavedTensor};

/// The keys below autograd (ADInplaceOrView and the backends).
pub(crate) const AFTER_AD: DispatchKeySet = DispatchKeySet::full_after(DispatchKey::AutogradOther);
/// The keys below ADInplaceOrView.
pub(crate) const AFTER_ADIV: DispatchKeySet =
    DispatchKeySet::full_after(DispatchKey::ADInplaceOrView);

/// Sizes or strides kept by a node (inline up to five dimensions: no allocation).
pub(crate) type SavedInts = SmallVec<[i64; 5]>;

// Note [Autograd fast path]
// Dense tensors carry the Autograd keys, so every call runs an autograd kernel, and almost
// always nothing requires grad (nor carries a tangent). The generated kernel tests the inputs'
// autograd flags (`autograd_hint`: the requires_grad and tangent bits, one relaxed load each,
// combined without branches; the grad-mode thread-local is not read at all when no flag is set) and redispatches with `ks & AFTER_AD`: the key set itself
// skips the Autograd keys, so no exclusion guard (two TLS writes) is set. That is sound
// because nothing below can record anything: kernels below that call other ops re-enter
// autograd for those calls (they are not excluded), but the inner calls see inputs that do not
// require grad either and pass through the same way. The recording path keeps PyTorch's
// AutoDispatchBelowADInplaceOrView guard, because there inner calls on inputs that require
// grad must not record. The recording code lives in a separate `#[inline(never)]` function so
// the pass-through path does not pay for its stack frame; it also reads the grad-mode
// thread-local (a thread-local read in a library crate compiles to a call, and a call with
// arguments live across it would cost the whole fast path a frame of callee-saved
// registers). The redispatch goes through a `FirstUseHandle` for the same reason (Note [First-use
// handles keep the first call out of line]). The kernel is inlined into its entry point, its
// scalars arrive and leave packed in registers (Note [Packed scalars]) and the redispatch ends
// in a jump (Note [Typed calls end in one jump]): with nothing requiring grad, the layer is the
// flags test, a table look-up and a jump, with no stack frame. switchboard-codegen gives every
// generated kernel this shape (Note [Generated kernel shape]).

/// Whether autograd, in either mode, may have something to do with `t`: it may require grad
/// or carry a tangent (its flags only, see Note [Autograd fast path]).
#[inline(always)]
pub(crate) fn hint(t: &Tensor) -> bool {
    t.autograd_hint()
}

/// [`hint`] of an optional tensor.
#[inline(always)]
pub(crate) fn hint_optional(t: Option<&Tensor>) -> bool {
    t.is_some_and(|t| t.autograd_hint())
}

/// [`hint`] of a tensor list.
#[inline(always)]
pub(crate) fn hint_list(ts: &[Tensor]) -> bool {
    ts.iter().any(|t| t.autograd_hint())
}

/// [`hint`] of a `Tensor?[]`.
#[inline(always)]
pub(crate) fn hint_optional_list(ts: &[Option<Tensor>]) -> bool {
    ts.iter().flatten().any(|t| t.autograd_hint())
}

/// Whether `t` may require grad (its flag only).
#[inline(always)]
pub(crate) fn rg_hint(t: &Tensor) -> bool {
    t.requires_grad_hint()
}

/// [`rg_hint`] of an optional tensor.
#[inline(always)]
pub(crate) fn rg_hint_optional(t: Option<&Tensor>) -> bool {
    t.is_some_and(|t| t.requires_grad_hint())
}

/// [`rg_hint`] of a tensor list.
#[inline(always)]
pub(crate) fn rg_hint_list(ts: &[Tensor]) -> bool {
    ts.iter().any(|t| t.requires_grad_hint())
}

/// [`rg_hint`] of a `Tensor?[]`.
#[inline(always)]
pub(crate) fn rg_hint_optional_list(ts: &[Option<Tensor>]) -> bool {
    ts.iter().flatten().any(|t| t.requires_grad_hint())
}

/// Whether `t` may carry a tangent (its flag only, Note [Forward-mode AD]).
#[inline(always)]
pub(crate) fn fw_hint(t: &Tensor) -> bool {
    t.forward_grad_hint()
}

/// [`fw_hint`] of an optional tensor.
#[inline(always)]
pub(crate) fn fw_hint_optional(t: Option<&Tensor>) -> bool {
    t.is_some_and(|t| t.forward_grad_hint())
}

/// [`fw_hint`] of a tensor list.
#[inline(always)]
pub(crate) fn fw_hint_list(ts: &[Tensor]) -> bool {
    ts.iter().any(|t| t.forward_grad_hint())
}

/// [`fw_hint`] of a `Tensor?[]` (for a differentiable `Tensor?[]` input; none has one yet).
#[allow(dead_code)]
#[inline(always)]
pub(crate) fn fw_hint_optional_list(ts: &[Option<Tensor>]) -> bool {
    ts.iter().flatten().any(|t| t.forward_grad_hint())
}

/// Whether `t` may get a gradient (floating point or complex).
pub(crate) fn differentiable(t: &Tensor) -> bool {
    t.dtype().is_floating_point() || t.dtype().is_complex()
}

/// An output that is not the same tensor as one of the inputs (so giving it a grad_fn cannot
/// clobber an input's history).
pub(crate) fn fresh(out: Tensor, inputs: &[&Tensor]) -> Tensor {
    if inputs.iter().any(|i| i.is_same(&out)) {
        autograd_meta::alias(&out)
    } else {
        out
    }
}

/// The edges of a node's inputs (`collect_next_edges`): `None` is an input that takes no part.
pub(crate) fn collect_edges(inputs: &[Option<&Tensor>]) -> Edges {
    let mut edges = Edges::new();
    for t in inputs {
        edges.push(t.map(autograd_meta::gradient_edge).unwrap_or_default());
    }
    edges
}

// Note [Recording cost]
// Recording runs on every op whose inputs require grad, so it is kept to what the graph needs.
// The edges (a leaf's AccumulateGrad is made once and cached in its metadata, which is locked
// once per edge) and the input metadata are computed first; then the node is one allocation
// whose fields are written straight into it (`FnNode::new_arc`), the saved state included:
// `record_function` takes a closure making it, because a state of a few hundred bytes passed
// by value was copied five times on its way into the `Arc`. Node names are `&'static str` (no
// String per node or per saved tensor); a fresh output's metadata is built with the grad_fn
// already in place instead of being created empty, locked and filled. What remains per op on
// two leaves (see examples/autograd_overhead.rs): two allocations (node, output metadata) and
// their frees when the output dies, and the slot read of each input.

/// Records the node of an out-of-place call: edges to `inputs`, the saved state made by
/// `saved` in the node's memory (it sees which edges are valid, so that a value only one
/// input's formula reads is saved only when that input needs a gradient), and makes the node
/// the grad_fn of the differentiable `outputs` (`None`: an output that takes no part).
#[inline(always)]
pub(crate) fn record_function<S: Send + 'static>(
    name: &'static str,
    inputs: &[Option<&Tensor>],
    outputs: &[Option<&Tensor>],
    saved: impl FnOnce(&[Edge]) -> S,
    formula: Formula<S>,
) {
    let edges = collect_edges(inputs);
    let mut metas = Inputs::new();
    for o in outputs {
        metas.push(o.filter(|o| differentiable(o)).map(InputMeta::of));
    }
    let node: Arc<dyn Node> = FnNode::new_arc(name, edges, metas, saved, formula);
    for (i, o) in outputs.iter().enumerate() {
        if let Some(o) = o.filter(|o| differentiable(o)) {
            autograd_meta::set_grad_fn(o, node.clone(), i as u32);
        }
    }
}

/// PyTorch's `check_inplace`: with grad mode on and a call that records (`requires_grad`), a
/// leaf that requires grad, or a view of one, cannot be written in place; nor can a view made
/// with grad mode off.
pub(crate) fn check_inplace(t: &Tensor, requires_grad: bool) -> Result<()> {
    if !requires_grad || !crate::is_grad_enabled() {
        return Ok(());
    }
    if let Some((function, index)) = autograd_meta::read(t, |m| m.multi_output).flatten() {
        // Note [In-place writes through multi-output views]
        // The views a function returns together share one backward node, which computes the
        // base's gradient from all of them; a write through one view cannot be rebased onto
        // it (PyTorch's `handle_view_on_rebase`), so it is refused when it would be recorded.
        return Err(err(format!(
            "Output {index} of {function} is a view and is being modified inplace. This view is \
             the output of a function that returns multiple views. Such functions do not allow \
             the output views to be modified inplace. You should replace the inplace operation \
             by an out-of-place one."
        )));
    }
    if let Some((base, bw_view)) =
        autograd_meta::read(t, |m| (m.base.clone(), m.bw_view)).and_then(|(b, v)| b.map(|b| (b, v)))
    {
        if !bw_view {
            return Err(err(
                "A view was created in no_grad mode and is being modified inplace with grad mode \
                 enabled. Given that this use case is ambiguous and error-prone, it is \
                 forbidden. You can clarify your code by moving both the view and the inplace \
                 either both inside the no_grad block (if you don't want the inplace to be \
                 tracked) or both outside (if you want the inplace to be tracked).",
            ));
        }
        if t.requires_grad_hint() && autograd_meta::grad_fn_of(&base).is_none() {
            return Err(err(
                "a view of a leaf Variable that requires grad is being used in an in-place \
                 operation.",
            ));
        }
    }
    if t.requires_grad_hint() && autograd_meta::grad_fn_of(t).is_none() {
        return Err(err(
            "a leaf Variable that requires grad is being used in an in-place operation.",
        ));
    }
    Ok(())
}

/// Builds the node of an in-place call on `self_` before the call (PyTorch's order: inputs are
/// saved before they can change); the caller runs the operator, saves the output with
/// `FnNode::with_saved` if the formulas read it, then calls [`rebase_history`].
#[inline(always)]
pub(crate) fn record_inplace_begin<S: Send + 'static>(
    name: &'static str,
    inputs: &[Option<&Tensor>],
    self_: &Tensor,
    saved: impl FnOnce(&[Edge]) -> S,
    formula: Formula<S>,
) -> Arc<FnNode<S>> {
    let edges = collect_edges(inputs);
    let mut metas = Inputs::new();
    metas.push(differentiable(self_).then(|| InputMeta::of(self_)));
    FnNode::new_arc(name, edges, metas, saved, formula)
}

/// Makes `node` the history of `t`, which was just written in place (PyTorch's
/// `rebase_history`): a view's base gets a `CopySlices` node around `node` (Note [CopySlices]),
/// any other tensor gets `node` itself.
pub(crate) fn rebase_history(t: &Tensor, node: Arc<dyn Node>) {
    if !differentiable(t) {
        return;
    }
    let view_base = autograd_meta::read(t, |m| m.base.clone().filter(|_| m.bw_view)).flatten();
    match view_base {
        Some(base) => crate::copy_slices::rebase_view(t, &base, node),
        None => autograd_meta::set_grad_fn(t, node, 0),
    }
}

/// PyTorch's `check_no_requires_grad`: a tensor argument without a formula (and not declared
/// `non_differentiable`) may not require grad.
pub(crate) fn check_no_requires_grad(t: Option<&Tensor>, name: &str, op: &str) -> Result<()> {
    if t.is_some_and(|t| t.requires_grad_hint()) {
        return Err(err(format!(
            "The function '{op}' is not differentiable with respect to argument '{name}'. This \
             input cannot have requires_grad True."
        )));
    }
    Ok(())
}

/// PyTorch's message for an `out=` call whose arguments require grad (`name`: the operator's
/// base name, `add` for `add.out`).
pub(crate) fn out_requires_grad_error(name: &str) -> switchboard_dispatcher::DispatchError {
    err(format!(
        "{name}(): functions with out=... arguments don't support automatic differentiation, \
         but one of the arguments requires grad."
    ))
}

/// Makes `out` a view of `base`'s base (or of `base`): PyTorch's `as_view`, called by the
/// ADInplaceOrView kernels of view operators.
pub(crate) fn as_view(base: &Tensor, out: Tensor) -> Tensor {
    let out = fresh(out, &[base]);
    let root = autograd_meta::read(base, |m| m.base.clone())
        .flatten()
        .unwrap_or_else(|| base.clone());
    let grad_mode = crate::is_grad_enabled();
    let version = out.version();
    autograd_meta::with(&out, |m| {
        m.base = Some(root);
        m.bw_view = grad_mode;
        m.attr_version = version;
    });
    out
}

/// [`as_view`] for element `index` of the list of views `function` returned
/// (`split_with_sizes`): recorded in-place writes through it are refused (Note [In-place
/// writes through multi-output views]).
pub(crate) fn as_multi_output_view(
    base: &Tensor,
    out: Tensor,
    function: &'static str,
    index: u32,
) -> Tensor {
    let out = as_view(base, out);
    if crate::is_grad_enabled() {
        autograd_meta::with(&out, |m| m.multi_output = Some((function, index)));
    }
    out
}

/// The gradient of the first output, which a formula reading `grad` needs.
#[inline]
pub(crate) fn grad_of(grads: &[Option<Tensor>]) -> Result<&Tensor> {
    grads
        .first()
        .and_then(Option::as_ref)
        .ok_or_else(|| err("autograd internal error: missing gradient"))
}

/// A value saved only when the formula reading it would run (see [`record_function`]).
#[inline]
pub(crate) fn guarded<T>(v: &Option<T>) -> Result<&T> {
    v.as_ref()
        .ok_or_else(|| err("autograd internal error: a saved value was not saved"))
}

/// An optional saved tensor, unpacked.
pub(crate) fn unpack_optional(
    v: &Option<SavedTensor>,
    node: &Arc<dyn Node>,
) -> Result<Option<Tensor>> {
    v.as_ref().map(|s| s.unpack(node)).transpose()
}

/// A saved `Tensor?[]`, unpacked (the `indices` of `index.Tensor`'s and `index_put`'s
/// formulas).
pub(crate) fn unpack_optional_list(
    v: &[Option<SavedTensor>],
    node: &Arc<dyn Node>,
) -> Result<Vec<Option<Tensor>>> {
    v.iter()
        .map(|s| s.as_ref().map(|s| s.unpack(node)).transpose())
        .collect()
}

/// A saved tensor list, unpacked (for a formula that reads a tensor list; none does yet).
#[allow(dead_code)]
pub(crate) fn unpack_list(v: &[SavedTensor], node: &Arc<dyn Node>) -> Result<Vec<Tensor>> {
    v.iter().map(|s| s.unpack(node)).collect()
}
