//! [`Shared`]: the reference-counted block behind a `Storage`, recycled through a small
//! per-thread cache (Note [Storage blocks]).

use std::alloc::{self, Layout};
use std::cell::UnsafeCell;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicUsize, Ordering};

// Note [Storage blocks]
// Every fresh tensor allocates two blocks: its `TensorImpl` (an `Arc`, part of the public
// API) and its storage (with the bytes inline for small tensors). For a small eager op, the
// general-purpose allocator's malloc and free of the storage block cost more than the
// arithmetic, the dispatch, or the tensor's construction. Storage blocks all have one layout
// and the storage handle is private to this crate, so storages use this `Arc` of their own
// (a strong count only: storages have no weak handles) whose freed blocks go to a per-thread
// cache of a few blocks, from which the next storage on that thread is taken. A block freed
// on another thread than the one that allocated it simply joins that thread's cache (all
// blocks come from the global allocator with the same layout). The cache is bounded
// (`CACHE_BLOCKS`), freed when its thread exits, and bypassed while thread-locals are being
// destroyed. Nothing is visible to users: storages are created, shared and dropped exactly
// as before.

/// Blocks a thread keeps for reuse (a few KiB at most).
const CACHE_BLOCKS: usize = 16;

/// A block: the strong count and the value.
struct Block<T> {
    strong: AtomicUsize,
    value: T,
}

/// An `Arc<T>` without weak handles whose blocks are recycled per thread (Note [Storage
/// blocks]). Only for the storage's one `T` (the cache holds blocks of one layout).
pub(crate) struct Shared<T: Cached>(NonNull<Block<T>>);

/// A type whose [`Shared`] blocks are cached: names the thread-local cache of its layout.
pub(crate) trait Cached: Sized + Send + Sync + 'static {
    /// Runs `f` on the cache of this type's blocks on the current thread (`None` while the
    /// thread's locals are being destroyed).
    ///
    /// # Safety
    /// `f` must not reach this cache again (no nested `with_cache` of the same type): it gets
    /// the only `&mut` to the cache while it runs.
    unsafe fn with_cache<R>(f: impl FnOnce(&mut BlockCache) -> R) -> Option<R>;
}

// SAFETY: as `Arc<T>`: the block is shared between threads only through `&T` (T: Sync), and
// the last handle, on any thread, drops `T` (T: Send).
unsafe impl<T: Cached> Send for Shared<T> {}
// SAFETY: as for Send.
unsafe impl<T: Cached> Sync for Shared<T> {}

impl<T: Cached> Shared<T> {
    /// A handle to a new block holding `value`.
    #[inline]
    pub(crate) fn new(value: T) -> Shared<T> {
        let layout = Layout::new::<Block<T>>();
        // SAFETY: `take` does not reach the cache again.
        let raw = unsafe { T::with_cache(|c| c.take()) }
            .flatten()
            // SAFETY: `Block<T>` has a non-zero size.
            .unwrap_or_else(|| unsafe { alloc::alloc(layout) });
        let Some(ptr) = NonNull::new(raw as *mut Block<T>) else {
            alloc::handle_alloc_error(layout)
        };
        let block = Block {
            strong: AtomicUsize::new(1),
            value,
        };
        // SAFETY: `ptr` is a free block of `Block<T>`'s layout (fresh, or a cached one whose
        // value was dropped), valid for writes and owned by no one else.
        unsafe { ptr.as_ptr().write(block) };
        Shared(ptr)
    }

    #[inline(always)]
    fn block(&self) -> &Block<T> {
        // SAFETY: the block lives while any handle does (this one does).
        unsafe { self.0.as_ref() }
    }

