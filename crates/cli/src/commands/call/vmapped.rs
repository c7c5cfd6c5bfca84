//! `switchboard call --vmap`: the call under `vmap`, and with `--backward` the per-sample
//! gradients of `vmap(grad(...))`.
//!
//! // Note [switchboard call --vmap]
//! Every tensor argument (each element of a `Tensor[]` or `Tensor?[]` too) is mapped over its
//! first dimension (`in_dims=0`), every other argument is shared by all samples, and every
//! tensor output carries the batch first (`out_dims=0`); an operator with a non-tensor return
//! is vmap's error ("must only return Tensors"). With `--backward`, each sample's
//! floating-point tensor inputs (those the operator's derivative formulas differentiate) get
//! the gradient of `sum_i sum(outI * grad_outI)` over that sample's floating-point outputs,
//! `grad_outI` being the input file's tensor of that name (batched along dimension 0 as well)
//! or ones: one `vjp` per sample under the vmap, as `vmap(grad(...))` computes it. An input
//! the outputs do not depend on gets zeros, as `torch.func.grad` gives. Gradients are output
//! as `grad.NAME`, batch first.

use std::cell::RefCell;
use std::collections::BTreeMap;

use switchboard::dispatcher::{DispatchError, IValue, OperatorHandle, Stack};
use switchboard::func::{vjp, Tree, Vmap};
use switchboard::ops;
use switchboard::schema::FunctionSchema;
use switchboard::tensor::Tensor;

use super::{backward, one_line, CallError};

/// What `--vmap` returns: the call's returns (batch first) and the named gradients.
pub(super) type VmapOutputs = (Stack, Vec<(String, Tensor)>);

/// The tensors of a stack, in order, with their argument names (`NAME`, `NAME.J` in lists).
fn named_tensors(schema: &FunctionSchema, stack: &Stack) -> Vec<(String, Tensor)> {
    let mut out = Vec::new();
    for (arg, v) in schema.arguments().iter().zip(stack) {
        let name = arg.name();
        match v {
            IValue::Tensor(t) => out.push((name.to_owned(), t.clone())),
            IValue::TensorList(ts) => out.extend(
                ts.iter()
                    .enumerate()
                    .map(|(j, t)| (format!("{name}.{j}"), t.clone())),
            ),
            IValue::OptionalTensorList(ts) => out.extend(
                ts.iter()
                    .enumerate()
                    .filter_map(|(j, t)| Some((format!("{name}.{j}"), t.clone()?))),
            ),
            _ => {}
        }
    }
    out
}

/// `template` with its tensors replaced, in order, by `tensors`.
fn substitute(template: &Stack, tensors: &[Tensor]) -> Result<Stack, DispatchError> {
    let mut next = tensors.iter();
    let mut stack = template.clone();
    for v in &mut stack {
        v.try_map_tensors(|_| -> Result<Tensor, DispatchError> {
            Ok(next.next().expect("one tensor per slot").clone())
        })?;
    }
    Ok(stack)
}

/// The returns as a tree (non-tensor returns are `None`, which vmap refuses) and flattened.
fn returns_tree(returns: &Stack) -> Tree {
    Tree::List(
        returns
            .iter()
            .map(|v| match v {
                IValue::Tensor(t) => Tree::Tensor(t.clone()),
                IValue::TensorList(ts) => {
                    Tree::List(ts.iter().cloned().map(Tree::Tensor).collect())
                }
                _ => Tree::None,
            })
            .collect(),
    )
}

fn tree_to_returns(tree: Tree) -> Stack {
    let Tree::List(items) = tree else {
        return Stack::new();
    };
    items
        .into_iter()
        .map(|item| match item {
            Tree::Tensor(t) => IValue::Tensor(t),
            Tree::List(ts) => IValue::TensorList(
                ts.into_iter()
                    .filter_map(|t| t.as_tensor().cloned())
                    .collect(),
            ),
            Tree::None => IValue::None,
        })
        .collect()
}

