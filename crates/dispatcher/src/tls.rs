//! Thread-local included/excluded dispatch keys and their RAII guards (`LocalDispatchKeySet`).

use std::cell::Cell;
use std::marker::PhantomData;

use switchboard_keys::{
    DispatchKey, DispatchKeySet, AFTER_AD_INPLACE_OR_VIEW_KEYSET, AUTOGRAD_DISPATCH_KEYSET,
    DEFAULT_EXCLUDED_SET, DEFAULT_INCLUDED_SET, FULL_BACKEND_MASK,
};

// Note [Thread-local dispatch keys]
// Every call's key set is (union of its tensors' sets | included) - excluded, where included and
// excluded are this thread's sets. A layer turns itself off for the code below it by excluding
// its keys (autograd's kernels run the rest of the call with the Autograd keys excluded), and a
// mode turns itself on by including a key no tensor carries. Both sets live in one `Cell` per
// thread with a constant initialiser and no destructor, so reading them on the hot path is a
// plain thread-local load: no lazy-init check, no lock.

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

/// A thread's sets as the hot path reads them: `keep` is the complement of `excluded` with the
/// backend bits set (excluding a key removes only its functionality, as PyTorch's `-` does), so
/// a call's key set is `(args | included) & keep`.
#[derive(Clone, Copy)]
struct State {
    sets: LocalDispatchKeySet,
    keep: u64,
}

const fn state_of(sets: LocalDispatchKeySet) -> State {
    State {
        sets,
        keep: !sets.excluded.raw() | FULL_BACKEND_MASK,
    }
}

thread_local! {
    static LOCAL: Cell<State> = const {
        Cell::new(state_of(LocalDispatchKeySet { included: DEFAULT_INCLUDED_SET, excluded: DEFAULT_EXCLUDED_SET }))
    };
}

/// This thread's included and excluded sets.
#[inline(always)]
pub fn tls_local_dispatch_key_set() -> LocalDispatchKeySet {
    LOCAL.with(|c| c.get().sets)
}

/// Applies this thread's sets to the union of a call's tensor key sets.
#[inline(always)]
pub(crate) fn apply_tls(args: DispatchKeySet) -> DispatchKeySet {
    let state = LOCAL.with(Cell::get);
    DispatchKeySet::from_raw((args.raw() | state.sets.included.raw()) & state.keep)
}

/// Replaces this thread's sets; used to carry the sets of one thread into work done on another
/// (see [`ThreadLocalStateGuard`]).
pub fn set_tls_local_dispatch_key_set(state: LocalDispatchKeySet) {
    LOCAL.with(|c| c.set(state_of(state)));
}

#[inline(always)]
fn update(f: impl FnOnce(&mut LocalDispatchKeySet)) {
    LOCAL.with(|c| {
        let mut s = c.get().sets;
        f(&mut s);
        c.set(state_of(s));
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

/// Adds keys to this thread's included set until dropped (`IncludeDispatchKeyGuard`). Only the
/// keys that were not already included are removed again, so guards nest.
#[must_use = "the keys are included only while the guard lives"]
pub struct IncludeDispatchKeyGuard {
    added: DispatchKeySet,
    _not_send: PhantomData<*const ()>,
}

impl IncludeDispatchKeyGuard {
    /// Includes `keys` for the guard's lifetime.
    #[inline]
    pub fn new(keys: impl Into<DispatchKeySet>) -> Self {
        let keys = keys.into();
        let mut added = DispatchKeySet::EMPTY;
        update(|s| {
            added = DispatchKeySet::from_raw(keys.raw() & !s.included.raw());
            s.included = s.included | keys;
        });
        IncludeDispatchKeyGuard {
            added,
            _not_send: PhantomData,
        }
    }
}

impl Drop for IncludeDispatchKeyGuard {
    #[inline]
    fn drop(&mut self) {
        let added = self.added;
        update(|s| s.included = DispatchKeySet::from_raw(s.included.raw() & !added.raw()));
    }
}

/// Adds keys to this thread's excluded set until dropped (`ExcludeDispatchKeyGuard`).
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
        // Updates `excluded` and `keep` in place rather than recomputing `keep`: a guard is
        // entered and left on every autograd hop. With `keep == !excluded | backends`, adding
        // keys to `excluded` clears their functionality bits from `keep`, and removing them
        // (in `drop`) sets them again.
        let added = LOCAL.with(|c| {
            let mut s = c.get();
            let added = keys & !s.sets.excluded.raw();
            s.sets.excluded = DispatchKeySet::from_raw(s.sets.excluded.raw() | keys);
            s.keep &= !keys | FULL_BACKEND_MASK;
            c.set(s);
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
        LOCAL.with(|c| {
            let mut s = c.get();
            s.sets.excluded = DispatchKeySet::from_raw(s.sets.excluded.raw() & !added);
            // Backend bits of `keep` are always set, so or-ing them in changes nothing.
            s.keep |= added;
            c.set(s);
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
#[must_use = "the captured state is installed only while the guard lives"]
pub struct ThreadLocalStateGuard {
    previous: LocalDispatchKeySet,
    _not_send: PhantomData<*const ()>,
}

impl ThreadLocalStateGuard {
    /// Installs `state` until dropped.
    #[inline]
    pub fn new(state: LocalDispatchKeySet) -> Self {
        let previous = tls_local_dispatch_key_set();
        set_tls_local_dispatch_key_set(state);
        ThreadLocalStateGuard {
            previous,
            _not_send: PhantomData,
        }
    }
}

impl Drop for ThreadLocalStateGuard {
    #[inline]
    fn drop(&mut self) {
        set_tls_local_dispatch_key_set(self.previous);
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
