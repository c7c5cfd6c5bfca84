//! Lazy mode: on, calls on lazy tensors are captured; off, they run at once (Genie's
//! `set_lazy_mode`).

use std::sync::atomic::{AtomicBool, Ordering};

static LAZY_MODE: AtomicBool = AtomicBool::new(true);

/// Turns lazy mode on or off for the whole process and returns the previous setting. Off,
/// every call on lazy tensors runs at once on CPU (what is pending runs first) and returns
/// lazy tensors holding the results: the same values, nothing deferred.
///
/// ```
/// # use switchboard_lazy as lazy;
/// let was = lazy::set_lazy_mode(false);
/// assert!(!lazy::lazy_mode());
/// lazy::set_lazy_mode(was);
/// ```
pub fn set_lazy_mode(on: bool) -> bool {
    LAZY_MODE.swap(on, Ordering::SeqCst)
}

/// Whether lazy mode is on (it is by default).
#[inline]
pub fn lazy_mode() -> bool {
    LAZY_MODE.load(Ordering::Relaxed)
}

/// Sets lazy mode for its lifetime and restores the previous setting when dropped.
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
    previous: bool,
}

impl LazyModeGuard {
    /// Sets lazy mode to `on` until the guard is dropped.
    pub fn new(on: bool) -> LazyModeGuard {
        LazyModeGuard {
            previous: set_lazy_mode(on),
        }
    }
}

impl Drop for LazyModeGuard {
    fn drop(&mut self) {
        set_lazy_mode(self.previous);
    }
}