/// Runs the call under vmap (see Note [switchboard call --vmap]).
pub(super) fn call_vmapped(
    op: &OperatorHandle,
    schema: &FunctionSchema,
    op_name: &str,
    stack: Stack,
    inputs: Option<&BTreeMap<String, Tensor>>,
    with_backward: bool,
) -> Result<VmapOutputs, CallError> {
    let fail = |e: DispatchError| CallError::Kernel {
        op: op_name.to_owned(),
        message: one_line(&e.to_string()),
    };
    let named = named_tensors(schema, &stack);
    let n = named.len();
    let differentiable = backward::aten_differentiable_inputs(schema);
    let differentiated: Vec<usize> = (0..n)
        .filter(|&i| {
            let (name, t) = &named[i];
            let arg = name.split('.').next().unwrap_or(name);
            t.dtype().is_floating_point() && differentiable.is_none_or(|d| d.contains(&arg))
        })
        .collect();
    if with_backward && differentiated.is_empty() {
        return Err(CallError::Backward(format!(
            "{op_name} has no floating-point tensor input to differentiate with respect to"
        )));
    }
    // The grad_outI tensors of the file ride along, batched as well.
    let grad_outs: Vec<(String, Tensor)> = match (with_backward, inputs) {
        (true, Some(m)) => m
            .iter()
            .filter(|(k, _)| k.starts_with("grad_out"))
            .map(|(k, t)| (k["grad_".len()..].to_owned(), t.clone()))
            .collect(),
        _ => Vec::new(),
    };
    let mut args: Vec<Tree> = named.iter().map(|(_, t)| Tree::Tensor(t.clone())).collect();
    args.extend(grad_outs.iter().map(|(_, t)| Tree::Tensor(t.clone())));
    let call = |tensors: &[Tensor]| -> Result<Stack, DispatchError> {
        let mut s = substitute(&stack, tensors)?;
        op.call_boxed(&mut s)?;
        Ok(s)
    };
    let out = Vmap::new()
        .name(op_name)
        .call(
            |xs| {
                let ts: Vec<Tensor> = xs.iter().filter_map(|x| x.as_tensor().cloned()).collect();
                let (own, grad_out) = ts.split_at(n);
                if !with_backward {
                    return Ok(returns_tree(&call(own)?));
                }
                let returns = RefCell::new(Stack::new());
                let primals: Vec<Tensor> = differentiated.iter().map(|&i| own[i].clone()).collect();
                let (outputs, vjp_fn) = vjp(
                    |ps| {
                        let mut all = own.to_vec();
                        for (&i, p) in differentiated.iter().zip(ps) {
                            all[i] = p.clone();
                        }
                        let r = call(&all)?;
                        let flat = backward::tensor_outputs(&r);
                        *returns.borrow_mut() = r;
                        Ok(flat.into_iter().map(|(_, t)| t).collect())
                    },
                    &primals,
                )?;
                let names = backward::tensor_outputs(&returns.borrow());
                let cotangents: Vec<Tensor> = names
                    .iter()
                    .zip(&outputs)
                    .map(
                        |((name, _), o)| match grad_outs.iter().position(|(g, _)| g == name) {
                            Some(k) if o.dtype().is_floating_point() => {
                                ops::to(&grad_out[k], o.dtype())
                            }
                            _ => ops::ones_like(o),
                        },
                    )
                    .collect::<Result<_, _>>()?;
                let grads = vjp_fn.call(&cotangents)?;
                let returns = returns.borrow().clone();
                let outputs_tree = rebuild(&returns, &outputs);
                Ok(Tree::List(vec![
                    outputs_tree,
                    Tree::List(grads.into_iter().map(Tree::Tensor).collect()),
                ]))
            },
            &args,
        )
        .map_err(fail)?;
    if !with_backward {
        return Ok((tree_to_returns(out), Vec::new()));
    }
    let Tree::List(mut parts) = out else {
        unreachable!("the returns and the gradients")
    };
    let grads = parts.pop().expect("the gradients");
    let returns = tree_to_returns(parts.pop().expect("the returns"));
    let Tree::List(grads) = grads else {
        unreachable!("a list of gradients")
    };
    let named_grads = differentiated
        .iter()
        .zip(grads)
        .filter_map(|(&i, g)| Some((format!("grad.{}", named[i].0), g.as_tensor()?.clone())))
        .collect();
    Ok((returns, named_grads))
}

/// The returns' tree with the (released) tensor outputs in place of the recorded ones.
fn rebuild(returns: &Stack, outputs: &[Tensor]) -> Tree {
    let mut next = outputs.iter().cloned();
    Tree::List(
        returns
            .iter()
            .map(|v| match v {
                IValue::Tensor(_) => next.next().map_or(Tree::None, Tree::Tensor),
                IValue::TensorList(ts) => Tree::List(
                    ts.iter()
                        .filter_map(|_| next.next().map(Tree::Tensor))
                        .collect(),
                ),
                _ => Tree::None,
            })
            .collect(),
    )
}
