//! Renaming the PrivateUse1 backend (PyTorch's `rename_privateuse1_backend`). The name is
//! process-wide and set once, so this test binary holds a single test that owns it.

use switchboard_keys::{
    parse_device, rename_privateuse1_backend, BackendComponent, DeviceType, DispatchKey,
};

#[test]
fn renamed_privateuse1_parses_prints_and_is_a_device() {
    // Before: the built-in name only.
    assert_eq!(DeviceType::PrivateUse1.name(), "privateuseone");
    assert!(parse_device("npu").is_err());
    assert_eq!(BackendComponent::PrivateUse1Bit.renamed(), None);

    // In-tree names are refused and leave it unnamed.
    let err = rename_privateuse1_backend("cuda").unwrap_err();
    assert_eq!(
        err.message(),
        "Cannot register privateuse1 backend with in-tree device name: cuda"
    );
    assert_eq!(DeviceType::PrivateUse1.name(), "privateuseone");

    rename_privateuse1_backend("NPU").unwrap();
    // PyTorch prints (and so parses) the name lower-cased.
    assert_eq!(DeviceType::PrivateUse1.name(), "npu");
    assert_eq!(DeviceType::PrivateUse1.builtin_name(), "privateuseone");
    assert_eq!(DeviceType::PrivateUse1.to_string(), "npu");
    assert_eq!(
        parse_device("npu:1").unwrap(),
        (DeviceType::PrivateUse1, Some(1))
    );
    assert_eq!(
        parse_device("npu").unwrap(),
        (DeviceType::PrivateUse1, None)
    );
    assert!(parse_device("NPU").is_err());
    // The built-in name still parses; the error's list is the built-in one.
    assert_eq!(
        parse_device("privateuseone:0").unwrap(),
        (DeviceType::PrivateUse1, Some(0))
    );
    assert!(parse_device("tpu")
        .unwrap_err()
        .message()
        .ends_with("mtia, privateuseone device type at start of device string: tpu"));
    assert_eq!(
        DispatchKey::for_device("npu").unwrap(),
        DispatchKey::PrivateUse1
    );
    assert_eq!(
        DispatchKey::for_device("npu:0").unwrap_err().message(),
        "Expected device_type string to not have a device index; got npu:0"
    );
    // Key names do not change.
    assert_eq!(DispatchKey::PrivateUse1.name(), "PrivateUse1");

    // Once: the same name again is fine, another is an error naming the current one.
    rename_privateuse1_backend("NPU").unwrap();
    let err = rename_privateuse1_backend("tpu").unwrap_err();
    assert_eq!(
        err.message(),
        "torch.register_privateuse1_backend() has already been set! Current backend: NPU"
    );
    assert_eq!(DeviceType::PrivateUse1.name(), "npu");
    // The other private-use backends are named independently.
    assert_eq!(BackendComponent::PrivateUse2Bit.renamed(), None);
}
