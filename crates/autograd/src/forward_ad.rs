//! Forward-mode AD (PyTorch's `torch.autograd.forward_ad` and `forward_grad.h`): dual levels,
//! `make_dual` / `unpack_dual`, and which levels the generated Autograd kernels see. The
//! tangents themselves live in `forward_grad`.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};

use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

use crate::forward_grad::{
    check_tangent_size, forward_grad_at, has_own_forward_grad_at, hide_level_in,
    set_forward_grad_at,
};
use crate::node::err;
use crate::recording::differentiable;

// Note [Forward-mode AD]
// A dual tensor is a primal with a tangent for a dual level, kept in its autograd metadata
// (`MetaInner::forward_grad`, a small map from level id to tangent). Levels form a stack per
// thread, outermost first; each has an id, never reused, and an inner level's id is larger
// than an outer one's. The raw API (`enter_dual_level`, `dual_level`) is PyTorch's
// `torch.autograd.forward_ad`, which supports one level at a time: entering a second one is
// PyTorch's "Nested forward mode AD is not supported at the moment". The function transforms
// nest their levels (`DualLevel::nested`, one per `torch.func.jvp`), as functorch gives each
// `jvp` its own level through its dynamic layer stack. Unlike PyTorch's, whose level is
// process-wide, levels are per thread, as the transform layers (`jvp`) that use them are. A
// tangent is only returned while its level is on the stack; the value of a level that was left
// is dropped the next time it is looked at (PyTorch clears them eagerly; nothing observes the
// difference).
//
// Tensors with a tangent set the `FORWARD_GRAD` bit of their autograd flags (Note
// [requires_grad hint] in switchboard-tensor), which the generated kernels' fast path tests
// with the `requires_grad` bit in the same load: with no dual tensor around, forward AD costs
// nothing. A kernel that finds the bit on an input takes the innermost visible level at which
// an input has a tangent, hides that level and the inner ones (`outer_levels_only`), runs the
// operator (which, re-entering the kernel, computes the outer levels' tangents and records the
// backward node if needed), evaluates the `result:` formula of derivatives.yaml on the inputs'
// primals and tangents, and attaches the output's tangent at that level. The formula's
// operators run with the outer levels visible, so the tangent is itself a dual tensor of the
// outer levels: `jvp(jvp(f))` and `jacfwd(jacfwd(f))` give second derivatives, as PyTorch's
// nested levels do (its formulas read `_fw_primal(level)`, a view without the level's
// tangent, on tensors that are duals of the outer levels). With one level, hiding it hides
// every level: the formula's operators make no tangents. Backward recording stays on, so that
// a tangent computed from inputs that require grad can be differentiated (reverse over
// forward), and forward propagation works under `no_grad`, as PyTorch's.
//
// Views and in-place writes follow PyTorch's rules (`forward_grad`): a view's formula
// (`auto_linear`) is the view operator applied to the tangent, so the view's tangent is a view
// of its base's; a view without a tangent of its own whose base has one gets the matching
// `as_strided` view of the base's tangent. An in-place operator computes the new tangent and
// copies it into the existing one (so a write through a view updates its base's tangent), or,
// when `self` had none, attaches it (a view of a base without a tangent first gives its base a
// zero tangent, and takes its own as a view of it).

/// The id the next dual level gets (ids are never reused, so a tangent of a level that was
/// left can never be taken for one of a later level, and inner levels have larger ids).
static NEXT_LEVEL: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The ids of this thread's active dual levels, outermost first.
    static LEVELS: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
    /// Levels whose id is at least this are hidden from the kernels (`u64::MAX`: none; 0: all).
    static HIDDEN_FROM: Cell<u64> = const { Cell::new(u64::MAX) };
}

/// The innermost active level the kernels see, if any.
pub(crate) fn innermost_visible_level() -> Option<u64> {
    let hidden_from = HIDDEN_FROM.with(Cell::get);
    LEVELS.with(|l| {
        l.borrow()
            .iter()
            .rev()
            .copied()
            .find(|&id| id < hidden_from)
    })
}

