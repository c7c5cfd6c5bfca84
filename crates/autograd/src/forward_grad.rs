//! A tensor's tangents (PyTorch's `ForwardGrad`): one per dual level, kept in its autograd
//! metadata, and what the generated Autograd kernels call to read input tangents and attach
//! output tangents (Note [Forward-mode AD]).

use std::sync::{Arc, Mutex};

use smallvec::SmallVec;
use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

use crate::autograd_meta;
use crate::forward_ad::{
    any_level_active, hide_all_levels, innermost_visible_level, level_is_active, outer_levels_only,
    visible_levels, without_forward_grad,
};
use crate::node::{err, lock};
use crate::recording::differentiable;

/// A tensor's tangent at one level: `None` marks a primal that `unpack_dual` split off, which
/// must not take its base's tangent at that level.
type Entry = (u64, Option<Tensor>);

/// Where a tensor's tangents are kept, by level id (shared with the aliases saved of it).
pub(crate) type ForwardGradSlot = Mutex<SmallVec<[Entry; 1]>>;

/// What a tensor's own slot says about one level.
enum Own {
    Tangent(Tensor),
    Hidden,
    Missing,
}

fn slot_of(t: &Tensor) -> Option<Arc<ForwardGradSlot>> {
    autograd_meta::read(t, |m| m.forward_grad.clone()).flatten()
}

/// `t`'s own entry at `level`, dropping the entries of levels that were left.
fn own_entry(t: &Tensor, level: u64) -> Own {
    let Some(slot) = slot_of(t) else {
        return Own::Missing;
    };
    let (own, emptied) = {
        let mut entries = lock(&slot);
        let before = entries.len();
        entries.retain(|(id, _)| level_is_active(*id));
        let own = match entries.iter().find(|(id, _)| *id == level) {
            Some((_, Some(tangent))) => Own::Tangent(tangent.clone()),
            Some((_, None)) => Own::Hidden,
            None => Own::Missing,
        };
        (own, entries.len() < before && entries.is_empty())
    };
    if emptied && !base_of(t).is_some_and(|b| b.forward_grad_hint()) {
        t.set_forward_grad_hint(false);
    }
    own
}

/// Whether `t` has a tangent of its own at `level` (not one derived from its base).
pub(crate) fn has_own_forward_grad_at(t: &Tensor, level: u64) -> bool {
    t.forward_grad_hint() && matches!(own_entry(t, level), Own::Tangent(_))
}

fn base_of(t: &Tensor) -> Option<Tensor> {
    autograd_meta::read(t, |m| m.base.clone()).flatten()
}

/// `t`'s tangent at `level`: its own, or for a view without one, the view of its base's.
pub(crate) fn forward_grad_at(t: &Tensor, level: u64) -> Option<Tensor> {
    if !t.forward_grad_hint() {
        return None;
    }
    match own_entry(t, level) {
        Own::Tangent(tangent) => Some(tangent),
        Own::Hidden => None,
        Own::Missing => view_of_base_forward_grad(t, level),
    }
}

/// `t`'s tangent at the innermost visible level (PyTorch's `_fw_grad`), if it has one there.
pub fn forward_grad(t: &Tensor) -> Option<Tensor> {
    if !t.forward_grad_hint() {
        return None;
    }
    forward_grad_at(t, innermost_visible_level()?)
}

/// The innermost visible level at which `t` has a tangent (what a kernel computes a tangent
/// for, Note [Forward-mode AD]).
pub(crate) fn tangent_level(t: &Tensor) -> Option<u64> {
    if !t.forward_grad_hint() {
        return None;
    }
    visible_levels()
        .into_iter()
        .find(|&id| forward_grad_at(t, id).is_some())
}

/// [`tangent_level`] of an optional tensor.
pub(crate) fn tangent_level_optional(t: Option<&Tensor>) -> Option<u64> {
    t.and_then(tangent_level)
}

/// [`tangent_level`] of a tensor list: the innermost of its tensors'.
pub(crate) fn tangent_level_list(ts: &[Tensor]) -> Option<u64> {
    ts.iter().filter_map(tangent_level).max()
}

