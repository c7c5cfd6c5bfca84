//! The npu backend end to end: device naming and printing, factories through BackendSelect,
//! transfers both ways, native kernels, the CPU fallback (out-of-place, in-place, out=, views,
//! errors), and autograd through AutogradPrivateUse1. PrivateUse1's name is process-wide; every
//! test calls `init()`, which names it once.

use switchboard::prelude::*;
use switchboard::tensor::Storage;
use switchboard_npu::{backend, init};

fn npu() -> Device {
    init().unwrap()
}

fn to(t: &Tensor, device: Device) -> Tensor {
    ops::to_device(t, device, t.dtype()).unwrap()
}

fn values(t: &Tensor) -> Vec<f32> {
    to(t, Device::CPU).to_vec::<f32>().unwrap()
}

#[test]
fn device_names_print_and_keys() {
    let npu = npu();
    assert_eq!(npu, "npu:0".parse::<Device>().unwrap());
    assert_eq!(npu.ty, DeviceType::PrivateUse1);
    assert_eq!(
        DispatchKey::for_device("npu").unwrap(),
        DispatchKey::PrivateUse1
    );
    let x = ops::zeros_with(&[2], ops::ZerosOptions::default().device(npu)).unwrap();
    assert_eq!(x.device(), npu);
    assert_eq!(x.to_string(), "tensor([0., 0.], device='npu:0')");
    assert_eq!(
        x.key_set().to_string(),
        "DispatchKeySet(PrivateUse1, ADInplaceOrView, AutogradPrivateUse1, AutocastPrivateUse1)"
    );
    // A device without an index is device 0; an index past the backend's devices is refused.
    let y = ops::empty_with(
        &[1],
        ops::EmptyOptions::default().device("npu".parse().unwrap()),
    )
    .unwrap();
    assert_eq!(y.device().to_string(), "npu:0");
    let on_1 = ops::ones_with(
        &[1],
        ops::OnesOptions::default().device("npu:1".parse().unwrap()),
    );
    assert_eq!(on_1.unwrap().device().to_string(), "npu:1");
    let err = ops::empty_with(
        &[1],
        ops::EmptyOptions::default().device("npu:7".parse().unwrap()),
    )
    .unwrap_err();
    assert!(err.to_string().contains("Invalid device index 7"), "{err}");
    // Installing again under the same name is fine; another name for PrivateUse1 is not.
    assert_eq!(init().unwrap(), npu);
    let err = switchboard_npu::install(BackendComponent::PrivateUse1Bit, "tpu").unwrap_err();
    assert_eq!(
        err.to_string(),
        "torch.register_privateuse1_backend() has already been set! Current backend: npu"
    );
}

#[test]
fn transfers_keep_values_layout_and_dtype() {
    let npu = npu();
    let cpu = Tensor::from_vec((0..6).map(|i| i as f32).collect(), &[2, 3]).unwrap();
    let on_npu = to(&cpu, npu);
    assert_eq!(on_npu.device(), npu);
    assert!(
        !Storage::ptr_eq(on_npu.storage(), cpu.storage()),
        "its own storage"
    );
    assert_eq!(on_npu.storage().device(), npu);
    assert_eq!(values(&on_npu), [0., 1., 2., 3., 4., 5.]);
    // Non-contiguous sources keep their layout (empty_like preserves strides).
    let t = ops::t(&on_npu).unwrap();
    assert_eq!(t.device(), npu);
    let back = to(&t, Device::CPU);
    assert_eq!(back.strides(), &[1, 3]);
    assert_eq!(back.to_vec::<f32>().unwrap(), [0., 3., 1., 4., 2., 5.]);
    // Other dtypes, and a dtype change with the move.
    let ints = Tensor::from_vec(vec![1i64, -2, 3], &[3]).unwrap();
    let ints_npu = to(&ints, npu);
    assert_eq!(ints_npu.dtype(), ScalarType::Long);
    assert_eq!(ints_npu.to_string(), "tensor([ 1, -2,  3], device='npu:0')");
    let f = ops::to_device(&ints, npu, ScalarType::Double).unwrap();
    assert_eq!(to(&f, Device::CPU).to_vec::<f64>().unwrap(), [1., -2., 3.]);
    // Moving to the device it is on is a no-op, as in PyTorch.
    assert!(to(&on_npu, npu).is_same(&on_npu));
    // Between the two npu devices.
    let on_1 = to(&on_npu, "npu:1".parse().unwrap());
    assert_eq!(on_1.device().to_string(), "npu:1");
    assert_eq!(values(&on_1), [0., 1., 2., 3., 4., 5.]);
}

