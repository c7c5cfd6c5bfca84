//! Mixed precision on the backend: an autocast policy at `AutocastPrivateUse1`, so
//! `autocast(npu, Half, ...)` casts as `torch.autocast("npu")` does for a PrivateUse1
//! accelerator.
//!
//! Note [Autocast of a private-use backend]
//! PyTorch gives PrivateUse1 an autocast key (`AutocastPrivateUse1`, float16 by default) but no
//! kernels: the out-of-tree backend registers its own. This one registers a policy table
//! (`switchboard::autocast::BackendPolicy`) with the CUDA policy's operator lists, the lists
//! PyTorch's accelerators (CUDA, XPU, MPS, MTIA) share, and the key's fallthrough for the other
//! operators. PrivateUse2 and PrivateUse3 have no
//! autocast key in PyTorch, so a backend installed there has no autocast, and an autocast
//! region of its device is `torch.autocast`'s "unsupported autocast device_type" error.

use switchboard::autocast::{register_policy, BackendPolicy, CUDA};
use switchboard::dispatcher::{Dispatcher, KernelFunction, Library, LibraryKind, Result};
use switchboard::keys::{DeviceType, DispatchKey};
use switchboard::tensor::ScalarType;

/// The backend's autocast policy on PrivateUse1 (Note [Autocast of a private-use backend]).
pub static POLICY: BackendPolicy = BackendPolicy {
    key: DispatchKey::AutocastPrivateUse1,
    device_type: DeviceType::PrivateUse1,
    eligible_devices: &[DeviceType::PrivateUse1],
    default_dtype: ScalarType::Half,
    supported_dtypes: &[ScalarType::Half, ScalarType::BFloat16],
    ops: CUDA.ops,
};

/// Registers [`POLICY`] in the global dispatcher, for the process's life.
pub(crate) fn register() -> Result<()> {
    let d = Dispatcher::global();
    let mut lib = Library::new(
        d,
        LibraryKind::Impl,
        "aten",
        Some(DispatchKey::AutocastPrivateUse1),
    )?;
    register_policy(&mut lib, &POLICY)?;
    // Operators off the policy fall through the key, as the built-in Autocast keys' do;
    // PyTorch leaves this fallthrough to the PrivateUse1 backend too.
    let mut fallthrough = Library::new(
        d,
        LibraryKind::Impl,
        "_",
        Some(DispatchKey::AutocastPrivateUse1),
    )?;
    fallthrough.fallback(None, KernelFunction::fallthrough())?;
    lib.leak();
    fallthrough.leak();
    Ok(())
}
