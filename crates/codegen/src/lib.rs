//! Switchboard's code generator (the counterpart of PyTorch's torchgen), used from build
//! scripts: it reads operator declarations in the format of PyTorch's
//! `native_functions.yaml` ([`parse_yaml`]) and derivative formulas in the format of PyTorch's
//! `derivatives.yaml` ([`parse_derivatives`]), and writes Rust source:
//!
//! - [`api`]: the typed operator API of the `ops` crate (one function per operator overload
//!   with a cached operator handle, taking the arguments without defaults, and a `_with`
//!   form with an options struct for the defaulted ones (Note [Operator API defaults] in
//!   `defaults.rs`); `redispatch::` functions, the `TensorOps` methods, the schema
//!   registrations and the composite / BackendSelect kernel registrations);
//! - [`backend`]: the kernel registrations of one backend crate for one dispatch key;
//! - [`lazy_registrations`]: the operators the lazy backend registers kernels for, from its
//!   list in the format of torch_xla's `xla_native_functions.yaml`;
//! - [`autograd`]: the autograd crate's backward nodes, its Autograd and ADInplaceOrView
//!   kernels and their registrations (Note [Which kernel an operator gets] in
//!   `emit_autograd/mod.rs`).
//!
//! Generated code is never edited by hand: change the YAML or this crate.

mod defaults;
mod derivatives;
mod emit_api;
mod emit_autograd;
mod emit_backend;
mod emit_lazy;
mod formula;
mod model;
mod structured;
mod tags;
mod types;

pub use derivatives::{
    node_prefix, parse_derivatives, plan, AutogradKind, AutogradPlan, Derivative, GradientFormula,
    DONT_REQUIRE_DERIVATIVE,
};
pub use emit_api::api;
pub use emit_autograd::autograd;
pub use emit_backend::backend;
pub use emit_lazy::lazy_registrations;
pub use model::{parse_yaml, NativeFunction, StructuredForm, StructuredKind};
pub use types::{rust_ident, RustArg};
