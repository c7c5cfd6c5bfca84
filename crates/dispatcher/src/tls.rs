//! Thread-local included/excluded dispatch keys and their RAII guards (`LocalDispatchKeySet`).

use std::cell::Cell;
use std::marker::PhantomData;

use switchboard_keys::{GuardFrame, GuardStack};

use switchboard_keys::{
    DispatchKey, DispatchKeySet, AFTER_AD_INPLACE_OR_VIEW_KEYSET, AUTOGRAD_DISPATCH_KEYSET,
    DEFAULT_EXCLUDED_SET, DEFAULT_INCLUDED_SET, FULL_BACKEND_MASK,
};

// Note [Thread-local dispatch keys]
// Every call's key set is (union of its tensors' sets | included) - excluded, where included and
// excluded are this thread's sets. A layer turns itself off for the code below it by excluding
// its keys (autograd's kernels run the rest of the call with the Autograd keys excluded), and a
// mode turns itself on by including a key no tensor carries. Both sets live in `Cell`s of one
// thread-local with a constant initialiser and no destructor, so reading them on the hot path
// is a plain thread-local load: no lazy-init check, no lock (and see Note [One word per
// thread-local set]).

/// A thread's included and excluded key sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalDispatchKeySet {
    /// Keys added to every call's key set.
    pub included: DispatchKeySet,
    /// Keys removed from every call's key set.
    pub excluded: DispatchKeySet,
}

impl Default for LocalDispatchKeySet {
    fn default() -> Self {
        LocalDispatchKeySet {
            included: DEFAULT_INCLUDED_SET,
            excluded: DEFAULT_EXCLUDED_SET,
        }
    }
}

// Note [One word per thread-local set]
// The hot path needs `(args | included) & keep`, where `keep` is the complement of `excluded`
// with the backend bits set (excluding a key removes only its functionality, as PyTorch's `-`
// does). So the thread keeps `keep` itself, not `excluded`: an exclude guard is then one
// read-modify-write when entered (`keep &= !keys`) and one when left (`keep |= added`), which
// matters because a guard is entered and left on every autograd hop. The excluded set is
// rebuilt from `keep` when asked for; the backend bits of an excluded set, which never affect a
// call, are kept apart in `excluded_backends` so that the set reads back exactly as set.
struct Local {
    included: Cell<u64>,
    keep: Cell<u64>,
    excluded_backends: Cell<u64>,
}

const fn keep_of(excluded: DispatchKeySet) -> u64 {
    !excluded.raw() | FULL_BACKEND_MASK
}

thread_local! {
    static LOCAL: Local = const {
        Local {
            included: Cell::new(DEFAULT_INCLUDED_SET.raw()),
            keep: Cell::new(keep_of(DEFAULT_EXCLUDED_SET)),
            excluded_backends: Cell::new(DEFAULT_EXCLUDED_SET.raw() & FULL_BACKEND_MASK),
        }
    };
}

/// This thread's included and excluded sets.
#[inline(always)]
pub fn tls_local_dispatch_key_set() -> LocalDispatchKeySet {
    LOCAL.with(|l| LocalDispatchKeySet {
        included: DispatchKeySet::from_raw(l.included.get()),
        excluded: DispatchKeySet::from_raw(
            (!l.keep.get() & !FULL_BACKEND_MASK) | l.excluded_backends.get(),
        ),
    })
}

/// Applies this thread's sets to the union of a call's tensor key sets.
#[inline(always)]
pub(crate) fn apply_tls(args: DispatchKeySet) -> DispatchKeySet {
    LOCAL.with(|l| DispatchKeySet::from_raw((args.raw() | l.included.get()) & l.keep.get()))
}

/// Replaces this thread's sets; used to carry the sets of one thread into work done on another
/// (see [`ThreadLocalStateGuard`]).
pub fn set_tls_local_dispatch_key_set(state: LocalDispatchKeySet) {
    LOCAL.with(|l| {
        l.included.set(state.included.raw());
        l.keep.set(keep_of(state.excluded));
        l.excluded_backends
            .set(state.excluded.raw() & FULL_BACKEND_MASK);
    });
}

