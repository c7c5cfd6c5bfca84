//! Lazy mode is per thread: guards on two threads interleaving leave each thread's mode as
//! its own guards set it, and guards dropped out of order restore the mode from before them.

use std::sync::Barrier;

use switchboard_lazy as lazy;

#[test]
fn interleaved_guards_on_two_threads_keep_each_threads_mode() {
    let barrier = Barrier::new(2);
    std::thread::scope(|s| {
        // Thread A turns lazy mode off, then B does, then A's guard ends, then B's: with one
        // process-wide flag B's guard put back A's "off" for good.
        let a = s.spawn(|| {
            let guard = lazy::LazyModeGuard::new(false);
            barrier.wait(); // 1: A's guard is live
            barrier.wait(); // 2: B's guard is live
            assert!(!lazy::lazy_mode(), "A's own guard is in force");
            drop(guard);
            assert!(lazy::lazy_mode(), "A's guard restored A's mode");
            barrier.wait(); // 3: A's guard ended
            barrier.wait(); // 4: B's guard ended
            assert!(lazy::lazy_mode(), "B's guard does not touch A's mode");
        });
        let b = s.spawn(|| {
            barrier.wait(); // 1
            assert!(lazy::lazy_mode(), "A's guard does not touch B's mode");
            let guard = lazy::LazyModeGuard::new(false);
            barrier.wait(); // 2
            barrier.wait(); // 3
            assert!(!lazy::lazy_mode(), "A's drop does not end B's guard");
            drop(guard);
            assert!(lazy::lazy_mode());
            barrier.wait(); // 4
        });
        a.join().unwrap();
        b.join().unwrap();
    });
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
