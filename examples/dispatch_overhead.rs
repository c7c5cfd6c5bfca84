//! Dispatch overhead scenarios, for instruction counts with callgrind:
//!
//! ```sh
//! cargo build --release --example dispatch_overhead
//! valgrind --tool=callgrind target/release/examples/dispatch_overhead call 1000
//! valgrind --tool=callgrind target/release/examples/dispatch_overhead call 2000
//! ```
//! The difference of the two totals divided by 1000 is the cost of one call. Scenarios: `call`,
//! `call_autograd_keys`, `call_boxed`, `boxed_fallback`, `register`, `startup` (prints the
//! global dispatcher's start-up registration time per operator), and through the global
//! dispatcher with the real operators: `add_1elem` (`ops::add` of two 1-element CPU tensors:
//! autograd kernel, nothing requires grad), `add_1elem_below_autograd` (the same with the
//! Autograd keys excluded: the difference is the autograd layer's cost) and
//! `add_1elem_requires_grad` (both require grad: the node is built and attached);
//! `add_1elem_autocast` (the same inside a CPU autocast region: `add` falls through the
//! AutocastCPU key) and `add_1elem_empty_mode` (under a dispatch mode that only runs the call:
//! the PythonTLSSnapshot and Python fallbacks, the boxing and the mode), `add_1elem_traced`
//! (under a trace, `switchboard::trace::Tracer`: the call runs and becomes a graph node with its
//! arguments' values and its output's metadata), `add_1elem_functionalized` (of two functional
//! tensors under functionalization, switchboard::functionalize: the Functionalize fallback
//! unwraps them, calls `add` on the values and wraps the result), `add_1elem_functionalized_inplace`
//! (`add_` on a functional tensor there: after the Meta check of the write, `add` on the
//! values, the result committed as the tensor's new value); `meta_add_1elem` (`ops::add` of two
//! 1-element Meta tensors: autograd kernel, then the Meta kernel, which is `add`'s structured
//! meta function (Note [Structured kernels] in switchboard-ops) and the output's allocation,
//! without data); `lazy_add_1elem` (`ops::add` of two 1-element lazy values, the plain lazy
//! tensors under functional ones, called as the functionalization layer calls them, with
//! `Functionalize` excluded: the lazy backend's own cost; the call is captured, its metadata
//! given by a shape rule (Note [Shape rules] in switchboard-lazy), a lazy value returned;
//! nothing runs: the results are dropped, so each
//! `lazy::sync()`, made after every `LAZY_STEP` captures as a training loop syncs once a step,
//! only ends the epoch, and its cost is shared by the step's captures); `lazy_add_1elem_long`
//! (the same on `int64` tensors, which no shape rule takes: the output metadata comes from
//! the Meta kernel, i.e. `add`'s meta function); `lazy_add_1elem_functional` (`ops::add` of the
//! lazy tensors users hold, functional ones, Note [Lazy tensors are functional] in
//! switchboard-lazy: the Functionalize fallback unwraps them, the call on the values is
//! captured, the result wrapped).

use std::hint::black_box;

use switchboard::dispatcher::{
    push, DispatchKeySet, Dispatcher, ExcludeDispatchKeyGuard, KernelFunction, Library,
    LibraryKind, Stack, TypedOperatorHandle,
};
use switchboard::keys::{DispatchKey as K, AUTOGRAD_DISPATCH_KEYSET};
use switchboard::tensor::{ScalarType, Tensor};

type Op2 = TypedOperatorHandle<(Tensor, Tensor), Tensor>;

/// Captures per `lazy::sync()` in `lazy_add_1elem` (a small training step's calls).
const LAZY_STEP: u64 = 100;

fn first(a: &Tensor, _b: &Tensor) -> switchboard::dispatcher::Result<Tensor> {
    Ok(a.clone())
}

/// Defines `bench::op(Tensor a, Tensor b) -> Tensor` with a CPU kernel returning `a`, and an
/// Autograd kernel that excludes autograd and redispatches.
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

