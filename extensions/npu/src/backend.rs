//! The installed backends: which private-use slot serves which name, the registrations made
//! for it, and what its kernels did.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use switchboard::dispatcher::{
    DispatchError, DispatchErrorKind, Dispatcher, KernelFunction, Library, LibraryKind, Result,
};
use switchboard::keys::{BackendComponent, DeviceType, DispatchKey};
use switchboard::tensor::Device;

use crate::{fallback, kernels, memory};

/// How many devices each backend has (`npu:0` and `npu:1`); a device index beyond is an error.
pub const DEVICE_COUNT: i16 = 2;

/// One installed backend: a private-use backend component with its name, its kernels and
/// fallback registered in the global dispatcher, and counters of what they ran.
pub struct Backend {
    component: BackendComponent,
    device_type: DeviceType,
    native: Mutex<BTreeMap<String, u64>>,
    fallback: Mutex<BTreeMap<String, u64>>,
}

/// What a backend's kernels ran since it was installed (or since [`Backend::reset_stats`]):
/// calls per operator, by native kernel and by the CPU fallback.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Calls served by a native kernel, per operator (`aten::add.Tensor`).
    pub native: BTreeMap<String, u64>,
    /// Calls that ran on the CPU through the fallback, per operator (`aten::addmm`).
    pub fallback: BTreeMap<String, u64>,
}

static BACKENDS: [OnceLock<Backend>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];

/// Serialises installations, so that the kernels of a slot are registered once.
static INSTALLING: Mutex<()> = Mutex::new(());

fn slot_index(component: BackendComponent) -> Option<usize> {
    match component {
        BackendComponent::PrivateUse1Bit => Some(0),
        BackendComponent::PrivateUse2Bit => Some(1),
        BackendComponent::PrivateUse3Bit => Some(2),
        _ => None,
    }
}

fn registration_error(msg: impl Into<String>) -> DispatchError {
    DispatchErrorKind::Registration(msg.into()).into()
}

/// Installs the backend on a private-use backend component under `name`: names the component
/// (as `rename_privateuse1_backend` does, so `name:0` is a device string and its tensors
/// print with it), then registers, at the component's dense key, the native kernels
/// (`empty.memory_format`, `empty_strided`, `copy_`, `add.Tensor`, `mul.Tensor`, `mm`, `relu`,
/// `sum`) and a boxed fallback that runs every other operator on the CPU; on PrivateUse1, also
/// an autocast policy (Note [Autocast of a private-use backend]).
///
/// Installing the same component under the same name again returns the installed backend.
/// A name another backend holds, or a second name for the component, is the naming error of
/// [`BackendComponent::rename`], and nothing is registered.
///
/// ```
/// use switchboard::keys::BackendComponent;
/// let apu = switchboard_npu::install(BackendComponent::PrivateUse3Bit, "apu")?;
/// assert_eq!(apu.device(0)?.to_string(), "apu:0");
/// let err = switchboard_npu::install(BackendComponent::PrivateUse2Bit, "apu").unwrap_err();
/// assert_eq!(err.to_string(),
///     "Cannot name the PrivateUse2 backend 'apu': the PrivateUse3 backend already has that name");
/// # Ok::<(), switchboard::dispatcher::DispatchError>(())
/// ```
pub fn install(component: BackendComponent, name: &str) -> Result<&'static Backend> {
    let index = slot_index(component).ok_or_else(|| {
        registration_error(format!(
            "switchboard-npu installs on PrivateUse1, PrivateUse2 or PrivateUse3, not {component}"
        ))
    })?;
    let _installing = INSTALLING.lock().unwrap_or_else(|e| e.into_inner());
    component
        .rename(name)
        .map_err(|e| registration_error(e.message()))?;
    if let Some(backend) = BACKENDS[index].get() {
        return Ok(backend);
    }
    let device_type = component
        .device_type()
        .ok_or_else(|| registration_error(format!("{component} has no device type")))?;
    let backend = Backend {
        component,
        device_type,
        native: Mutex::new(BTreeMap::new()),
        fallback: Mutex::new(BTreeMap::new()),
    };
    register(backend.dispatch_key())?;
    // Only PrivateUse1 has an autocast key (Note [Autocast of a private-use backend]).
    if component == BackendComponent::PrivateUse1Bit {
        crate::autocast::register()?;
    }
    Ok(BACKENDS[index].get_or_init(|| backend))
}

