//! Lazy devices capture and run independently (Note [Lazy devices]): each has its own pending
//! graph, counters, operator filter and executor; tensors of two lazy devices do not mix, as
//! tensors of two CUDA devices do not; `to(lazy:N)` moves values between them.

mod common;

use std::sync::Arc;

use common::*;
use switchboard_lazy as lazy;
use switchboard_ops as ops;
use switchboard_tensor::{Device, ScalarType, Tensor};

fn device_error(a: Device, b: Device) -> String {
    format!(
        "Expected all tensors to be on the same device, but found at least two devices, {a} and \
         {b}!"
    )
}

#[test]
fn two_devices_capture_and_run_independently() {
    let (a, b) = (own_device(), own_device());
    let (xa, yb, mb) = (a.lz(&seq(&[3])), b.lz(&seq(&[2])), b.lz(&seq(&[2, 2])));
    a.sync().unwrap();
    b.sync().unwrap();
    a.reset_stats();
    b.reset_stats();
    let x = ops::exp(&xa).unwrap();
    let y = ops::mul_scalar(&yb, 2).unwrap();
    let z = ops::mm(&mb, &mb).unwrap();
    assert_eq!((x.device(), y.device()), (a.device(), b.device()));
    assert_eq!(z.device(), b.device());
    assert_eq!((a.pending_calls(), b.pending_calls()), (1, 2));
    assert!(a.pending_graph().to_string().contains("aten.exp.default"));
    assert!(!b.pending_graph().to_string().contains("aten.exp.default"));
    // Running one device's graph leaves the other's pending.
    a.sync().unwrap();
    assert_eq!((a.pending_calls(), b.pending_calls()), (0, 2));
    assert_eq!(values(&x), values(&ops::exp(&seq(&[3])).unwrap()));
    assert_eq!(b.stats().syncs, 0, "nothing ran on b");
    assert_eq!(values(&y), [2.0, 4.0]);
    assert_eq!(values(&z), [7.0, 10.0, 15.0, 22.0]);
    let (sa, sb) = (a.stats(), b.stats());
    assert_eq!((sa.explicit_syncs, sb.explicit_syncs), (1, 0));
    assert_eq!((sa.syncs, sb.syncs), (1, 1));
    assert_eq!(sa.nodes_captured, 1);
    assert_eq!(sb.nodes_captured, 2);
}

#[test]
fn tensors_of_two_lazy_devices_do_not_mix() {
    let (a, b) = (own_device(), own_device());
    let x = a.lz(&seq(&[2, 2]));
    let y = b.lz(&seq(&[2, 2]));
    a.sync().unwrap();
    b.sync().unwrap();
    let msg = |r: switchboard_dispatcher::Result<Tensor>| r.unwrap_err().to_string();
    let (da, db) = (a.device(), b.device());
    // The typed kernels (a shape rule applies), the boxed path, and the eager path.
    assert_eq!(msg(ops::add(&x, &y)), device_error(da, db));
    assert_eq!(msg(ops::mm(&y, &x)), device_error(db, da));
    a.disable_ops(&["mm"]).unwrap();
    assert_eq!(msg(ops::mm(&x, &y)), device_error(da, db));
    assert_eq!((a.pending_calls(), b.pending_calls()), (0, 0));
    // Moving a tensor to the other device (a copy through the host) makes them mix.
    let moved = to(&ops::neg(&x).unwrap(), db);
    assert_eq!(moved.device(), db);
    let sum = ops::add(&moved, &y).unwrap();
    assert_eq!(values(&sum), [0.0; 4]);
    let back = to(&sum, da);
    assert_eq!((back.device(), values(&back)), (da, vec![0.0; 4]));
    // A factory on one device with an argument of the other: the argument's values.
    let like = ops::ones_like_with(&x, ops::OnesLikeOptions::default().device(db)).unwrap();
    assert_eq!((like.device(), values(&like)), (db, vec![1.0; 4]));
}

#[test]
fn each_device_has_its_own_filter_executor_and_counts() {
    let (a, b) = (own_device(), own_device());
    a.disable_ops(&["relu"]).unwrap();
    assert_eq!(a.disabled_ops(), ["aten::relu"]);
    assert!(b.disabled_ops().is_empty());
    let (xa, xb) = (a.lz(&seq(&[3])), b.lz(&seq(&[3])));
    b.sync().unwrap();
    let on_a = ops::relu(&xa).unwrap();
    let on_b = ops::relu(&xb).unwrap();
    assert_eq!(a.stats().eager_fallback_ops.get("aten::relu"), Some(&1));
    assert!(b.stats().eager_fallback_ops.is_empty());
    assert_eq!(b.pending_calls(), 1, "captured on b");
    let old = b.set_executor(Arc::new(lazy::CpuExecutor));
    assert_eq!(old.name(), "cpu");
    b.set_profiling(true);
    let twice = ops::mul_scalar(&on_b, 2).unwrap();
    b.set_profiling(false);
    assert!(b.profile().contains_key("aten::mul.Scalar"));
    assert!(a.profile().is_empty());
    assert_eq!(values(&twice), [2.0, 4.0, 6.0]);
    assert_eq!(values(&on_a), [1.0, 2.0, 3.0]);
    b.reset_stats();
    assert_eq!(b.stats().operation_count, 0);
    assert!(a.stats().operation_count > 0);
}

#[test]
fn devices_on_two_threads_run_in_parallel() {
    let threads: Vec<_> = (0..2)
        .map(|k| {
            let d = own_device();
            std::thread::spawn(move || {
                let mut x = d.lz(&Tensor::full(&[4], k as f64, ScalarType::Float).unwrap());
                for _ in 0..50 {
                    x = ops::add_scalar(&x, 1).unwrap();
                    d.mark_step().unwrap();
                }
                (values(&x), d.stats().explicit_syncs)
            })
        })
        .collect();
    for (k, t) in threads.into_iter().enumerate() {
        let (v, syncs) = t.join().unwrap();
        assert_eq!(v, [k as f32 + 50.0; 4]);
        assert_eq!(syncs, 50);
    }
}

#[test]
fn lazy_device_indices_are_checked() {
    let last = lazy::MAX_LAZY_DEVICES - 1;
    let ok: Device = format!("lazy:{last}").parse().unwrap();
    assert_eq!(lazy::backend(ok).unwrap().device(), ok);
    let beyond: Device = format!("lazy:{}", last + 1).parse().unwrap();
    let err = ops::zeros_with(&[2], ops::ZerosOptions::default().device(beyond))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        format!(
            "lazy device index {} is out of range: the lazy devices are lazy:0 to lazy:{last}",
            last + 1
        )
    );
    assert!(lazy::backend(Device::CPU).is_err());
    // `lazy` without an index is the default device.
    let plain: Device = "lazy".parse().unwrap();
    assert!(std::ptr::eq(
        lazy::backend(plain).unwrap(),
        lazy::default_backend()
    ));
}