#[test]
fn native_kernels_and_the_fallback() {
    let npu = npu();
    let backend = backend().unwrap();
    let a_cpu = Tensor::from_vec(vec![1f32, -2., 3., -4., 5., -6.], &[2, 3]).unwrap();
    let b_cpu = Tensor::from_vec(vec![0.5f32, 1., 2.], &[3]).unwrap();
    let (a, b) = (to(&a_cpu, npu), to(&b_cpu, npu));

    let before = backend.stats();
    let n = |s: &switchboard_npu::Stats, op: &str| s.native.get(op).copied().unwrap_or(0);
    let f = |s: &switchboard_npu::Stats, op: &str| s.fallback.get(op).copied().unwrap_or(0);

    // Native: broadcasting add with alpha, mul, mm, relu, sum.
    let sum = ops::add_with(&a, &b, ops::AddOptions::default().alpha(2)).unwrap();
    assert_eq!(sum.device(), npu);
    assert_eq!(values(&sum), [2., 0., 7., -3., 7., -2.]);
    assert_eq!(
        values(&ops::mul(&a, &b).unwrap()),
        [0.5, -2., 6., -2., 5., -12.]
    );
    let prod = ops::mm(&a, &ops::t(&a).unwrap()).unwrap();
    assert_eq!(values(&prod), [14., -32., -32., 77.]);
    assert_eq!(values(&ops::relu(&a).unwrap()), [1., 0., 3., 0., 5., 0.]);
    let s = ops::sum(&a).unwrap();
    assert_eq!((s.dim(), s.device()), (0, npu));
    assert_eq!(s.item().unwrap().to_f64(), -3.0);
    let after = backend.stats();
    for op in [
        "aten::add.Tensor",
        "aten::mul.Tensor",
        "aten::mm",
        "aten::relu",
        "aten::sum",
    ] {
        assert!(
            n(&after, op) > n(&before, op),
            "{op} ran natively: {after:?}"
        );
    }

    // The fallback: results equal the CPU kernel's, on npu.
    let e = ops::exp(&a).unwrap();
    assert_eq!(e.device(), npu);
    assert_eq!(
        values(&e),
        ops::exp(&a_cpu).unwrap().to_vec::<f32>().unwrap()
    );
    // Two returns.
    let (vals, idx) = ops::max_dim(&a, 1).unwrap();
    assert_eq!((vals.device(), idx.device()), (npu, npu));
    assert_eq!(to(&idx, Device::CPU).to_vec::<i64>().unwrap(), [2, 1]);
    // In place: the npu tensor itself is written, and returned.
    let c = to(&a_cpu, npu);
    let r = ops::mul_scalar_(&c, 10).unwrap();
    assert!(r.is_same(&c));
    assert_eq!(values(&c), [10., -20., 30., -40., 50., -60.]);
    // out=: written into the given npu tensor.
    let out = ops::empty_with(&[2, 3], ops::EmptyOptions::default().device(npu)).unwrap();
    let r = ops::sub_out(&a, &a, &out).unwrap();
    assert!(r.is_same(&out));
    assert_eq!(values(&out), [0.; 6]);
    // An out= tensor of another size: whatever the CPU kernel does with it, the fallback does.
    let small = ops::empty_with(&[0], ops::EmptyOptions::default().device(npu)).unwrap();
    let small_cpu = Tensor::zeros(&[0], ScalarType::Float).unwrap();
    match (
        ops::add_out(&a, &b, &small),
        ops::add_out(&a_cpu, &b_cpu, &small_cpu),
    ) {
        (Ok(r), Ok(r_cpu)) => {
            assert_eq!((r.sizes(), r.device()), (r_cpu.sizes(), npu));
            assert_eq!(values(&r), r_cpu.to_vec::<f32>().unwrap());
        }
        (Err(e), Err(e_cpu)) => assert_eq!(e.to_string(), e_cpu.to_string()),
        (r, r_cpu) => panic!("npu {r:?} vs cpu {r_cpu:?}"),
    }
    // A list argument (cat) and a 0-dim CPU scalar mixed in (allowed, as in PyTorch).
    let cat = ops::cat(&[a.clone(), a.clone()]).unwrap();
    assert_eq!((cat.sizes(), cat.device()), (&[4i64, 3][..], npu));
    let scalar = Tensor::scalar_tensor(2.0, ScalarType::Float);
    assert_eq!(values(&ops::div(&a, &scalar).unwrap())[0], 0.5);
    // Natives hand other dtypes to the fallback.
    let ints = to(&Tensor::from_vec(vec![1i64, 2], &[2]).unwrap(), npu);
    assert_eq!(
        to(&ops::add(&ints, &ints).unwrap(), Device::CPU)
            .to_vec::<i64>()
            .unwrap(),
        [2, 4]
    );
    // Views are composite: they stay on npu and share its memory.
    let row = ops::select(&a, 0, 1).unwrap();
    assert!(row.is_alias_of(&a) && row.device() == npu);
    let stats = backend.stats();
    for op in [
        "aten::exp",
        "aten::max.dim",
        "aten::mul_.Scalar",
        "aten::sub.out",
        "aten::cat",
    ] {
        assert!(f(&stats, op) > f(&before, op), "{op} fell back: {stats:?}");
    }
    assert!(f(&stats, "aten::add.Tensor") > f(&before, "aten::add.Tensor"));
}

