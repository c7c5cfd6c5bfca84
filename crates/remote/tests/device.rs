//! The `remote_accelerator` device (Note [The remote accelerator]): a lazy device type whose
//! graphs a worker runs, Genie's API on it, and its eager mode on the worker.

mod common;

use common::*;
use switchboard_lazy::{self as lazy, LazyModeGuard};
use switchboard_ops as ops;
use switchboard_remote::{self as remote, ClientConfig};
use switchboard_tensor::{Device, Tensor};

const SIZES: [usize; 3] = [64, 32, 10];

/// `remote_accelerator:index` connected to `w`.
fn connect(index: i16, w: &switchboard_remote::Worker) -> Device {
    remote::connect(index, &w.local_addr().to_string(), ClientConfig::default()).unwrap()
}

#[test]
fn training_on_remote_accelerator_gives_the_eager_numbers() {
    let w = worker();
    let d = connect(0, &w);
    assert_eq!(d.to_string(), "remote_accelerator:0");
    assert_eq!("remote_accelerator:0".parse::<Device>().unwrap(), d);
    assert!(remote::is_remote(d));
    let mut on_worker = Trainer::new(d, &SIZES);
    let mut eager = Trainer::new(Device::CPU, &SIZES);
    for (x, y) in &batches(3, 64) {
        let a = on_worker.step(x, y);
        let b = eager.step(x, y);
        assert_eq!(a.to_bits(), b.to_bits(), "loss: worker {a}, eager {b}");
    }
    assert_eq!(on_worker.first_weight(), eager.first_weight());
    // The parameters live on the worker: their storages hold the worker's handles.
    assert!(w.resident_tensors() >= SIZES.len());
    let report = lazy::backend(d).unwrap().metrics_report();
    for line in ["RemoteRoundTrips", "RemoteBytesSent", "RemoteExecutionTime"] {
        assert!(report.contains(line), "{report}");
    }
}

#[test]
fn eager_mode_runs_each_call_on_the_worker() {
    let w = worker();
    let d = connect(1, &w);
    let b = lazy::backend(d).unwrap();
    let x = to(&Tensor::from_vec(vec![1f32, -2., 3.], &[3]).unwrap(), d);
    b.sync().unwrap();
    let resident = w.resident_tensors();
    let y = {
        let _eager = LazyModeGuard::new(false);
        let y = ops::relu(&ops::mul_scalar(&x, 2).unwrap()).unwrap();
        assert_eq!(b.pending_calls(), 0, "ran at once");
        y
    };
    // Each call's result is kept on the worker (no host copy of x's data was made for it).
    assert!(w.resident_tensors() > resident);
    assert_eq!(y.device(), d);
    assert_eq!(values(&y), [2., 0., 6.]);
    assert!(b.stats().eager_mode_calls >= 2);
    assert!(b.stats().eager_fallback_count == 0);
}

#[test]
fn the_profile_includes_the_time_on_the_worker() {
    let w = worker();
    let d = connect(2, &w);
    let b = lazy::backend(d).unwrap();
    let x = to(
        &Tensor::from_vec(vec![1f32; 64 * 64], &[64, 64]).unwrap(),
        d,
    );
    b.sync().unwrap();
    b.set_profiling(true);
    let y = ops::mm(&x, &x).unwrap();
    let captured = b.profile()["aten::mm"].clone();
    assert_eq!(captured.count, 1);
    assert_eq!(values(&y)[0], 64.0); // runs the graph on the worker
                                     // One call, captured then run: its time now has the worker's part too.
    let p = b.profile()["aten::mm"].clone();
    assert_eq!(p.count, 1, "{p:?}");
    assert!(
        p.avg_overhead_ns > captured.avg_overhead_ns,
        "{captured:?} then {p:?}"
    );
    b.set_profiling(false);
}

#[test]
fn a_kept_result_is_read_from_the_worker_once() {
    let w = worker();
    let d = connect(3, &w);
    let x = to(
        &Tensor::from_vec((0..200).map(|i| i as f32).collect(), &[200]).unwrap(),
        d,
    );
    let y = ops::mul_scalar(&x, 3).unwrap();
    lazy::backend(d).unwrap().sync().unwrap();
    let client_trips = || {
        // Every device connected by `connect` has its own client; this one's counters.
        let exe = lazy::backend(d).unwrap().executor();
        exe.report()
    };
    let before = client_trips();
    assert_eq!(values(&y)[199], 597.0);
    assert_eq!(values(&y)[1], 3.0);
    let after = client_trips();
    assert_ne!(before, after, "the first read fetched");
    assert_eq!(after, client_trips());
}

#[test]
fn connecting_from_the_environment_says_what_is_missing() {
    std::env::remove_var(remote::WORKER_ENV);
    let e = remote::connect_from_env().unwrap_err().to_string();
    assert!(
        e.contains("remote_accelerator needs a worker: set SWITCHBOARD_WORKER=HOST:PORT"),
        "{e}"
    );
    let e = remote::connect(
        0,
        "127.0.0.1:1",
        ClientConfig {
            connect_timeout: std::time::Duration::from_millis(500),
            ..ClientConfig::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("127.0.0.1:1"), "{e}");
}
