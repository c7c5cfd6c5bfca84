//! Switchboard: PyTorch's operator dispatcher rebuilt in Rust.
//!
//! This facade re-exports the public API of the workspace's crates and links the CPU, Meta and
//! lazy backends and the autograd, autocast, mode and tracing layers (their kernels register
//! themselves in [`Dispatcher::global()`](dispatcher::Dispatcher::global) at start-up); most
//! users only need [`prelude`].
//!
//! ```
//! use switchboard::prelude::*;
//! # fn main() -> Result<(), DispatchError> {
//! let x = ops::arange_with(6, ops::ArangeOptions::default().dtype(ScalarType::Float))?.view(&[2, 3])?;
//! let w = ops::ones(&[2, 3])?;
//! w.requires_grad_(true)?;
//! let loss = ops::linear(&x, &w)?.relu()?.sum()?;   // Autograd -> CPU, recorded
//! loss.backward()?;
//! assert_eq!(w.grad().unwrap().to_vec::<f32>().unwrap(), [3., 5., 7., 3., 5., 7.]);
//! let m = ops::empty_with(&[128, 784], ops::EmptyOptions::default().device(Device::META))?;
//! assert_eq!(ops::mm(&m, &ops::t(&m)?)?.sizes(), &[128, 128]);   // shapes only
//! # Ok(())
//! # }
//! ```

/// The README's Rust code blocks, run as doctests of this crate so that they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub use switchboard_autocast as autocast;
pub use switchboard_autograd as autograd;
pub use switchboard_cpu as cpu;
pub use switchboard_dispatcher as dispatcher;
pub use switchboard_functionalize as functionalize;
/// The composable function transforms (`torch.func`): `vmap`, `grad`, `vjp`, `jacrev`, ...
pub use switchboard_functorch as func;
pub use switchboard_graph as graph;
pub use switchboard_keys as keys;
pub use switchboard_lazy as lazy;
pub use switchboard_meta as meta;
pub use switchboard_modes as modes;
pub use switchboard_nn as nn;
pub use switchboard_ops as ops;
pub use switchboard_schema as schema;
pub use switchboard_tensor as tensor;
pub use switchboard_trace as trace;

/// The names most programs need.
pub mod prelude {
    pub use switchboard_dispatcher::{
        AutoDispatchBelowADInplaceOrView, AutoDispatchBelowAutograd, DispatchError, Dispatcher,
        ExcludeDispatchKeyGuard, IValue, IncludeDispatchKeyGuard, KernelFunction, Library,
        LibraryKind, OperatorHandle, PackedScalar, Stack, Tag, TypedOperatorHandle,
    };
    pub use switchboard_keys::{BackendComponent, DeviceType, DispatchKey, DispatchKeySet};
    pub use switchboard_schema::{FunctionSchema, OperatorName};
    pub use switchboard_tensor::{Device, Layout, MemoryFormat, Scalar, ScalarType, Tensor};

    pub use switchboard_autocast::{autocast, is_autocast_enabled, AutocastGuard, AutocastOptions};
    pub use switchboard_autograd::{
        enable_grad, no_grad, AutogradTensor, InferenceMode, NoGradGuard,
    };
    pub use switchboard_functionalize::{functionalize, Remove};
    pub use switchboard_modes::{push_mode, DispatchMode, FlopCounterMode, LoggingMode};
    pub use switchboard_ops::{self as ops, TensorOps};
    pub use switchboard_trace::{trace, Traced, Tracer};
}