#[test]
fn errors_name_the_operator_and_devices() {
    let npu = npu();
    let a = to(&Tensor::ones(&[2, 2], ScalarType::Float).unwrap(), npu);
    let cpu = Tensor::ones(&[2, 2], ScalarType::Float).unwrap();
    // Mixed devices: the fallback's check, PyTorch's message.
    let err = ops::exp(&a).and_then(|e| ops::sub(&e, &cpu)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Expected all tensors to be on the same device, but found at least two devices, npu:0 \
         and cpu! (when checking argument for argument other in method aten::sub.Tensor)"
    );
    // Native kernels pass bad calls on: the CPU kernel's messages.
    let v = to(&Tensor::ones(&[3], ScalarType::Float).unwrap(), npu);
    let err = ops::mm(
        &a,
        &ops::ones_with(&[3, 2], ops::OnesOptions::default().device(npu)).unwrap(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("cannot be multiplied"), "{err}");
    assert!(ops::add(&a, &v)
        .unwrap_err()
        .to_string()
        .contains("must match"));
}

#[test]
fn autograd_through_autograd_private_use1() {
    let npu = npu();
    let x_cpu = Tensor::from_vec(vec![1f32, -2., 3., 4.], &[2, 2]).unwrap();
    let w_cpu = Tensor::from_vec(vec![0.5f32, -1., 2., 0.25], &[2, 2]).unwrap();
    let grads = |device: Device| {
        let x = to(&x_cpu, device);
        let w = to(&w_cpu, device).requires_grad_(true).unwrap();
        let y = ops::mm(&x, &w).unwrap().relu().unwrap();
        let loss = ops::mul(&y, &y).unwrap().sum().unwrap();
        if device == npu {
            assert_eq!(loss.device(), npu);
            assert_eq!(loss.grad_fn().unwrap().name(), "SumBackward0");
        }
        loss.backward().unwrap();
        let g = w.grad().unwrap();
        assert_eq!(g.device(), device);
        (values(&loss), values(&g))
    };
    assert_eq!(grads(npu), grads(Device::CPU));
}

#[test]
fn autograd_through_views_and_in_place_updates() {
    // View backward formulas build index tensors: they must be on the gradient's device
    // (select, narrow/slice), and an in-place update of a view rebases its base's history
    // (CopySlices) with masks on the base's device.
    let npu = npu();
    let w_cpu = Tensor::from_vec((1..=6).map(|i| i as f32).collect(), &[2, 3]).unwrap();
    let grads = |device: Device| {
        let w = to(&w_cpu, device).requires_grad_(true).unwrap();
        let row = ops::select(&w, 0, 1).unwrap();
        let cols = ops::narrow(&w, 1, 1, 2).unwrap();
        let y = ops::mul(&w, &w).unwrap();
        let part = ops::select(&y, 1, 0).unwrap();
        ops::mul_scalar_(&part, 10).unwrap();
        let loss = ops::add(
            &ops::add(
                &ops::mul(&row, &row).unwrap().sum().unwrap(),
                &cols.sum().unwrap(),
            )
            .unwrap(),
            &y.sum().unwrap(),
        )
        .unwrap();
        loss.backward().unwrap();
        let g = w.grad().unwrap();
        assert_eq!(g.device(), device);
        values(&g)
    };
    assert_eq!(grads(npu), grads(Device::CPU));
}
