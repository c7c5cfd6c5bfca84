//! Helpers of the kernels and formulas: recording nodes, broadcasting reductions.

use std::sync::Arc;

use switchboard_dispatcher::{DispatchKey, DispatchKeySet, Result};
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

use crate::meta;
use crate::node::{err, FnNode, Formula, Node};

/// The keys below autograd (ADInplaceOrView and the backends).
pub(crate) const AFTER_AD: DispatchKeySet = DispatchKeySet::full_after(DispatchKey::AutogradOther);
/// The keys below ADInplaceOrView.
pub(crate) const AFTER_ADIV: DispatchKeySet =
    DispatchKeySet::full_after(DispatchKey::ADInplaceOrView);

/// `[2, 3]` -> `2, 3`.
pub(crate) fn sizes_str(s: &[i64]) -> String {
    s.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether grad mode is on and one of `ts` requires grad.
#[inline(always)]
pub(crate) fn any_rg(ts: &[&Tensor]) -> bool {
    crate::is_grad_enabled() && ts.iter().any(|t| t.requires_grad_hint())
}

/// Whether `t` may get a gradient (floating point or complex).
pub(crate) fn differentiable(t: &Tensor) -> bool {
    t.dtype().is_floating_point()
}

/// Sums `g` down to `sizes` (`sum_to_size`), through ops so that it is differentiable.
pub fn sum_to(g: &Tensor, sizes: &[i64]) -> Result<Tensor> {
    if g.sizes() == sizes {
        return Ok(g.clone());
    }
    let lead = g.dim() - sizes.len().min(g.dim());
    let mut dims: Vec<i64> = (0..lead as i64).collect();
    for (i, &s) in sizes.iter().enumerate() {
        if s == 1 && g.sizes()[lead + i] != 1 {
            dims.push((lead + i) as i64);
        }
    }
    let r = if dims.is_empty() {
        g.clone()
    } else {
        ops::sum_dim_int_list(g, Some(&dims), true, None)?
    };
    if r.sizes() == sizes {
        Ok(r)
    } else {
        ops::view(&r, sizes)
    }
}

/// The gradient `i` (the engine fills missing ones with zeros before calling formulas).
pub(crate) fn grad_at(grads: &[Option<Tensor>], i: usize) -> Result<Tensor> {
    grads
        .get(i)
        .cloned()
        .flatten()
        .ok_or_else(|| err("autograd internal error: missing gradient"))
}

/// An output that is not the same tensor as one of the inputs (so giving it a grad_fn cannot
/// clobber an input's history).
pub(crate) fn fresh(out: Tensor, inputs: &[&Tensor]) -> Tensor {
    if inputs.iter().any(|i| i.is_same(&out)) {
        meta::alias(&out)
    } else {
        out
    }
}

/// Builds the node of an op: edges to `inputs` (None: not differentiable there), saved state,
/// and makes it the grad_fn of the differentiable `outputs`.
pub(crate) fn record<S: Send + 'static>(
    name: &'static str,
    inputs: &[Option<&Tensor>],
    outputs: &[&Tensor],
    saved: S,
    formula: Formula<S>,
) -> Arc<dyn Node> {
    let outs: smallvec::SmallVec<[Option<&Tensor>; 3]> = outputs.iter().map(|o| Some(*o)).collect();
    record_opt(name, inputs, &outs, saved, formula)
}

/// [`record`] where some outputs (`None`) take no part in autograd: they get no grad_fn and
/// their gradient stays `None` in the formula.
pub(crate) fn record_opt<S: Send + 'static>(
    name: &'static str,
    inputs: &[Option<&Tensor>],
    outputs: &[Option<&Tensor>],
    saved: S,
    formula: Formula<S>,
) -> Arc<dyn Node> {
    let edges = inputs
        .iter()
        .map(|t| t.map(meta::gradient_edge).unwrap_or_default());
    let node: Arc<dyn Node> = Arc::new(FnNode::new(name, outputs.len(), edges, saved, formula));
    for (i, o) in outputs.iter().enumerate() {
        if let Some(o) = o.filter(|o| differentiable(o)) {
            node.meta().set_input(i, o);
            meta::set_grad_fn(o, node.clone(), i as u32);
        }
    }
    node
}

/// `grad * s` skipping the multiply by one.
pub(crate) fn scale(g: &Tensor, s: switchboard_tensor::Scalar) -> Result<Tensor> {
    let one = match s {
        switchboard_tensor::Scalar::Int(1) => true,
        switchboard_tensor::Scalar::Float(f) => f == 1.0,
        switchboard_tensor::Scalar::Bool(b) => b,
        _ => false,
    };
    if one {
        Ok(g.clone())
    } else {
        ops::mul_scalar(g, s)
    }
}
