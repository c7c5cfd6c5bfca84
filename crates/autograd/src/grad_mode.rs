//! Thread-local grad mode: `no_grad`, `enable_grad`, `set_grad_enabled`, inference mode.

use std::cell::Cell;
use std::marker::PhantomData;

use switchboard_dispatcher::{ExcludeDispatchKeyGuard, GuardFrame, GuardStack};
use switchboard_keys::{DispatchKey, AUTOGRAD_DISPATCH_KEYSET};

thread_local! {
    // Const-initialised and without destructor: reading it is a plain TLS load.
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
    static INFERENCE: Cell<bool> = const { Cell::new(false) };
    // The guards' saved values, apart from the flags so that reading a flag stays a plain
    // load (Note [Guards dropped out of order]).
    static GRAD_GUARDS: GuardStack<bool> = const { GuardStack::new() };
    static INFERENCE_GUARDS: GuardStack<bool> = const { GuardStack::new() };
}

/// Whether operators record the autograd graph on this thread (`torch.is_grad_enabled`).
#[inline(always)]
pub fn is_grad_enabled() -> bool {
    GRAD_ENABLED.with(Cell::get)
}

/// Turns grad mode on or off on this thread (`torch.set_grad_enabled`); prefer the guards.
pub fn set_grad_enabled(enabled: bool) {
    GRAD_ENABLED.with(|c| c.set(enabled));
}

/// Whether an [`InferenceMode`] guard is active on this thread.
pub fn is_inference_mode_enabled() -> bool {
    INFERENCE.with(Cell::get)
}

/// Sets grad mode until dropped, then restores the previous mode (also when guards drop out
/// of order: Note [Guards dropped out of order]).
#[must_use = "grad mode changes only while the guard lives"]
pub struct GradModeGuard {
    frame: GuardFrame,
    _not_send: PhantomData<*const ()>,
}

impl GradModeGuard {
    /// Sets grad mode to `enabled` for the guard's lifetime.
    pub fn new(enabled: bool) -> Self {
        let previous = is_grad_enabled();
        set_grad_enabled(enabled);
        GradModeGuard {
            frame: GRAD_GUARDS.with(|g| g.push(previous)),
            _not_send: PhantomData,
        }
    }
}

impl Drop for GradModeGuard {
    fn drop(&mut self) {
        if let Some(previous) = GRAD_GUARDS.with(|g| g.pop(self.frame)) {
            set_grad_enabled(previous);
        }
    }
}

/// `torch.no_grad()`'s guard.
pub type NoGradGuard = GradModeGuard;
/// `torch.enable_grad()`'s guard.
pub type EnableGradGuard = GradModeGuard;

/// Disables gradient recording until the guard drops (`with torch.no_grad():`).
pub fn no_grad() -> NoGradGuard {
    GradModeGuard::new(false)
}

/// Enables gradient recording until the guard drops (`with torch.enable_grad():`).
pub fn enable_grad() -> EnableGradGuard {
    GradModeGuard::new(true)
}

/// `c10::InferenceMode`: no grad mode, and the Autograd and ADInplaceOrView keys excluded, so
/// calls skip both layers entirely (no version counter bumps, no view tracking).
#[must_use = "inference mode is on only while the guard lives"]
pub struct InferenceMode {
    _grad: GradModeGuard,
    _keys: ExcludeDispatchKeyGuard,
    frame: GuardFrame,
}

impl InferenceMode {
    /// Enters inference mode until dropped.
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        let previous = INFERENCE.with(|c| c.replace(true));
        InferenceMode {
            _grad: GradModeGuard::new(false),
            _keys: ExcludeDispatchKeyGuard::new(
                AUTOGRAD_DISPATCH_KEYSET.add(DispatchKey::ADInplaceOrView),
            ),
            frame: INFERENCE_GUARDS.with(|g| g.push(previous)),
        }
    }
}

impl Drop for InferenceMode {
    fn drop(&mut self) {
        if let Some(previous) = INFERENCE_GUARDS.with(|g| g.pop(self.frame)) {
            INFERENCE.with(|c| c.set(previous));
        }
    }
}
