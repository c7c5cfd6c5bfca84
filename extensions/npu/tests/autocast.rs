//! Autocast on npu (PrivateUse1, whose autocast key PyTorch defines): a region of the npu
//! device casts npu tensors with the backend's policy; a backend on PrivateUse2 or
//! PrivateUse3 has no autocast key, so a region of its device is torch.autocast's error.

use switchboard::autocast::{autocast, is_autocast_available, AutocastGuard};
use switchboard::keys::BackendComponent;
use switchboard::ops;
use switchboard::tensor::{Device, ScalarType};
use switchboard_cli::layers::AutocastDtype;
use switchboard_cli::train::{train, TrainConfig};

#[test]
fn regions_of_npu_cast_npu_tensors() {
    let npu = switchboard_npu::init().unwrap();
    assert!(is_autocast_available(npu.ty));
    let a = ops::to_device(&ops::ones(&[2, 3]).unwrap(), npu, ScalarType::Float).unwrap();
    let b = ops::to_device(&ops::ones(&[3, 4]).unwrap(), npu, ScalarType::Float).unwrap();
    let c = autocast(npu, ScalarType::Half, || ops::mm(&a, &b)).unwrap();
    assert_eq!((c.dtype(), c.device()), (ScalarType::Half, npu));
    // A CPU region leaves npu tensors alone, as in PyTorch.
    let c = autocast(Device::CPU, ScalarType::Half, || ops::mm(&a, &b)).unwrap();
    assert_eq!(c.dtype(), ScalarType::Float);
    let back = ops::to_device(&c, Device::CPU, ScalarType::Float).unwrap();
    assert_eq!(back.to_vec::<f32>().unwrap(), [3.0; 8]);
}

#[test]
fn private_use_two_has_no_autocast() {
    let apu = switchboard_npu::install(BackendComponent::PrivateUse2Bit, "apu2")
        .unwrap()
        .device(0)
        .unwrap();
    assert!(!is_autocast_available(apu.ty));
    let err = AutocastGuard::new(apu, ScalarType::Half).err().unwrap();
    assert_eq!(
        err.to_string(),
        "User specified an unsupported autocast device_type 'apu2'"
    );
}

#[test]
fn trains_in_mixed_precision_on_npu() {
    let npu = switchboard_npu::init().unwrap();
    let mut cfg = TrainConfig {
        epochs: 1,
        progress: false,
        summary: false,
        device: npu,
        ..TrainConfig::default()
    };
    cfg.layers.autocast = Some(AutocastDtype::Float16);
    let report = train(&cfg, &mut Vec::new()).unwrap();
    assert!(report.test_accuracy > 0.8, "{}", report.test_accuracy);
}
