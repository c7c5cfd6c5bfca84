//! The per-thread stack that typed calls box their arguments onto when they reach a boxed
//! kernel (see Note [Reused boxing stacks]).

use std::cell::{Cell, UnsafeCell};
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
// During the thread's teardown, once the cache is gone, calls box onto stacks of their own.
//
// The stack is held by a guard (`BoxingStack`), not lent to a closure: a closure called from
// both the common and the nested path is not inlined, and its call, frame and captured
// environment cost more than the rest of the boxing. The guard reaches the cache through a
// pointer taken inside `LocalKey::try_with`: the thread-local lives until the thread's
// thread-local destructors run, which cannot happen while this call is running on the thread
// (destructors run one after another at thread exit, and a call made from one of them finds the
// cache either alive for the whole call, or already gone and then does not use it).

struct Cache {
    /// Set while a call on this thread holds `stack`.
    taken: Cell<bool>,
    stack: UnsafeCell<Stack>,
}

thread_local! {
    static CACHE: Cache = const {
        Cache {
            taken: Cell::new(false),
            stack: UnsafeCell::new(Vec::new()),
        }
    };
}

/// An empty stack for boxing one call's arguments: this thread's cached stack, or one of its own
/// when the cached one is in use (see Note [Reused boxing stacks]). Clears and releases the
/// cached stack when dropped, also when the call unwinds.
pub(crate) struct BoxingStack {
    /// The stack: the cache's, or (when `cache` is `None`) a `Box` this guard owns.
    stack: NonNull<Stack>,
    /// The cache whose stack this guard holds (its `taken` flag is set).
    cache: Option<NonNull<Cache>>,
}

impl BoxingStack {
    /// Takes this thread's stack, or allocates one when it is in use or gone.
    #[inline(always)]
    pub(crate) fn take() -> Self {
        let cache = CACHE
            .try_with(|c| (!c.taken.replace(true)).then(|| NonNull::from(c)))
            .ok()
            .flatten();
        match cache {
            Some(cache) => BoxingStack {
                // SAFETY: `cache` points to this thread's live cache (see Note [Reused boxing
                // stacks] for why it outlives the call); `UnsafeCell::get` never returns null.
                stack: unsafe { NonNull::new_unchecked(cache.as_ref().stack.get()) },
                cache: Some(cache),
            },
            None => Self::own(),
        }
    }

    /// A stack of this call's own (nested, or during the thread's teardown).
    #[cold]
    #[inline(never)]
    fn own() -> Self {
        BoxingStack {
            stack: NonNull::from(Box::leak(Box::new(Stack::new()))),
            cache: None,
        }
    }

    /// The stack.
    #[inline(always)]
    pub(crate) fn stack(&mut self) -> &mut Stack {
        // SAFETY: the stack is the cache's, which this guard holds exclusively while `taken` is
        // set (nested calls use their own), or the guard's own box; either outlives the guard,
        // and the returned borrow is tied to `&mut self`.
        unsafe { self.stack.as_mut() }
    }
}

impl Drop for BoxingStack {
    #[inline(always)]
    fn drop(&mut self) {
        match self.cache {
            Some(cache) => {
                // A call leaves the stack empty (its returns were popped): one test; the drops
                // of what an error or a misbehaving kernel left are out of line.
                if !self.stack().is_empty() {
                    clear(self.stack());
                }
                // SAFETY: as in `take`, the cache is alive; the flag is released only after the
                // stack has been cleared, so that calls made by those drops do not take it.
                unsafe { cache.as_ref() }.taken.set(false);
            }
            None => drop_own(self.stack),
        }
    }
}

#[cold]
#[inline(never)]
fn clear(stack: &mut Stack) {
    stack.clear();
}

#[cold]
#[inline(never)]
fn drop_own(stack: NonNull<Stack>) {
    // SAFETY: a guard without a cache owns its stack, leaked from a `Box` in `own`; it is freed
    // here once, when the guard is dropped.
    drop(unsafe { Box::from_raw(stack.as_ptr()) });
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
