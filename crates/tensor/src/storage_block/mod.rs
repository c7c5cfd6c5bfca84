//! [`Shared`]: the reference-counted block behind a `Storage` and a `Tensor`, recycled through
//! a small per-thread cache (Note [Storage blocks]), with weak handles for the types that ask
//! for them (Note [Weak handles], in `weak.rs`).

use std::alloc::{self, Layout};
use std::cell::UnsafeCell;
use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::ptr::{self, addr_of, addr_of_mut, NonNull};
use std::sync::atomic::{fence, AtomicUsize, Ordering};

mod weak;

pub(crate) use weak::SharedWeak;

// Note [Storage blocks]
// Every fresh tensor allocates two blocks: its `TensorImpl` and its storage (with the bytes
// inline for small tensors). For a small eager op, the general-purpose allocator's malloc and
// free of these blocks cost more than the arithmetic, the dispatch, or the tensor's
// construction. Each kind of block has one layout and its handle is private to this crate, so
// both use this `Arc` of their own whose freed blocks go to a per-thread cache of a few blocks
// of that type, from which the next block of that type on that thread is taken. A block freed
// on another thread than the one that allocated it simply joins that thread's cache (all
// blocks of a type come from the global allocator with the same layout). The cache is bounded
// (`CACHE_BLOCKS`), freed when its thread exits, and bypassed while thread-locals are being
// destroyed. Nothing is visible to users: storages and tensors are created, shared and
// dropped exactly as before. Storages have no weak handles; tensors do (autograd's
// `AccumulateGrad` and `retain_grad` refer to tensors weakly), see Note [Weak handles].

/// Blocks a thread keeps for reuse (a few KiB at most).
const CACHE_BLOCKS: usize = 16;

/// A block: the counts and the value.
struct Block<T> {
    strong: AtomicUsize,
    /// As `Arc`'s: weak handles, plus one held by all strong handles together. Only used
    /// when `T::WEAK_HANDLES` (Note [Weak handles]); the value is at least 16-aligned for
    /// storages, so the field costs them no space either.
    weak: AtomicUsize,
    /// Initialised while `strong > 0`; dropped (and never read again) when it reaches 0.
    value: T,
}

/// An `Arc<T>` whose blocks are recycled per thread (Note [Storage blocks]), with weak
/// handles ([`SharedWeak`]) only if `T::WEAK_HANDLES`. One cache per `T`: all its blocks have
/// one layout.
pub(crate) struct Shared<T: Cached>(NonNull<Block<T>>);

/// A type whose [`Shared`] blocks are cached: names the thread-local cache of its layout.
pub(crate) trait Cached: Sized + Send + Sync + 'static {
    /// Whether [`SharedWeak`] handles to this type can exist (Note [Weak handles]). When false,
    /// the weak count is never touched and `Shared::get_mut` is available.
    const WEAK_HANDLES: bool;

    /// Whether the last strong handle's drop (the value's drop and the block's release) is a
    /// call rather than inlined into every place a handle is dropped. Worth it for handles
    /// dropped in many hot places that are rarely the last (tensors: every argument clone a
    /// kernel returns); storages are dropped almost only by their tensor's drop, where
    /// inlining saves the call.
    const OUTLINE_LAST_DROP: bool;

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

/// Frees a taken block if the value's initialiser panics (the value is not dropped: it was
/// never complete; whatever the initialiser wrote is leaked, which is safe).
struct InitGuard<T: Cached>(*mut Block<T>);

impl<T: Cached> Drop for InitGuard<T> {
    fn drop(&mut self) {
        // SAFETY: the block was taken by `new_with` for its value alone and no handle to it
        // was made: nobody else can reach it, and it holds no live value to drop.
        unsafe { free_block::<T>(self.0 as *mut u8) };
    }
}

impl<T: Cached> Shared<T> {
    /// A handle to a new block holding `value`.
    #[inline]
    pub(crate) fn new(value: T) -> Shared<T> {
        // Moved with `ptr::read` by a closure that borrows it: a closure capturing it by move
        // would hold a copy of the value, which the compiler does not forward, so the value
        // would be copied twice (see `Tensor::from_valid_parts_with`). If the allocation
        // fails before the read, the value is leaked, not dropped twice.
        let value = ManuallyDrop::new(value);
        // SAFETY: the closure initialises the whole value, moving it out of `value` exactly
        // once; `value` itself is never dropped.
        unsafe { Shared::new_with(|slot: *mut T| slot.write(ptr::read(&*value))) }
    }

    /// A handle to a new block whose value `init` writes in place: a large `T` is not built
    /// on the stack and then copied into the block.
    ///
    /// # Safety
    /// `init` must initialise every field of `*slot` before it returns (it may panic: the
    /// block is then freed and the value never dropped). `slot` is valid for writes, aligned,
    /// and uninitialised; `init` must not keep it.
    #[inline(always)]
    pub(crate) unsafe fn new_with(init: impl FnOnce(*mut T)) -> Shared<T> {
        let layout = Layout::new::<Block<T>>();
        // SAFETY: `take` does not reach the cache again.
        let raw = unsafe { T::with_cache(|c| c.take()) }
            .flatten()
            // SAFETY: `Block<T>` has a non-zero size.
            .unwrap_or_else(|| unsafe { alloc::alloc(layout) });
        let Some(ptr) = NonNull::new(raw as *mut Block<T>) else {
            alloc::handle_alloc_error(layout)
        };
        let p = ptr.as_ptr();
        let guard = InitGuard::<T>(p);
        // SAFETY: `p` is a free block of `Block<T>`'s layout (fresh, or a cached one whose value
        // was dropped), valid for writes and owned by no one else; `init` initialises the value
        // (the caller's guarantee) before the block gets a handle.
        unsafe {
            addr_of_mut!((*p).strong).write(AtomicUsize::new(1));
            addr_of_mut!((*p).weak).write(AtomicUsize::new(1));
            init(addr_of_mut!((*p).value));
        }
        std::mem::forget(guard);
        Shared(ptr)
    }

