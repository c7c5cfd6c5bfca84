//! Calling operators: routing by key, redispatch, thread-local keys, boxing, fallbacks, errors.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use switchboard_dispatcher::*;
use switchboard_keys::{DispatchKey as K, DispatchKeySet};
use switchboard_tensor::{ScalarType, Tensor};

fn cpu_tensor() -> Tensor {
    Tensor::zeros(&[2], ScalarType::Float).unwrap()
}

fn with_keys(keys: &[K]) -> Tensor {
    cpu_tensor().with_key_set(DispatchKeySet::from_keys(keys))
}

/// A dispatcher with PyTorch's fallthrough fallbacks, and the Autograd keys falling through
/// (no autograd layer in these tests).
fn dispatcher() -> Dispatcher {
    let d = Dispatcher::with_builtin_fallbacks();
    d.register_fallback(K::Autograd, KernelFunction::fallthrough(), "test")
        .unwrap()
        .leak();
    d
}

/// A library defining `test::op(Tensor a, Tensor b) -> Tensor` with a CPU kernel that returns
/// its first argument.
fn setup(d: &Dispatcher) -> Library {
    let mut lib = Library::new(d, LibraryKind::Def, "test", None).unwrap();
    lib.def("op(Tensor a, Tensor b) -> Tensor").unwrap();
    lib.impl_(
        "op",
        Some(K::CPU),
        KernelFunction::from_fn(|a: &Tensor, _b: &Tensor| Ok(a.clone())),
    )
    .unwrap();
    lib
}

type Op = TypedOperatorHandle<(Tensor, Tensor), Tensor>;

fn op(d: &Dispatcher) -> Op {
    d.find_schema_or_throw("test::op").unwrap().typed().unwrap()
}

#[test]
fn typed_call_routes_to_the_backend_kernel() {
    let d = dispatcher();
    let _lib = setup(&d);
    let (a, b) = (cpu_tensor(), cpu_tensor());
    let out = op(&d).call((&a, &b)).unwrap();
    assert!(out.is_same(&a));
}

#[test]
fn autograd_kernel_redispatches_below_itself() {
    let d = dispatcher();
    let mut lib = setup(&d);
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    let handle = op(&d);
    let below = handle.clone();
    lib.impl_(
        "op",
        Some(K::Autograd),
        KernelFunction::from_fn_with_keys(move |ks: DispatchKeySet, a: &Tensor, b: &Tensor| {
            h.fetch_add(1, Ordering::SeqCst);
            below.redispatch(ks & DispatchKeySet::full_after(K::AutogradOther), (a, b))
        }),
    )
    .unwrap();
    let x = with_keys(&[K::CPU, K::ADInplaceOrView, K::AutogradCPU, K::AutocastCPU]);
    let out = handle.call((&x, &x)).unwrap();
    assert!(out.is_same(&x));
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    // Excluding autograd skips the autograd kernel.
    {
        let _g = AutoDispatchBelowAutograd::new();
        handle.call((&x, &x)).unwrap();
    }
    assert_eq!(hits.load(Ordering::SeqCst), 1);
}

#[test]
fn boxed_call_and_boxed_fallback() {
    let d = dispatcher();
    let _lib = setup(&d);
    let x = cpu_tensor();
    let handle = d.find_schema_or_throw("test::op").unwrap();
    let mut stack: Stack = vec![IValue::Tensor(x.clone()), IValue::Tensor(x.clone())];
    handle.call_boxed(&mut stack).unwrap();
    assert_eq!(stack.len(), 1);
    assert!(stack[0].as_tensor().unwrap().is_same(&x));

    // A boxed fallback on Python serves every operator, then redispatches.
    let seen = Arc::new(AtomicUsize::new(0));
    let s = seen.clone();
    let mut fb = Library::new(&d, LibraryKind::Impl, "_", Some(K::Python)).unwrap();
    fb.fallback(
        None,
        KernelFunction::from_boxed(move |op, ks, stack| {
            s.fetch_add(1, Ordering::SeqCst);
            op.redispatch_boxed(ks & DispatchKeySet::full_after(K::Python), stack)
        }),
    )
    .unwrap();
    let p = with_keys(&[K::CPU, K::Python]);
    let out = op(&d).call((&p, &p)).unwrap();
    assert!(out.is_same(&p));
    assert_eq!(seen.load(Ordering::SeqCst), 1);
    drop(fb);
    let err = op(&d).call((&p, &p)).unwrap_err();
    assert!(
        err.to_string().contains("from the 'Python' backend"),
        "the fallback is gone with its library: {err}"
    );
    assert_eq!(seen.load(Ordering::SeqCst), 1);
}

