//! Capture: the three interception layers, their counts, errors at capture time, the
//! intercept log.

mod common;

use std::sync::OnceLock;

use common::*;
use switchboard_dispatcher::{Dispatcher, KernelFunction, Library, LibraryKind, Result};
use switchboard_keys::DispatchKey;
use switchboard_lazy as lazy;
use switchboard_ops as ops;
use switchboard_tensor::{Generator, ScalarType, Tensor};

/// `lazytest::twice` (a CPU kernel, no Meta kernel) and `lazytest::count_positive` (returns an
/// int).
fn test_ops() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let d = Dispatcher::global();
        let mut lib = Library::new(d, LibraryKind::Def, "lazytest", None).unwrap();
        lib.def("twice(Tensor x) -> Tensor").unwrap();
        lib.def("count_positive(Tensor x) -> int").unwrap();
        let twice = |x: &Tensor| -> Result<Tensor> {
            assert!(x.is_cpu(), "the eager fallback passes CPU tensors");
            let v: Vec<f32> = x.to_vec_as::<f32>()?.iter().map(|v| v * 2.0).collect();
            Ok(Tensor::from_vec(v, x.sizes())?)
        };
        let count = |x: &Tensor| -> Result<i64> {
            Ok(x.to_vec_as::<f32>()?.iter().filter(|v| **v > 0.0).count() as i64)
        };
        lib.impl_(
            "twice",
            Some(DispatchKey::CPU),
            KernelFunction::from_fn(twice),
        )
        .unwrap();
        lib.impl_(
            "count_positive",
            Some(DispatchKey::CPU),
            KernelFunction::from_fn(count),
        )
        .unwrap();
        lib.leak();
    });
}

#[test]
fn registered_kernels_capture_without_running() {
    let d = own_device();
    let before = d.stats();
    let x = d.lz(&seq(&[2, 2]));
    d.sync().unwrap();
    let syncs = d.stats().syncs;
    let (z, cpu_calls) = cpu_kernel_calls(|| {
        let y = ops::mm(&x, &x).unwrap();
        ops::relu(&ops::sub(&y, &x).unwrap()).unwrap()
    });
    assert_eq!(z.sizes(), &[2, 2]);
    assert_eq!(z.device(), d.device());
    assert_eq!(cpu_calls, 0, "capturing computes nothing");
    let after = d.stats();
    assert_eq!(after.syncs, syncs, "capturing runs nothing");
    assert!(after.registered_captures >= before.registered_captures + 3);
    assert!(d.pending_calls() >= 3);
    let (v, cpu_calls) = cpu_kernel_calls(|| values(&z));
    assert_eq!(v, [6.0, 8.0, 12.0, 18.0]);
    assert!(
        cpu_calls >= 3,
        "the sync runs the calls on CPU: {cpu_calls}"
    );
    assert_eq!(d.stats().syncs, syncs + 1);
    assert_eq!(d.pending_calls(), 0);
}

#[test]
fn the_fallback_captures_every_other_operator() {
    let d = own_device();
    assert!(!lazy::REGISTERED_OPS.contains(&"clamp"));
    let before = d.stats();
    let x = d.lz(&f32s(&[-2.0, -0.5, 0.5, 2.0], &[4]));
    let c = ops::clamp_with(&x, ops::ClampOptions::default().min(-1).max(1)).unwrap();
    let v = ops::var_dim(&d.lz(&seq(&[2, 3])), Some(&[1])).unwrap();
    assert_eq!(d.stats().syncs, before.syncs, "captured, not run");
    let after = d.stats();
    assert_eq!(
        after.fallback_capture_count,
        before.fallback_capture_count + 2
    );
    assert_eq!(
        after.fallback_ops["aten::clamp"],
        before.fallback_ops.get("aten::clamp").unwrap_or(&0) + 1
    );
    // var.dim is CompositeImplicitAutograd over var.correction, as in PyTorch.
    assert!(after.fallback_ops.contains_key("aten::var.correction"));
    assert_eq!(values(&c), [-1.0, -0.5, 0.5, 1.0]);
    assert_eq!(values(&v), [1.0, 1.0]);
}