fn view_of_base_forward_grad(t: &Tensor, level: u64) -> Option<Tensor> {
    let base = base_of(t)?;
    if !base.forward_grad_hint() {
        return None;
    }
    let Own::Tangent(base_tangent) = own_entry(&base, level) else {
        return None;
    };
    if base_tangent.sizes() != base.sizes() || base_tangent.strides() != base.strides() {
        return None;
    }
    let offset = t.storage_offset() - base.storage_offset() + base_tangent.storage_offset();
    let view = {
        let _outer = outer_levels_only(level);
        ops::as_strided_with(
            &base_tangent,
            t.sizes(),
            t.strides(),
            ops::AsStridedOptions {
                storage_offset: Some(offset),
            },
        )
    }
    .ok()?;
    set_slot(t, level, view.clone());
    Some(view)
}

fn set_entry(t: &Tensor, level: u64, tangent: Option<Tensor>) {
    autograd_meta::with(t, |m| {
        let slot = m
            .forward_grad
            .get_or_insert_with(|| Arc::new(Mutex::new(SmallVec::new())));
        let mut entries = lock(slot);
        match entries.iter_mut().find(|(id, _)| *id == level) {
            Some(entry) => entry.1 = tangent,
            None => entries.push((level, tangent)),
        }
    });
}

/// Sets `t`'s tangent at `level`, in its slot.
pub(crate) fn set_slot(t: &Tensor, level: u64, tangent: Tensor) {
    set_entry(t, level, Some(tangent));
    t.set_forward_grad_hint(true);
}

/// Marks `t` as having no tangent at `level`, whatever its base has there (a primal of
/// `unpack_dual`). Only a tensor with tangents at other levels needs the mark.
pub(crate) fn hide_level_in(t: &Tensor, level: u64) {
    if t.forward_grad_hint() {
        set_entry(t, level, None);
    }
}

/// Makes `alias` (an output's alias saved by its backward node, which the output's tangent
/// is set after) share `output`'s tangent slot while a dual level is active, so that a
/// backward formula reading the saved output sees its tangent (PyTorch's `SavedVariable`
/// saves the forward grad too; forward over reverse needs it).
pub(crate) fn share_forward_grad(output: &Tensor, alias: &Tensor) {
    if !any_level_active() {
        return;
    }
    let slot = autograd_meta::with(output, |m| {
        m.forward_grad
            .get_or_insert_with(|| Arc::new(Mutex::new(SmallVec::new())))
            .clone()
    });
    autograd_meta::with(alias, |m| m.forward_grad = Some(slot));
    alias.set_forward_grad_hint(true);
}

/// The tangent of an input for a formula: its own, or zeros shaped as the primal (PyTorch's
/// `_efficientzerotensor` for an input without one).
pub(crate) fn tangent_or_zeros(tangent: &Option<Tensor>, primal: &Tensor) -> Result<Tensor> {
    match tangent {
        Some(t) => Ok(t.clone()),
        None => without_forward_grad(|| ops::zeros_like(primal)),
    }
}

/// Attaches `tangent` to `t` at `level` (an output of a kernel), in `t`'s layout (Note
/// [Tangent layout]).
pub(crate) fn set_forward_grad_at(t: &Tensor, level: u64, tangent: Tensor) -> Result<()> {
    if !differentiable(t) {
        return Ok(());
    }
    check_tangent_size(t, &tangent)?;
    let tangent = in_layout_of(tangent, t, level)?;
    set_slot(t, level, tangent);
    Ok(())
}

/// PyTorch's error for a tangent whose sizes are not its primal's.
pub(crate) fn check_tangent_size(primal: &Tensor, tangent: &Tensor) -> Result<()> {
    if tangent.sizes() != primal.sizes() {
        return Err(err(format!(
            "Trying to set a forward gradient that has a different size than that of the \
             original Tensor, this is not supported. Tensor is of size {:?} while the given \
             forward gradient is of size {:?}.",
            primal.sizes(),
            tangent.sizes()
        )));
    }
    Ok(())
}

// Note [Tangent layout]
// A view of a dual tensor takes the same view of its tangent (`auto_linear`), which is only
// valid for every view of the primal if the tangent has the primal's layout: PyTorch's
// `set_fw_grad` copies a tangent of another layout into one with the primal's strides
// ("the basic layout constraint"). The same here, with one difference: a primal whose
// elements overlap (an expansion over a batch, stride 0, which `vmap(grad)` and `jvp` under
// `vmap` make of shared inputs) cannot hold a tangent that differs along that batch in its
// own layout, so its tangent is made contiguous instead, which every view accepts.

/// Whether `a` and `b` have the same sizes and the same strides where a size exceeds one (the
/// strides a view depends on).
fn same_layout(a: &Tensor, b: &Tensor) -> bool {
    a.sizes() == b.sizes()
        && a.sizes()
            .iter()
            .zip(a.strides().iter().zip(b.strides()))
            .all(|(&size, (x, y))| size <= 1 || x == y)
}