#[test]
fn missing_kernel_names_the_operator_and_key() {
    let d = dispatcher();
    let _lib = setup(&d);
    let m = cpu_tensor().with_key_set(DispatchKeySet::from_keys(&[K::Meta]));
    let err = op(&d).call((&m, &m)).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with("Could not run 'test::op' with arguments from the 'Meta' backend."),
        "{msg}"
    );
    assert!(
        msg.contains("only available for these backends: [CPU"),
        "{msg}"
    );
}

/// A boxed call that reaches a slot without a kernel, or the ambiguous AutogradOther slot,
/// returns the same error as a typed call (the markers' boxed forms, Note [Boxed markers]).
#[test]
fn boxed_calls_of_marker_slots_report_the_slot_error() {
    let d = dispatcher();
    let mut lib = setup(&d);
    let handle = d.find_schema_or_throw("test::op").unwrap();
    let boxed = |t: &Tensor| {
        let mut stack: Stack = vec![IValue::Tensor(t.clone()), IValue::Tensor(t.clone())];
        let err = handle.call_boxed(&mut stack).unwrap_err().to_string();
        let typed = op(&d).call((t, t)).unwrap_err().to_string();
        assert_eq!(err, typed);
        err
    };
    let meta = with_keys(&[K::Meta]);
    assert!(
        boxed(&meta)
            .starts_with("Could not run 'test::op' with arguments from the 'Meta' backend."),
        "{}",
        boxed(&meta)
    );
    // A CompositeImplicitAutograd kernel next to a kernel for an AutogradOther backend.
    lib.impl_(
        "op",
        Some(K::CompositeImplicitAutograd),
        KernelFunction::from_fn(|a: &Tensor, _b: &Tensor| Ok(a.clone())),
    )
    .unwrap();
    lib.impl_(
        "op",
        Some(K::SparseCPU),
        KernelFunction::from_fn(|a: &Tensor, _b: &Tensor| Ok(a.clone())),
    )
    .unwrap();
    let sparse = with_keys(&[K::SparseCPU, K::AutogradOther]);
    let err = boxed(&sparse);
    assert!(err.contains("AutogradOther"), "{err}");
}

#[test]
fn boxed_call_type_errors_name_the_argument() {
    let d = dispatcher();
    let _lib = setup(&d);
    let handle = d.find_schema_or_throw("test::op").unwrap();
    let mut stack: Stack = vec![IValue::Tensor(cpu_tensor()), IValue::Int(3)];
    let err = handle.call_boxed(&mut stack).unwrap_err();
    assert_eq!(
        err.to_string(),
        "test::op() Expected a value of type 'Tensor' for argument 'b' but instead found type 'int'."
    );
}

#[test]
fn boxed_kernel_with_too_few_values_reports_the_count() {
    let d = dispatcher();
    let _lib = setup(&d);
    let handle = d.find_schema_or_throw("test::op").unwrap();
    let mut stack: Stack = vec![IValue::Tensor(cpu_tensor())];
    let err = handle
        .redispatch_boxed(DispatchKeySet::from_key(DispatchKey::CPU), &mut stack)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "test::op() expected at most 2 argument(s) but received 1 argument(s)."
    );
    assert_eq!(stack.len(), 1, "a failed call leaves the stack as it was");
}

#[test]
fn typed_handle_with_wrong_signature_is_refused() {
    let d = dispatcher();
    let _lib = setup(&d);
    let err = d
        .find_schema_or_throw("test::op")
        .unwrap()
        .typed::<(Tensor,), Tensor>()
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("The number of arguments is different. 2 vs 1."),
        "{err}"
    );
}

#[test]
fn kernel_schema_is_checked_at_registration() {
    let d = dispatcher();
    let mut lib = setup(&d);
    let err = lib
        .impl_(
            "op",
            Some(K::CUDA),
            KernelFunction::from_fn(|a: &Tensor, _n: i64| Ok(a.clone())),
        )
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("reason: Type mismatch in argument 2: Tensor vs int."),
        "{err}"
    );
    assert!(
        !d.dump_state("test::op").contains("CUDA"),
        "a refused kernel leaves no trace"
    );
}

