//! Tests of `Shared` blocks: counts, reuse, bounds, threads, weak handles.

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

impl_cached!(Probe, PROBES, weak_handles: false, outline_last_drop: false);

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

static WEAK_DROPS: Counter = Counter::new(0);

/// A probe with weak handles (its own cache, as every `Cached` type).
struct WeakProbe(u64);

impl Drop for WeakProbe {
    fn drop(&mut self) {
        WEAK_DROPS.fetch_add(1, Ordering::SeqCst);
    }
}

impl_cached!(WeakProbe, WEAK_PROBES, weak_handles: true, outline_last_drop: true);

fn weak_cached() -> usize {
    // SAFETY: reading the length does not reach the cache again.
    unsafe { WeakProbe::with_cache(|c| c.len) }.unwrap()
}

#[test]
fn weak_handles() {
    let drops = || WEAK_DROPS.load(Ordering::SeqCst);
    let before = drops();
    let a = Shared::new(WeakProbe(3));
    assert_eq!((Shared::strong_count(&a), Shared::weak_count(&a)), (1, 0));
    let w = Shared::downgrade(&a);
    let w2 = w.clone();
    assert_eq!(Shared::weak_count(&a), 2);
    let b = w.upgrade().unwrap();
    assert!(Shared::ptr_eq(&a, &b));
    assert_eq!(w.strong_count(), 2);
    drop(a);
    drop(w2);
    assert_eq!(((*b).0, drops()), (3, before));
    let cached_before = weak_cached();
    drop(b);
    // The value is dropped with the last strong handle; the block waits for the weak one.
    assert_eq!(drops(), before + 1);
    assert_eq!((w.strong_count(), weak_cached()), (0, cached_before));
    assert!(
        w.upgrade().is_none(),
        "upgrading after the last strong drop fails"
    );
    drop(w);
    assert_eq!(weak_cached(), cached_before + 1);
    assert_eq!(drops(), before + 1, "dropped once");
}

#[test]
fn weak_handles_cross_threads() {
    let a = Shared::new(WeakProbe(9));
    let w = Shared::downgrade(&a);
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let w = w.clone();
            std::thread::spawn(move || w.upgrade().map(|s| (*s).0))
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), Some(9));
    }
    assert_eq!((Shared::strong_count(&a), Shared::weak_count(&a)), (1, 1));
    // Last strong handle on another thread, last weak one on a third.
    std::thread::spawn(move || drop(a)).join().unwrap();
    assert!(w.upgrade().is_none());
    std::thread::spawn(move || drop(w)).join().unwrap();
}

#[test]
fn init_panic_frees_the_block() {
    let cached_before = cached();
    let r = std::panic::catch_unwind(|| {
        // SAFETY: the initialiser panics before writing; `new_with` frees the block.
        unsafe { Shared::<Probe>::new_with(|_| panic!("no value")) }
    });
    assert!(r.is_err());
    assert_eq!(cached(), (cached_before + 1).min(CACHE_BLOCKS));
}
