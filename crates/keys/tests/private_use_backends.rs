//! Three private-use backends named at once (Note [Devices of PrivateUse2 and PrivateUse3]):
//! each name is a device of its own backend, no two backends share a name, and PrivateUse2 and
//! PrivateUse3 do not take built-in device names. Names are process-wide and set once, so this
//! binary holds a single test that owns them.

use switchboard_keys::{
    parse_device, rename_privateuse1_backend, BackendComponent, DeviceType, DispatchKey,
};

#[test]
fn three_named_private_use_backends_side_by_side() {
    // Unnamed, PrivateUse2 and PrivateUse3 print with built-in names that are not device
    // strings (PyTorch has no such types: its parse error is unchanged).
    assert_eq!(DeviceType::PrivateUse2.name(), "privateusetwo");
    assert_eq!(DeviceType::PrivateUse3.to_string(), "privateusethree");
    let err = parse_device("privateusetwo").unwrap_err();
    assert!(
        err.message()
            .ends_with("mtia, privateuseone device type at start of device string: privateusetwo"),
        "{err}"
    );

    rename_privateuse1_backend("npu").unwrap();
    BackendComponent::PrivateUse3Bit.rename("apu").unwrap();

    // No two backends share a name, compared lower-cased (as devices print and parse); the
    // error names the backend holding it, and the claimant stays unnamed.
    for (claim, holder) in [
        ("npu", "PrivateUse1"),
        ("NPU", "PrivateUse1"),
        ("apu", "PrivateUse3"),
    ] {
        let err = BackendComponent::PrivateUse2Bit.rename(claim).unwrap_err();
        assert_eq!(
            err.message(),
            format!(
                "Cannot name the PrivateUse2 backend '{claim}': the {holder} backend already \
                 has that name"
            )
        );
    }
    // PrivateUse2 and PrivateUse3 take no built-in device name (it would never parse as
    // theirs); PyTorch's in-tree names are refused with PyTorch's message.
    for name in ["lazy", "Meta", "privateuseone"] {
        let err = BackendComponent::PrivateUse2Bit.rename(name).unwrap_err();
        assert_eq!(
            err.message(),
            format!(
                "Cannot name the PrivateUse2 backend '{name}': it is the name of the built-in \
                 device type {}",
                name.to_ascii_lowercase()
            )
        );
    }
    assert_eq!(
        BackendComponent::PrivateUse2Bit
            .rename("cuda")
            .unwrap_err()
            .message(),
        "Cannot register privateuse1 backend with in-tree device name: cuda"
    );
    assert_eq!(BackendComponent::PrivateUse2Bit.renamed(), None);
    BackendComponent::PrivateUse2Bit.rename("Dpu").unwrap();

    let expected = [
        ("npu", DeviceType::PrivateUse1, DispatchKey::PrivateUse1),
        ("dpu", DeviceType::PrivateUse2, DispatchKey::PrivateUse2),
        ("apu", DeviceType::PrivateUse3, DispatchKey::PrivateUse3),
    ];
    for (name, ty, key) in expected {
        assert_eq!(ty.name(), name);
        assert_eq!(parse_device(name).unwrap(), (ty, None));
        assert_eq!(parse_device(&format!("{name}:1")).unwrap(), (ty, Some(1)));
        assert_eq!(DispatchKey::for_device(name).unwrap(), key);
        assert_eq!(ty.dense_key().unwrap(), key);
        let backend = key.to_backend_component();
        assert_eq!(ty.private_use_backend(), Some(backend));
        assert_eq!(backend.device_type(), Some(ty));
    }
    // Names print lower-cased, so only the lower-cased name parses.
    assert!(parse_device("Dpu").is_err());

    // Once named, each keeps its name.
    assert_eq!(
        rename_privateuse1_backend("dpu").unwrap_err().message(),
        "torch.register_privateuse1_backend() has already been set! Current backend: npu"
    );
    assert_eq!(
        BackendComponent::PrivateUse2Bit
            .rename("xpu2")
            .unwrap_err()
            .message(),
        "the PrivateUse2Bit backend has already been named! Current backend: Dpu"
    );
    BackendComponent::PrivateUse2Bit.rename("Dpu").unwrap();
    // Each keeps its name.
    assert_eq!(BackendComponent::PrivateUse2Bit.renamed(), Some("dpu"));
    assert_eq!(BackendComponent::PrivateUse3Bit.renamed(), Some("apu"));
}
