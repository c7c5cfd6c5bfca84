//! What a sync must survive: a failing call (only what depends on it fails, as in eager
//! code), kernels and executors that call the lazy API while the graph runs (no deadlock),
//! and graphs a user made arbitrarily deep (no recursion per node).

mod common;

use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use common::*;
use switchboard_autograd::AutogradTensor;
use switchboard_dispatcher::{KernelFunction, Result};
use switchboard_graph::Graph;
use switchboard_lazy as lazy;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

#[test]
fn a_failing_call_fails_only_what_depends_on_it() {
    let d = own_device();
    let x = d.lz(&seq(&[3]));
    let bad = d.lz(&Tensor::from_vec(vec![0i64, 5], &[2]).unwrap());
    let acc = d.lz(&seq(&[2]));
    d.sync().unwrap();
    let y = ops::index_select(&x, 0, &bad).unwrap(); // the index is only checked on data
    let dependent = ops::mul_scalar(&y, 2).unwrap();
    ops::add_(&acc, &y).unwrap(); // a write of a failed value fails the storage
    let ones = ops::ones_with(&[2], ops::OnesOptions::default().device(d.device())).unwrap();
    let independent = ops::add_scalar(&ones, 1).unwrap();
    let after = ops::neg(&x).unwrap(); // captured after the failing call, independent of it
                                       // Reading the independent value runs the whole step; it gets its value, as in eager.
    assert_eq!(values(&independent), [2.0, 2.0]);
    assert_eq!(values(&after), [-1.0, -2.0, -3.0]);
    for t in [&y, &dependent, &acc] {
        let err = t.to_vec::<f32>().unwrap_err().to_string();
        assert!(err.contains("the graph computing it failed"), "{err}");
        assert!(err.contains("out of range"), "{err}");
    }
    // An explicit sync of such a step reports the failure.
    let y = ops::index_select(&x, 0, &bad).unwrap();
    let z = ops::exp(&x).unwrap();
    let err = d.sync().unwrap_err().to_string();
    assert!(err.contains("out of range"), "{err}");
    assert!(y.to_vec::<f32>().is_err());
    assert_eq!(values(&z), values(&ops::exp(&seq(&[3])).unwrap()));
}

/// What the kernel of `lazy_reentry::probe` saw of the lazy API while the graph ran.
static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// The lazy device the probe's test runs on.
static PROBED: OnceLock<OwnDevice> = OnceLock::new();
/// A lazy tensor the graph running the kernel computes (read from inside it).
static IN_FLIGHT: Mutex<Option<Tensor>> = Mutex::new(None);

/// `x + 1`, calling the lazy API from inside the kernel: counting pending calls, capturing and
/// reading new lazy values (a nested sync), reading a value of its own running graph.
fn probe_cpu(x: &Tensor) -> Result<Tensor> {
    let d = PROBED.get().expect("the test set its device");
    let mut seen = SEEN.lock().unwrap();
    seen.push(format!("pending {}", d.pending_calls()));
    let inner = ops::add_scalar(&d.lz(&seq(&[2])), 10)?;
    seen.push(format!("inner {:?}", inner.to_vec::<f32>()?));
    let held = IN_FLIGHT.lock().unwrap().clone();
    if let Some(t) = held {
        seen.push(format!("in flight {}", t.to_vec::<f32>().unwrap_err()));
    }
    seen.push(format!("stats {}", d.stats().syncs > 0));
    ops::add_scalar(x, 1)
}

fn probe_meta(x: &Tensor) -> Result<Tensor> {
    ops::add_scalar(x, 1)
}

switchboard_dispatcher::library!(DEF lazy_reentry, |lib| {
    lib.def("probe(Tensor x) -> Tensor")?;
    Ok(())
});
switchboard_dispatcher::library!(IMPL lazy_reentry, CPU, |lib| {
    lib.impl_("probe", None, KernelFunction::from_fn(probe_cpu))?;
    Ok(())
});
switchboard_dispatcher::library!(IMPL lazy_reentry, Meta, |lib| {
    lib.impl_("probe", None, KernelFunction::from_fn(probe_meta))?;
    Ok(())
});

