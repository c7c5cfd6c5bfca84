//! Forward-mode AD (PyTorch's `torch.autograd.forward_ad` and `forward_grad.h`): dual levels,
//! tangents kept on a tensor's autograd metadata, `make_dual` / `unpack_dual`, and what the
//! generated Autograd kernels call to read input tangents and attach output tangents.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

use crate::autograd_meta;
use crate::node::{err, lock};
use crate::recording::differentiable;

// Note [Forward-mode AD]
// A dual tensor is a primal with a tangent for the active dual level, kept in its autograd
// metadata (`MetaInner::forward_grad`) with the id of the level it was set at. As in PyTorch,
// one level can be active at a time, entered by `enter_dual_level` and left by
// `exit_dual_level` (or the `dual_level` guard); entering a second one is PyTorch's "Nested
// forward mode AD is not supported at the moment". Unlike PyTorch's, whose level is
// process-wide, the level is per thread, as the transform layers (`jvp`) that use it are:
// transforms running on two threads at once each get their own. Leaving a level makes every tangent set
// at it unreachable: a tangent is only returned while its level's id is the active one, and
// the stale value is dropped the next time it is looked at (PyTorch clears them eagerly; the
// values here live until then, which nothing observes).
//
// Tensors with a tangent set the `FORWARD_GRAD` bit of their autograd flags (Note
// [requires_grad hint] in switchboard-tensor), which the generated kernels' fast path tests
// with the `requires_grad` bit in the same load: with no dual tensor around, forward AD costs
// nothing. A kernel that finds the bit on an input reads the input tangents (`forward_grad`),
// runs the operator as usual (recording its backward node if needed), then evaluates the
// `result:` formula of derivatives.yaml and attaches the output tangent (`set_forward_grad`).
// The formula runs with tangent propagation switched off on this thread
// (`ForwardGradSuppressed`): it computes with primals that are dual tensors themselves, whose
// tangents must not flow into the tangent being computed (PyTorch's formulas read
// `_fw_primal(level)`, a view without the tangent). Backward recording stays on, so that a
// tangent computed from inputs that require grad can be differentiated (reverse over
// forward), and forward propagation works under `no_grad`, as PyTorch's.
//
// Views and in-place writes follow PyTorch's rules: a view's formula (`auto_linear`) is the
// view operator applied to the tangent, so the view's tangent is a view of its base's; a view
// without a tangent of its own whose base has one gets the matching `as_strided` view of the
// base's tangent. An in-place operator computes the new tangent and copies it into the
// existing one (so a write through a view updates its base's tangent), or, when `self` had
// none, attaches it (a view of a base without a tangent first gives its base a zero tangent,
// and takes its own as a view of it).

/// The id the next dual level gets (ids are never reused, so a tangent of a level that was
/// left can never be taken for one of a later level).
static NEXT_LEVEL: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The id of this thread's active dual level; 0 when none is.
    static ACTIVE_LEVEL: Cell<u64> = const { Cell::new(0) };
    static SUPPRESSED: Cell<bool> = const { Cell::new(false) };
}

/// The id of the active dual level, if one is active and propagation is not switched off on
/// this thread.
fn active_level() -> Option<u64> {
    if SUPPRESSED.with(Cell::get) {
        return None;
    }
    active_level_ignoring_suppression()
}

/// Enters a new dual level (`torch.autograd.forward_ad.enter_dual_level`); returns its index
/// (0: PyTorch supports one level at a time).
pub fn enter_dual_level() -> Result<usize> {
    if ACTIVE_LEVEL.with(Cell::get) != 0 {
        return Err(err("Nested forward mode AD is not supported at the moment"));
    }
    let id = NEXT_LEVEL.fetch_add(1, Ordering::Relaxed);
    ACTIVE_LEVEL.with(|l| l.set(id));
    Ok(0)
}

/// Leaves dual level `level` (`exit_dual_level`): the tangents set at it are gone.
pub fn exit_dual_level(level: usize) -> Result<()> {
    if ACTIVE_LEVEL.with(Cell::get) == 0 {
        return Err(err(
            "Trying to exit a forward AD level that does not exist.",
        ));
    }
    if level != 0 {
        return Err(err(
            "Trying to exit a forward AD level that was not the last one that was created. This \
             is not supported.",
        ));
    }
    ACTIVE_LEVEL.with(|l| l.set(0));
    Ok(())
}