/// `tangent` in the layout of `primal` (Note [Tangent layout]); copied, with the levels outside
/// `level` visible so that the copy keeps the tangent's own tangents.
fn in_layout_of(tangent: Tensor, primal: &Tensor, level: u64) -> Result<Tensor> {
    if same_layout(&tangent, primal) {
        return Ok(tangent);
    }
    let _outer = outer_levels_only(level);
    if !primal.is_non_overlapping_and_dense() {
        return ops::contiguous(&tangent);
    }
    let copy = ops::empty_strided_with(
        primal.sizes(),
        primal.strides(),
        ops::EmptyStridedOptions::default().dtype(tangent.dtype()),
    )?;
    ops::copy_(&copy, &tangent)?;
    Ok(copy)
}

/// Updates the tangent at `level` of `self_`, just written in place, to `new_tangent` (Note
/// [Forward-mode AD]).
pub(crate) fn update_inplace_forward_grad_at(
    self_: &Tensor,
    level: u64,
    new_tangent: Tensor,
) -> Result<()> {
    // The copies are operators of the outer levels: the tangent's own tangents follow.
    let _outer = outer_levels_only(level);
    if let Some(old) = forward_grad_at(self_, level) {
        if !old.is_same(&new_tangent) {
            ops::copy_(&old, &new_tangent)?;
        }
        return Ok(());
    }
    if let Some(base) = base_of(self_) {
        if differentiable(&base) {
            let zeros = zeros_with_layout_of(&base)?;
            set_forward_grad_at(&base, level, zeros)?;
            self_.set_forward_grad_hint(true);
            if let Some(view) = view_of_base_forward_grad(self_, level) {
                ops::copy_(&view, &new_tangent)?;
                return Ok(());
            }
        }
    }
    set_forward_grad_at(self_, level, new_tangent)
}

/// Zeros with `t`'s sizes, strides and dtype (a base's tangent, whose views' tangents are
/// taken with `t`'s views' strides).
fn zeros_with_layout_of(t: &Tensor) -> Result<Tensor> {
    let _none = hide_all_levels();
    let z = ops::empty_strided_with(
        t.sizes(),
        t.strides(),
        ops::EmptyStridedOptions::default().dtype(t.dtype()),
    )?;
    ops::zero_(&z)?;
    Ok(z)
}

/// Whether any of `tensors` has a tangent at a visible level.
pub(crate) fn any_forward_grad(tensors: &[Option<&Tensor>]) -> bool {
    tensors.iter().flatten().any(|t| tangent_level(t).is_some())
}

/// `t` without its backward history (`detach`), keeping its tangent at every visible level,
/// each tangent detached the same way (a value a function transform returns: `jvp` under
/// `jvp`, `grad` under `jvp`).
pub fn detach_keeping_forward_grads(t: &Tensor) -> Result<Tensor> {
    detach_below(t, u64::MAX)
}

/// [`detach_keeping_forward_grads`] for the levels inside `bound` (a tangent at a level only
/// has tangents at the levels outside it: the recursion ends).
fn detach_below(t: &Tensor, bound: u64) -> Result<Tensor> {
    let detached = autograd_meta::alias(t);
    if !t.forward_grad_hint() {
        return Ok(detached);
    }
    for level in visible_levels().into_iter().filter(|&l| l < bound) {
        if let Some(tangent) = forward_grad_at(t, level) {
            let tangent = detach_below(&tangent, level)?;
            set_slot(&detached, level, tangent);
        }
    }
    Ok(detached)
}

/// `t` carrying `source`'s tangent at every visible level: a view of `t` with them, or `t`
/// itself when `source` has none (`grad` lifting a dual input to the leaf it differentiates).
pub fn alias_with_forward_grads_of(t: &Tensor, source: &Tensor) -> Result<Tensor> {
    let tangents: Vec<(u64, Tensor)> = if source.forward_grad_hint() {
        visible_levels()
            .into_iter()
            .filter_map(|level| Some((level, forward_grad_at(source, level)?)))
            .collect()
    } else {
        Vec::new()
    };
    if tangents.is_empty() {
        return Ok(t.clone());
    }
    let alias = without_forward_grad(|| ops::alias(t))?;
    for (level, tangent) in tangents {
        set_slot(&alias, level, tangent);
    }
    Ok(alias)
}
