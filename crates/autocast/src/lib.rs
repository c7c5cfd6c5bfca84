//! Switchboard's autocast layer (PyTorch 2.15's `torch.autocast`): inside a region, operators
//! on a backend's policy list run in a lower-precision dtype (matrix products, convolutions),
//! in float32 (losses), or in the widest dtype of their inputs (`cat`, `stack`); every other
//! operator falls through the Autocast key untouched.
//!
//! Each backend's policy is a table ([`BackendPolicy`]: key, devices, dtypes, operators); one
//! boxed kernel per [`CastPolicy`] serves all its operators. Linking this crate registers the
//! CPU and CUDA tables in the global dispatcher; another backend registers its own with
//! [`register_policy`].
//!
//! ```
//! use switchboard_autocast::autocast;
//! use switchboard_autograd::AutogradTensor;
//! use switchboard_cpu as _; // links the CPU kernels
//! use switchboard_ops as ops;
//! use switchboard_tensor::{Device, ScalarType};
//!
//! let x = ops::ones(&[2, 3])?;
//! let w = ops::ones(&[4, 3])?.requires_grad_(true)?;
//! let loss = autocast(Device::CPU, ScalarType::BFloat16, || {
//!     let y = ops::linear(&x, &w)?;                 // lower precision: bfloat16
//!     assert_eq!(y.dtype(), ScalarType::BFloat16);
//!     ops::mse_loss(&y, &ops::zeros(&[2, 4])?)      // fp32 list: computed in float32
//! })?;
//! assert_eq!(loss.dtype(), ScalarType::Float);
//! loss.backward()?;
//! assert_eq!(w.grad().unwrap().dtype(), ScalarType::Float); // through the cast, in w's dtype
//! # Ok::<(), switchboard_dispatcher::DispatchError>(())
//! ```
#![warn(missing_docs)]

mod cache;
mod kernel;
mod policy;
mod state;

pub use cache::{autocast_cache_len, clear_autocast_cache};
pub use policy::{registered_policy, BackendPolicy, CastPolicy, BUILTIN_POLICIES, CPU, CUDA};
pub use state::{
    autocast, autocast_device_types, autocast_with, get_autocast_dtype, is_autocast_available,
    is_autocast_cache_enabled, is_autocast_enabled, set_autocast_cache_enabled, set_autocast_dtype,
    set_autocast_enabled, AutocastGuard, AutocastOptions,
};

use switchboard_dispatcher::{DispatchError, DispatchErrorKind, Library, Result};

/// Registers `policy`'s kernels in `lib`, an `IMPL aten` library of the policy's Autocast key,
/// and makes its device usable with [`autocast`]. Operators not in the table keep the key's
/// fallthrough fallback.
///
/// ```
/// use switchboard_autocast::{register_policy, BackendPolicy, CastPolicy};
/// use switchboard_dispatcher::{Dispatcher, Library, LibraryKind};
/// use switchboard_keys::{DeviceType, DispatchKey};
/// use switchboard_tensor::ScalarType;
///
/// static NPU: BackendPolicy = BackendPolicy {
///     key: DispatchKey::AutocastPrivateUse1,
///     device_type: DeviceType::PrivateUse1,
///     eligible_devices: &[DeviceType::PrivateUse1],
///     default_dtype: ScalarType::Half,
///     supported_dtypes: &[ScalarType::Half, ScalarType::BFloat16],
///     ops: &[("mm", CastPolicy::LowerPrecisionFp), ("mse_loss", CastPolicy::Fp32)],
/// };
/// let d = Dispatcher::global();
/// let mut lib = Library::new(d, LibraryKind::Impl, "aten", Some(DispatchKey::AutocastPrivateUse1))?;
/// register_policy(&mut lib, &NPU)?;
/// assert!(d.has_kernel_for_dispatch_key("aten::mm", DispatchKey::AutocastPrivateUse1)?);
/// # Ok::<(), switchboard_dispatcher::DispatchError>(())
/// ```
pub fn register_policy(lib: &mut Library, policy: &'static BackendPolicy) -> Result<()> {
    for &(name, cast) in policy.ops {
        lib.impl_(
            name,
            Some(policy.key),
            kernel::autocast_kernel(policy, cast),
        )
        .map_err(|e| {
            DispatchError::from(DispatchErrorKind::Registration(format!(
                "autocast policy of {:?}, operator {name}: {e}",
                policy.key
            )))
        })?;
    }
    policy::remember_policy(policy);
    Ok(())
}

switchboard_dispatcher::library!(IMPL aten, AutocastCPU, |lib| register_policy(lib, &CPU));
switchboard_dispatcher::library!(IMPL aten, AutocastCUDA, |lib| register_policy(lib, &CUDA));