/// Runs `f` on another thread and waits for it: a deadlock fails the test instead of hanging
/// it (the bound is generous; nothing here is timed).
fn without_deadlock<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(f()).unwrap());
    rx.recv_timeout(Duration::from_secs(300))
        .expect("deadlock: the sync never returned")
}

#[test]
fn kernels_run_by_a_sync_can_call_the_lazy_api() {
    let d = *PROBED.get_or_init(own_device);
    SEEN.lock().unwrap().clear();
    let got = without_deadlock(move || {
        let op = switchboard_dispatcher::Dispatcher::global()
            .find_schema_or_throw("lazy_reentry::probe")
            .unwrap()
            .typed::<(Tensor,), Tensor>()
            .unwrap();
        let x = d.lz(&seq(&[3]));
        let y = op.call((&x,)).unwrap(); // captured (its Meta kernel gives the shape)
        let other = ops::exp(&x).unwrap(); // computed by the same graph
        *IN_FLIGHT.lock().unwrap() = Some(other.clone());
        let r = values(&y);
        IN_FLIGHT.lock().unwrap().take();
        (r, values(&other))
    });
    assert_eq!(got.0, [2.0, 3.0, 4.0]);
    assert_eq!(got.1, values(&ops::exp(&seq(&[3])).unwrap()));
    let seen = SEEN.lock().unwrap().clone();
    assert_eq!(seen.len(), 4, "{seen:?}");
    assert_eq!(
        seen[0], "pending 0",
        "the running graph is out of the context"
    );
    assert_eq!(seen[1], "inner [11.0, 12.0]");
    assert!(
        seen[2].contains("the graph computing it is running"),
        "{seen:?}"
    );
    assert_eq!(seen[3], "stats true");
}

/// An executor whose compilation uses the lazy API (it is user code too).
struct Reentrant(OwnDevice);

impl lazy::Executor for Reentrant {
    fn name(&self) -> &str {
        "reentrant"
    }
    fn compile(&self, graph: Graph) -> Result<Arc<dyn lazy::Executable>> {
        let d = self.0;
        let _ = d.pending_calls();
        let _ = d.stats();
        d.clear_cache();
        lazy::CpuExecutor.compile(graph)
    }
}

#[test]
fn executors_can_call_the_lazy_api_while_compiling() {
    let d = own_device();
    let got = without_deadlock(move || {
        let old = d.set_executor(Arc::new(Reentrant(d)));
        let r = values(&ops::neg(&d.lz(&seq(&[2]))).unwrap());
        d.set_executor(old);
        r
    });
    assert_eq!(got, [-1.0, -2.0]);
}

/// Runs `f` on a thread with a 256 KiB stack (a recursion per node overflows it within a few
/// thousand nodes).
fn on_small_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn deep_lazy_chains_capture_run_print_and_drop() {
    let d = own_device();
    on_small_stack(move || {
        let x = d.lz(&Tensor::from_vec(vec![1.0f32], &[1]).unwrap());
        let mut y = x.clone();
        for _ in 0..100_000 {
            y = ops::add(&y, &x).unwrap();
        }
        assert!(d.pending_graph().to_string().len() > 100_000);
        drop(y); // pending, never run
        d.sync().unwrap();
        let mut y = x.clone();
        for _ in 0..100_000 {
            y = ops::add(&y, &x).unwrap();
        }
        assert_eq!(values(&y), [100_001.0]);
        drop(y);
    });
}

#[test]
fn backward_through_a_deep_lazy_chain() {
    let d = own_device();
    on_small_stack(move || {
        let x = d
            .lz(&Tensor::from_vec(vec![1.0f32], &[1]).unwrap())
            .requires_grad_(true)
            .unwrap();
        let mut y = x.clone();
        for _ in 0..60_000 {
            y = ops::add(&y, &x).unwrap();
        }
        ops::sum(&y).unwrap().backward().unwrap();
        assert_eq!(values(&x.grad().unwrap()), [60_001.0]);
        drop(y);
        // Dropped with its graph, never run backward.
        let mut y = x.clone();
        for _ in 0..60_000 {
            y = ops::mul(&y, &x).unwrap();
        }
        drop(y);
        d.sync().unwrap();
    });
}
