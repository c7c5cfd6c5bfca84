//! The boxed fallbacks of the PythonTLSSnapshot and Python keys, which enter the modes.

use std::cell::Cell;
use std::marker::PhantomData;

use switchboard_dispatcher::{
    set_tls_local_dispatch_key_set, tls_local_dispatch_key_set, DispatchKey, DispatchKeySet,
    ExcludeDispatchKeyGuard, LocalDispatchKeySet, OperatorHandle, Result, Stack,
};

use crate::stack;

// Note [Modes run popped]
// PyTorch enters a mode in two steps. The PythonTLSSnapshot key, at the top of the key order,
// records the thread's key sets once per call from outside (the first one: nested calls from
// kernels find it set) and redispatches below itself. The Python key, below autograd, autocast
// and ADInplaceOrView but above the backends, excludes every key above itself for the rest of
// the call (those layers have had their turn), pops the top mode and hands it the call; the
// mode is pushed back when it returns. So a mode may call operators, including the one it
// intercepts: with itself popped and the upper layers excluded, the call goes to the next
// mode or to the backend, never around in a loop. `RestoreDispatchSnapshot` lets a mode run
// code with the key sets recorded at the top instead (autograd and autocast on again), as
// `torch._C._RestorePythonTLSSnapshot` does.

thread_local! {
    /// The key sets on entry to the outermost call of the current dispatch (`tls_on_entry`).
    static ON_ENTRY: Cell<Option<LocalDispatchKeySet>> = const { Cell::new(None) };
}

/// Every key above Python (PyTorch's `after_Python_keyset`): excluded while a mode runs.
const ABOVE_PYTHON: DispatchKeySet = DispatchKeySet::from_raw(
    DispatchKeySet::FULL.raw()
        & !(DispatchKeySet::full_after(DispatchKey::Python).raw()
            | DispatchKeySet::from_key(DispatchKey::Python).raw()),
);

/// `pythonTLSSnapshotFallback`: records the key sets (unless a call further out did) and
/// redispatches below PythonTLSSnapshot.
pub(crate) fn tls_snapshot_fallback(
    op: &OperatorHandle,
    keys: DispatchKeySet,
    stack: &mut Stack,
) -> Result<()> {
    let set_here = ON_ENTRY.with(|e| {
        if e.get().is_some() {
            return false;
        }
        e.set(Some(tls_local_dispatch_key_set()));
        true
    });
    let result = op.redispatch_boxed(
        keys & DispatchKeySet::full_after(DispatchKey::PythonTLSSnapshot),
        stack,
    );
    if set_here {
        ON_ENTRY.with(|e| e.set(None));
    }
    result
}

/// Pushes a popped mode back when dropped (`StashTorchDispatchModeGuard`).
struct Unpop(Option<std::rc::Rc<dyn crate::DispatchMode>>);

impl Drop for Unpop {
    fn drop(&mut self) {
        if let Some(mode) = self.0.take() {
            stack::push(mode);
        }
    }
}

/// `pythonFallback`: hands the call to the top mode, popped while it runs; with no mode (the
/// key was included by hand), redispatches below Python without it.
pub(crate) fn python_fallback(
    op: &OperatorHandle,
    keys: DispatchKeySet,
    stack: &mut Stack,
) -> Result<()> {
    let _above = ExcludeDispatchKeyGuard::new(ABOVE_PYTHON);
    match stack::pop() {
        Some(mode) => {
            let _unpop = Unpop(Some(mode.clone()));
            mode.dispatch(op, keys, stack)
        }
        None => {
            // No mode and no Python tensors: drop the key from the call and from the thread
            // (pytorch/pytorch#136565).
            let mut local = tls_local_dispatch_key_set();
            let previous = local;
            local.included = local.included.remove(DispatchKey::Python);
            set_tls_local_dispatch_key_set(local);
            let result = op.redispatch_boxed(
                keys & DispatchKeySet::full_after(DispatchKey::Python),
                stack,
            );
            set_tls_local_dispatch_key_set(previous);
            result
        }
    }
}

/// Runs the rest of a scope with the key sets recorded on entry to the current dispatch
/// (`torch._C._RestorePythonTLSSnapshot`): inside a mode, operators called then go through
/// autograd and autocast again. `None` outside a dispatch.
#[must_use = "the snapshot is restored only while the guard lives"]
pub struct RestoreDispatchSnapshot {
    saved: LocalDispatchKeySet,
    snapshot: LocalDispatchKeySet,
    _not_send: PhantomData<*const ()>,
}

impl RestoreDispatchSnapshot {
    /// Installs the recorded key sets, or `None` when no dispatch is under way ("Accessing
    /// torch dispatch state outside of '__torch_dispatch__' is not allowed.").
    pub fn new() -> Option<RestoreDispatchSnapshot> {
        let snapshot = ON_ENTRY.with(Cell::get)?;
        let saved = tls_local_dispatch_key_set();
        set_tls_local_dispatch_key_set(snapshot);
        // Calls made now are outermost again: they record their own entry.
        ON_ENTRY.with(|e| e.set(None));
        Some(RestoreDispatchSnapshot {
            saved,
            snapshot,
            _not_send: PhantomData,
        })
    }
}

impl Drop for RestoreDispatchSnapshot {
    fn drop(&mut self) {
        set_tls_local_dispatch_key_set(self.saved);
        ON_ENTRY.with(|e| e.set(Some(self.snapshot)));
    }
}
