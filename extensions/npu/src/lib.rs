//! `npu`: an out-of-tree backend for Switchboard, built on the public API alone, as a PyTorch
//! accelerator extension is built on PrivateUse1 (`torch.utils.rename_privateuse1_backend`).
//!
//! - **Device.** [`init`] names PrivateUse1 `npu`: `npu:0` parses, PrivateUse1 tensors print
//!   as `device='npu:0'`, and their dispatch keys are `PrivateUse1` and `AutogradPrivateUse1`.
//! - **Memory.** Tensors own storage of their own: host memory tagged as the device (the
//!   emulated accelerator's memory). Factories given `device=npu` reach the backend's
//!   `empty.memory_format` / `empty_strided` through BackendSelect; `copy_` moves data to and
//!   from the CPU, so `to("npu")` and back work.
//! - **Kernels.** `add.Tensor`, `mul.Tensor`, `mm`, `relu` and `sum` are native (float32);
//!   every other operator runs through a boxed fallback that copies the arguments to the CPU,
//!   runs the CPU kernel and copies the results back (`switchboard::ops::cpu_fallback`).
//! - **Autocast** on PrivateUse1: `autocast(npu, ...)` casts with the accelerators' policy
//!   lists, float16 by default ([`autocast`]).
//! - **Autograd** works unchanged: its kernels are registered for the `Autograd` alias, which
//!   covers `AutogradPrivateUse1`, and redispatch to these kernels.
//!
//! ```
//! use switchboard::prelude::*;
//!
//! let npu = switchboard_npu::init()?;                        // PrivateUse1 is now "npu"
//! assert_eq!(npu.to_string(), "npu:0");
//! let x = ops::ones_with(&[2, 2], ops::OnesOptions::default().device(npu))?; // BackendSelect
//! let w = ops::to_device(&Tensor::from_vec(vec![1f32, -2., 3., -4.], &[2, 2])?, npu,
//!                        ScalarType::Float)?.requires_grad_(true)?;
//! let y = ops::mm(&x, &w)?.relu()?;                          // native kernels
//! let loss = ops::exp(&y)?.sum()?;                           // exp: the CPU fallback
//! loss.backward()?;                                          // AutogradPrivateUse1
//! assert_eq!(w.grad().unwrap().device(), npu);
//! assert_eq!(y.to_string(), "tensor([[4., 0.],\n        [4., 0.]], device='npu:0')");
//! let stats = switchboard_npu::backend().unwrap().stats();
//! assert!(stats.native.contains_key("aten::mm") && stats.fallback.contains_key("aten::exp"));
//! let back = ops::to_device(&y, Device::CPU, ScalarType::Float)?;
//! assert_eq!(back.to_vec::<f32>()?, [4., 0., 4., 0.]);
//! # Ok::<(), DispatchError>(())
//! ```
//!
//! [`install`] puts the same backend on PrivateUse2 or PrivateUse3 under other names, so up to
//! three run side by side.
#![warn(missing_docs)]

pub mod autocast;
mod backend;
mod fallback;
mod kernels;
mod memory;

pub use backend::{install, Backend, Stats, DEVICE_COUNT};

use switchboard::dispatcher::Result;
use switchboard::keys::{BackendComponent, DeviceType};
use switchboard::tensor::Device;

/// The name [`init`] gives PrivateUse1.
pub const NAME: &str = "npu";

/// Installs the backend as `npu` on PrivateUse1 (once; later calls return the same device) and
/// returns `npu:0`. Fails when PrivateUse1 already has another name.
pub fn init() -> Result<Device> {
    install(BackendComponent::PrivateUse1Bit, NAME)?.device(0)
}

/// The backend [`init`] installed, if it ran.
pub fn backend() -> Option<&'static Backend> {
    Backend::for_device_type(DeviceType::PrivateUse1)
}
