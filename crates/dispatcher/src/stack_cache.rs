//! The per-thread stack that typed calls box their arguments onto when they reach a boxed
//! kernel (see Note [Reused boxing stacks]).

use std::cell::{Cell, UnsafeCell};
use std::mem::ManuallyDrop;
use std::ptr::NonNull;

use crate::ivalue::Stack;

// Note [Reused boxing stacks]
// A typed call that reaches a boxed kernel (a fallback, usually) boxes its arguments onto a
// stack. Allocating that stack on every call would cost more than the rest of the call, so each
// thread keeps one, used in place (no move of the vector in and out of the thread-local) while
// a `taken` flag is set. The boxed kernel may itself make a typed call that needs boxing (a
// fallback calling another operator, or a drop running one): that nested call finds the flag
// set and boxes onto a stack of its own, so the two never alias. When the outer call ends the
// stack is cleared (dropping whatever an error or a misbehaving kernel left there) before the
// flag is released, so that code run by those drops is nested too; the allocation is kept.
//
// Two ways in. The common one, `CachedStack::take(n)`, is inline and makes no call: the flag
// is clear and the stack already has room for the `n` arguments, so the caller writes them
// without a capacity test, and nothing it holds (the arguments, the kernel) has to survive a
// call in a callee-saved register before the kernel's. Everything else (first use, growth, a
// nested call, the thread's teardown) goes through `BoxingStack::take`, out of line.
//
// That split is why the cache has no destructor of its own: a thread-local with one is
// registered lazily, a test and a possible call on every access. Instead the stack's buffer is
// freed by a second thread-local, `FREE`, registered by the slow path before the buffer is
// first allocated (the fast path needs a non-zero capacity, so it never allocates a buffer
// nobody frees; a kernel pushing past the capacity reallocates a buffer that `FREE` already
// owns). `FREE`'s destructor, at thread exit, frees the buffer and marks the cache `gone`;
// calls made after that (from other destructors) box onto stacks of their own. No call is in
// progress on the thread while its thread-local destructors run one after another, so the
// buffer is never freed under a running call.
//
// The stack is held by a guard, not lent to a closure: a closure called from both the common
// and the nested path is not inlined, and its call, frame and captured environment cost more
// than the rest of the boxing. The guard reaches the cache through a pointer taken inside
// `LocalKey::with`: the cache has no destructor, so it lives as long as the thread.

struct Cache {
    /// Set while a call on this thread holds `stack`.
    taken: Cell<bool>,
    /// Set once `FREE` has freed the stack's buffer (thread exit).
    gone: Cell<bool>,
    /// Set once `FREE` is registered.
    registered: Cell<bool>,
    /// Empty whenever `taken` is clear; its buffer is freed by `FREE`.
    stack: UnsafeCell<ManuallyDrop<Stack>>,
}

thread_local! {
    static CACHE: Cache = const {
        Cache {
            taken: Cell::new(false),
            gone: Cell::new(false),
            registered: Cell::new(false),
            stack: UnsafeCell::new(ManuallyDrop::new(Vec::new())),
        }
    };
    static FREE: FreeCache = const { FreeCache };
}

/// Frees the cache's buffer at thread exit (see Note [Reused boxing stacks]).
struct FreeCache;

impl Drop for FreeCache {
    fn drop(&mut self) {
        CACHE.with(|c| {
            // Thread-local destructors do not run inside a call, so no call holds the stack.
            debug_assert!(!c.taken.get());
            c.gone.set(true);
            // SAFETY: the stack is not taken (above), so nothing borrows it; the buffer is
            // dropped once, and the stack left empty without a buffer.
            unsafe {
                let stack = &mut *c.stack.get();
                ManuallyDrop::drop(stack);
                *stack = ManuallyDrop::new(Vec::new());
            }
        });
    }
}

#[inline(always)]
fn cache() -> NonNull<Cache> {
    // No destructor: the access is an address computation, and it never fails.
    CACHE.with(|c| NonNull::from(c))
}

/// This thread's cached stack, held by the common path (see Note [Reused boxing stacks]):
/// empty, with room for the arguments. Clears and releases the stack when dropped, also when the
/// call unwinds.
pub(crate) struct CachedStack {
    cache: NonNull<Cache>,
}

impl CachedStack {
    /// Takes this thread's stack if it is free and has room for `n` values (and some buffer:
    /// the common path never allocates one); `None` sends the call to [`BoxingStack::take`].
    #[inline(always)]
    pub(crate) fn take(n: usize) -> Option<Self> {
        let cache = cache();
        // SAFETY: `cache` points to this thread's cache, which lives as long as the thread.
        let c = unsafe { cache.as_ref() };
        // SAFETY: the stack is read only while not taken: no guard holds it.
        if c.taken.get() || unsafe { (*c.stack.get()).capacity() } < n.max(1) {
            return None;
        }
        c.taken.set(true);
        Some(CachedStack { cache })
    }