#[test]
fn operators_that_cannot_be_captured_run_eagerly() {
    let d = own_device();
    test_ops();
    let dispatcher = Dispatcher::global();
    let twice = dispatcher
        .find_schema_or_throw("lazytest::twice")
        .unwrap()
        .typed::<(Tensor,), Tensor>()
        .unwrap();
    let count = dispatcher
        .find_schema_or_throw("lazytest::count_positive")
        .unwrap()
        .typed::<(Tensor,), i64>()
        .unwrap();
    let before = d.stats();
    let x = ops::neg(&d.lz(&f32s(&[1.0, -2.0, 3.0], &[3]))).unwrap();
    // No Meta kernel: the inputs are materialised, the CPU kernel runs, the result is lazy.
    let y = twice.call((&x,)).unwrap();
    assert_eq!(y.device(), d.device());
    let mid = d.stats();
    assert_eq!(mid.syncs, before.syncs + 1, "the pending neg ran first");
    assert!(mid.materializations > before.materializations);
    assert_eq!(values(&y), [-2.0, 4.0, -6.0]);
    // A host value.
    assert_eq!(count.call((&y,)).unwrap(), 1);
    // Random numbers: eager's, drawn from the same generator state.
    let g1 = Generator::new(7);
    let g2 = Generator::new(7);
    let cpu = Tensor::zeros(&[5], ScalarType::Float).unwrap();
    ops::normal_with_(&cpu, ops::NormalInplaceOptions::default().generator(&g1)).unwrap();
    let l = d.lz(&Tensor::zeros(&[5], ScalarType::Float).unwrap());
    let r = ops::normal_with_(&l, ops::NormalInplaceOptions::default().generator(&g2)).unwrap();
    assert!(r.is_same(&l), "an in-place op returns its argument");
    assert_eq!(values(&l), values(&cpu));
    let after = d.stats();
    assert_eq!(
        after.eager_fallback_ops["lazytest::twice"],
        before
            .eager_fallback_ops
            .get("lazytest::twice")
            .unwrap_or(&0)
            + 1
    );
    assert!(after
        .eager_fallback_ops
        .contains_key("lazytest::count_positive"));
    assert!(after.eager_fallback_ops.contains_key("aten::normal_"));
    assert!(after.capture_percentage < 100.0);
}

#[test]
fn errors_appear_at_capture_time_as_in_eager() {
    let d = own_device();
    let a = seq(&[2, 3]);
    let b = seq(&[4]);
    let (la, lb) = (d.lz(&a), d.lz(&b));
    d.sync().unwrap();
    let msg = |r: Result<Tensor>| r.unwrap_err().to_string();
    assert_eq!(msg(ops::add(&la, &lb)), msg(ops::add(&a, &b)));
    assert_eq!(msg(ops::mm(&la, &la)), msg(ops::mm(&a, &a)));
    let i = Tensor::from_vec(vec![1i64, 2], &[2]).unwrap();
    assert_eq!(
        msg(ops::add_with(
            &d.lz(&i),
            &d.lz(&i),
            ops::AddOptions::default().alpha(2.5)
        )),
        msg(ops::add_with(&i, &i, ops::AddOptions::default().alpha(2.5)))
    );
    d.sync().unwrap();
    assert_eq!(d.pending_calls(), 0, "a failed capture records nothing");
    let dev = d.device();
    assert_eq!(
        msg(ops::add(&la, &a)),
        format!(
            "Expected all tensors to be on the same device, but found at least two devices, \
             {dev} and cpu!"
        )
    );
    assert_eq!(
        msg(ops::mm(&a, &la)),
        format!(
            "Expected all tensors to be on the same device, but found at least two devices, cpu \
             and {dev}!"
        )
    );
    // A zero-dim CPU tensor mixes with lazy tensors, as CPU scalars do with any device.
    let s = Tensor::scalar_tensor(2.0, ScalarType::Float);
    assert_eq!(
        values(&ops::mul(&la, &s).unwrap()),
        values(&ops::mul(&a, &s).unwrap())
    );
    // ...but not with an operator whose tensors must all be on one device: the shape function
    // (on meta stand-ins) refuses it, and the error names the lazy device, not meta.
    let ls = d.lz(&s);
    let index = Tensor::from_vec(vec![0i64], &[]).unwrap();
    assert_eq!(
        msg(ops::gather(&ls, 0, &index)),
        format!(
            "Expected all tensors to be on the same device, but found at least two devices, \
             {dev} and cpu!"
        )
    );
}

