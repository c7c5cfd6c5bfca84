//! [`install`]: the capture on a private-use backend under a name of its own (Note [Lazy device
//! types]).

use std::sync::Mutex;

use switchboard_dispatcher::{
    DispatchError, DispatchErrorKind, Dispatcher, Library, LibraryKind, Result,
};
use switchboard_keys::{BackendComponent, DeviceType};

use crate::backend::{is_lazy_device_type, mark_installed, slot_of};
use crate::kernels::{fallback_kernel, register_on};

/// Held while installing, so two threads do not register twice.
static INSTALLING: Mutex<()> = Mutex::new(());

fn registration_error(msg: impl Into<String>) -> DispatchError {
    DispatchErrorKind::Registration(msg.into()).into()
}

/// Makes the private-use backend `component` a lazy device type named `name` (Note [Lazy
/// device types]): names it (as `rename_privateuse1_backend` does, so `name:0` parses and its
/// tensors print with it) and registers the lazy backend's kernels and fallback at its dense
/// key, so that tensors created on or moved to `name:N` are captured and run as `lazy:N`
/// tensors are, on devices with their own [`LazyBackend`](crate::LazyBackend) (and executor).
/// Returns the device type.
///
/// Installing the same component under the same name again returns at once. A name another
/// backend holds, or a second name for the component, is the naming error of
/// [`BackendComponent::rename`], and nothing is registered.
///
/// ```
/// use switchboard_keys::BackendComponent;
/// use switchboard_lazy as lazy;
/// use switchboard_ops as ops;
///
/// let ty = lazy::install(BackendComponent::PrivateUse3Bit, "graph_accel").unwrap();
/// let dev = switchboard_tensor::Device::with_index(ty, 0);
/// let x = ops::ones_with(&[2], ops::OnesOptions::default().device(dev)).unwrap();
/// let y = ops::exp(&x).unwrap();                     // captured on graph_accel:0
/// assert_eq!(y.device().to_string(), "graph_accel:0");
/// assert!(lazy::backend(dev).unwrap().pending_calls() > 0);
/// assert_eq!(lazy::default_backend().pending_calls(), 0);
/// assert!((y.to_vec::<f32>().unwrap()[0] - 1f32.exp()).abs() < 1e-6);
/// ```
pub fn install(component: BackendComponent, name: &str) -> Result<DeviceType> {
    let device_type = component
        .device_type()
        .filter(|ty| *ty != DeviceType::Lazy)
        .and_then(|ty| slot_of(ty).map(|slot| (ty, slot)));
    let Some((device_type, slot)) = device_type else {
        return Err(registration_error(format!(
            "the lazy backend installs on PrivateUse1, PrivateUse2 or PrivateUse3, not {component}"
        )));
    };
    let _installing = INSTALLING.lock().unwrap_or_else(|e| e.into_inner());
    component
        .rename(name)
        .map_err(|e| registration_error(e.message()))?;
    if is_lazy_device_type(device_type) {
        return Ok(device_type);
    }
    let key = device_type
        .dense_key()
        .map_err(|e| registration_error(e.message()))?;
    let d = Dispatcher::global();
    let mut lib = Library::new(d, LibraryKind::Impl, "aten", Some(key))?;
    register_on(&mut lib, device_type)?;
    let mut fallback = Library::new(d, LibraryKind::Impl, "_", Some(key))?;
    fallback.fallback(None, fallback_kernel())?;
    lib.leak();
    fallback.leak();
    mark_installed(slot);
    Ok(device_type)
}