/// The loop of the typed-call scenarios, kept out of line so its code can be read in a
/// disassembly. `black_box` hides the tensor once; the key sets are still loaded on every call
/// (the kernel is an opaque indirect call), and the result is dropped, as a caller would.
#[inline(never)]
fn call_loop(op: &Op2, t: &Tensor, n: u64) {
    // Two handles, so that the two key-set loads are not merged.
    let t2 = t.clone();
    let (a, b) = (black_box(t), black_box(&t2));
    for _ in 0..n {
        drop(op.call((a, b)).unwrap());
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let scenario = args.get(1).map(String::as_str).unwrap_or("call");
    let n: u64 = args
        .get(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let d = Dispatcher::with_builtin_fallbacks();
    let (_lib, op) = setup(&d);
    let plain = Tensor::zeros(&[1], ScalarType::Float).unwrap();
    let cpu_only = plain.with_key_set(DispatchKeySet::from_key(K::CPU));
    match scenario {
        "call" => call_loop(&op, &cpu_only, n),
        // A dense CPU tensor's keys: CPU, ADInplaceOrView, AutogradCPU, AutocastCPU.
        "call_autograd_keys" => call_loop(&op, &plain, n),
        "call_boxed" => {
            let handle = op.handle().clone();
            let mut stack: Stack = Vec::with_capacity(2);
            for _ in 0..n {
                // `push` rather than two `Vec::push`es: see Note [Pushing onto a stack].
                push(&mut stack, (&cpu_only, &cpu_only));
                handle.call_boxed(black_box(&mut stack)).unwrap();
                black_box(stack.pop());
            }
        }
        "boxed_fallback" => {
            let mut fb = Library::new(&d, LibraryKind::Impl, "_", Some(K::Python)).unwrap();
            fb.fallback(
                None,
                KernelFunction::from_boxed(|op, ks, stack| {
                    op.redispatch_boxed(ks & DispatchKeySet::full_after(K::Python), stack)
                }),
            )
            .unwrap();
            let py = plain.with_key_set(DispatchKeySet::from_keys(&[K::CPU, K::Python]));
            call_loop(&op, &py, n);
        }
        "register" => {
            for i in 0..n {
                let mut lib = Library::new(&d, LibraryKind::Fragment, "reg", None).unwrap();
                let name = format!("op{}", i % 64);
                lib.def(&format!("{name}(Tensor a, Tensor b) -> Tensor"))
                    .unwrap();
                lib.impl_(&name, Some(K::CPU), KernelFunction::from_fn(first))
                    .unwrap();
                black_box(&lib);
            }
        }
        "add_1elem"
        | "add_1elem_below_autograd"
        | "add_1elem_requires_grad"
        | "add_1elem_autocast"
        | "add_1elem_empty_mode"
        | "add_1elem_traced"
        | "add_1elem_functionalized"
        | "add_1elem_functionalized_inplace" => {
            use switchboard_autograd::AutogradTensor;
            let a = Tensor::ones(&[1], ScalarType::Float).unwrap();
            let b = Tensor::ones(&[1], ScalarType::Float).unwrap();
            if scenario == "add_1elem_requires_grad" {
                a.requires_grad_(true).unwrap();
                b.requires_grad_(true).unwrap();
            }
            let _below = (scenario == "add_1elem_below_autograd")
                .then(|| ExcludeDispatchKeyGuard::new(AUTOGRAD_DISPATCH_KEYSET));
            let _autocast = (scenario == "add_1elem_autocast").then(|| {
                switchboard::autocast::AutocastGuard::new(
                    switchboard::tensor::Device::CPU,
                    ScalarType::BFloat16,
                )
                .unwrap()
            });
            let _mode = (scenario == "add_1elem_empty_mode").then(|| {
                let empty = |op: &switchboard::dispatcher::OperatorHandle,
                             _keys: DispatchKeySet,
                             stack: &mut Stack| op.call_boxed(stack);
                switchboard::modes::push_mode(std::rc::Rc::new(empty))
            });
            let tracer = (scenario == "add_1elem_traced").then(|| {
                let tracer = switchboard::trace::Tracer::start();
                tracer.input(&a).unwrap();
                tracer.input(&b).unwrap();
                tracer
            });
            // Functional tensors over `a` and `b`, functionalization on: each `add` goes through
            // the Functionalize fallback (unwrap, `add` on the values, wrap).
            let inplace = scenario == "add_1elem_functionalized_inplace";
            let functional = scenario == "add_1elem_functionalized" || inplace;
            let (a, b) = if functional {
                use switchboard::functionalize::to_functional;
                (to_functional(&a).unwrap(), to_functional(&b).unwrap())
            } else {
                (a, b)
            };
            let _functionalize = functional.then(|| {
                switchboard::functionalize::FunctionalizeGuard::new(
                    switchboard::functionalize::Remove::Mutations,
                )
            });
            if inplace {
                use switchboard::ops::TensorOps;
                for _ in 0..n {
                    black_box(black_box(&a).add_(black_box(&b)).unwrap());
                }
            } else {
                for _ in 0..n {
                    black_box(switchboard::ops::add(black_box(&a), black_box(&b)).unwrap());
                }
            }
            if let Some(tracer) = tracer {
                let traced = tracer.finish(&[]).unwrap();
                assert_eq!(traced.graph().num_calls() as u64, n);
            }
        }
        "meta_add_1elem" => {
            let meta = switchboard::tensor::Device::META;
            let a = Tensor::empty_on(&[1], ScalarType::Float, meta).unwrap();
            let b = Tensor::empty_on(&[1], ScalarType::Float, meta).unwrap();
            for _ in 0..n {
                black_box(switchboard::ops::add(black_box(&a), black_box(&b)).unwrap());
            }
        }
        "lazy_add_1elem" | "lazy_add_1elem_long" | "lazy_add_1elem_functional" => {
            use switchboard::lazy;
            let dtype = if scenario == "lazy_add_1elem_long" {
                ScalarType::Long
            } else {
                ScalarType::Float
            };
            let cpu = Tensor::ones(&[1], dtype).unwrap();
            let to_lazy = |t: &Tensor| {
                switchboard::ops::_to_copy_with(
                    t,
                    switchboard::ops::ToCopyOptions::default().device(lazy::DEVICE),
                )
                .unwrap()
            };
            let (mut a, mut b) = (to_lazy(&cpu), to_lazy(&cpu));
            lazy::sync().unwrap();
            let _values = (scenario != "lazy_add_1elem_functional").then(|| {
                let value = |t: &Tensor| {
                    switchboard::functionalize::functional_value(t)
                        .expect("lazy tensors are functional")
                        .unwrap()
                };
                (a, b) = (value(&a), value(&b));
                ExcludeDispatchKeyGuard::new(K::Functionalize)
            });
            for i in 1..=n {
                black_box(switchboard::ops::add(black_box(&a), black_box(&b)).unwrap());
                // A step's end, as a training loop has: the pending graph is cleared (its
                // memory kept for the next step's), its dead storages become spares. The
                // captured calls are dead (their results were dropped): nothing runs, and the
                // difference of two runs is the cost of capturing one call, the sync's share
                // included.
                if i % LAZY_STEP == 0 {
                    lazy::sync().unwrap();
                }
            }
        }
        "startup" => {
            // The global dispatcher's start-up registration: every operator of the ops crate
            // with its CPU, Meta, composite, BackendSelect and autograd kernels.
            let start = std::time::Instant::now();
            let global = Dispatcher::global();
            let elapsed = start.elapsed();
            let ops = global.list_operators().len();
            println!(
                "{ops} operators registered in {:.2} ms: {:.2} µs per operator",
                elapsed.as_secs_f64() * 1e3,
                elapsed.as_secs_f64() * 1e6 / ops as f64
            );
        }
        other => {
            eprintln!("unknown scenario {other}; one of call, call_autograd_keys, call_boxed, boxed_fallback, register, startup, add_1elem, add_1elem_below_autograd, add_1elem_requires_grad, add_1elem_autocast, add_1elem_empty_mode, add_1elem_traced, add_1elem_functionalized, add_1elem_functionalized_inplace, meta_add_1elem, lazy_add_1elem, lazy_add_1elem_long, lazy_add_1elem_functional");
            std::process::exit(2);
        }
    }
}
