//! Lazy mode: on, calls on lazy tensors are captured; off, they run at once (Genie's
//! `set_lazy_mode`). The mode is the calling thread's, as PyTorch's dispatch modes and grad
//! mode are: one thread turning it off for a while does not change what another captures.

use std::cell::Cell;
use std::marker::PhantomData;

use switchboard_dispatcher::{GuardFrame, GuardStack};

thread_local! {
    static LAZY_MODE: Cell<bool> = const { Cell::new(true) };
    /// The saved modes of this thread's live guards (Note [Guards dropped out of order]).
    static GUARDS: GuardStack<bool> = const { GuardStack::new() };
}

/// Turns lazy mode on or off on this thread and returns the previous setting; logs Genie's
/// info line, `Dispatcher lazy mode enabled` (`disabled`), to the backend's log. Off, every
/// call on tensors of a lazy device runs at once (what is pending runs first), on CPU or
/// through the implementation [`register_op`](crate::LazyBackend::register_op) gave its
/// operator, and returns ordinary tensors of that device holding the results (materialised
/// data, no pending value): the same values, nothing deferred. Other threads keep their own
/// mode (on until they change it). A [`LazyModeGuard`] sets it for a scope without logging.
///
/// ```
/// # use switchboard_lazy as lazy;
/// let (was, lines) = lazy::capture_intercept_log(|| lazy::set_lazy_mode(false));
/// assert_eq!(lines, ["[switchboard] Dispatcher lazy mode disabled"]);
/// assert!(!lazy::lazy_mode());
/// lazy::set_lazy_mode(was);
/// ```
pub fn set_lazy_mode(on: bool) -> bool {
    let previous = replace_lazy_mode(on);
    crate::log::info(if on {
        "Dispatcher lazy mode enabled"
    } else {
        "Dispatcher lazy mode disabled"
    });
    previous
}

/// Sets this thread's lazy mode, without a log line.
fn replace_lazy_mode(on: bool) -> bool {
    LAZY_MODE.with(|m| m.replace(on))
}

/// Whether lazy mode is on on this thread (it is by default).
#[inline]
pub fn lazy_mode() -> bool {
    LAZY_MODE.with(Cell::get)
}

/// Sets this thread's lazy mode for its lifetime and restores the previous setting when
/// dropped; guards dropped out of order still leave the mode as it was before the first.
///
/// ```
/// # use switchboard_lazy as lazy;
/// {
///     let _eager = lazy::LazyModeGuard::new(false);
///     assert!(!lazy::lazy_mode());
/// }
/// assert!(lazy::lazy_mode());
/// ```
#[must_use = "lazy mode is restored when the guard is dropped"]
pub struct LazyModeGuard {
    frame: GuardFrame,
    // The mode is the thread's: the guard must be dropped where it was made.
    _not_send: PhantomData<*const ()>,
}

impl LazyModeGuard {
    /// Sets lazy mode to `on` until the guard is dropped.
    pub fn new(on: bool) -> LazyModeGuard {
        let previous = replace_lazy_mode(on);
        LazyModeGuard {
            frame: GUARDS.with(|g| g.push(previous)),
            _not_send: PhantomData,
        }
    }
}

impl Drop for LazyModeGuard {
    fn drop(&mut self) {
        if let Some(previous) = GUARDS.with(|g| g.pop(self.frame)) {
            replace_lazy_mode(previous);
        }
    }
}
