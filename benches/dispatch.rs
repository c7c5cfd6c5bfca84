//! Criterion benches of the dispatch scenarios of `examples/dispatch_overhead.rs`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use switchboard::dispatcher::{
    push, DispatchKeySet, Dispatcher, ExcludeDispatchKeyGuard, KernelFunction, Library,
    LibraryKind, Stack, TypedOperatorHandle,
};
use switchboard::keys::{DispatchKey as K, AUTOGRAD_DISPATCH_KEYSET};
use switchboard::tensor::{ScalarType, Tensor};

type Op2 = TypedOperatorHandle<(Tensor, Tensor), Tensor>;

fn first(a: &Tensor, _b: &Tensor) -> switchboard::dispatcher::Result<Tensor> {
    Ok(a.clone())
}

fn setup(d: &Dispatcher) -> (Library, Op2) {
    let mut lib = Library::new(d, LibraryKind::Def, "bench", None).unwrap();
    lib.def("op(Tensor a, Tensor b) -> Tensor").unwrap();
    lib.impl_("op", Some(K::CPU), KernelFunction::from_fn(first))
        .unwrap();
    let op: Op2 = d
        .find_schema_or_throw("bench::op")
        .unwrap()
        .typed()
        .unwrap();
    let below = op.clone();
    lib.impl_(
        "op",
        Some(K::Autograd),
        KernelFunction::from_fn_with_keys(move |ks: DispatchKeySet, a: &Tensor, b: &Tensor| {
            let _g = ExcludeDispatchKeyGuard::new(AUTOGRAD_DISPATCH_KEYSET);
            below.redispatch(ks & DispatchKeySet::full_after(K::AutogradOther), (a, b))
        }),
    )
    .unwrap();
    (lib, op)
}

fn benches(c: &mut Criterion) {
    let d = Dispatcher::with_builtin_fallbacks();
    let (_lib, op) = setup(&d);
    let plain = Tensor::zeros(&[1], ScalarType::Float).unwrap();
    let cpu_only = plain.with_key_set(DispatchKeySet::from_key(K::CPU));
    c.bench_function("dispatch/call", |b| {
        b.iter(|| {
            op.call((black_box(&cpu_only), black_box(&cpu_only)))
                .unwrap()
        })
    });
    c.bench_function("dispatch/call_autograd_keys", |b| {
        b.iter(|| op.call((black_box(&plain), black_box(&plain))).unwrap())
    });
    let handle = op.handle().clone();
    let mut stack: Stack = Vec::with_capacity(2);
    c.bench_function("dispatch/call_boxed", |b| {
        b.iter(|| {
            // `push` rather than two `Vec::push`es: see Note [Pushing onto a stack].
            push(&mut stack, (&cpu_only, &cpu_only));
            handle.call_boxed(&mut stack).unwrap();
            black_box(stack.pop())
        })
    });
    let mut fb = Library::new(&d, LibraryKind::Impl, "_", Some(K::Python)).unwrap();
    fb.fallback(
        None,
        KernelFunction::from_boxed(|op, ks, stack| {
            op.redispatch_boxed(ks & DispatchKeySet::full_after(K::Python), stack)
        }),
    )
    .unwrap();
    let py = plain.with_key_set(DispatchKeySet::from_keys(&[K::CPU, K::Python]));
    c.bench_function("dispatch/boxed_fallback", |b| {
        b.iter(|| op.call((black_box(&py), black_box(&py))).unwrap())
    });
    let mut i = 0u64;
    c.bench_function("dispatch/register", |b| {
        b.iter(|| {
            i += 1;
            let mut lib = Library::new(&d, LibraryKind::Fragment, "reg", None).unwrap();
            let name = format!("op{}", i % 64);
            lib.def(&format!("{name}(Tensor a, Tensor b) -> Tensor"))
                .unwrap();
            lib.impl_(&name, Some(K::CPU), KernelFunction::from_fn(first))
                .unwrap();
            drop(black_box(lib));
        })
    });
}

criterion_group!(dispatch, benches);
criterion_main!(dispatch);