    /// The value, mutably, if this is the only handle.
    #[inline]
    pub(crate) fn get_mut(this: &mut Shared<T>) -> Option<&mut T> {
        // Acquire: see every use of the value by handles dropped before (as `Arc::get_mut`).
        if this.block().strong.load(Ordering::Acquire) != 1 {
            return None;
        }
        // SAFETY: the count is 1 and we hold `&mut` of that one handle: no other reference
        // to the value exists or can be made while the borrow lasts (no weak handles).
        Some(unsafe { &mut (*this.0.as_ptr()).value })
    }

    /// Whether two handles are of one block.
    #[inline(always)]
    pub(crate) fn ptr_eq(a: &Shared<T>, b: &Shared<T>) -> bool {
        a.0 == b.0
    }

    /// Number of handles.
    #[inline]
    pub(crate) fn strong_count(this: &Shared<T>) -> usize {
        this.block().strong.load(Ordering::Acquire)
    }
}

impl<T: Cached> Deref for Shared<T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        &self.block().value
    }
}

impl<T: Cached> Clone for Shared<T> {
    #[inline]
    fn clone(&self) -> Shared<T> {
        // Relaxed as in `Arc::clone`: a new handle is made from an existing one.
        let old = self.block().strong.fetch_add(1, Ordering::Relaxed);
        if old > isize::MAX as usize {
            // Far more handles than memory could hold: leaked ones (as `Arc`).
            std::process::abort();
        }
        Shared(self.0)
    }
}

impl<T: Cached> Drop for Shared<T> {
    #[inline]
    fn drop(&mut self) {
        if self.block().strong.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        // Synchronise with every other handle's release before the value is dropped.
        fence(Ordering::Acquire);
        let ptr = self.0.as_ptr();
        // SAFETY: this was the last handle: nothing else can reach the block. The value is
        // dropped once, then the block (its memory) is kept or freed, never used again here.
        unsafe {
            std::ptr::drop_in_place(&mut (*ptr).value);
            free_block::<T>(ptr as *mut u8);
        }
    }
}

/// Puts a block whose value was dropped in the cache, or frees it.
///
/// # Safety
/// `raw` is a block of `Block<T>`'s layout from the global allocator, owned by the caller and
/// holding no live value.
#[inline]
unsafe fn free_block<T: Cached>(raw: *mut u8) {
    // SAFETY: `put` does not reach the cache again.
    if unsafe { T::with_cache(|c| c.put(raw)) } != Some(true) {
        // SAFETY: the caller's guarantee; the cache did not take it.
        unsafe { alloc::dealloc(raw, Layout::new::<Block<T>>()) };
    }
}

/// A thread's free blocks of one layout (Note [Storage blocks]).
pub(crate) struct BlockCache {
    blocks: [*mut u8; CACHE_BLOCKS],
    len: usize,
    /// The layout of the blocks, to free them when the thread exits.
    layout: Layout,
}

impl BlockCache {
    /// An empty cache of blocks of `layout`.
    pub(crate) const fn new(layout: Layout) -> BlockCache {
        BlockCache {
            blocks: [std::ptr::null_mut(); CACHE_BLOCKS],
            len: 0,
            layout,
        }
    }

    #[inline(always)]
    fn take(&mut self) -> Option<*mut u8> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        Some(self.blocks[self.len])
    }

    /// Keeps `raw` if there is room; returns whether it did.
    #[inline(always)]
    fn put(&mut self, raw: *mut u8) -> bool {
        if self.len == CACHE_BLOCKS {
            return false;
        }
        self.blocks[self.len] = raw;
        self.len += 1;
        true
    }
}

impl Drop for BlockCache {
    fn drop(&mut self) {
        for &raw in &self.blocks[..self.len] {
            // SAFETY: cached blocks were allocated by the global allocator with `layout` and
            // are owned by the cache alone.
            unsafe { alloc::dealloc(raw, self.layout) };
        }
        self.len = 0;
    }
}

/// A thread-local `BlockCache`: `UnsafeCell` because `with_cache` hands out `&mut` only for
/// the duration of a call that neither re-enters the cache nor panics while it holds it.
pub(crate) struct CacheCell(pub(crate) UnsafeCell<BlockCache>);