#[test]
fn unknown_operator_suggests_close_names() {
    let d = dispatcher();
    let _lib = setup(&d);
    let err = d.find_schema_or_throw("test::opp").unwrap_err();
    assert_eq!(
        err.to_string(),
        "Could not find schema for test::opp.. Did you mean 'test::op'?"
    );
}

#[test]
fn handle_outliving_its_dispatcher_is_harmless() {
    let d = dispatcher();
    let lib = setup(&d);
    let handle = op(&d);
    drop(d);
    drop(lib); // deregisters: the dispatcher is still alive through the library
    let x = cpu_tensor();
    assert!(handle.call((&x, &x)).is_err());
    let d2 = Dispatcher::new();
    let mut lib2 = Library::new(&d2, LibraryKind::Fragment, "t2", None).unwrap();
    lib2.def("f(Tensor x) -> Tensor").unwrap();
    drop(d2);
    drop(lib2);
}

#[test]
fn registration_while_calling_from_other_threads() {
    let d = dispatcher();
    let _lib = setup(&d);
    let handle = op(&d);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Threads that have made a call: registration goes on until both have (on a loaded machine
    // they may start only after 200 registrations).
    let calling = Arc::new(AtomicUsize::new(0));
    let mut threads = Vec::new();
    for _ in 0..2 {
        let (handle, stop, calling) = (handle.clone(), stop.clone(), calling.clone());
        threads.push(std::thread::spawn(move || {
            let x = with_keys(&[K::CPU, K::AutogradCPU]);
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let out = handle.call((&x, &x)).unwrap();
                assert!(out.is_same(&x));
                if n == 0 {
                    calling.fetch_add(1, Ordering::Relaxed);
                }
                n += 1;
            }
            n
        }));
    }
    let mut i = 0;
    while i < 200 || calling.load(Ordering::Relaxed) < 2 {
        i += 1;
        let mut lib = Library::new(&d, LibraryKind::Impl, "test", None).unwrap();
        let key = if i % 2 == 0 {
            K::AutogradCPU
        } else {
            K::Autograd
        };
        lib.impl_(
            "op",
            Some(key),
            KernelFunction::from_fn(|a: &Tensor, _b: &Tensor| Ok(a.clone())),
        )
        .unwrap();
        lib.fallthrough("op", K::ADInplaceOrView).unwrap();
        drop(lib);
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        assert!(t.join().unwrap() > 0);
    }
}

#[test]
fn observers_see_nested_calls() {
    let d = dispatcher();
    let mut lib = setup(&d);
    let handle = op(&d);
    let below = handle.clone();
    lib.impl_(
        "op",
        Some(K::AutogradCPU),
        KernelFunction::from_fn_with_keys(move |ks: DispatchKeySet, a: &Tensor, b: &Tensor| {
            below.redispatch(ks & DispatchKeySet::full_after(K::AutogradCPU), (a, b))
        }),
    )
    .unwrap();
    let events = Arc::new(std::sync::Mutex::new(Vec::new()));
    let e = events.clone();
    let mine = handle.handle().clone();
    // Observers see every dispatcher's calls, including other tests' running in parallel.
    let guard = add_observer(move |ev| {
        if ev.before && ev.op.ptr_eq(&mine) {
            e.lock().unwrap().push((ev.key, ev.depth));
        }
    });
    let x = with_keys(&[K::CPU, K::AutogradCPU]);
    handle.call((&x, &x)).unwrap();
    drop(guard);
    handle.call((&x, &x)).unwrap();
    let seen = events.lock().unwrap().clone();
    assert!(
        seen.contains(&(K::AutogradCPU, 0)) && seen.contains(&(K::CPU, 1)),
        "{seen:?}"
    );
    assert_eq!(seen.iter().filter(|(k, _)| *k == K::AutogradCPU).count(), 1);
}

