//! `RegistrationHandle`: the RAII handle every registration returns.

use std::sync::Weak;

use smallvec::SmallVec;
use switchboard_keys::DispatchKey;

use crate::dispatcher::{Dispatcher, DispatcherInner};
use crate::operator::OperatorEntry;

/// What a registration handle undoes when dropped.
#[derive(Debug)]
pub(crate) enum Undo {
    Library(Box<str>),
    Def(Weak<OperatorEntry>),
    Impl {
        op: Weak<OperatorEntry>,
        key: DispatchKey,
        id: u64,
    },
    Fallback {
        slot: usize,
        id: u64,
    },
}

/// Undoes a registration when dropped (`c10::RegistrationHandleRAII`): the kernel, definition or
/// fallback is removed and whatever it shadowed becomes active again. A handle that outlives its
/// dispatcher does nothing when dropped.
#[must_use = "dropping the handle undoes the registration at once"]
#[derive(Debug, Default)]
pub struct RegistrationHandle {
    pub(crate) dispatcher: Weak<DispatcherInner>,
    /// Inline for one registration: a `def` or `impl` allocates no list.
    pub(crate) undo: SmallVec<[Undo; 1]>,
}

impl RegistrationHandle {
    /// Merges another handle into this one: both registrations are undone together.
    pub fn merge(&mut self, mut other: RegistrationHandle) {
        if self.undo.is_empty() {
            self.dispatcher = other.dispatcher.clone();
        }
        self.undo.extend(other.undo.drain(..));
    }

    /// Keeps the registration for the life of the dispatcher.
    pub fn leak(mut self) {
        self.undo.clear();
    }
}

impl Drop for RegistrationHandle {
    fn drop(&mut self) {
        if self.undo.is_empty() {
            return;
        }
        if let Some(inner) = self.dispatcher.upgrade() {
            let d = Dispatcher { inner };
            for undo in self.undo.drain(..) {
                d.undo(undo);
            }
        }
    }
}
