//! Three out-of-tree backends at once, on PrivateUse1, PrivateUse2 and PrivateUse3, each with a
//! name of its own (PyTorch names only PrivateUse1), and the error a crate gets when it claims a
//! name another backend holds. Names are process-wide and set once: one test owns them.

use switchboard::prelude::*;
use switchboard_npu::{install, Backend};

fn to(t: &Tensor, device: Device) -> Tensor {
    ops::to_device(t, device, t.dtype()).unwrap()
}

#[test]
fn three_named_backends_side_by_side() {
    let npu = switchboard_npu::init().unwrap();
    // A second crate claiming the name `npu` for its backend gets an error naming the holder,
    // and its backend component stays free.
    let err = install(BackendComponent::PrivateUse2Bit, "npu").unwrap_err();
    assert_eq!(
        err.to_string(),
        "Cannot name the PrivateUse2 backend 'npu': the PrivateUse1 backend already has that name"
    );
    assert_eq!(BackendComponent::PrivateUse2Bit.renamed(), None);
    let dpu = install(BackendComponent::PrivateUse2Bit, "dpu").unwrap();
    let apu = install(BackendComponent::PrivateUse3Bit, "apu").unwrap();
    let (dpu0, apu1) = (dpu.device(0).unwrap(), apu.device(1).unwrap());

    // Each name is a device of its own backend, with its own keys.
    assert_eq!("dpu:0".parse::<Device>().unwrap(), dpu0);
    assert_eq!(dpu0.ty, DeviceType::PrivateUse2);
    assert_eq!(apu1.to_string(), "apu:1");
    assert_eq!(
        DispatchKey::for_device("apu").unwrap(),
        DispatchKey::PrivateUse3
    );
    assert_eq!(
        dpu0.dense_key_set().unwrap().to_string(),
        "DispatchKeySet(PrivateUse2, ADInplaceOrView, AutogradPrivateUse2)"
    );

    // The same computation on each device, and on the CPU, gives the same numbers; each
    // backend's counters see only its own calls.
    let x = Tensor::from_vec(vec![1f32, -2., 3., -4., 5., -6.], &[2, 3]).unwrap();
    let w = Tensor::from_vec(vec![0.5f32, -1., 2., 0.25, -0.5, 1.], &[3, 2]).unwrap();
    let run = |device: Device| {
        let w = to(&w.detach(), device).requires_grad_(true).unwrap();
        let y = ops::mm(&to(&x, device), &w).unwrap().relu().unwrap();
        let loss = ops::tanh(&y).unwrap().sum().unwrap();
        loss.backward().unwrap();
        assert_eq!((y.device(), w.grad().unwrap().device()), (device, device));
        (
            y.to_string(),
            to(&w.grad().unwrap(), Device::CPU).to_vec::<f32>().unwrap(),
        )
    };
    apu.reset_stats();
    let (on_cpu, grad_cpu) = run(Device::CPU);
    for device in [npu, dpu0, apu1] {
        let (printed, grad) = run(device);
        assert_eq!(grad, grad_cpu, "{device}");
        assert_eq!(
            printed,
            on_cpu
                .replace(")", &format!(", device='{device}')"))
                .replacen(
                    &format!(", device='{device}'), device='{device}')"),
                    &format!("), device='{device}')"),
                    1,
                )
        );
    }
    let apu_stats = apu.stats();
    assert_eq!(apu_stats.native["aten::mm"], 2, "{apu_stats:?}"); // forward, and w's gradient
    assert_eq!(apu_stats.fallback["aten::tanh"], 1, "{apu_stats:?}");
    assert_eq!(
        apu_stats.fallback["aten::tanh_backward"], 1,
        "{apu_stats:?}"
    );
    assert!(Backend::for_device_type(DeviceType::PrivateUse2).is_some());

    // Tensors move between backends through the CPU; a direct copy says so.
    let on_npu = to(&x, npu);
    let on_dpu = to(&to(&on_npu, Device::CPU), dpu0);
    assert_eq!(on_dpu.to_vec::<f32>().unwrap(), x.to_vec::<f32>().unwrap());
    let err = ops::to_device(&on_npu, dpu0, ScalarType::Float).unwrap_err();
    assert!(err.to_string().contains("go through the CPU"), "{err}");
    // Mixing them in one call is the fallback's device error.
    let err = ops::exp(&on_npu)
        .and_then(|e| ops::sub(&e, &on_dpu))
        .unwrap_err();
    assert!(
        err.to_string().starts_with(
            "Expected all tensors to be on the same device, but found at least two devices"
        ),
        "{err}"
    );

    // A named backend keeps its name: claims of another name fail, whether through this
    // crate's installation or by renaming the backend component directly.
    let err = BackendComponent::PrivateUse3Bit.rename("dpu").unwrap_err();
    assert_eq!(
        err.message(),
        "the PrivateUse3Bit backend has already been named! Current backend: apu"
    );
    let err = install(BackendComponent::PrivateUse1Bit, "dpu").unwrap_err();
    assert_eq!(
        err.to_string(),
        "torch.register_privateuse1_backend() has already been set! Current backend: npu"
    );
    let err = install(BackendComponent::CPUBit, "cpu2").unwrap_err();
    assert!(err.to_string().contains("not CPUBit"), "{err}");
    // Names survive the failed claims.
    assert_eq!(npu.ty.name(), "npu");
    assert_eq!(dpu.name(), "dpu");
}