    #[inline(always)]
    fn strong(&self) -> &AtomicUsize {
        // SAFETY: the block lives while any handle does (this one does).
        unsafe { &*addr_of!((*self.0.as_ptr()).strong) }
    }

    /// The value, mutably, if this is the only handle (types without weak handles only).
    #[inline]
    pub(crate) fn get_mut(this: &mut Shared<T>) -> Option<&mut T> {
        // With weak handles, a weak one could be upgraded on another thread between our look
        // at the counts (`Arc` locks the weak count for this); nobody needs that yet.
        const { assert!(!T::WEAK_HANDLES, "get_mut of a type with weak handles") };
        // Acquire: see every use of the value by handles dropped before (as `Arc::get_mut`).
        if this.strong().load(Ordering::Acquire) != 1 {
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

    /// Number of (strong) handles.
    #[inline]
    pub(crate) fn strong_count(this: &Shared<T>) -> usize {
        this.strong().load(Ordering::Acquire)
    }
}

impl<T: Cached> Deref for Shared<T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        // SAFETY: the block lives and its value is initialised while any handle does (this
        // one does); only shared references to it are made through handles.
        unsafe { &*addr_of!((*self.0.as_ptr()).value) }
    }
}

impl<T: Cached> Clone for Shared<T> {
    #[inline]
    fn clone(&self) -> Shared<T> {
        // Relaxed as in `Arc::clone`: a new handle is made from an existing one.
        let old = self.strong().fetch_add(1, Ordering::Relaxed);
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
        if self.strong().fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        if T::OUTLINE_LAST_DROP {
            // SAFETY: this was the last strong handle.
            unsafe { drop_last_outlined(self.0) }
        } else {
            // SAFETY: as above.
            unsafe { drop_last(self.0) }
        }
    }
}

/// [`drop_last`] out of line (Note [Storage blocks]: `Cached::OUTLINE_LAST_DROP`).
///
/// # Safety
/// As [`drop_last`].
#[inline(never)]
unsafe fn drop_last_outlined<T: Cached>(ptr: NonNull<Block<T>>) {
    // SAFETY: the caller's guarantee.
    unsafe { drop_last(ptr) }
}

/// Drops the value of a block whose last strong handle is gone, then the strong handles'
/// weak reference.
///
/// # Safety
/// The caller dropped the strong count from 1 to 0 (it held the last strong handle).
#[inline(always)]
unsafe fn drop_last<T: Cached>(ptr: NonNull<Block<T>>) {
    // Synchronise with every other handle's release before the value is dropped.
    fence(Ordering::Acquire);
    let ptr = ptr.as_ptr();
    // SAFETY: this was the last strong handle: nothing else can reach the value (weak
    // handles fail to upgrade once the count is 0). It is dropped once, here.
    unsafe { std::ptr::drop_in_place(addr_of_mut!((*ptr).value)) };
    // SAFETY: the strong handles' weak reference was the last one (or there are no weak
    // handles): nothing can reach the block, whose memory is kept or freed, never used
    // again here.
    unsafe { release_weak::<T>(ptr) };
}

/// Drops one weak reference to the block (the strong handles' shared one when called from
/// `Shared::drop`); the last one frees the block.
///
/// # Safety
/// The caller owns that reference, and the block's value has been dropped if it is the last.
#[inline]
unsafe fn release_weak<T: Cached>(ptr: *mut Block<T>) {
    if T::WEAK_HANDLES {
        // SAFETY: the block lives while the caller's reference does.
        let weak = unsafe { &*addr_of!((*ptr).weak) };
        if weak.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        // Synchronise with every weak handle's release (and its reads of the counts).
        fence(Ordering::Acquire);
    }
    // SAFETY: no reference to the block is left (the caller's guarantee and the count).
    unsafe { free_block::<T>(ptr as *mut u8) };
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

    /// Number of cached blocks (for tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
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

/// Implements [`Cached`] for `$ty`, its freed blocks kept in a new thread-local `$cache`:
/// `impl_cached!(StorageImpl, STORAGE_BLOCKS, weak_handles: false, outline_last_drop: false)`.
macro_rules! impl_cached {
    ($ty:ty, $cache:ident, weak_handles: $weak:expr, outline_last_drop: $outline:expr) => {
        std::thread_local! {
            static $cache: $crate::storage_block::CacheCell = const {
                $crate::storage_block::CacheCell(::std::cell::UnsafeCell::new(
                    $crate::storage_block::BlockCache::new(
                        $crate::storage_block::block_layout::<$ty>(),
                    ),
                ))
            };
        }

        impl $crate::storage_block::Cached for $ty {
            const WEAK_HANDLES: bool = $weak;
            const OUTLINE_LAST_DROP: bool = $outline;

            #[inline(always)]
            unsafe fn with_cache<R>(
                f: impl FnOnce(&mut $crate::storage_block::BlockCache) -> R,
            ) -> Option<R> {
                // SAFETY: our caller's guarantee (`f` does not reach this cache again) is the
                // one `CacheCell::with` needs.
                $cache.try_with(|c| unsafe { c.with(f) }).ok()
            }
        }
    };
}
pub(crate) use impl_cached;

#[cfg(test)]
mod tests;
