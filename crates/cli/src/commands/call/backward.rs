//! `switchboard call --backward`: the gradients of a call with respect to its tensor inputs.
//!
//! Note [switchboard call --backward]
//! Before the call, every floating-point tensor argument (also inside `Tensor[]` and
//! `Tensor?[]`) that the operator's derivative formulas differentiate (for an aten operator
//! with a derivatives.yaml entry; every one otherwise) is replaced by a fresh leaf that requires grad: a `detach` of the loaded tensor,
//! so the loaded tensors keep no autograd state, and one leaf per argument, so that
//! `mul(self=@a, other=@a)` has a gradient for `self` and one for `other` (not their sum, as
//! one shared leaf would give). Integer and bool tensors (indices, masks) are passed as they
//! are. The call then runs with autograd on. The floating-point tensor outputs `outI` (`outI.J`
//! in lists; integer outputs such as `max.dim`'s indices are skipped) are reduced to one
//! scalar through the operators, so that autograd records it:
//! `loss = sum_i sum(outI * grad_outI)`, where `grad_outI` is the input file's tensor of that
//! name (cast to the output's dtype; its shape must be the output's, as PyTorch's
//! `backward(grad_tensors=...)` requires) or, when the file has none, ones (`sum(outI)`).
//! `loss.backward()` then fills the leaves' `.grad`, written as `grad.NAME`
//! (`grad.NAME.J` for list items) after the outputs. A leaf that received no gradient (no
//! output depends on it differentiably, like `nll_loss_forward`'s `weight`) is left out with
//! a note on stderr, as `torch.autograd.grad(..., allow_unused=True)` gives `None` for it.
//! Mutating a leaf in place is autograd's error, as in PyTorch. A floating-point output
//! that does not require grad (a non-differentiable one, like `nll_loss_forward`'s
//! `total_weight`) adds nothing, with a note; when no output requires grad (the operator has
//! no derivative, or the outputs do not depend on the inputs) the loss has no history, which is
//! PyTorch's error "element 0 of tensors does not require grad and does not have a grad_fn".
//! A call without floating-point tensor input or output is an error too.

use std::collections::BTreeMap;
use std::io::Write;

use switchboard::autograd::AutogradTensor;
use switchboard::dispatcher::{DispatchError, IValue, Stack};
use switchboard::ops;
use switchboard::schema::FunctionSchema;
use switchboard::tensor::Tensor;

use super::{one_line, CallError};

/// The leaves made by [`make_leaves`]: `(NAME or NAME.J, leaf)` in schema order.
pub(super) type Leaves = Vec<(String, Tensor)>;

/// A fresh leaf requiring grad, if `t` is floating-point.
fn leaf(t: &Tensor) -> Result<Option<Tensor>, DispatchError> {
    if !t.dtype().is_floating_point() {
        return Ok(None);
    }
    let leaf = AutogradTensor::detach(t);
    leaf.requires_grad_(true)?;
    Ok(Some(leaf))
}

/// The inputs an aten operator's derivatives.yaml entry differentiates, if it has one.
pub(super) fn aten_differentiable_inputs(
    schema: &FunctionSchema,
) -> Option<&'static [&'static str]> {
    if schema.namespace() != Some("aten") {
        return None;
    }
    let name = match schema.overload_name() {
        "" => schema.base_name().to_owned(),
        o => format!("{}.{o}", schema.base_name()),
    };
    switchboard::autograd::operator_autograd(&name)
        .filter(|o| o.is_differentiable())
        .map(|o| o.differentiable_inputs)
}

/// Replaces the floating-point tensor arguments of `stack` (in schema order) by fresh leaves
/// requiring grad (see Note [switchboard call --backward]) and returns them by name.
pub(super) fn make_leaves(
    schema: &FunctionSchema,
    op_name: &str,
    stack: &mut Stack,
) -> Result<Leaves, CallError> {
    let mut leaves = Leaves::new();
    let fail = |e: DispatchError| CallError::Kernel {
        op: op_name.to_owned(),
        message: one_line(&e.to_string()),
    };
    // An aten operator with a derivatives.yaml entry gets leaves only for the arguments its
    // formulas differentiate: PyTorch refuses the others if they require grad (`weight` of
    // `nll_loss_forward`). They are passed as they are, and reported as receiving no gradient.
    let differentiable = aten_differentiable_inputs(schema);
    for (arg, v) in schema.arguments().iter().zip(stack.iter_mut()) {
        let name = arg.name();
        if differentiable.is_some_and(|d| !d.contains(&name)) {
            if let IValue::Tensor(t) = v {
                if t.dtype().is_floating_point() {
                    leaves.push((name.to_owned(), AutogradTensor::detach(t)));
                }
            }
            continue;
        }
        match v {
            IValue::Tensor(t) => {
                if let Some(l) = leaf(t).map_err(fail)? {
                    *t = l.clone();
                    leaves.push((name.to_owned(), l));
                }
            }
            IValue::TensorList(ts) => {
                for (j, t) in ts.iter_mut().enumerate() {
                    if let Some(l) = leaf(t).map_err(fail)? {
                        *t = l.clone();
                        leaves.push((format!("{name}.{j}"), l));
                    }
                }
            }
            IValue::OptionalTensorList(ts) => {
                for (j, t) in ts.iter_mut().enumerate() {
                    if let Some(t) = t {
                        if let Some(l) = leaf(t).map_err(fail)? {
                            *t = l.clone();
                            leaves.push((format!("{name}.{j}"), l));
                        }
                    }
                }
            }
            _ => {}
        }
    }
    if leaves.is_empty() {
        return Err(CallError::Backward(format!(
            "{op_name} has no floating-point tensor input to differentiate with respect to"
        )));
    }
    Ok(leaves)
}

