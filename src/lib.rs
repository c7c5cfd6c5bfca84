//! Switchboard: PyTorch's operator dispatcher rebuilt in Rust.
//!
//! This facade re-exports the public API of the workspace's crates; most users only need
//! [`prelude`].

pub use switchboard_dispatcher as dispatcher;
pub use switchboard_keys as keys;
pub use switchboard_nn as nn;
pub use switchboard_ops as ops;
pub use switchboard_schema as schema;
pub use switchboard_tensor as tensor;

pub mod train;

/// The names most programs need.
pub mod prelude {
    pub use switchboard_dispatcher::{
        AutoDispatchBelowADInplaceOrView, AutoDispatchBelowAutograd, DispatchError, Dispatcher,
        ExcludeDispatchKeyGuard, IValue, IncludeDispatchKeyGuard, KernelFunction, Library,
        LibraryKind, OperatorHandle, Stack, TypedOperatorHandle,
    };
    pub use switchboard_keys::{BackendComponent, DeviceType, DispatchKey, DispatchKeySet};
    pub use switchboard_schema::{FunctionSchema, OperatorName};
    pub use switchboard_tensor::{Device, Layout, MemoryFormat, Scalar, ScalarType, Tensor};
}