/// A dual level, left when dropped (`with torch.autograd.forward_ad.dual_level():`); it
/// belongs to the thread that entered it.
pub struct DualLevel {
    level: usize,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl DualLevel {
    /// Enters a dual level (see [`enter_dual_level`]).
    pub fn new() -> Result<DualLevel> {
        Ok(DualLevel {
            level: enter_dual_level()?,
            _not_send: std::marker::PhantomData,
        })
    }

    /// The level's index, for [`make_dual`] and [`unpack_dual`].
    pub fn level(&self) -> usize {
        self.level
    }
}

impl Drop for DualLevel {
    fn drop(&mut self) {
        // The level is the active one: it was entered by `new` and only this guard leaves it.
        let _ = exit_dual_level(self.level);
    }
}

/// Enters a dual level for the guard's lifetime (`forward_ad.dual_level()`).
pub fn dual_level() -> Result<DualLevel> {
    DualLevel::new()
}

/// Switches tangent propagation off on this thread while alive (Note [Forward-mode AD]).
pub(crate) struct ForwardGradSuppressed {
    was: bool,
}

impl ForwardGradSuppressed {
    pub(crate) fn new() -> ForwardGradSuppressed {
        ForwardGradSuppressed {
            was: SUPPRESSED.with(|s| s.replace(true)),
        }
    }
}

impl Drop for ForwardGradSuppressed {
    fn drop(&mut self) {
        let was = self.was;
        SUPPRESSED.with(|s| s.set(was));
    }
}

/// Runs `f` with tangent propagation off: its operators make no tangents.
pub(crate) fn without_forward_grad<R>(f: impl FnOnce() -> R) -> R {
    let _guard = ForwardGradSuppressed::new();
    f()
}

fn check_level(level: usize) -> Result<()> {
    if level != 0 {
        return Err(err(format!(
            "Trying to use forward AD level {level} but only level 0 exists: nested forward mode \
             AD is not supported at the moment"
        )));
    }
    Ok(())
}

/// `t`'s tangent at the active level (PyTorch's `_fw_grad`): its own, or for a view without
/// one, the view of its base's (Note [Forward-mode AD]).
pub fn forward_grad(t: &Tensor) -> Option<Tensor> {
    if !t.forward_grad_hint() {
        return None;
    }
    let level = active_level()?;
    own_forward_grad(t, level).or_else(|| view_of_base_forward_grad(t, level))
}

fn own_forward_grad(t: &Tensor, level: u64) -> Option<Tensor> {
    let slot = autograd_meta::read(t, |m| m.forward_grad.clone()).flatten()?;
    let (tangent, stale) = {
        let mut g = lock(&slot);
        match &*g {
            Some((l, tangent)) if *l == level => (Some(tangent.clone()), false),
            Some(_) => {
                *g = None;
                (None, true)
            }
            None => (None, false),
        }
    };
    if stale {
        let base_has_one = base_of(t).is_some_and(|b| b.forward_grad_hint());
        if !base_has_one {
            t.set_forward_grad_hint(false);
        }
    }
    tangent
}

fn base_of(t: &Tensor) -> Option<Tensor> {
    autograd_meta::read(t, |m| m.base.clone()).flatten()
}

fn view_of_base_forward_grad(t: &Tensor, level: u64) -> Option<Tensor> {
    let base = base_of(t)?;
    let base_tangent = own_forward_grad(&base, level)?;
    if base_tangent.sizes() != base.sizes() || base_tangent.strides() != base.strides() {
        return None;
    }
    let offset = t.storage_offset() - base.storage_offset() + base_tangent.storage_offset();
    let view = without_forward_grad(|| {
        ops::as_strided_with(
            &base_tangent,
            t.sizes(),
            t.strides(),
            ops::AsStridedOptions {
                storage_offset: Some(offset),
            },
        )
    })
    .ok()?;
    set_slot(t, level, view.clone());
    Some(view)
}

/// Where a tensor's tangent is kept: the id of its dual level and the tangent.
pub(crate) type ForwardGradSlot = Mutex<Option<(u64, Tensor)>>;

/// Sets `t`'s tangent at `level`, in its slot (shared with the aliases saved of it).
fn set_slot(t: &Tensor, level: u64, tangent: Tensor) {
    autograd_meta::with(t, |m| match &m.forward_grad {
        Some(slot) => *lock(slot) = Some((level, tangent)),
        None => m.forward_grad = Some(Arc::new(Mutex::new(Some((level, tangent))))),
    });
    t.set_forward_grad_hint(true);
}

/// Makes `alias` (an output's alias saved by its backward node, which the output's tangent
/// is set after) share `output`'s tangent slot while a dual level is active, so that a
/// backward formula reading the saved output sees its tangent (PyTorch's `SavedVariable`
/// saves the forward grad too; forward over reverse needs it).
pub(crate) fn share_forward_grad(output: &Tensor, alias: &Tensor) {
    if active_level_ignoring_suppression().is_none() {
        return;
    }
    let slot = autograd_meta::with(output, |m| {
        m.forward_grad
            .get_or_insert_with(|| Arc::new(Mutex::new(None)))
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

/// Attaches `tangent` to `t` at the active level (an output of a kernel).
pub(crate) fn set_forward_grad(t: &Tensor, tangent: Tensor) -> Result<()> {
    let Some(level) = active_level_ignoring_suppression() else {
        return Ok(());
    };
    if !differentiable(t) {
        return Ok(());
    }
    if tangent.sizes() != t.sizes() {
        return Err(err(format!(
            "Trying to set a forward gradient that has a different size than that of the \
             original Tensor, this is not supported. Tensor is of size {:?} while the given \
             forward gradient is of size {:?}.",
            t.sizes(),
            tangent.sizes()
        )));
    }
    set_slot(t, level, tangent);
    Ok(())
}

/// Updates the tangent of `self_`, just written in place, to `new_tangent` (Note
/// [Forward-mode AD]).
pub(crate) fn update_inplace_forward_grad(self_: &Tensor, new_tangent: Tensor) -> Result<()> {
    let Some(level) = active_level_ignoring_suppression() else {
        return Ok(());
    };
    let _guard = ForwardGradSuppressed::new();
    let existing = if self_.forward_grad_hint() {
        own_forward_grad(self_, level).or_else(|| view_of_base_forward_grad(self_, level))
    } else {
        None
    };
    if let Some(old) = existing {
        if !old.is_same(&new_tangent) {
            ops::copy_(&old, &new_tangent)?;
        }
        return Ok(());
    }
    if let Some(base) = base_of(self_) {
        if differentiable(&base) {
            let zeros = zeros_with_layout_of(&base)?;
            set_forward_grad(&base, zeros)?;
            if let Some(view) = view_of_base_forward_grad(self_, level) {
                ops::copy_(&view, &new_tangent)?;
                self_.set_forward_grad_hint(true);
                return Ok(());
            }
        }
    }
    set_forward_grad(self_, new_tangent)
}

/// Zeros with `t`'s sizes, strides and dtype (a base's tangent, whose views' tangents are
/// taken with `t`'s views' strides).
fn zeros_with_layout_of(t: &Tensor) -> Result<Tensor> {
    let z = ops::empty_strided_with(
        t.sizes(),
        t.strides(),
        ops::EmptyStridedOptions::default().dtype(t.dtype()),
    )?;
    ops::zero_(&z)?;
    Ok(z)
}

fn active_level_ignoring_suppression() -> Option<u64> {
    match ACTIVE_LEVEL.with(Cell::get) {
        0 => None,
        id => Some(id),
    }
}

/// Whether any of `tensors` has a tangent at the active level.
pub(crate) fn any_forward_grad(tensors: &[Option<&Tensor>]) -> bool {
    tensors
        .iter()
        .flatten()
        .any(|t| t.forward_grad_hint() && forward_grad(t).is_some())
}

/// Whether a kernel must compute tangents: a dual level is active and propagation is on.
pub(crate) fn forward_ad_enabled() -> bool {
    active_level().is_some()
}

/// PyTorch's error for an operator without a forward formula.
pub(crate) fn forward_ad_not_implemented(op: &str) -> switchboard_dispatcher::DispatchError {
    err(format!(
        "Trying to use forward AD with {op} that does not support it because it has not been \
         implemented yet.\nPlease file an issue to PyTorch at \
         https://github.com/pytorch/pytorch/issues/new?template=feature-request.yml so that we \
         can prioritize its implementation or submit a PR adding the implementation to \
         derivatives.yaml"
    ))
}

/// PyTorch's error for an `out=` call on dual tensors.
pub(crate) fn forward_ad_out_error(op: &str) -> switchboard_dispatcher::DispatchError {
    err(format!(
        "Trying to use forward AD with {op} that does not support it because it is an out= \
         function"
    ))
}

/// A dual tensor of `primal` with tangent `tangent` at `level` (`forward_ad.make_dual`): a
/// view of `primal` (sharing its backward history) carrying the tangent.
pub fn make_dual(primal: &Tensor, tangent: &Tensor, level: usize) -> Result<Tensor> {
    let Some(id) = active_level_ignoring_suppression() else {
        return Err(err(
            "Trying to create a dual Tensor for forward AD but no level exists, make sure to \
             enter_dual_level() first.",
        ));
    };
    check_level(level)?;
    if !differentiable(primal) {
        return Err(err(format!(
            "Expected primal to be floating point or complex, but got: {}",
            primal.dtype()
        )));
    }
    if !differentiable(tangent) {
        return Err(err(format!(
            "Expected tangent to be floating point or complex, but got: {}",
            tangent.dtype()
        )));
    }
    if primal.forward_grad_hint() && own_forward_grad(primal, id).is_some() {
        return Err(err(
            "Making a dual Tensor based on a Tensor that already has a forward gradient at the \
             same level 0 is not supported.",
        ));
    }
    if tangent.sizes() != primal.sizes() {
        return Err(err(format!(
            "Trying to set a forward gradient that has a different size than that of the \
             original Tensor, this is not supported. Tensor is of size {:?} while the given \
             forward gradient is of size {:?}.",
            primal.sizes(),
            tangent.sizes()
        )));
    }
    let _guard = ForwardGradSuppressed::new();
    let dual = ops::alias(primal)?;
    let tangent = tangent.clone();
    set_slot(&dual, id, tangent);
    Ok(dual)
}

/// `forward_ad.unpack_dual(t, level)`: the primal (a view of `t` without the tangent) and the
/// tangent at `level`, if any.
pub fn unpack_dual(t: &Tensor, level: usize) -> Result<(Tensor, Option<Tensor>)> {
    check_level(level)?;
    let tangent = forward_grad(t);
    let primal = without_forward_grad(|| ops::alias(t))?;
    Ok((primal, tangent))
}