#[test]
fn the_intercept_log_uses_genies_format() {
    let d = own_device();
    let x = d.lz(&seq(&[4, 4]));
    let v = d.lz(&seq(&[3]));
    let (_, lines) = lazy::capture_intercept_log(|| {
        (
            ops::mm(&x, &x).unwrap(),
            ops::sum(&v).unwrap(),
            ops::max_dim(&x, 1).unwrap(),
        )
    });
    assert_eq!(lines.len(), 3, "{lines:?}");
    let id = |l: &str| {
        l.split("id=lt_")
            .nth(1)
            .unwrap()
            .split(',')
            .next()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    assert_eq!(
        lines[0],
        format!(
            "[switchboard] Intercepted aten::mm -> id=lt_{}, in_shapes=[(4, 4), (4, 4)], out_shape=(4, 4)",
            id(&lines[0])
        )
    );
    assert!(
        lines[1].ends_with("in_shapes=[(3,)], out_shape=()"),
        "{}",
        lines[1]
    );
    assert!(lines[2].starts_with("[switchboard] Intercepted aten::max.dim -> id=lt_"));
    assert!(lines[2].ends_with("out_shape=[(4,), (4,)]"), "{}", lines[2]);
    assert!(id(&lines[1]) > id(&lines[0]));
    // Off by default (unless SWITCHBOARD_LOG_INTERCEPTS=1), and switchable.
    let was = lazy::log_intercepts();
    lazy::set_log_intercepts(true);
    assert!(lazy::log_intercepts());
    lazy::set_log_intercepts(was);
}

#[test]
fn factories_and_transfers() {
    let d = own_device();
    let z = ops::zeros_with(
        &[2, 3],
        ops::ZerosOptions::default()
            .dtype(ScalarType::Int)
            .device(d.device()),
    )
    .unwrap();
    assert_eq!((z.dtype(), z.device()), (ScalarType::Int, d.device()));
    let r = ops::arange_with(
        5,
        ops::ArangeOptions::default().device("lazy".parse().unwrap()),
    )
    .unwrap();
    assert_eq!(r.device().to_string(), "lazy:0");
    assert_eq!(r.to_vec::<i64>().unwrap(), [0, 1, 2, 3, 4]);
    let e = ops::empty_with(&[3], ops::EmptyOptions::default().device(d.device())).unwrap();
    assert_eq!(e.sizes(), &[3]);
    // to(lazy) copies: later writes to the CPU tensor do not show.
    let c = seq(&[3]);
    let l = d.lz(&c);
    ops::add_(&c, &c).unwrap();
    assert_eq!(values(&l), [1.0, 2.0, 3.0]);
    // to(cpu) and copy_ across devices, with broadcasting and conversion.
    let back = to(
        &ops::mul_scalar(&l, 2).unwrap(),
        switchboard_tensor::Device::CPU,
    );
    assert!(back.is_cpu() && back.has_data());
    assert_eq!(values(&back), [2.0, 4.0, 6.0]);
    let dst = Tensor::zeros(&[2, 3], ScalarType::Double).unwrap();
    ops::copy_(&dst, &l).unwrap();
    assert_eq!(dst.to_vec::<f64>().unwrap(), [1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
    let ldst = ops::zeros_with(&[2, 3], ops::ZerosOptions::default().device(d.device())).unwrap();
    ops::copy_(&ldst, &c).unwrap();
    assert_eq!(values(&ldst), [2.0, 4.0, 6.0, 2.0, 4.0, 6.0]);
    assert_eq!(
        ldst.to_string(),
        format!(
            "tensor([[2., 4., 6.],\n        [2., 4., 6.]], device='{}')",
            d.device()
        )
    );
    assert_eq!(ops::sum(&l).unwrap().item().unwrap().to_f64(), 6.0);
}