/// True when `k` is in this thread's included set.
pub fn tls_is_dispatch_key_included(k: DispatchKey) -> bool {
    tls_local_dispatch_key_set().included.has(k)
}

/// True when `k` is in this thread's excluded set.
pub fn tls_is_dispatch_key_excluded(k: DispatchKey) -> bool {
    tls_local_dispatch_key_set().excluded.has(k)
}

/// Adds `k` to this thread's included set, or removes it (`c10::impl::tls_set_dispatch_key_included`).
/// For state that outlives a scope, such as a mode stack that includes its keys while it is not
/// empty; a scope uses [`IncludeDispatchKeyGuard`].
pub fn tls_set_dispatch_key_included(k: DispatchKey, included: bool) {
    let mut state = tls_local_dispatch_key_set();
    state.included = if included {
        state.included.add(k)
    } else {
        state.included.remove(k)
    };
    set_tls_local_dispatch_key_set(state);
}

/// Adds `k` to this thread's excluded set, or removes it (`c10::impl::tls_set_dispatch_key_excluded`):
/// how autocast is switched on and off (its keys are excluded by default). A scope uses
/// [`ExcludeDispatchKeyGuard`].
pub fn tls_set_dispatch_key_excluded(k: DispatchKey, excluded: bool) {
    let mut state = tls_local_dispatch_key_set();
    state.excluded = if excluded {
        state.excluded.add(k)
    } else {
        state.excluded.remove(k)
    };
    set_tls_local_dispatch_key_set(state);
}

/// Adds keys to this thread's included set until dropped (`IncludeDispatchKeyGuard`). Only the
/// keys that were not already included are removed again, so guards nest, and guards dropped
/// in any order leave the set as it was before the first.
#[must_use = "the keys are included only while the guard lives"]
pub struct IncludeDispatchKeyGuard {
    added: DispatchKeySet,
    _not_send: PhantomData<*const ()>,
}

impl IncludeDispatchKeyGuard {
    /// Includes `keys` for the guard's lifetime.
    #[inline]
    pub fn new(keys: impl Into<DispatchKeySet>) -> Self {
        let keys = keys.into().raw();
        let added = LOCAL.with(|l| {
            let included = l.included.get();
            l.included.set(included | keys);
            keys & !included
        });
        IncludeDispatchKeyGuard {
            added: DispatchKeySet::from_raw(added),
            _not_send: PhantomData,
        }
    }
}

impl Drop for IncludeDispatchKeyGuard {
    #[inline]
    fn drop(&mut self) {
        let added = self.added.raw();
        LOCAL.with(|l| l.included.set(l.included.get() & !added));
    }
}

/// Adds keys to this thread's excluded set until dropped (`ExcludeDispatchKeyGuard`). As with
/// [`IncludeDispatchKeyGuard`], only the keys it added are removed again: guards dropped in any
/// order leave the set as it was before the first.
#[must_use = "the keys are excluded only while the guard lives"]
pub struct ExcludeDispatchKeyGuard {
    added: DispatchKeySet,
    _not_send: PhantomData<*const ()>,
}

impl ExcludeDispatchKeyGuard {
    /// Excludes `keys` for the guard's lifetime.
    #[inline]
    pub fn new(keys: impl Into<DispatchKeySet>) -> Self {
        let keys = keys.into().raw();
        // See Note [One word per thread-local set]: `added` holds the functionality bits this
        // guard cleared from `keep` and the backend bits it added to `excluded_backends` (the
        // two never overlap). For the usual constant `keys` without backend bits the second
        // half folds away.
        let added = LOCAL.with(|l| {
            let keep = l.keep.get();
            let mut added = keys & keep & !FULL_BACKEND_MASK;
            l.keep.set(keep & !added);
            let backends = keys & FULL_BACKEND_MASK;
            if backends != 0 {
                let old = l.excluded_backends.get();
                added |= backends & !old;
                l.excluded_backends.set(old | backends);
            }
            added
        });
        ExcludeDispatchKeyGuard {
            added: DispatchKeySet::from_raw(added),
            _not_send: PhantomData,
        }
    }
}