/// The tensor returns by output name (`outI`, `outI.J`), in return order.
pub(super) fn tensor_outputs(returns: &Stack) -> Vec<(String, Tensor)> {
    let mut out = Vec::new();
    for (i, v) in returns.iter().enumerate() {
        match v {
            IValue::Tensor(t) => out.push((format!("out{i}"), t.clone())),
            IValue::TensorList(ts) => out.extend(
                ts.iter()
                    .enumerate()
                    .map(|(j, t)| (format!("out{i}.{j}"), t.clone())),
            ),
            IValue::OptionalTensorList(ts) => out.extend(
                ts.iter()
                    .enumerate()
                    .filter_map(|(j, t)| Some((format!("out{i}.{j}"), t.clone()?))),
            ),
            _ => {}
        }
    }
    out
}

/// `[2, 2]` as PyTorch prints a shape, `torch.Size([2, 2])`.
fn torch_size(sizes: &[i64]) -> String {
    let dims: Vec<String> = sizes.iter().map(i64::to_string).collect();
    format!("torch.Size([{}])", dims.join(", "))
}

/// Reduces the floating-point tensor outputs of `returns` to one scalar, runs backward and
/// returns the gradients of `leaves` as `(grad.NAME, gradient)`; notes (leaves without
/// gradient, unused `grad_out` tensors) go to `stderr`. See Note [switchboard call --backward].
pub(super) fn gradients(
    op_name: &str,
    returns: &Stack,
    leaves: &Leaves,
    inputs: Option<&BTreeMap<String, Tensor>>,
    stderr: &mut dyn Write,
) -> Result<Vec<(String, Tensor)>, CallError> {
    let fail = |e: DispatchError| CallError::Kernel {
        op: op_name.to_owned(),
        message: format!("backward: {}", one_line(&e.to_string())),
    };
    let outputs: Vec<(String, Tensor)> = tensor_outputs(returns)
        .into_iter()
        .filter(|(_, t)| t.dtype().is_floating_point())
        .collect();
    let mut loss: Option<Tensor> = None;
    for (k, (name, out)) in outputs.iter().enumerate() {
        let term = match inputs.and_then(|m| m.get(&format!("grad_{name}"))) {
            Some(g) => {
                if g.sizes() != out.sizes() {
                    return Err(CallError::Backward(format!(
                        "Mismatch in shape: grad_output[{k}] has a shape of {} and output[{k}] \
                         has a shape of {} (grad_{name} and {name} of {op_name})",
                        torch_size(g.sizes()),
                        torch_size(out.sizes())
                    )));
                }
                // The weights are constants: their own history (none) must not matter.
                let mut g = AutogradTensor::detach(g);
                if g.dtype() != out.dtype() {
                    g = ops::to(&g, out.dtype()).map_err(fail)?;
                }
                ops::sum(&ops::mul(out, &g).map_err(fail)?)
            }
            None => ops::sum(out),
        }
        .map_err(fail)?;
        loss = Some(match loss {
            Some(l) => ops::add(&l, &term).map_err(fail)?,
            None => term,
        });
    }
    let Some(loss) = loss else {
        return Err(CallError::Backward(format!(
            "{op_name} has no floating-point tensor output to differentiate"
        )));
    };
    if !loss.requires_grad() {
        // PyTorch's words for `loss.backward()` on a tensor without history.
        return Err(CallError::Backward(format!(
            "element 0 of tensors does not require grad and does not have a grad_fn (no \
             output of {op_name} depends differentiably on its inputs)"
        )));
    }
    loss.backward().map_err(fail)?;
    // Notes only after backward succeeded: an error stays the one stderr line.
    if let Some(m) = inputs {
        let used: Vec<String> = outputs.iter().map(|(n, _)| format!("grad_{n}")).collect();
        let unused: Vec<&String> = m
            .keys()
            .filter(|k| k.starts_with("grad_out") && !used.contains(k))
            .collect();
        // A file can hold any number of them: a bounded number of notes.
        for key in unused.iter().take(super::MAX_LISTED_NAMES) {
            let out = &key["grad_".len()..];
            writeln!(
                stderr,
                "note: {key} of the input file is not used: {out} is not a floating-point \
                 tensor output of {op_name}"
            )?;
        }
        if let Some(more) = unused.len().checked_sub(super::MAX_LISTED_NAMES) {
            if more > 0 {
                writeln!(stderr, "note: ... and {more} more unused grad_out tensors")?;
            }
        }
    }
    for (name, out) in &outputs {
        if !out.requires_grad() {
            writeln!(
                stderr,
                "note: {name} does not require grad (it is not differentiable); it adds no \
                 gradient"
            )?;
        }
    }
    let mut grads = Vec::with_capacity(leaves.len());
    for (name, leaf) in leaves {
        match leaf.grad() {
            Some(g) => grads.push((format!("grad.{name}"), g)),
            None => writeln!(
                stderr,
                "note: '{name}' received no gradient (the outputs do not depend on it \
                 differentiably); grad.{name} is omitted"
            )?,
        }
    }
    Ok(grads)
}
