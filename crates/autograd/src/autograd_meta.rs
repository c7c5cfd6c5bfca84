//! Autograd metadata of a tensor, kept in its `TensorImpl` autograd slot.

use std::sync::{Arc, Mutex};

use switchboard_tensor::{Tensor, TensorImpl};

use crate::engine::AccumulateGrad;
use crate::node::{lock, Hook, Node, PostAccumulateGradHook};

// Note [Autograd metadata]
// The slot of a TensorImpl holds an `Arc<AutogradMeta>` (as `Arc<dyn Any>`), created on
// first need: requires_grad_, an op output getting a grad_fn, a view recording its base.
// Tensors that never meet autograd have none. Whether a tensor requires grad is also
// mirrored in the impl's `requires_grad_hint` flag (Note [requires_grad hint]), which every
// writer here keeps in step, so kernels test it without touching the slot.

/// A tensor's autograd state (`AutogradMeta`).
#[derive(Default)]
pub struct AutogradMeta {
    pub(crate) inner: Mutex<MetaInner>,
}

#[derive(Default)]
pub(crate) struct MetaInner {
    /// Leaf flag (`requires_grad_`); non-leaves require grad through their grad_fn.
    pub requires_grad: bool,
    pub grad: Option<Tensor>,
    pub grad_fn: Option<Arc<dyn Node>>,
    pub output_nr: u32,
    pub retains_grad: bool,
    /// Hooks of a leaf (a non-leaf's live on its grad_fn).
    pub hooks: Vec<Hook>,
    /// Hooks run after the leaf's gradient was accumulated (a leaf's only).
    pub post_accumulate_grad_hooks: Vec<PostAccumulateGradHook>,
    /// The leaf's accumulator (see [`AccumulateGrad`]).
    pub accumulator: Option<Arc<AccumulateGrad>>,
    /// The base of a view (`_base`).
    pub base: Option<Tensor>,
    /// A view created with grad mode on: its grad_fn follows its base's history (see
    /// Note [View grad_fn regeneration]).
    pub bw_view: bool,
    /// The version counter's value when the view's grad_fn was last set.
    pub attr_version: u64,
    /// A view made, with grad mode on, by a function returning several views: the function's
    /// name and the view's index among them (PyTorch's `CreationMeta::MULTI_OUTPUT_NODE`,
    /// which refuses recorded in-place writes through it).
    pub multi_output: Option<(&'static str, u32)>,
    /// The forward-mode tangents by dual level id, in a slot a saved output's alias shares
    /// (Note [Forward-mode AD]).
    pub forward_grad: Option<Arc<crate::forward_grad::ForwardGradSlot>>,
}

impl MetaInner {
    /// Whether `t` (this metadata's tensor) is a view whose storage was modified in place
    /// since its grad_fn was set.
    fn stale(&self, t: &Tensor) -> bool {
        self.bw_view && self.base.is_some() && self.attr_version != t.version()
    }
}

/// The tensor's metadata, if any (borrowed from the impl's write-once slot, see
/// Note [Autograd metadata slot]).
#[inline]
pub(crate) fn get(t: &TensorImpl) -> Option<&AutogradMeta> {
    t.autograd_meta()
        .and_then(|a| a.downcast_ref::<AutogradMeta>())
}

/// The tensor's metadata, created if missing. The slot is reserved for this crate (see
/// `TensorImpl::set_autograd_meta`); finding another crate's value there is a broken contract.
pub(crate) fn get_or_create(t: &TensorImpl) -> &AutogradMeta {
    t.autograd_meta_or_init(|| Arc::new(AutogradMeta::default()))
        .downcast_ref::<AutogradMeta>()
        .expect("the autograd slot holds AutogradMeta (only this crate sets it)")
}

fn update_hint(t: &TensorImpl, inner: &MetaInner) {
    t.set_requires_grad_hint(inner.requires_grad || inner.grad_fn.is_some());
}

/// A shallow copy without autograd metadata (same storage and version counter): `detach`.
pub fn alias(t: &Tensor) -> Tensor {
    t.with_key_set(t.key_set())
}

/// Whether `t` requires grad.
#[inline]
pub fn requires_grad(t: &Tensor) -> bool {
    t.requires_grad_hint()
}

/// The grad_fn and output number of a non-leaf.
pub(crate) fn grad_fn_of(t: &Tensor) -> Option<(Arc<dyn Node>, u32)> {
    if !t.requires_grad_hint() {
        return None;
    }
    let m = get(t)?;
    {
        let g = lock(&m.inner);
        if !g.stale(t) {
            return g.grad_fn.clone().map(|f| (f, g.output_nr));
        }
    }
    crate::copy_slices::regenerate(t);
    let g = lock(&m.inner);
    g.grad_fn.clone().map(|f| (f, g.output_nr))
}

/// Makes `node` the grad_fn of `t` (output `nr`).
pub(crate) fn set_grad_fn(t: &Tensor, node: Arc<dyn Node>, nr: u32) {
    // A fresh kernel output has no metadata yet: make it with the grad_fn in place, without
    // locking its mutex (nothing else can see it before it is in the slot).
    let (m, node) = match get(t) {
        Some(m) => (m, node),
        None => {
            let m = AutogradMeta {
                inner: Mutex::new(MetaInner {
                    grad_fn: Some(node),
                    output_nr: nr,
                    ..MetaInner::default()
                }),
            };
            match t.set_autograd_meta(Arc::new(m)) {
                Ok(()) => {
                    t.set_requires_grad_hint(true);
                    return;
                }
                // Another thread attached metadata first: take the node back and set it in
                // that metadata, under its lock, below.
                Err(ours) => {
                    let node = ours
                        .downcast::<AutogradMeta>()
                        .ok()
                        .and_then(|m| lock(&m.inner).grad_fn.take());
                    let Some(node) = node else {
                        return; // unreachable: built above with a grad_fn
                    };
                    (get_or_create(t), node)
                }
            }
        }
    };
    let mut g = lock(&m.inner);
    g.grad_fn = Some(node);
    g.output_nr = nr;
    g.requires_grad = false;
    update_hint(t, &g);
}

/// Sets the leaf flag.
pub(crate) fn set_requires_grad(t: &Tensor, value: bool) {
    if !value && get(t).is_none() {
        return;
    }
    let m = get_or_create(t);
    let mut g = lock(&m.inner);
    g.requires_grad = value;
    update_hint(t, &g);
}

/// Runs `f` on the metadata, creating it.
pub(crate) fn with<R>(t: &Tensor, f: impl FnOnce(&mut MetaInner) -> R) -> R {
    let m = get_or_create(t);
    let mut g = lock(&m.inner);
    let r = f(&mut g);
    update_hint(t, &g);
    r
}

/// Runs `f` on the metadata if there is some.
pub(crate) fn read<R>(t: &Tensor, f: impl FnOnce(&MetaInner) -> R) -> Option<R> {
    let m = get(t)?;
    let g = lock(&m.inner);
    Some(f(&g))
}

/// The edge a gradient for `t` flows along: its grad_fn, or its leaf accumulator, or none.
pub(crate) fn gradient_edge(t: &Tensor) -> crate::Edge {
    if !t.requires_grad_hint() {
        return crate::Edge::default();
    }
    let Some(m) = get(t) else {
        return crate::Edge::default();
    };
    let mut g = lock(&m.inner);
    if g.stale(t) {
        drop(g);
        crate::copy_slices::regenerate(t);
        g = lock(&m.inner);
    }
    if let Some(f) = &g.grad_fn {
        return crate::Edge {
            node: Some(f.clone()),
            input_nr: g.output_nr,
        };
    }
    if !g.requires_grad {
        return crate::Edge::default();
    }
    let acc = g
        .accumulator
        .get_or_insert_with(|| Arc::new(AccumulateGrad::new(t)))
        .clone();
    crate::Edge {
        node: Some(acc),
        input_nr: 0,
    }
}
