//! The per-thread stack that typed calls box their arguments onto when they reach a boxed
//! kernel (see Note [Reused boxing stacks]).

use std::cell::{Cell, UnsafeCell};

use crate::ivalue::Stack;

// Note [Reused boxing stacks]
// A typed call that reaches a boxed kernel (a fallback, usually) boxes its arguments onto a
// stack. Allocating that stack on every call would cost more than the rest of the call, so each
// thread keeps one, used in place (no move of the vector in and out of the thread-local) while
// a `taken` flag is set. The boxed kernel may itself make a typed call that needs boxing (a
// fallback calling another operator, or a drop running one): that nested call finds the flag
// set and boxes onto a fresh stack of its own, so the two never alias. When the outer call ends
// the stack is cleared (dropping whatever a misbehaving kernel left there) before the flag is
// released, so that code run by those drops is nested too; the allocation is kept. During the
// thread's teardown, once the cache is gone, calls box onto fresh stacks.

struct Cache {
    /// Set while a call on this thread uses `stack`.
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

/// Clears the cached stack and releases it, also when the call unwinds.
struct Release<'a>(&'a Cache);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        // SAFETY: the guard exists only while this call holds `taken`, and the closure's borrow
        // of the stack has ended; nested calls (from the drops below) see `taken` and do not
        // touch the stack.
        let stack = unsafe { &mut *self.0.stack.get() };
        stack.clear();
        self.0.taken.set(false);
    }
}

/// Runs `f` with this thread's boxing stack (empty), or with a fresh stack when a call on this
/// thread already uses it (see Note [Reused boxing stacks]).
#[inline]
pub(crate) fn with_boxing_stack<T>(f: impl FnOnce(&mut Stack) -> T) -> T {
    let mut f = Some(f);
    let cached = CACHE.try_with(|cache| {
        if cache.taken.replace(true) {
            return None;
        }
        let release = Release(cache);
        let f = f.take()?;
        // SAFETY: `taken` was clear and this call set it, so no other reference to the stack
        // exists on this thread (and it is thread-local); `release` clears `taken` only after
        // this borrow has ended.
        let result = f(unsafe { &mut *cache.stack.get() });
        drop(release);
        Some(result)
    });
    if let Ok(Some(result)) = cached {
        return result;
    }
    // Nested, or the thread is being torn down: `f` did not run.
    match f {
        Some(f) => f(&mut Stack::new()),
        None => unreachable!("the boxing closure ran but returned nothing"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::IValue;

    #[test]
    fn nested_use_gets_a_fresh_stack() {
        let outer = with_boxing_stack(|outer| {
            outer.push(IValue::Int(1));
            let inner = with_boxing_stack(|inner| {
                assert!(inner.is_empty());
                inner.push(IValue::Int(2));
                inner.len()
            });
            assert_eq!(inner, 1);
            outer.len()
        });
        assert_eq!(outer, 1);
        // The cached stack was cleared and released.
        with_boxing_stack(|s| assert!(s.is_empty()));
    }

    #[test]
    fn released_after_a_panic() {
        let r = std::panic::catch_unwind(|| {
            with_boxing_stack(|s| {
                s.push(IValue::Int(1));
                panic!("kernel panicked");
            })
        });
        assert!(r.is_err());
        with_boxing_stack(|s| assert!(s.is_empty()));
        assert!(CACHE.with(|c| !c.taken.get()));
    }
}
