//! Warnings (c10's `TORCH_WARN`): messages about something the user should know that is not
//! an error. They go to the thread's handler (set with [`set_warning_handler`], as c10's
//! `WarningUtils::set_warning_handler`), or to standard error.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use switchboard_keys::{set_warning_handler, warn};
//!
//! let seen = Arc::new(Mutex::new(Vec::new()));
//! let sink = seen.clone();
//! {
//!     let _guard = set_warning_handler(move |m: &str| sink.lock().unwrap().push(m.to_owned()));
//!     warn("careful");
//! }
//! assert_eq!(*seen.lock().unwrap(), ["careful"]);
//! ```

use std::cell::RefCell;
use std::marker::PhantomData;
use std::sync::Arc;

use crate::guard_stack::{GuardFrame, GuardStack};

/// A warning handler: receives each warning's message.
pub type WarningHandler = Arc<dyn Fn(&str) + Send + Sync>;

thread_local! {
    static HANDLER: RefCell<Option<WarningHandler>> = const { RefCell::new(None) };
    static HANDLER_GUARDS: GuardStack<Option<WarningHandler>> = const { GuardStack::new() };
}

/// Emits a warning: the thread's handler gets it, or standard error (`Warning: MESSAGE`).
pub fn warn(message: &str) {
    let handler = HANDLER.with(|h| h.borrow().clone());
    match handler {
        Some(h) => h(message),
        None => eprintln!("Warning: {message}"),
    }
}

/// Restores the previous warning handler when dropped (also when guards drop out of order:
/// Note [Guards dropped out of order]).
#[must_use = "the handler is replaced only while the guard lives"]
pub struct WarningHandlerGuard {
    frame: GuardFrame,
    _not_send: PhantomData<*const ()>,
}

impl Drop for WarningHandlerGuard {
    fn drop(&mut self) {
        if let Some(previous) = HANDLER_GUARDS.with(|g| g.pop(self.frame)) {
            HANDLER.with(|h| *h.borrow_mut() = previous);
        }
    }
}

/// Emits `message` with [`warn`] the first time `once` is passed in this process, and never
/// again (c10's `TORCH_WARN_ONCE`; one `Once` per call site).
pub fn warn_once(once: &std::sync::Once, message: &str) {
    once.call_once(|| warn(message));
}

/// Sends this thread's warnings to `handler` until the guard drops.
pub fn set_warning_handler(handler: impl Fn(&str) + Send + Sync + 'static) -> WarningHandlerGuard {
    let previous = HANDLER.with(|h| h.borrow_mut().replace(Arc::new(handler)));
    WarningHandlerGuard {
        frame: HANDLER_GUARDS.with(|g| g.push(previous)),
        _not_send: PhantomData,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn handlers_nest_and_restore() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (a, b) = (seen.clone(), seen.clone());
        let outer =
            set_warning_handler(move |m: &str| a.lock().unwrap().push(format!("outer {m}")));
        {
            let _inner =
                set_warning_handler(move |m: &str| b.lock().unwrap().push(format!("inner {m}")));
            warn("1");
        }
        warn("2");
        drop(outer);
        assert_eq!(*seen.lock().unwrap(), ["inner 1", "outer 2"]);
    }
}
