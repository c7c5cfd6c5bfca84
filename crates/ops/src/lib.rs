//! Switchboard's operators: PyTorch's schemas declared in `native_functions.yaml` (same
//! format as PyTorch's), and the typed API generated from it by `switchboard-codegen`:
//!
//! - one function per operator overload (`ops::add(&a, &b)`, `ops::add_scalar`,
//!   `ops::sum_dim_int_list`): it looks its operator up once (a cached typed handle) and
//!   calls through the dispatcher, so every layer (autograd, tracing, ...) sees the call; it
//!   takes the arguments without a default, and a `_with` form sets the others (see
//!   [defaulted arguments](#defaulted-arguments));
//! - [`redispatch`]: the same with an explicit `DispatchKeySet` and every argument, for
//!   kernels that wrap others;
//! - [`TensorOps`]: the operators declared `variants: method` as `Tensor` methods;
//! - [`handles`]: the typed operator handles themselves;
//! - the composite kernels (`CompositeImplicitAutograd` decompositions such as `linear`,
//!   `matmul`, `cross_entropy_loss`, and `CompositeExplicitAutograd` kernels such as the views
//!   and the factories) and the generated BackendSelect kernels of factories.
//!
//! Backend crates (`switchboard-cpu`, `switchboard-meta`) generate their kernel registrations
//! from the same YAML file (its path reaches their build scripts as
//! `DEP_SWITCHBOARD_OPS_YAML`).
//!
//! ```
//! use switchboard_cpu as _; // a backend crate must be linked for the kernels
//! use switchboard_ops::{self as ops, TensorOps};
//! let a = ops::ones(&[2, 2])?;
//! let b = a.add(&a)?.sum()?;
//! assert_eq!(b.item()?.to_f64(), 8.0);
//! # Ok::<(), switchboard_ops::DispatchError>(())
//! ```
//!
//! # Defaulted arguments
//!
//! A generated function takes only the arguments that have no default in the schema, in
//! schema order (an `out=` overload's `out` included); the defaulted ones take the schema's
//! defaults, as in PyTorch's C++ API: `ops::randn(&[4, 3])`, `ops::sum(&x)`,
//! `ops::add(&a, &b)` (`alpha=1`), `ops::linear(&x, &w)` (no bias). When an overload has
//! defaulted arguments, `NAME_with` takes them in an options struct: `NameOptions` in
//! [`options`] (also at the crate root) has one public field per defaulted argument,
//! `Default` gives the schema's defaults, and setters named after the arguments set them
//! (the setter of an optional argument takes the value itself). Methods get the same pair
//! (`x.sum()`, `x.sum_with(..)`); an in-place operator keeps its `_` last (`x.add_with_(..)`,
//! with [`AddInplaceOptions`]). The short form costs what a call with every argument costs:
//! its defaults are constants. (Note [Operator API defaults] in `switchboard-codegen`.)
//!
//! ```
//! use switchboard_cpu as _;
//! use switchboard_ops::{self as ops, SumDimIntListOptions, TensorOps};
//! use switchboard_tensor::{ScalarType, Tensor};
//!
//! let x = ops::randn_with(&[4, 3], ops::RandnOptions::default().dtype(ScalarType::Double))?;
//! assert_eq!(x.dtype(), ScalarType::Double);
//! let rows = x.sum_dim_int_list_with(Some(&[1]), SumDimIntListOptions::default().keepdim(true))?;
//! assert_eq!(rows.sizes(), &[4, 1]);
//!
//! let a = Tensor::from_vec(vec![1.0f32, 2.0], &[2])?;
//! let b = ops::add_with(&a, &a, ops::AddOptions::default().alpha(2))?; // a + 2 * a
//! assert_eq!(b.to_vec::<f32>()?, [3.0, 6.0]);
//! let w = Tensor::from_vec(vec![1.0f32, 1.0], &[1, 2])?;
//! let bias = Tensor::from_vec(vec![10.0f32], &[1])?;
//! let y = ops::linear_with(&a, &w, ops::LinearOptions::default().bias(&bias))?;
//! assert_eq!(y.to_vec::<f32>()?, [13.0]);
//! // Fields can be set directly too, e.g. from values that are already optional.
//! let dtype: Option<ScalarType> = None;
//! let z = ops::zeros_with(&[2], ops::ZerosOptions { dtype, ..Default::default() })?;
//! assert_eq!(z.dtype(), ScalarType::Float);
//! # Ok::<(), switchboard_ops::DispatchError>(())
//! ```
#![warn(missing_docs)]

pub mod composite;
mod cpu_fallback;
mod first_use_handle;
mod out_arguments;
mod sdp_backend;
pub mod structured;