/// The levels the kernels see, innermost first.
pub(crate) fn visible_levels() -> Vec<u64> {
    let hidden_from = HIDDEN_FROM.with(Cell::get);
    LEVELS.with(|l| {
        l.borrow()
            .iter()
            .rev()
            .copied()
            .filter(|&id| id < hidden_from)
            .collect()
    })
}

/// Whether level `id` is still on this thread's stack (hidden or not).
pub(crate) fn level_is_active(id: u64) -> bool {
    LEVELS.with(|l| l.borrow().contains(&id))
}

/// Whether any level is on this thread's stack, hidden or not.
pub(crate) fn any_level_active() -> bool {
    LEVELS.with(|l| !l.borrow().is_empty())
}

/// Whether a kernel must compute tangents: a level is active and visible.
pub(crate) fn forward_ad_enabled() -> bool {
    innermost_visible_level().is_some()
}

fn push_level() -> u64 {
    let id = NEXT_LEVEL.fetch_add(1, Ordering::Relaxed);
    LEVELS.with(|l| l.borrow_mut().push(id));
    id
}

/// Enters a new dual level (`torch.autograd.forward_ad.enter_dual_level`); returns its index
/// (0: PyTorch's raw API supports one level at a time).
pub fn enter_dual_level() -> Result<usize> {
    if any_level_active() {
        return Err(err("Nested forward mode AD is not supported at the moment"));
    }
    push_level();
    Ok(0)
}

/// Leaves dual level `level` (`exit_dual_level`): the tangents set at it are gone.
pub fn exit_dual_level(level: usize) -> Result<()> {
    let depth = LEVELS.with(|l| l.borrow().len());
    if depth == 0 {
        return Err(err(
            "Trying to exit a forward AD level that does not exist.",
        ));
    }
    if level != 0 || depth > 1 {
        return Err(err(
            "Trying to exit a forward AD level that was not the last one that was created. This \
             is not supported.",
        ));
    }
    LEVELS.with(|l| l.borrow_mut().pop());
    Ok(())
}

