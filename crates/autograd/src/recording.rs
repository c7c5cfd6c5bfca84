//! Recording autograd nodes from kernels (`fresh`, `record_with`, `grad_at`), the key sets
//! below the autograd layers, and the helpers formulas share (`sum_to`, `scale`).

use std::sync::Arc;

use switchboard_dispatcher::{DispatchKey, DispatchKeySet, PackedScalar, Result};
use switchboard_ops as ops;
use switchboard_tensor::{Scalar, Tensor};

use crate::autograd_meta;
use crate::node::{err, Edges, FnNode, Formula, InputMeta, Inputs, Node};

/// The keys below autograd (ADInplaceOrView and the backends).
pub(crate) const AFTER_AD: DispatchKeySet = DispatchKeySet::full_after(DispatchKey::AutogradOther);
/// The keys below ADInplaceOrView.
pub(crate) const AFTER_ADIV: DispatchKeySet =
    DispatchKeySet::full_after(DispatchKey::ADInplaceOrView);

/// A kernel parameter as derivative formulas use it: a scalar unpacked (kernels that mostly
/// pass their scalars on take them packed, Note [Packed scalars]), everything else as it is.
pub(crate) trait Unpack {
    type Out;
    fn unpack(self) -> Self::Out;
}

impl Unpack for PackedScalar {
    type Out = Scalar;
    #[inline(always)]
    fn unpack(self) -> Scalar {
        self.get()
    }
}

macro_rules! unpack_as_is {
    ($($t:ty),*) => {$(
        impl<'a> Unpack for $t {
            type Out = $t;
            #[inline(always)]
            fn unpack(self) -> $t {
                self
            }
        }
    )*};
}
unpack_as_is!(&'a Tensor, &'a str, Option<&'a str>, Option<Scalar>, i64);

/// `[2, 3]` -> `2, 3`.
pub(crate) fn sizes_str(s: &[i64]) -> String {
    s.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether one of `ts` requires grad and grad mode is on (`compute_requires_grad`). The
/// tensors' flags come first: they are one relaxed load each from memory the call already
/// touched, and when none is set (almost every call) the thread-local is not read at all.
#[inline(always)]
pub(crate) fn any_rg(ts: &[&Tensor]) -> bool {
    any_hint(ts) && crate::is_grad_enabled()
}

/// Whether one of `ts` may require grad (their flags only; grad mode is not read). For fast
/// paths that leave the rest to an out-of-line function (Note [Autograd fast path]).
#[inline(always)]
pub(crate) fn any_hint(ts: &[&Tensor]) -> bool {
    // Or-ed without short-circuit: the flags are loaded and combined, and tested once (one
    // branch instead of one per input; the loads are from memory the call already touched).
    ts.iter().fold(false, |any, t| any | t.requires_grad_hint())
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
        ops::sum_dim_int_list_with(
            g,
            Some(&dims),
            ops::SumDimIntListOptions::default().keepdim(true),
        )?
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
        autograd_meta::alias(&out)
    } else {
        out
    }
}

// Note [Recording cost]
// Recording runs on every op whose inputs require grad, so it is kept to what the graph needs.
// The edges (a leaf's AccumulateGrad is made once and cached in its metadata, which is locked
// once per edge) and the input metadata are computed first; then the node is one allocation
// whose fields are written straight into it (`FnNode::new_arc`), the saved state included:
// `record_with` takes a closure making it, because a state of a few hundred bytes passed by
// value was copied five times on its way into the `Arc` (a third of the recording's
// instructions); every kernel family records through it (`rec`/`rec_multi` keep up to two
// saved tensors inline in the node, no Vec allocation). Node names are `&'static str` (no
// String per node or per saved tensor); a fresh output's metadata is built with the grad_fn
// already in place instead of being created empty, locked and filled. What remains per op on
// two leaves (see examples/autograd_overhead.rs): two allocations (node, output metadata) and
// their frees when the output dies, and the slot read of each input (a RwLock and an Arc clone
// inside switchboard-tensor).

/// Builds the node of an op: edges to `inputs` (None: not differentiable there), the saved
/// state made by `saved` once the node's memory is allocated, so that it is built in place
/// rather than moved there (see Note [Recording cost]), and makes the node the grad_fn of the
/// differentiable `outputs`. Outputs given as `None` take no part in autograd: they get no
/// grad_fn and their gradient stays `None` in the formula.
#[inline(always)]
pub(crate) fn record_with<S: Send + 'static>(
    name: &'static str,
    inputs: &[Option<&Tensor>],
    outputs: &[Option<&Tensor>],
    saved: impl FnOnce() -> S,
    formula: Formula<S>,
) -> Arc<dyn Node> {
    // Edges and input metadata are built before the node, so it is made in one allocation
    // and its input metadata needs no lock.
    let mut edges = Edges::new();
    for t in inputs {
        edges.push(t.map(autograd_meta::gradient_edge).unwrap_or_default());
    }
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
