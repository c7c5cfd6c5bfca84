//! Lazy mode is per thread: guards on two threads interleaving leave each thread's mode as
//! its own guards set it, and guards dropped out of order restore the mode from before them.

use std::sync::Barrier;

use switchboard_lazy as lazy;

#[test]
fn interleaved_guards_on_two_threads_keep_each_threads_mode() {
    // Thread A turns lazy mode off, then B does, then A's guard ends, then B's: with one
    // process-wide flag B's guard put back A's "off" for good. Each thread records the mode it
    // sees at each step and every thread reaches every barrier, so a wrong mode fails the
    // assertions below instead of stalling a thread at a barrier.
    let barrier = Barrier::new(2);
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| {
            let mut seen = Vec::new();
            let guard = lazy::LazyModeGuard::new(false);
            barrier.wait(); // 1: A's guard is live
            barrier.wait(); // 2: B's guard is live
            seen.push(lazy::lazy_mode());
            drop(guard);
            seen.push(lazy::lazy_mode());
            barrier.wait(); // 3: A's guard ended
            barrier.wait(); // 4: B's guard ended
            seen.push(lazy::lazy_mode());
            seen
        });
        let b = s.spawn(|| {
            let mut seen = Vec::new();
            barrier.wait(); // 1
            seen.push(lazy::lazy_mode());
            let guard = lazy::LazyModeGuard::new(false);
            barrier.wait(); // 2
            barrier.wait(); // 3
            seen.push(lazy::lazy_mode());
            drop(guard);
            seen.push(lazy::lazy_mode());
            barrier.wait(); // 4
            seen
        });
        (a.join().unwrap(), b.join().unwrap())
    });
    // A: off under its guard, on after it, still on after B's guard ends.
    assert_eq!(a, [false, true, true]);
    // B: on despite A's guard, off under its own guard after A's ended, on after.
    assert_eq!(b, [true, false, true]);
    assert!(lazy::lazy_mode());
}

#[test]
fn guards_dropped_out_of_order_restore_the_first_mode() {
    std::thread::spawn(|| {
        let outer = lazy::LazyModeGuard::new(false);
        let inner = lazy::LazyModeGuard::new(true);
        drop(outer);
        assert!(lazy::lazy_mode(), "the inner guard is still in force");
        drop(inner);
        assert!(lazy::lazy_mode(), "the mode from before the outer guard");

        lazy::set_lazy_mode(false);
        let outer = lazy::LazyModeGuard::new(true);
        let inner = lazy::LazyModeGuard::new(false);
        drop(outer);
        assert!(!lazy::lazy_mode());
        drop(inner);
        assert!(!lazy::lazy_mode(), "off, as before the outer guard");
    })
    .join()
    .unwrap();
}
