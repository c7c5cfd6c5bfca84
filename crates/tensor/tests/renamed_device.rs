//! A renamed PrivateUse1 backend is a device of the tensor runtime (PyTorch's
//! `rename_privateuse1_backend`). The name is process-wide, so this binary holds one test.

use switchboard_keys::{rename_privateuse1_backend, DeviceType, DispatchKey};
use switchboard_tensor::{Device, ScalarType, Tensor};

#[test]
fn tensors_live_on_the_renamed_device() {
    assert!("accel".parse::<Device>().is_err());
    rename_privateuse1_backend("accel").unwrap();

    let device: Device = "accel:1".parse().unwrap();
    assert_eq!(device, Device::with_index(DeviceType::PrivateUse1, 1));
    assert_eq!(device.to_string(), "accel:1");
    assert_eq!(
        "privateuseone:1".parse::<Device>().unwrap().to_string(),
        "accel:1"
    );
    let keys = Device::new(DeviceType::PrivateUse1)
        .dense_key_set()
        .unwrap();
    assert_eq!(
        keys.to_string(),
        "DispatchKeySet(PrivateUse1, ADInplaceOrView, AutogradPrivateUse1, AutocastPrivateUse1)"
    );

    let t = Tensor::zeros_on(&[2, 3], ScalarType::Float, device).unwrap();
    assert_eq!(t.device().to_string(), "accel:1");
    assert!(t.key_set().has(DispatchKey::PrivateUse1));
}