/// Operators registered after an observer, in a dispatcher made after it, are observed too
/// (each entry keeps a copy of the observing state, Note [Observing calls for free]), through
/// typed and boxed calls; after the observer goes, its calls still run.
#[test]
fn observers_see_operators_made_after_them() {
    let events = Arc::new(std::sync::Mutex::new(Vec::new()));
    let e = events.clone();
    let guard = add_observer(move |ev| {
        if ev.before && ev.op.name().name() == "observed_late::late_op" {
            e.lock().unwrap().push(ev.key);
        }
    });
    let d = dispatcher();
    let mut lib = Library::new(&d, LibraryKind::Def, "observed_late", None).unwrap();
    lib.def("late_op(Tensor a) -> int").unwrap();
    lib.impl_(
        "late_op",
        Some(K::CPU),
        KernelFunction::from_fn(|_a: &Tensor| Ok(7i64)),
    )
    .unwrap();
    let handle = d.find_schema_or_throw("observed_late::late_op").unwrap();
    let typed: TypedOperatorHandle<(Tensor,), i64> = handle.typed().unwrap();
    let x = with_keys(&[K::CPU]);
    assert_eq!(typed.call((&x,)).unwrap(), 7);
    let mut stack = vec![IValue::Tensor(x.clone())];
    handle.call_boxed(&mut stack).unwrap();
    assert_eq!(events.lock().unwrap().as_slice(), &[K::CPU, K::CPU]);
    drop(guard);
    assert_eq!(typed.call((&x,)).unwrap(), 7);
    assert_eq!(events.lock().unwrap().len(), 2);
}

/// An observer added after an operator exists sees its boxed calls, and stops seeing them
/// once dropped: the boxed fast path carries its own copy of the observing state
/// (Note [Boxed dispatch arguments]).
#[test]
fn observers_see_boxed_calls_of_existing_operators() {
    let d = dispatcher();
    let mut lib = Library::new(&d, LibraryKind::Def, "observed_early", None).unwrap();
    lib.def("early_op(Tensor a, int n, Tensor b) -> int")
        .unwrap();
    lib.impl_(
        "early_op",
        Some(K::CPU),
        KernelFunction::from_fn(|_a: &Tensor, n: i64, _b: &Tensor| Ok(n + 1)),
    )
    .unwrap();
    let handle = d.find_schema_or_throw("observed_early::early_op").unwrap();
    let x = with_keys(&[K::CPU]);
    let call = |n: i64| {
        let mut stack = vec![
            IValue::Tensor(x.clone()),
            IValue::Int(n),
            IValue::Tensor(x.clone()),
        ];
        handle.call_boxed(&mut stack).unwrap();
        assert!(matches!(stack.as_slice(), [IValue::Int(m)] if *m == n + 1));
    };
    call(1);
    let events = Arc::new(std::sync::Mutex::new(Vec::new()));
    let e = events.clone();
    let guard = add_observer(move |ev| {
        if ev.before && ev.op.name().name() == "observed_early::early_op" {
            e.lock().unwrap().push(ev.key);
        }
    });
    call(2);
    assert_eq!(events.lock().unwrap().as_slice(), &[K::CPU]);
    drop(guard);
    call(3);
    assert_eq!(events.lock().unwrap().len(), 1);
}

/// A fallthrough on one backend's Autograd key only (AutogradCPU) skips that key for CPU
/// tensors, while tensors of another backend still reach the Autograd kernel (see
/// Note [Fallthrough mask]): typed and boxed calls agree.
#[test]
fn per_backend_fallthrough_skips_only_its_backend() {
    let d = Dispatcher::with_builtin_fallbacks();
    let mut lib = Library::new(&d, LibraryKind::Def, "pb", None).unwrap();
    lib.def("op(Tensor a) -> int").unwrap();
    lib.impl_(
        "op",
        Some(K::CPU),
        KernelFunction::from_fn(|_a: &Tensor| Ok(1i64)),
    )
    .unwrap();
    lib.impl_(
        "op",
        Some(K::CUDA),
        KernelFunction::from_fn(|_a: &Tensor| Ok(2i64)),
    )
    .unwrap();
    lib.impl_(
        "op",
        Some(K::Autograd),
        KernelFunction::from_fn(|_a: &Tensor| Ok(10i64)),
    )
    .unwrap();
    lib.fallthrough("op", K::AutogradCPU).unwrap();
    let handle = d.find_schema_or_throw("pb::op").unwrap();
    let typed: TypedOperatorHandle<(Tensor,), i64> = handle.typed().unwrap();
    let cpu = with_keys(&[K::CPU, K::AutogradCPU]);
    let cuda = with_keys(&[K::CUDA, K::AutogradCUDA]);
    assert_eq!(typed.call((&cpu,)).unwrap(), 1);
    assert_eq!(typed.call((&cuda,)).unwrap(), 10);
    for (t, expected) in [(&cpu, 1), (&cuda, 10)] {
        let mut stack = vec![IValue::Tensor(t.clone())];
        handle.call_boxed(&mut stack).unwrap();
        assert!(matches!(stack.as_slice(), [IValue::Int(v)] if *v == expected));
    }
    drop(lib);
}
