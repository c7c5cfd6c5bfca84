//! Operators without a derivative formula: the node that fails in backward, recorded by the
//! generated kernels of aten operators without a formula (PyTorch's
//! `autogradNotImplementedFallback`), and the Autograd key's fallback for every other operator
//! (PyTorch's `basicAutogradNotImplementedFallback` and `torch._C._set_autograd_fallback_mode`).
//!
//! Note [Autograd fallback modes]
//! An operator of another crate registered with backend kernels only reaches the Autograd
//! key's fallback (Note [Autograd fallback] in switchboard-ops). Its outputs cannot be
//! differentiated, and a gradient must never be dropped silently. In the default
//! mode, `Warn`, a call with grad mode on and an input that requires grad warns once per
//! operator (PyTorch's warning text) and gives the differentiable outputs a
//! `NotImplemented` node whose backward fails with that text, naming the
//! operator. (PyTorch's `warn` mode warns in backward and lets the gradient be undefined; Rust
//! has no warning filter to turn that warning into an error, so here reaching the node is the
//! error.) `Nothing` is PyTorch's other mode: the key is passed through and the outputs take no
//! part in autograd. Outputs written in place (`Tensor(a!)`) keep their history, as PyTorch's
//! fallback does. With no input requiring grad (almost every call) the fallback is a check of
//! the arguments' flags and a redispatch.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use switchboard_dispatcher::{
    stack_tensors, DispatchKeySet, IValue, OperatorHandle, Result, Stack,
};
use switchboard_tensor::Tensor;

use crate::autograd_meta;
use crate::node::{err, lock, Edge, FnNode, InputMeta, Inputs, Node};
use crate::recording::{collect_edges, differentiable, AFTER_AD};

/// The name of the node of outputs without a derivative (PyTorch's).
const NODE: &str = "NotImplemented";

/// The state of a [`NODE`]: the error its backward raises.
struct NotImplemented {
    message: Cow<'static, str>,
}

fn fail(
    s: &NotImplemented,
    _: &Arc<dyn Node>,
    _: &[Option<Tensor>],
    _: &[bool],
) -> Result<Vec<Option<Tensor>>> {
    Err(err(s.message.clone()))
}

fn node(
    message: Cow<'static, str>,
    edges: crate::node::Edges,
    inputs: Inputs,
) -> Arc<FnNode<NotImplemented>> {
    FnNode::new_arc(
        NODE,
        edges,
        inputs,
        |_: &[Edge]| NotImplemented { message },
        fail,
    )
}

/// PyTorch's `NotImplemented` message for operator `op` (`aten::silu_backward`).
fn not_implemented_message(op: &str) -> String {
    format!("derivative for {op} is not implemented")
}

/// Records, for the outputs of a call of `op` (an operator with a kernel and no formula),
/// a node that fails in backward naming it.
pub(crate) fn record_not_implemented(
    op: &'static str,
    inputs: &[Option<&Tensor>],
    outputs: &[Option<&Tensor>],
) {
    let mut metas = Inputs::new();
    for o in outputs {
        metas.push(o.filter(|o| differentiable(o)).map(InputMeta::of));
    }
    let n: Arc<dyn Node> = node(
        Cow::Owned(not_implemented_message(op)),
        collect_edges(inputs),
        metas,
    );
    for (i, o) in outputs.iter().enumerate() {
        if let Some(o) = o.filter(|o| differentiable(o)) {
            autograd_meta::set_grad_fn(o, n.clone(), i as u32);
        }
    }
}

/// The node of an in-place call of `op` without a formula, to rebase `self_` on (every
/// in-place operator has a formula today).
#[allow(dead_code)]
pub(crate) fn record_not_implemented_inplace(
    op: &'static str,
    inputs: &[Option<&Tensor>],
    self_: &Tensor,
) -> Arc<dyn Node> {
    let mut metas = Inputs::new();
    metas.push(differentiable(self_).then(|| InputMeta::of(self_)));
    node(
        Cow::Owned(not_implemented_message(op)),
        collect_edges(inputs),
        metas,
    )
}

/// What the Autograd key's fallback does with a call whose inputs require grad (PyTorch's
/// `torch._C._set_autograd_fallback_mode`; see Note [Autograd fallback modes]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutogradFallbackMode {
    /// Pass the call through: the outputs take no part in autograd (`"nothing"`).
    Nothing,
    /// Warn once per operator, and make backward through the outputs fail (`"warn"`, the
    /// default).
    Warn,
}