impl CacheCell {
    /// Runs `f` on the cache.
    ///
    /// # Safety
    /// As [`Cached::with_cache`]: `f` must not reach this cell again.
    #[inline(always)]
    pub(crate) unsafe fn with<R>(&self, f: impl FnOnce(&mut BlockCache) -> R) -> R {
        // SAFETY: the cell is thread-local (no other thread sees it) and `f` does not reach it
        // again (the caller's guarantee), so this is the only reference to it while `f` runs.
        f(unsafe { &mut *self.0.get() })
    }
}

/// The layout of a `Shared<T>` block (for its cache).
pub(crate) const fn block_layout<T>() -> Layout {
    Layout::new::<Block<T>>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize as Counter;

    static DROPS: Counter = Counter::new(0);
    static OTHER_DROPS: Counter = Counter::new(0);

    /// A value counting its drops (in a counter of its test's own).
    struct Probe(u64, &'static Counter);

    impl Drop for Probe {
        fn drop(&mut self) {
            self.1.fetch_add(1, Ordering::SeqCst);
        }
    }

    std::thread_local! {
        static PROBES: CacheCell =
            const { CacheCell(UnsafeCell::new(BlockCache::new(block_layout::<Probe>()))) };
    }

    impl Cached for Probe {
        unsafe fn with_cache<R>(f: impl FnOnce(&mut BlockCache) -> R) -> Option<R> {
            // SAFETY: passed on to our caller.
            PROBES.try_with(|c| unsafe { c.with(f) }).ok()
        }
    }

    fn cached() -> usize {
        // SAFETY: reading the length does not reach the cache again.
        unsafe { Probe::with_cache(|c| c.len) }.unwrap()
    }

    #[test]
    fn counts_reuse_and_bounds() {
        let before = DROPS.load(Ordering::SeqCst);
        let mut a = Shared::new(Probe(1, &DROPS));
        assert_eq!(Shared::strong_count(&a), 1);
        Shared::get_mut(&mut a).unwrap().0 = 5;
        let b = a.clone();
        assert!(Shared::ptr_eq(&a, &b));
        assert_eq!(Shared::strong_count(&a), 2);
        assert!(Shared::get_mut(&mut a).is_none());
        drop(b);
        assert_eq!((*a).0, 5);
        assert_eq!(DROPS.load(Ordering::SeqCst), before);
        let cached_before = cached();
        let addr = a.0.as_ptr() as usize;
        drop(a);
        assert_eq!(DROPS.load(Ordering::SeqCst), before + 1, "dropped once");
        assert_eq!(cached(), cached_before + 1);
        // The next block on this thread is the freed one.
        let c = Shared::new(Probe(2, &DROPS));
        assert_eq!(c.0.as_ptr() as usize, addr);
        assert_eq!((*c).0, 2);
        // More frees than the cache holds: the rest go back to the allocator.
        let many: Vec<_> = (0..3 * CACHE_BLOCKS as u64)
            .map(|i| Shared::new(Probe(i, &DROPS)))
            .collect();
        drop(many);
        assert_eq!(cached(), CACHE_BLOCKS);
        drop(c);
    }

    #[test]
    fn handles_cross_threads() {
        let a = Shared::new(Probe(7, &OTHER_DROPS));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let h = a.clone();
                std::thread::spawn(move || {
                    // Blocks made and dropped here stay in this thread's cache, freed at exit.
                    let own = Shared::new(Probe((*h).0, &OTHER_DROPS));
                    assert_eq!((*own).0, 7);
                    drop(h);
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(Shared::strong_count(&a), 1);
        // The last handle dropped on another thread: that thread caches (or frees) it.
        let b = a.clone();
        drop(a);
        std::thread::spawn(move || drop(b)).join().unwrap();
        assert_eq!(OTHER_DROPS.load(Ordering::SeqCst), 5);
    }
}
