//! [`install`]: the capture on a private-use backend under a name of its own (Note [Lazy device
//! types]).

use std::sync::Mutex;

use switchboard_dispatcher::{
    DispatchError, DispatchErrorKind, Dispatcher, Library, LibraryKind, Result,
};
use switchboard_keys::{BackendComponent, DeviceType, DispatchKey};

use crate::backend::{is_lazy_device_type, mark_installed, slot_of};
use crate::kernels::{fallback_kernel, register_on, REGISTERED_OPS};

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
    capture_non_functional_composites(&mut lib)?;
    let mut fallback = Library::new(d, LibraryKind::Impl, "_", Some(key))?;
    fallback.fallback(None, fallback_kernel())?;
    lib.leak();
    fallback.leak();
    mark_installed(slot);
    Ok(device_type)
}

// Note [Functional kernels on a private-use device]
// A `CompositeExplicitAutogradNonFunctional` kernel decomposes a functional operator into
// calls that alias or write: `t_copy` is `t` then `clone`, `slice_scatter` writes into a
// clone. Its alias covers every backend but `Lazy` and `XLA` (PyTorch's
// `non_functional_backend_dispatch_keyset`), the backends that run functionalization, so
// that on them the call reaches their own kernel or fallback whole. A private-use backend is
// covered, so a lazy device type installed on one would capture `t_copy` of a value as a view
// read and a `clone`, and the graph would differ from `lazy`'s (its plan could not run the
// copy as the view it copies: Note [Copies that run as views] in switchboard-graph). So, as
// PyTorch asks of a backend that only takes functional operators, `install` registers the
// capture (the lazy fallback) as the backend's own kernel of every operator with such a
// kernel when it installs; the device then captures exactly what `lazy` captures.

/// Registers the lazy fallback as `lib`'s kernel of every `aten` operator that has a
/// `CompositeExplicitAutogradNonFunctional` kernel and no dedicated lazy one (Note
/// [Functional kernels on a private-use device]).
fn capture_non_functional_composites(lib: &mut Library) -> Result<()> {
    let d = Dispatcher::global();
    for name in d.list_operators() {
        if name.namespace() != Some("aten") {
            continue;
        }
        let entry = match name.overload_name() {
            "" => name.base_name().to_string(),
            overload => format!("{}.{overload}", name.base_name()),
        };
        let non_functional = d.find_op(&name).is_some_and(|op| {
            op.has_kernel_for_dispatch_key(DispatchKey::CompositeExplicitAutogradNonFunctional)
        });
        if non_functional && !REGISTERED_OPS.contains(&entry.as_str()) {
            lib.impl_with_static_debug(
                &entry,
                None,
                fallback_kernel(),
                "switchboard_lazy::capture [non-functional composite]",
            )?;
        }
    }
    Ok(())
}