impl Drop for ExcludeDispatchKeyGuard {
    #[inline]
    fn drop(&mut self) {
        let added = self.added.raw();
        LOCAL.with(|l| {
            // Backend bits of `keep` are always set, so or-ing them in changes nothing.
            l.keep.set(l.keep.get() | added);
            let backends = added & FULL_BACKEND_MASK;
            if backends != 0 {
                l.excluded_backends
                    .set(l.excluded_backends.get() & !backends);
            }
        });
    }
}

/// Runs the rest of a scope below autograd: excludes the Autograd keys
/// (`at::AutoDispatchBelowAutograd`).
#[must_use = "autograd is excluded only while the guard lives"]
pub struct AutoDispatchBelowAutograd {
    _guard: ExcludeDispatchKeyGuard,
}

impl AutoDispatchBelowAutograd {
    /// Excludes the autograd keys until dropped.
    #[inline]
    pub fn new() -> Self {
        AutoDispatchBelowAutograd {
            _guard: ExcludeDispatchKeyGuard::new(AUTOGRAD_DISPATCH_KEYSET),
        }
    }
}

impl Default for AutoDispatchBelowAutograd {
    fn default() -> Self {
        Self::new()
    }
}

/// Runs the rest of a scope below ADInplaceOrView: excludes the Autograd keys and
/// ADInplaceOrView (`at::AutoDispatchBelowADInplaceOrView`).
#[must_use = "the keys are excluded only while the guard lives"]
pub struct AutoDispatchBelowADInplaceOrView {
    _guard: ExcludeDispatchKeyGuard,
}

impl AutoDispatchBelowADInplaceOrView {
    /// Excludes the autograd keys and ADInplaceOrView until dropped.
    #[inline]
    pub fn new() -> Self {
        let keys = AUTOGRAD_DISPATCH_KEYSET.add(DispatchKey::ADInplaceOrView);
        AutoDispatchBelowADInplaceOrView {
            _guard: ExcludeDispatchKeyGuard::new(keys),
        }
    }
}

impl Default for AutoDispatchBelowADInplaceOrView {
    fn default() -> Self {
        Self::new()
    }
}

/// Installs a captured [`LocalDispatchKeySet`] on the current thread and restores the previous
/// one when dropped: capture with [`tls_local_dispatch_key_set`] on the spawning thread, then
/// create this guard on the worker (`c10::impl::ForceDispatchKeyGuard` /
/// `ThreadLocalStateGuard`).
///
/// Guards dropped out of order still leave the sets as they were before the first (Note
/// [Guards dropped out of order]).
#[must_use = "the captured state is installed only while the guard lives"]
pub struct ThreadLocalStateGuard {
    frame: GuardFrame,
    _not_send: PhantomData<*const ()>,
}

thread_local! {
    static STATE_GUARDS: GuardStack<LocalDispatchKeySet> = const { GuardStack::new() };
}

impl ThreadLocalStateGuard {
    /// Installs `state` until dropped.
    #[inline]
    pub fn new(state: LocalDispatchKeySet) -> Self {
        let previous = tls_local_dispatch_key_set();
        set_tls_local_dispatch_key_set(state);
        ThreadLocalStateGuard {
            frame: STATE_GUARDS.with(|g| g.push(previous)),
            _not_send: PhantomData,
        }
    }
}

impl Drop for ThreadLocalStateGuard {
    #[inline]
    fn drop(&mut self) {
        if let Some(previous) = STATE_GUARDS.with(|g| g.pop(self.frame)) {
            set_tls_local_dispatch_key_set(previous);
        }
    }
}