    /// The stack: empty (when taken), with room for the `n` values asked for.
    #[inline(always)]
    pub(crate) fn stack(&mut self) -> &mut Stack {
        // SAFETY: this guard holds the stack exclusively while `taken` is set (nested calls
        // use their own), the cache outlives the guard, and the borrow is tied to `&mut self`.
        unsafe { &mut *self.cache.as_ref().stack.get() }
    }
}

impl Drop for CachedStack {
    #[inline(always)]
    fn drop(&mut self) {
        // A call leaves the stack empty (its returns were popped): one test; the drops of what
        // an error or a misbehaving kernel left are out of line.
        if !self.stack().is_empty() {
            clear(self.stack());
        }
        // SAFETY: the cache lives as long as the thread; the flag is released only after the
        // stack has been cleared, so that calls made by those drops do not take it.
        unsafe { self.cache.as_ref() }.taken.set(false);
    }
}

/// An empty stack for boxing one call's arguments on the slow path: this thread's cached stack,
/// or one of its own when the cached one is in use or gone (see Note [Reused boxing stacks]).
pub(crate) enum BoxingStack {
    /// The cached stack.
    Cached(CachedStack),
    /// A stack of this call's own.
    Own(Stack),
}

impl BoxingStack {
    /// Takes this thread's stack, or makes one when it is in use or gone.
    pub(crate) fn take() -> Self {
        let cache = cache();
        // SAFETY: `cache` points to this thread's cache, which lives as long as the thread.
        let c = unsafe { cache.as_ref() };
        if c.taken.get() || c.gone.get() {
            return BoxingStack::Own(Stack::new());
        }
        if !c.registered.get() {
            // Before the buffer is first allocated: `FREE` will free it.
            if FREE.try_with(|_| ()).is_err() {
                return BoxingStack::Own(Stack::new());
            }
            c.registered.set(true);
        }
        c.taken.set(true);
        BoxingStack::Cached(CachedStack { cache })
    }

    /// The stack.
    pub(crate) fn stack(&mut self) -> &mut Stack {
        match self {
            BoxingStack::Cached(c) => c.stack(),
            BoxingStack::Own(s) => s,
        }
    }
}

#[cold]
#[inline(never)]
fn clear(stack: &mut Stack) {
    stack.clear();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::IValue;

    #[test]
    fn nested_use_gets_a_fresh_stack() {
        let mut outer = BoxingStack::take();
        outer.stack().push(IValue::Int(1));
        {
            let mut inner = BoxingStack::take();
            assert!(inner.stack().is_empty());
            inner.stack().push(IValue::Int(2));
            assert_eq!(inner.stack().len(), 1);
        }
        assert_eq!(outer.stack().len(), 1);
        let ptr: *const Stack = outer.stack();
        drop(outer);
        // The cached stack was cleared and released, and is the one handed out again.
        let mut again = BoxingStack::take();
        assert!(again.stack().is_empty());
        assert!(std::ptr::eq(ptr, again.stack()));
    }

    /// The common path takes the stack only once the slow path has given it a buffer, never
    /// while it is taken, and only with room for the arguments; the buffer is freed when the
    /// thread exits (Miri checks that nothing leaks).
    #[test]
    fn the_common_path_needs_a_free_stack_with_room() {
        std::thread::spawn(|| {
            assert!(CachedStack::take(0).is_none(), "no buffer yet");
            {
                let mut slow = BoxingStack::take();
                assert!(matches!(slow, BoxingStack::Cached(_)));
                slow.stack().extend([IValue::Int(1), IValue::Int(2)]);
                assert!(CachedStack::take(1).is_none(), "taken");
                let mut nested = BoxingStack::take();
                assert!(matches!(nested, BoxingStack::Own(_)));
                nested.stack().push(IValue::Int(3));
            }
            let mut fast = CachedStack::take(2).expect("free, with room for two");
            assert!(fast.stack().is_empty());
            assert!(fast.stack().capacity() >= 2);
            // A kernel pushing past the capacity reallocates the cached buffer.
            fast.stack().extend((0..100).map(IValue::Int));
            drop(fast);
            let mut again = CachedStack::take(50).expect("kept its grown buffer");
            assert!(again.stack().is_empty());
            assert!(CachedStack::take(1).is_none(), "taken");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn released_after_a_panic() {
        let r = std::panic::catch_unwind(|| {
            let mut s = BoxingStack::take();
            s.stack().push(IValue::Int(1));
            panic!("kernel panicked");
        });
        assert!(r.is_err());
        assert!(CACHE.with(|c| !c.taken.get()));
        assert!(BoxingStack::take().stack().is_empty());
    }
}
