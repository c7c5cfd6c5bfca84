//! In-place operations on views (PyTorch's `CopySlices`) and the regeneration of a view's
//! grad_fn after its storage was modified in place.
//!
//! Note [CopySlices]
//! An in-place call on a view `v` of `base` records the operator's node `fn` as any in-place
//! call does (its first edge is `v`'s old history), but the history that changes is `base`'s:
//! its new value is its old value with `v`'s region replaced by the operator's result. So
//! `base` gets a `CopySlices` node wrapping `fn`, whose first edge is `base`'s old history and
//! whose other edges are `fn`'s. Its backward copies the gradient into a tensor of `base`'s
//! geometry, runs `fn` on the view's region of it, and writes `fn`'s first gradient back into
//! that region: `base`'s old history gets the gradient with the region replaced by the
//! gradient with respect to the view's old value, and `fn`'s other inputs get theirs. The
//! view's grad_fn is then regenerated from `base`'s (Note [View grad_fn regeneration]).
//!
//! Note [View grad_fn regeneration]
//! Views share their base's version counter. A view created with grad mode on remembers the
//! version when its grad_fn was set; when the storage has been modified in place since (on
//! the base or any view of it), reading its grad_fn (`grad_fn`, recording an op on it)
//! replaces it by `AsStridedBackward0` of the base's current history, as PyTorch does. A view
//! of a base that did not take part in autograd when the view was created and joins it later
//! is not regenerated (it does not require grad): a known difference from PyTorch.

use std::sync::{Arc, Mutex};

use smallvec::SmallVec;
use switchboard_dispatcher::Result;
use switchboard_ops::{self as ops, TensorOps};
use switchboard_tensor::Tensor;

use crate::autograd_meta;
use crate::grad_mode::GradModeGuard;
use crate::node::{err, lock, InputMeta, Node, NodeMeta, FREED_MSG};

/// Sets `t`'s grad_fn to `AsStridedBackward0` of its base's current history (when the base
/// requires grad), and marks it current.
pub(crate) fn regenerate(t: &Tensor) {
    let Some(base) = autograd_meta::read(t, |m| m.base.clone()).flatten() else {
        return;
    };
    let version = t.version();
    let node = if base.requires_grad_hint() {
        let _g = GradModeGuard::new(true);
        ops::as_strided_with(
            &base,
            t.sizes(),
            t.strides(),
            ops::AsStridedOptions::default().storage_offset(t.storage_offset()),
        )
        .ok()
        .and_then(|v| autograd_meta::grad_fn_of(&v))
    } else {
        None
    };
    autograd_meta::with(t, |m| {
        if let Some((n, nr)) = node {
            n.meta().set_input(nr as usize, t);
            m.grad_fn = Some(n);
            m.output_nr = nr;
            m.requires_grad = false;
        }
        m.bw_view = true;
        m.attr_version = version;
    });
}

type Geometry = SmallVec<[i64; 6]>;

/// The node of a base whose view was written in place (Note [CopySlices]).
struct CopySlices {
    meta: NodeMeta,
    base_sizes: Geometry,
    base_strides: Geometry,
    view_sizes: Geometry,
    view_strides: Geometry,
    /// The view's storage offset relative to the base's.
    view_offset: i64,
    /// The in-place operator's node (freed with the graph).
    fn_: Mutex<Option<Arc<dyn Node>>>,
}

/// PyTorch's name of the node.
const NAME: &str = "CopySlices";

impl Drop for CopySlices {
    fn drop(&mut self) {
        // The in-place operator's node first (Note [Dropping deep graphs]).
        drop(self.fn_.get_mut().unwrap_or_else(|e| e.into_inner()).take());
    }
}

impl Node for CopySlices {
    fn meta(&self) -> &NodeMeta {
        &self.meta
    }

    fn apply(&self, _: &Arc<dyn Node>, grads: Vec<Option<Tensor>>) -> Result<Vec<Option<Tensor>>> {
        let n = self.meta.next_edges().len();
        let Some(grad) = grads.into_iter().next().flatten() else {
            return Ok(vec![None; n]);
        };
        let f = lock(&self.fn_).clone().ok_or_else(|| err(FREED_MSG))?;
        // PyTorch's `grad.new_empty_strided(..)`: a call on the gradient, so that a layer the
        // gradient belongs to (a functional tensor, Note [Functional tensors below autograd]
        // in switchboard-functionalize) makes the result too.
        let result = grad.new_empty_strided(&self.base_sizes, &self.base_strides)?;
        ops::copy_(&result, &grad)?;
        let grad_slice = ops::as_strided_with(
            &result,
            &self.view_sizes,
            &self.view_strides,
            ops::AsStridedOptions::default().storage_offset(self.view_offset),
        )?;
        // `fn` may save what it gets: it gets a copy, since `grad_slice` is written below.
        let res = f.apply(
            &f,
            vec![Some(ops::clone_with(
                &grad_slice,
                ops::CloneOptions::default()
                    .memory_format(switchboard_tensor::MemoryFormat::Contiguous),
            )?)],
        )?;
        let mut out = vec![None; n];
        let mut result = Some(result);
        for (i, g) in res.into_iter().enumerate().take(n) {
            let (Some(g), true) = (g, self.meta.next_edges()[i].is_valid()) else {
                continue;
            };
            if i == 0 {
                ops::copy_(&grad_slice, &g)?;
                out[0] = result.take();
            } else {
                out[i] = Some(g);
            }
        }
        Ok(out)
    }

    fn release_variables(&self) {
        lock(&self.fn_).take();
    }
}

/// Rebases the history of `base` after the in-place call recorded as `node` on its view `view`
/// (PyTorch's `rebase_history` of a view, Note [CopySlices]).
pub(crate) fn rebase_view(view: &Tensor, base: &Tensor, node: Arc<dyn Node>) {
    let mut edges = crate::node::Edges::new();
    edges.push(autograd_meta::gradient_edge(base));
    edges.extend(node.next_edges().iter().skip(1).cloned());
    let mut inputs = crate::node::Inputs::new();
    inputs.push(Some(InputMeta::of(base)));
    let copy_slices: Arc<dyn Node> = Arc::new(CopySlices {
        meta: NodeMeta::with_inputs(NAME.into(), edges, inputs),
        base_sizes: SmallVec::from_slice(base.sizes()),
        base_strides: SmallVec::from_slice(base.strides()),
        view_sizes: SmallVec::from_slice(view.sizes()),
        view_strides: SmallVec::from_slice(view.strides()),
        view_offset: view.storage_offset() - base.storage_offset(),
        fn_: Mutex::new(Some(node)),
    });
    autograd_meta::set_grad_fn(base, copy_slices, 0);
    // The view's grad_fn follows (its version changed with the call).
    regenerate(view);
}
