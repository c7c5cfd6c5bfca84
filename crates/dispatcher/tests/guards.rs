//! The dispatcher's thread-local guards: per thread, and right whatever order they drop in
//! (Note [Guards dropped out of order]).

use std::sync::{Arc, Barrier, Mutex};

use switchboard_dispatcher::{
    set_warning_handler, tls_is_dispatch_key_excluded, tls_is_dispatch_key_included,
    tls_local_dispatch_key_set, warn, DispatchKey, ExcludeDispatchKeyGuard,
    IncludeDispatchKeyGuard, LocalDispatchKeySet, ThreadLocalStateGuard,
};

#[test]
fn state_guards_dropped_out_of_order_restore_the_first_sets() {
    std::thread::spawn(|| {
        let start = tls_local_dispatch_key_set();
        let with = |k: DispatchKey| LocalDispatchKeySet {
            included: start.included.add(k),
            excluded: start.excluded,
        };
        let outer = ThreadLocalStateGuard::new(with(DispatchKey::Python));
        let inner = ThreadLocalStateGuard::new(with(DispatchKey::FuncTorchBatched));
        drop(outer);
        assert_eq!(
            tls_local_dispatch_key_set(),
            with(DispatchKey::FuncTorchBatched)
        );
        drop(inner);
        assert_eq!(
            tls_local_dispatch_key_set(),
            start,
            "the outer guard's sets were left"
        );

        // Include and exclude guards remove only the keys they added: any order is right.
        let a = IncludeDispatchKeyGuard::new(DispatchKey::Python);
        let b = ExcludeDispatchKeyGuard::new(DispatchKey::AutogradCPU);
        let c = IncludeDispatchKeyGuard::new(DispatchKey::Python);
        drop(a);
        drop(c);
        assert!(!tls_is_dispatch_key_included(DispatchKey::Python));
        drop(b);
        assert!(!tls_is_dispatch_key_excluded(DispatchKey::AutogradCPU));
        assert_eq!(tls_local_dispatch_key_set(), start);
    })
    .join()
    .unwrap();
}

#[test]
fn warning_handlers_are_per_thread_and_any_drop_order_restores_the_first() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = |tag: &'static str| {
        let seen = seen.clone();
        move |m: &str| seen.lock().unwrap().push(format!("{tag}: {m}"))
    };
    let barrier = Barrier::new(2);
    std::thread::scope(|s| {
        s.spawn(|| {
            let outer = set_warning_handler(sink("a-outer"));
            let inner = set_warning_handler(sink("a-inner"));
            barrier.wait(); // 1: both of A's handlers are set
            barrier.wait(); // 2: B warned
            drop(outer);
            warn("one"); // the inner handler is still in force
            drop(inner);
            barrier.wait(); // 3
        });
        s.spawn(|| {
            barrier.wait(); // 1
            let b = set_warning_handler(sink("b"));
            warn("two"); // B's own handler, not A's
            barrier.wait(); // 2
            barrier.wait(); // 3: A's handlers are gone
            warn("three");
            drop(b);
        });
    });
    assert_eq!(
        *seen.lock().unwrap(),
        ["b: two", "a-inner: one", "b: three"]
    );
    // No handler is left on a thread that dropped them out of order.
    std::thread::spawn(move || {
        let outer = set_warning_handler(sink_to(&seen, "x"));
        let inner = set_warning_handler(sink_to(&seen, "y"));
        drop(outer);
        drop(inner);
        warn("to stderr");
        assert_eq!(seen.lock().unwrap().len(), 3);
    })
    .join()
    .unwrap();
}

fn sink_to(seen: &Arc<Mutex<Vec<String>>>, tag: &'static str) -> impl Fn(&str) + Send + Sync {
    let seen = seen.clone();
    move |m: &str| seen.lock().unwrap().push(format!("{tag}: {m}"))
}