/// The keys below ADInplaceOrView, for kernels that redispatch past it.
pub const BELOW_AD_INPLACE_OR_VIEW: DispatchKeySet = AFTER_AD_INPLACE_OR_VIEW_KEYSET;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_nest_and_restore() {
        let start = tls_local_dispatch_key_set();
        assert_eq!(start, LocalDispatchKeySet::default());
        {
            let _a = AutoDispatchBelowAutograd::new();
            assert!(tls_is_dispatch_key_excluded(DispatchKey::AutogradOther));
            {
                let _b = AutoDispatchBelowADInplaceOrView::new();
                assert!(tls_is_dispatch_key_excluded(DispatchKey::ADInplaceOrView));
            }
            // The inner guard removes only what it added.
            assert!(tls_is_dispatch_key_excluded(DispatchKey::AutogradOther));
            assert!(!tls_is_dispatch_key_excluded(DispatchKey::ADInplaceOrView));
        }
        assert_eq!(tls_local_dispatch_key_set(), start);
        {
            let _i = IncludeDispatchKeyGuard::new(DispatchKey::Python);
            assert!(tls_is_dispatch_key_included(DispatchKey::Python));
        }
        assert!(!tls_is_dispatch_key_included(DispatchKey::Python));
    }

    #[test]
    fn excluding_a_runtime_key_removes_only_its_functionality() {
        use switchboard_keys::DispatchKeySet as Ks;
        let cpu = Ks::from_keys(&[DispatchKey::CPU, DispatchKey::AutogradCPU]);
        let _g = ExcludeDispatchKeyGuard::new(DispatchKey::AutogradCPU);
        // The CPU backend bit stays: the call still reaches the CPU kernel.
        let expected =
            (cpu | tls_local_dispatch_key_set().included) - Ks::from_key(DispatchKey::AutogradCPU);
        assert_eq!(apply_tls(cpu), expected);
        assert!(apply_tls(cpu).has(DispatchKey::CPU));
        assert!(!apply_tls(cpu).has(DispatchKey::AutogradCPU));
    }

    #[test]
    fn excluded_sets_read_back_as_set_with_their_backend_bits() {
        use switchboard_keys::DispatchKeySet as Ks;
        let start = tls_local_dispatch_key_set();
        let cpu = Ks::from_keys(&[DispatchKey::CPU]);
        {
            let _outer = ExcludeDispatchKeyGuard::new(DispatchKey::AutogradCPU);
            let after_outer = tls_local_dispatch_key_set();
            assert_eq!(
                after_outer.excluded,
                start.excluded | Ks::from_key(DispatchKey::AutogradCPU)
            );
            {
                // Already excluded (functionality and backend): this guard adds nothing.
                let _inner = ExcludeDispatchKeyGuard::new(DispatchKey::AutogradCPU);
                assert_eq!(tls_local_dispatch_key_set(), after_outer);
            }
            assert_eq!(tls_local_dispatch_key_set(), after_outer);
            // The backend bit never removes a backend from a call.
            assert!(apply_tls(cpu).has(DispatchKey::CPU));
        }
        assert_eq!(tls_local_dispatch_key_set(), start);
        let captured = LocalDispatchKeySet {
            included: Ks::from_key(DispatchKey::Python),
            excluded: Ks::from_keys(&[DispatchKey::SparseCPU, DispatchKey::Tracer]),
        };
        {
            let _s = ThreadLocalStateGuard::new(captured);
            assert_eq!(tls_local_dispatch_key_set(), captured);
        }
        assert_eq!(tls_local_dispatch_key_set(), start);
    }

    #[test]
    fn set_included_and_excluded_flip_one_key() {
        let start = tls_local_dispatch_key_set();
        tls_set_dispatch_key_excluded(DispatchKey::AutocastCPU, false);
        assert!(!tls_is_dispatch_key_excluded(DispatchKey::AutocastCPU));
        assert!(tls_is_dispatch_key_excluded(DispatchKey::AutocastCUDA));
        tls_set_dispatch_key_included(DispatchKey::Python, true);
        assert!(tls_is_dispatch_key_included(DispatchKey::Python));
        tls_set_dispatch_key_included(DispatchKey::Python, false);
        tls_set_dispatch_key_excluded(DispatchKey::AutocastCPU, true);
        assert_eq!(tls_local_dispatch_key_set(), start);
    }

    #[test]
    fn state_moves_across_threads() {
        let _g = ExcludeDispatchKeyGuard::new(DispatchKey::Tracer);
        let captured = tls_local_dispatch_key_set();
        std::thread::spawn(move || {
            assert!(!tls_is_dispatch_key_excluded(DispatchKey::Tracer));
            let _s = ThreadLocalStateGuard::new(captured);
            assert!(tls_is_dispatch_key_excluded(DispatchKey::Tracer));
        })
        .join()
        .unwrap();
    }
}
