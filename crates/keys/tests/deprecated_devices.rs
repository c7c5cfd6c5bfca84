//! PyTorch's deprecated and grandfathered device types: `mkldnn` parses with a deprecation
//! warning given once per process; the grandfathered Caffe2 types parse but have no dispatch
//! key.

use std::sync::{Arc, Mutex};

use switchboard_keys::{
    parse_device, set_warning_handler, DeviceType, DispatchKey, MKLDNN_DEPRECATION,
};

#[test]
fn mkldnn_warns_once_per_process() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let _handler = set_warning_handler(move |m: &str| sink.lock().unwrap().push(m.to_owned()));
    assert_eq!(parse_device("cpu").unwrap(), (DeviceType::CPU, None));
    assert!(seen.lock().unwrap().is_empty(), "other types do not warn");
    assert_eq!(parse_device("mkldnn").unwrap(), (DeviceType::MKLDNN, None));
    assert_eq!(
        parse_device("mkldnn:0").unwrap(),
        (DeviceType::MKLDNN, Some(0))
    );
    assert_eq!("mkldnn".parse::<DeviceType>().unwrap(), DeviceType::MKLDNN);
    assert_eq!(*seen.lock().unwrap(), [MKLDNN_DEPRECATION]);
    assert_eq!(
        MKLDNN_DEPRECATION,
        "'mkldnn' is no longer used as device type. So torch.device('mkldnn') will be \
         deprecated and removed in the future. Please use other valid device types instead."
    );
    // Still a grandfathered type: no dispatch key.
    let err = DispatchKey::for_device("mkldnn").unwrap_err();
    assert!(err
        .message()
        .starts_with("This is a grandfathered Caffe2 device type mkldnn"));
}
