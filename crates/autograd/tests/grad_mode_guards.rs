//! Grad mode and inference mode are per thread, and their guards dropped out of order restore
//! the mode from before them (Note [Guards dropped out of order]).

use std::sync::Barrier;

use switchboard_autograd::{
    enable_grad, is_grad_enabled, is_inference_mode_enabled, no_grad, InferenceMode,
};

#[test]
fn guards_dropped_out_of_order_restore_the_first_mode() {
    std::thread::spawn(|| {
        let outer = no_grad();
        let inner = enable_grad();
        drop(outer);
        assert!(is_grad_enabled(), "the inner guard is still in force");
        drop(inner);
        assert!(is_grad_enabled(), "grad mode was left off");

        let outer = enable_grad();
        let middle = no_grad();
        let inner = no_grad();
        drop(middle);
        assert!(!is_grad_enabled());
        drop(outer);
        assert!(!is_grad_enabled());
        drop(inner);
        assert!(is_grad_enabled());

        let outer = InferenceMode::new();
        let inner = InferenceMode::new();
        drop(outer);
        assert!(is_inference_mode_enabled() && !is_grad_enabled());
        drop(inner);
        assert!(!is_inference_mode_enabled(), "inference mode was left on");
        assert!(is_grad_enabled());
    })
    .join()
    .unwrap();
}

#[test]
fn interleaved_guards_on_two_threads_keep_each_threads_mode() {
    // Each thread records the mode at each step and reaches every barrier, so a wrong mode
    // fails the assertions below rather than stalling the other thread.
    let barrier = Barrier::new(2);
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| {
            let mut seen = Vec::new();
            let guard = no_grad();
            barrier.wait(); // 1: A's guard is live
            barrier.wait(); // 2: B's guard is live
            seen.push(is_grad_enabled());
            drop(guard);
            seen.push(is_grad_enabled());
            barrier.wait(); // 3: A's guard ended
            barrier.wait(); // 4: B's guard ended
            seen.push(is_grad_enabled());
            seen
        });
        let b = s.spawn(|| {
            let mut seen = Vec::new();
            barrier.wait(); // 1
            seen.push(is_grad_enabled());
            let guard = no_grad();
            barrier.wait(); // 2
            barrier.wait(); // 3
            seen.push(is_grad_enabled());
            drop(guard);
            seen.push(is_grad_enabled());
            barrier.wait(); // 4
            seen
        });
        (a.join().unwrap(), b.join().unwrap())
    });
    assert_eq!(a, [false, true, true]);
    assert_eq!(b, [true, false, true]);
}