/// The kernels and the fallback, at `key`, in the global dispatcher, for the process's life.
fn register(key: DispatchKey) -> Result<()> {
    let d = Dispatcher::global();
    let mut lib = Library::new(d, LibraryKind::Impl, "aten", Some(key))?;
    lib.impl_(
        "empty.memory_format",
        None,
        KernelFunction::from_fn(memory::empty_memory_format),
    )?;
    lib.impl_(
        "empty_strided",
        None,
        KernelFunction::from_fn(memory::empty_strided),
    )?;
    lib.impl_("copy_", None, KernelFunction::from_fn(memory::copy_))?;
    lib.impl_("add.Tensor", None, KernelFunction::from_fn(kernels::add))?;
    lib.impl_("mul.Tensor", None, KernelFunction::from_fn(kernels::mul))?;
    lib.impl_("mm", None, KernelFunction::from_fn(kernels::mm))?;
    lib.impl_("relu", None, KernelFunction::from_fn(kernels::relu))?;
    lib.impl_("sum", None, KernelFunction::from_fn(kernels::sum))?;
    let mut fallback_lib = Library::new(d, LibraryKind::Impl, "_", Some(key))?;
    fallback_lib.fallback(None, KernelFunction::from_boxed(fallback::fallback))?;
    lib.leak();
    fallback_lib.leak();
    Ok(())
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend")
            .field("name", &self.name())
            .field("component", &self.component)
            .finish()
    }
}

impl Backend {
    /// The backend installed on the slot whose devices are of type `ty`, if any.
    pub fn for_device_type(ty: DeviceType) -> Option<&'static Backend> {
        BACKENDS[slot_index(ty.private_use_backend()?)?].get()
    }

    /// The backend component it is installed on (`PrivateUse1Bit`, ...).
    pub fn component(&self) -> BackendComponent {
        self.component
    }

    /// Its name (`npu`), the device type's name.
    pub fn name(&self) -> &'static str {
        self.device_type.name()
    }

    /// The type of its devices.
    pub fn device_type(&self) -> DeviceType {
        self.device_type
    }

    /// The dense dispatch key its kernels are registered at (`PrivateUse1`, ...).
    pub fn dispatch_key(&self) -> DispatchKey {
        self.device_type
            .dense_key()
            .expect("private-use device types have a dense key")
    }

    /// Device `index` of this backend (`npu:0`); an index beyond [`DEVICE_COUNT`] is an error.
    pub fn device(&self, index: i16) -> Result<Device> {
        check_index(self.name(), index)?;
        Ok(Device::with_index(self.device_type, index))
    }

    /// What its kernels ran so far.
    pub fn stats(&self) -> Stats {
        let read =
            |m: &Mutex<BTreeMap<String, u64>>| m.lock().unwrap_or_else(|e| e.into_inner()).clone();
        Stats {
            native: read(&self.native),
            fallback: read(&self.fallback),
        }
    }

    /// Clears the counters.
    pub fn reset_stats(&self) {
        for m in [&self.native, &self.fallback] {
            m.lock().unwrap_or_else(|e| e.into_inner()).clear();
        }
    }

    pub(crate) fn count_native(&self, op: &str) {
        count(&self.native, op);
    }

    pub(crate) fn count_fallback(&self, op: &str) {
        count(&self.fallback, op);
    }
}

fn count(m: &Mutex<BTreeMap<String, u64>>, op: &str) {
    let mut m = m.lock().unwrap_or_else(|e| e.into_inner());
    match m.get_mut(op) {
        Some(n) => *n += 1,
        None => {
            m.insert(op.to_string(), 1);
        }
    }
}

pub(crate) fn check_index(name: &str, index: i16) -> Result<()> {
    if (0..DEVICE_COUNT).contains(&index) {
        return Ok(());
    }
    Err(DispatchErrorKind::Kernel(format!(
        "Invalid device index {index}: the {name} backend has {DEVICE_COUNT} devices \
         ({name}:0 to {name}:{})",
        DEVICE_COUNT - 1
    ))
    .into())
}
