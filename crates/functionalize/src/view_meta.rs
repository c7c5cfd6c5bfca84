//! `ViewMeta`: one view operation of a functional tensor's chain, replayed forward to
//! regenerate a view from its base, and used backward to write a view's new value into the
//! base.

use switchboard_dispatcher::{Dispatcher, IValue, OperatorHandle, Result, Stack};
use switchboard_tensor::Tensor;

use crate::wrapper::{below_functionalization, call_plain, error, single_tensor, Kind};

// Note [Writing through a view]
// A write of `value` to a view replaces the view's region of the base: the new base is the
// old one with that region overwritten, computed backwards along the chain of views, each
// view's inverse applied to the new value of its output and the value it viewed (PyTorch's
// `ViewMeta::reverse_fn`). Shape views (`view`, `squeeze`, `unsqueeze`, `alias`) invert by a
// `reshape`, `t`, `transpose` and `permute` by themselves (inverted), `view.dtype` by a view
// back; `select`, `slice` and `as_strided` write a region, which PyTorch's `select_scatter`,
// `slice_scatter` and `as_strided_scatter` express, and `expand` adds what the writes summed
// over its broadcast dimensions changed (`base + sum_to(value - base)`), as PyTorch's
// `FunctionalInverses` do. A view without an inverse here (one an extension registers) writes
// through `copy_` into the view of a fresh clone of the base: still a function of values (the
// clone is the layer's own), but a graph captured then shows that `copy_`.

/// One view operation: `op` called with `args`, whose argument `self_index` is the tensor
/// viewed, returning the view as its tensor output number `output` (0 for a single tensor;
/// the list item of `split`-like views).
#[derive(Clone)]
pub(crate) struct ViewMeta {
    pub op: OperatorHandle,
    /// The call's arguments, the viewed tensor's slot left `None`.
    pub args: Stack,
    pub self_index: usize,
    pub output: usize,
}

impl ViewMeta {
    /// Calls `op` (this view operation or its `*_copy` form) on `base`, a value of a tensor of
    /// `kind`.
    pub(crate) fn apply(&self, op: &OperatorHandle, base: &Tensor, kind: Kind) -> Result<Tensor> {
        let mut stack = self.args.clone();
        stack[self.self_index] = IValue::Tensor(base.clone());
        let out = call_plain(op, stack, kind)?;
        let view = out
            .iter()
            .flat_map(IValue::tensors)
            .nth(self.output)
            .cloned();
        view.ok_or_else(|| {
            error(format!(
                "functionalization: {} returned no tensor {}",
                op.name(),
                self.output
            ))
        })
    }
}

/// The value of the view made by `metas` from `base` (of a tensor of `kind`): with the
/// `*_copy` forms when views are removed (a fresh tensor), with the view operators themselves
/// otherwise.
pub(crate) fn replay(base: &Tensor, metas: &[ViewMeta], kind: Kind) -> Result<Tensor> {
    let remove_views = kind.removes_views();
    let mut value = base.clone();
    for meta in metas {
        let copy = if remove_views {
            Dispatcher::global().view_copy_form(&meta.op)
        } else {
            None
        };
        value = meta.apply(copy.as_ref().unwrap_or(&meta.op), &value, kind)?;
    }
    Ok(value)
}

/// `base` (of a tensor of `kind`) with the region `metas` view replaced by `value` (Note
/// [Writing through a view]).
pub(crate) fn write_through(
    base: &Tensor,
    metas: &[ViewMeta],
    value: &Tensor,
    kind: Kind,
) -> Result<Tensor> {
    let _below = below_functionalization(kind);
    // The values the chain goes through: `bases[i]` is what `metas[i]` views.
    let mut bases = Vec::with_capacity(metas.len());
    let mut current = base.clone();
    for meta in metas {
        let next = replay(&current, std::slice::from_ref(meta), kind)?;
        bases.push(std::mem::replace(&mut current, next));
    }
    let mut new = value.clone();
    for (meta, base_i) in metas.iter().zip(&bases).rev() {
        match meta.scatter(base_i, &new, kind)? {
            Some(b) => new = b,
            None => return write_through_copy(base, metas, value, kind),
        }
    }
    Ok(new)
}

/// [`write_through`] for views without an inverse here: `copy_` into the view of a fresh
/// clone.
fn write_through_copy(
    base: &Tensor,
    metas: &[ViewMeta],
    value: &Tensor,
    kind: Kind,
) -> Result<Tensor> {
    let d = Dispatcher::global();
    let clone = d.find_schema_or_throw("aten::clone")?;
    let fresh = single_tensor(
        &clone,
        call_plain(&clone, vec![base.clone().into(), IValue::None], kind)?,
    )?;
    let mut region = fresh.clone();
    for meta in metas {
        region = meta.apply(&meta.op, &region, kind)?;
    }
    let copy_ = d.find_schema_or_throw("aten::copy_")?;
    call_plain(
        &copy_,
        vec![region.into(), value.clone().into(), IValue::Bool(false)],
        kind,
    )?;
    Ok(fresh)
}

/// Whether view operator `op` may give two elements of its result one element of its input
/// (Note [Reading a view after writing it] in wrapper.rs).
pub(crate) fn repeats_elements(op: &OperatorHandle) -> bool {
    matches!(op.name().name(), "aten::expand" | "aten::as_strided")
}
