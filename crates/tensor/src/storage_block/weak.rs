//! [`SharedWeak`]: a weak handle to a [`Shared`] block (Note [Weak handles]).

use std::ptr::{addr_of, NonNull};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{release_weak, Block, Cached, Shared};

// Note [Weak handles]
// Autograd refers to some tensors weakly (an `AccumulateGrad` to its leaf, a node to the
// outputs that `retain_grad`), as PyTorch does with `weak_intrusive_ptr`. So `Shared` blocks
// of a type whose `Cached::WEAK_HANDLES` is true count weak handles as `Arc` does: `weak` is
// the number of weak handles plus one held by all strong handles together. The last strong
// handle drops the value and then gives up that one weak reference; whoever drops the weak
// count to zero frees the block (to its thread's cache, as any block: Note [Storage blocks]).
// Upgrading increments the strong count only if it is not already zero (a compare-and-swap
// loop), so a dropped value is never revived. The counts sit outside the value: a weak handle
// reads them after the value is gone, never the value.
//
// Types without weak handles (storages) pay nothing: the constant is false, so `Shared::drop`
// skips the weak count entirely (and the field fits in alignment padding). Unlike `Arc`,
// `Shared::get_mut` is refused at compile time for types with weak handles instead of locking
// the weak count: nothing needs it.

/// A weak handle to a [`Shared`] block: keeps the block, not the value, alive.
pub(crate) struct SharedWeak<T: Cached>(NonNull<Block<T>>);

// SAFETY: as `std::sync::Weak<T>`: it hands out the value only by upgrading to a `Shared<T>`
// (Send + Sync for these `T`), and it touches only the atomic counts itself.
unsafe impl<T: Cached> Send for SharedWeak<T> {}
// SAFETY: as for Send.
unsafe impl<T: Cached> Sync for SharedWeak<T> {}

impl<T: Cached> Shared<T> {
    /// A weak handle to this block (types with weak handles only).
    #[inline]
    pub(crate) fn downgrade(this: &Shared<T>) -> SharedWeak<T> {
        const { assert!(T::WEAK_HANDLES, "downgrade of a type without weak handles") };
        // Relaxed as in `Arc::downgrade`: made from a live strong handle, which holds the
        // strong handles' weak reference, so the count cannot reach zero meanwhile.
        let old = weak_count_of(this.0).fetch_add(1, Ordering::Relaxed);
        if old > isize::MAX as usize {
            std::process::abort();
        }
        SharedWeak(this.0)
    }

    /// Number of weak handles.
    #[inline]
    pub(crate) fn weak_count(this: &Shared<T>) -> usize {
        if !T::WEAK_HANDLES {
            return 0;
        }
        // Minus the strong handles' own weak reference (this handle is one of them).
        weak_count_of(this.0).load(Ordering::Acquire) - 1
    }
}

/// The weak count of a live block.
#[inline(always)]
fn weak_count_of<'a, T: Cached>(ptr: NonNull<Block<T>>) -> &'a AtomicUsize {
    // SAFETY: callers hold a strong or weak handle, which keeps the block (and its counts,
    // outside the value) alive for as long as they use the reference.
    unsafe { &*addr_of!((*ptr.as_ptr()).weak) }
}

impl<T: Cached> SharedWeak<T> {
    #[inline(always)]
    fn strong(&self) -> &AtomicUsize {
        // SAFETY: this handle keeps the block alive; the count is outside the value.
        unsafe { &*addr_of!((*self.0.as_ptr()).strong) }
    }

    /// A strong handle, unless the value was dropped (every strong handle is gone).
    #[inline]
    pub(crate) fn upgrade(&self) -> Option<Shared<T>> {
        let strong = self.strong();
        let mut n = strong.load(Ordering::Relaxed);
        loop {
            if n == 0 {
                return None;
            }
            if n > isize::MAX as usize {
                std::process::abort();
            }
            // Acquire on success, as `Weak::upgrade`: the new handle sees the value as the
            // last release left it. Never from 0: a dropped value stays dropped.
            match strong.compare_exchange_weak(n, n + 1, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return Some(Shared(self.0)),
                Err(now) => n = now,
            }
        }
    }

    /// Number of strong handles (0 once the value is dropped).
    #[inline]
    pub(crate) fn strong_count(&self) -> usize {
        self.strong().load(Ordering::Acquire)
    }

    /// Whether two weak handles are of one block.
    #[inline]
    pub(crate) fn ptr_eq(a: &SharedWeak<T>, b: &SharedWeak<T>) -> bool {
        a.0 == b.0
    }
}

impl<T: Cached> Clone for SharedWeak<T> {
    #[inline]
    fn clone(&self) -> SharedWeak<T> {
        // Relaxed: made from a live weak handle, which keeps the count above zero.
        let old = weak_count_of(self.0).fetch_add(1, Ordering::Relaxed);
        if old > isize::MAX as usize {
            std::process::abort();
        }
        SharedWeak(self.0)
    }
}

impl<T: Cached> Drop for SharedWeak<T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: this handle owns one weak reference; if it is the last one, the strong
        // handles gave theirs up after dropping the value, so the value is gone.
        unsafe { release_weak::<T>(self.0.as_ptr()) };
    }
}