static MODE: AtomicU8 = AtomicU8::new(1);

/// Sets what the Autograd key's fallback does (process-wide), as
/// `torch._C._set_autograd_fallback_mode`.
pub fn set_autograd_fallback_mode(mode: AutogradFallbackMode) {
    MODE.store(mode as u8, Ordering::Relaxed);
}

/// What the Autograd key's fallback does (`torch._C._get_autograd_fallback_mode`).
pub fn autograd_fallback_mode() -> AutogradFallbackMode {
    match MODE.load(Ordering::Relaxed) {
        0 => AutogradFallbackMode::Nothing,
        _ => AutogradFallbackMode::Warn,
    }
}

/// PyTorch's warning of a call that cannot be differentiated.
fn fallback_message(op: &str) -> String {
    format!(
        "{op}: an autograd kernel was not registered to the Autograd key(s) but we are trying \
         to backprop through it. This may lead to silently incorrect behavior. This behavior is \
         deprecated and will be removed in a future version of PyTorch. If your operator is \
         differentiable, please ensure you have registered an autograd kernel to the correct \
         Autograd key (e.g. DispatchKey::Autograd, DispatchKey::CompositeImplicitAutograd). If \
         your operator is not differentiable, or to squash this warning and use the previous \
         behavior, please register torch::CppFunction::makeFallthrough() to \
         DispatchKey::Autograd."
    )
}

/// Whether a boxed value holds a tensor that may require grad.
fn requires_grad(v: &IValue) -> bool {
    v.tensors().any(|t| t.requires_grad_hint())
}

/// The tensors of boxed values, in order.
fn tensors(vs: &[IValue]) -> Vec<Tensor> {
    stack_tensors(vs).cloned().collect()
}

/// The Autograd key's fallback (Note [Autograd fallback modes]); switchboard-ops registers it
/// (Note [Autograd fallback] there).
pub(crate) fn autograd_fallback(
    op: &OperatorHandle,
    ks: DispatchKeySet,
    stack: &mut Stack,
) -> Result<()> {
    let Some(record) = op.schema() else {
        return op.redispatch_boxed(ks & AFTER_AD, stack);
    };
    let schema = &record.schema;
    let n = schema.arguments().len();
    let start = stack.len().saturating_sub(n);
    if !stack[start..].iter().any(requires_grad)
        || autograd_fallback_mode() == AutogradFallbackMode::Nothing
        || !crate::is_grad_enabled()
    {
        return op.redispatch_boxed(ks & AFTER_AD, stack);
    }
    let inputs = tensors(&stack[start..]);
    let name = schema.name().to_owned();
    warn_once(&name);
    op.redispatch_boxed(ks & AFTER_AD, stack)?;
    let returns = schema.returns();
    let first = stack.len().saturating_sub(returns.len());
    let mut outputs: Vec<Option<Tensor>> = Vec::new();
    for (v, r) in stack[first..].iter().zip(returns) {
        // Outputs written in place keep their history (PyTorch's fallback does the same).
        let keep = !r.is_write();
        for t in tensors(std::slice::from_ref(v)) {
            outputs.push((keep && differentiable(&t)).then_some(t));
        }
    }
    let refs: Vec<Option<&Tensor>> = inputs.iter().map(Some).collect();
    let mut metas = Inputs::new();
    for o in &outputs {
        metas.push(o.as_ref().map(InputMeta::of));
    }
    let n: Arc<dyn Node> = node(
        Cow::Owned(fallback_message(&name)),
        collect_edges(&refs),
        metas,
    );
    for (i, o) in outputs.iter().enumerate() {
        if let Some(o) = o {
            autograd_meta::set_grad_fn(o, n.clone(), i as u32);
        }
    }
    Ok(())
}

/// Warns once per operator that its outputs cannot be differentiated.
fn warn_once(op: &str) {
    static WARNED: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    let first = lock(&WARNED)
        .get_or_insert_with(HashSet::new)
        .insert(op.to_owned());
    if first {
        switchboard_dispatcher::warn(&fallback_message(op));
    }
}

switchboard_dispatcher::inventory::submit! {
    switchboard_ops::AutogradFallback(autograd_fallback)
}