/// A dual level, left when dropped (`with torch.autograd.forward_ad.dual_level():`, or one
/// `torch.func.jvp`'s level); it belongs to the thread that entered it.
pub struct DualLevel {
    id: u64,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl DualLevel {
    /// Enters a dual level (see [`enter_dual_level`]).
    pub fn new() -> Result<DualLevel> {
        enter_dual_level()?;
        let id = LEVELS.with(|l| *l.borrow().last().expect("just entered"));
        Ok(DualLevel {
            id,
            _not_send: std::marker::PhantomData,
        })
    }

    /// Enters a dual level inside the active ones (a function transform's: each `jvp` has its
    /// own, see Note [Forward-mode AD]). The raw API refuses to nest; the transforms do not.
    pub fn nested() -> DualLevel {
        DualLevel {
            id: push_level(),
            _not_send: std::marker::PhantomData,
        }
    }

    /// The level's index for [`make_dual`] and [`unpack_dual`] (0: the raw API's only level).
    pub fn level(&self) -> usize {
        0
    }

    /// A dual tensor of `primal` with tangent `tangent` at this level (see [`make_dual`]).
    pub fn make_dual(&self, primal: &Tensor, tangent: &Tensor) -> Result<Tensor> {
        make_dual_at(primal, tangent, self.id)
    }

    /// The primal of `t` (a view without this level's tangent) and its tangent at this level
    /// (see [`unpack_dual`]).
    pub fn unpack_dual(&self, t: &Tensor) -> Result<(Tensor, Option<Tensor>)> {
        unpack_dual_at(t, self.id)
    }
}

impl Drop for DualLevel {
    fn drop(&mut self) {
        // Levels are left in the reverse order they were entered: this one is the innermost
        // unless an inner guard leaked, whose levels go with it.
        LEVELS.with(|l| {
            let mut l = l.borrow_mut();
            if let Some(at) = l.iter().position(|&id| id == self.id) {
                l.truncate(at);
            }
        });
    }
}

/// Enters a dual level for the guard's lifetime (`forward_ad.dual_level()`).
pub fn dual_level() -> Result<DualLevel> {
    DualLevel::new()
}

/// Hides levels from the kernels while alive (Note [Forward-mode AD]).
pub(crate) struct HiddenLevels {
    was: u64,
}

impl HiddenLevels {
    fn hide_from(id: u64) -> HiddenLevels {
        HiddenLevels {
            was: HIDDEN_FROM.with(|h| h.replace(h.get().min(id))),
        }
    }
}

impl Drop for HiddenLevels {
    fn drop(&mut self) {
        let was = self.was;
        HIDDEN_FROM.with(|h| h.set(was));
    }
}

/// Switches tangent propagation off on this thread while the guard lives: every level is
/// hidden.
pub(crate) fn hide_all_levels() -> HiddenLevels {
    HiddenLevels::hide_from(0)
}

/// Hides level `id` and the levels inside it while the guard lives: operators compute the
/// tangents of the outer levels only (those of a formula computing the tangent at `id`).
pub(crate) fn outer_levels_only(id: u64) -> HiddenLevels {
    HiddenLevels::hide_from(id)
}

/// Runs `f` with tangent propagation off: its operators make no tangents.
pub(crate) fn without_forward_grad<R>(f: impl FnOnce() -> R) -> R {
    let _guard = hide_all_levels();
    f()
}

/// The raw API's level index: 0, its only level (the innermost visible one).
fn check_level_index(level: usize) -> Result<()> {
    if level != 0 {
        return Err(err(format!(
            "Trying to use forward AD level {level} but only level 0 exists: nested forward mode \
             AD is not supported at the moment"
        )));
    }
    Ok(())
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
/// view of `primal` (sharing its backward history, and its tangents at the outer levels)
/// carrying the tangent.
pub fn make_dual(primal: &Tensor, tangent: &Tensor, level: usize) -> Result<Tensor> {
    check_level_index(level)?;
    let Some(id) = innermost_visible_level() else {
        return Err(err(
            "Trying to create a dual Tensor for forward AD but no level exists, make sure to \
             enter_dual_level() first.",
        ));
    };
    make_dual_at(primal, tangent, id)
}

fn make_dual_at(primal: &Tensor, tangent: &Tensor, id: u64) -> Result<Tensor> {
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
    if has_own_forward_grad_at(primal, id) {
        return Err(err(
            "Making a dual Tensor based on a Tensor that already has a forward gradient at the \
             same level 0 is not supported.",
        ));
    }
    check_tangent_size(primal, tangent)?;
    let dual = {
        let _outer = outer_levels_only(id);
        ops::alias(primal)?
    };
    set_forward_grad_at(&dual, id, tangent.clone())?;
    Ok(dual)
}

/// `forward_ad.unpack_dual(t, level)`: the primal (a view of `t` without the tangent) and the
/// tangent at `level`, if any.
/// Outside any level the tensor is its own primal, as in PyTorch.
pub fn unpack_dual(t: &Tensor, level: usize) -> Result<(Tensor, Option<Tensor>)> {
    check_level_index(level)?;
    match innermost_visible_level() {
        Some(id) => unpack_dual_at(t, id),
        None => Ok((t.clone(), None)),
    }
}

fn unpack_dual_at(t: &Tensor, id: u64) -> Result<(Tensor, Option<Tensor>)> {
    let tangent = forward_grad_at(t, id);
    let primal = {
        let _outer = outer_levels_only(id);
        ops::alias(t)?
    };
    // The primal keeps the outer levels' tangents; its own view of `t` must not lend it `t`'s
    // tangent at this level.
    hide_level_in(&primal, id);
    Ok((primal, tangent))
}
