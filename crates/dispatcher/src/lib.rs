//! The Switchboard dispatcher: PyTorch's c10 dispatcher in Rust.
//!
//! Operators are registered by name and schema; kernels are registered per dispatch key; a call
//! computes the key set of its tensor arguments (plus this thread's included keys, minus its
//! excluded keys) and runs the kernel of the highest-priority key. Layers such as autograd
//! register kernels on their key that do their work and then *redispatch* to the keys below.
//!
//! ```
//! use switchboard_dispatcher::{Dispatcher, KernelFunction, Library, LibraryKind, Result};
//! use switchboard_keys::DispatchKey;
//! use switchboard_tensor::{Tensor, ScalarType};
//!
//! fn identity_cpu(x: &Tensor) -> Result<Tensor> { Ok(x.clone()) }
//!
//! let d = Dispatcher::with_builtin_fallbacks();
//! let mut lib = Library::new(&d, LibraryKind::Def, "demo", None)?;
//! lib.def("identity(Tensor x) -> Tensor")?;
//! lib.impl_("identity", Some(DispatchKey::CPU), KernelFunction::from_fn(identity_cpu))?;
//!
//! let op = d.find_schema_or_throw("demo::identity")?.typed::<(Tensor,), Tensor>()?;
//! // A plain CPU tensor also carries AutogradCPU; no autograd layer here, so skip it.
//! let _no_grad = switchboard_dispatcher::AutoDispatchBelowAutograd::new();
//! let x = Tensor::zeros(&[2, 3], ScalarType::Float).unwrap();
//! let y = op.call((&x,))?;
//! assert!(y.is_same(&x));
//! # Ok::<(), switchboard_dispatcher::DispatchError>(())
//! ```
#![warn(missing_docs)]

mod arg;
mod arities;
mod call;
mod custom_class;
mod debug;
mod dispatch_args;
mod dispatcher;
mod edit_distance;
mod error;
mod handle;
mod introspect;
mod ivalue;
mod ivalue_tensors;
mod kernel;
mod library;
mod observe;
mod op_map;
mod operator;
mod packed_scalar;
mod push;
#[cfg(test)]
mod refresh_tests;
mod ret;
mod schema_check;
mod schema_default;
mod semantics;
#[cfg(test)]
mod semantics_tests;
mod stack_cache;
mod table;
mod tls;

pub use arg::{Arg, KernelParam};
pub use call::{OperatorHandle, TypedOperatorHandle};
pub use custom_class::{CustomClass, Object};
pub use debug::RegistrationDebug;
pub use dispatcher::{Dispatcher, RegistrationHandle, BUILTIN_FALLTHROUGH_KEYS};
pub use error::{DispatchError, DispatchErrorKind, Result, SchemaMismatch};
pub use ivalue::{IValue, Stack};
pub use ivalue_tensors::stack_tensors;
#[doc(hidden)]
pub use kernel::Invoke;
pub use kernel::{ArgList, BoxedKernelFn, KernelFn, KernelFnWithKeys, KernelFunction, KernelKind};
pub use library::{static_registration_errors, Library, LibraryKind, StaticLibrary};
pub use observe::{
    add_observer, env_flag, parse_env_flag, set_dispatch_trace, CallEvent, ObserverGuard,
    DISPATCH_TRACE_ENV,
};
pub use operator::{AliasAnalysisKind, SchemaRecord};
pub use packed_scalar::PackedScalar;
pub use push::{push, PushValues};
pub use ret::{KernelReturn, ReturnValue};
pub use semantics::{KernelOrigin, OperatorSemantics, SchemaKind};
pub use table::{runtime_keys, Provenance, RUNTIME_KEYS};
pub use tls::*;
// Warnings and the guard stack live in the keys crate, the lowest, so that every crate can
// warn (device-string parsing does) and guard its thread-local settings.
pub use switchboard_keys::{
    set_warning_handler, warn, warn_once, GuardFrame, GuardStack, WarningHandler,
    WarningHandlerGuard,
};

pub use switchboard_keys::{DispatchKey, DispatchKeySet};
pub use switchboard_schema::{FunctionSchema, OperatorName, Tag, UnknownTag};
/// The one-word list of list-valued [`IValue`]s (Note [Two-word IValues]), and its macro.
pub use thin_vec::{thin_vec, ThinVec};

#[doc(hidden)]
pub use inventory;