pub use cpu_fallback::cpu_fallback;
pub use first_use_handle::FirstUseHandle;
pub use out_arguments::write_out;
pub use sdp_backend::{flash_sdp_enabled, sdp_backend, set_flash_sdp_enabled, SdpBackend};

// Generated code: long signatures are PyTorch's schemas.
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
mod generated {
    use crate::FirstUseHandle;

    use switchboard_dispatcher::{
        DispatchKeySet, KernelFunction, Library, PackedScalar, Result, Tag, TypedOperatorHandle,
    };
    use switchboard_tensor::{Device, Generator, Layout, MemoryFormat, Scalar, ScalarType, Tensor};

    include!(concat!(env!("OUT_DIR"), "/api.rs"));
}

pub use generated::*;
pub use switchboard_dispatcher::{DispatchError, PackedScalar, Result};

use switchboard_dispatcher::{library, Dispatcher, KernelFunction, TypedOperatorHandle};
use switchboard_dispatcher::{ArgList, KernelReturn};
use switchboard_keys::DispatchKeySet;
use switchboard_tensor::Device;

library!(DEF aten, generated::register_schemas);
library!(IMPL aten, CompositeImplicitAutograd, generated::register_composite_implicit_autograd);
library!(IMPL aten, CompositeExplicitAutograd, generated::register_composite_explicit_autograd);
library!(
    IMPL aten,
    CompositeExplicitAutogradNonFunctional,
    generated::register_composite_explicit_autograd_non_functional
);
library!(IMPL aten, BackendSelect, generated::register_backend_select);

// Note [Autograd fallback]
// Tensors carry their backend's Autograd key whether or not they require grad (as in
// PyTorch), so every call reaches an Autograd slot first. Operators with an Autograd kernel
// (switchboard-autograd generates one for every operator of native_functions.yaml) run it;
// CompositeImplicitAutograd operators use their decomposition. Every other operator (an
// operator of another crate with only backend kernels) reaches this fallback. As in PyTorch,
// where ATen's fallback calls into libtorch's autograd through `VariableHooks`, the fallback's
// implementation is the autograd crate's (`basicAutogradNotImplementedFallback`, which
// makes the outputs of a call with inputs that require grad fail in backward) when that crate
// is linked: it submits an `AutogradFallback`. Without autograd, the fallback is a
// fallthrough: the key is skipped and the call goes on to the backend.

/// The implementation of the Autograd key's fallback (see Note [Autograd fallback]): a crate
/// that implements autograd submits one with `switchboard_dispatcher::inventory::submit!`.
/// Only one may be submitted.
pub struct AutogradFallback(
    pub  fn(
        &switchboard_dispatcher::OperatorHandle,
        DispatchKeySet,
        &mut switchboard_dispatcher::Stack,
    ) -> Result<()>,
);

switchboard_dispatcher::inventory::collect!(AutogradFallback);

library!(IMPL _, Autograd, |lib| {
    let mut provided = switchboard_dispatcher::inventory::iter::<AutogradFallback>.into_iter();
    let kernel = match (provided.next(), provided.next()) {
        (Some(f), None) => KernelFunction::from_boxed(f.0),
        (None, _) => KernelFunction::fallthrough(),
        (Some(_), Some(_)) => {
            return Err(switchboard_dispatcher::DispatchErrorKind::Kernel(
                "two crates provide the Autograd fallback (switchboard_ops::AutogradFallback)"
                    .into(),
            )
            .into())
        }
    };
    lib.fallback(None, kernel)
});

/// The typed handle of an `aten` operator of the global dispatcher (the generated functions
/// call this once each and cache the result).
///
/// # Panics
/// If the operator is missing or its schema does not match the generated signature: both
/// mean the generated code and the registered schemas disagree, a build error of this crate.
#[cold]
pub fn lookup<A: ArgList, R: KernelReturn>(name: &str) -> TypedOperatorHandle<A, R> {
    let d = Dispatcher::global();
    let op = d
        .find_schema_or_throw(name)
        .unwrap_or_else(|e| panic!("switchboard-ops: {e}"));
    op.typed()
        .unwrap_or_else(|e| panic!("switchboard-ops: {name}: {e}"))
}

/// The key set a factory's BackendSelect kernel redispatches to: the dense backend key of
/// `device` (CPU when `None`), as PyTorch's `computeDispatchKey`. The grandfathered Caffe2
/// device types (`mkldnn`, `opengl`, `opencl`, `ideep`) have none: PyTorch's error.
pub fn backend_select_keys(device: Option<Device>) -> Result<DispatchKeySet> {
    match device.unwrap_or_default().ty.dense_key() {
        Ok(key) => Ok(DispatchKeySet::from_key(key)),
        Err(e) => Err(switchboard_tensor::TensorError::invalid(e.message()).into()),
    }
}
