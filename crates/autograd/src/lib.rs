//! Switchboard's autograd (PyTorch 2.15 semantics): autograd metadata on tensors, the graph
//! of backward [`Node`]s, the engine (`backward`, [`grad`]), grad-mode guards, custom
//! functions, `gradcheck` / `gradgradcheck`, and the `Autograd` / `ADInplaceOrView` kernels of
//! the aten operators, generated from switchboard-ops' `derivatives.yaml` (see
//! switchboard-codegen). Linking this crate registers the kernels in the global dispatcher.
//!
//! ```
//! use switchboard_autograd::AutogradTensor;
//! use switchboard_cpu as _; // links the CPU kernels
//! use switchboard_ops as ops;
//! use switchboard_tensor::Tensor;
//!
//! let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2])?.requires_grad_(true)?;
//! let y = ops::sum(&ops::mul(&x, &x)?)?;
//! assert_eq!(y.grad_fn().unwrap().name(), "SumBackward0");
//! y.backward()?;
//! assert_eq!(x.grad().unwrap().to_vec::<f32>()?, [2.0, 4.0]);
//! # Ok::<(), switchboard_autograd::DispatchError>(())
//! ```
#![warn(missing_docs)]

mod autograd_meta;
mod copy_slices;
mod engine;
mod formulas;
mod forward_ad;
mod forward_grad;
mod function;
mod generated;
mod grad_mode;
mod gradcheck;
mod graph_drop;
mod node;
mod not_implemented;
mod recording;
mod tensor_ext;

pub use autograd_meta::AutogradMeta;
pub use engine::{grad, AccumulateGrad};
pub use formulas::sum_to;
pub use forward_ad::{
    dual_level, enter_dual_level, exit_dual_level, make_dual, unpack_dual, DualLevel,
};
pub use forward_grad::{alias_with_forward_grads_of, detach_keeping_forward_grads, forward_grad};
pub use function::{apply, Function, FunctionCtx};
pub use generated::OPERATORS;
pub use grad_mode::{
    enable_grad, is_grad_enabled, is_inference_mode_enabled, no_grad, set_grad_enabled,
    EnableGradGuard, GradModeGuard, InferenceMode, NoGradGuard,
};
pub use gradcheck::{gradcheck, gradcheck_forward_ad, gradgradcheck};
pub use node::{
    Edge, FnNode, Formula, Hook, InputMeta, Node, NodeMeta, PostAccumulateGradHook, SavedTensor,
};
pub use not_implemented::{
    autograd_fallback_mode, set_autograd_fallback_mode, AutogradFallbackMode,
};
pub use switchboard_dispatcher::{DispatchError, Result};
pub use tensor_ext::{AutogradTensor, BackwardOptions};

/// How an operator takes part in autograd: which Autograd kernel switchboard-codegen generated
/// for it (Note [Which kernel an operator gets] in switchboard-codegen).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutogradKind {
    /// CompositeImplicitAutograd: no kernel; the operators of its decomposition record.
    Composite,
    /// No tensor argument (factories): no kernel.
    NoTensors,
    /// Records the node of its `derivatives.yaml` entry.
    Formula,
    /// In place: records the node of its out-of-place form's entry (or its own) and rebases
    /// the history of `self`.
    Inplace,
    /// An `out=` overload: refuses arguments that require grad.
    Out,
    /// Outputs that are never differentiable: the key is skipped (a fallthrough).
    NonDifferentiable,
    /// A kernel without a formula: its outputs get a node that fails in backward.
    NotImplemented,
}

/// One operator of switchboard-ops and how it takes part in autograd (the generated
/// [`OPERATORS`] table lists them all, in `native_functions.yaml` order).
#[derive(Clone, Copy, Debug)]
pub struct OperatorAutograd {
    /// `name.overload` (`add.Tensor`).
    pub operator: &'static str,
    /// Its Autograd kernel.
    pub kind: AutogradKind,
    /// The backward node it records (`AddBackward0`), for `Formula` and `Inplace`.
    pub node: Option<&'static str>,
    /// The inputs that get gradients, in schema order.
    pub differentiable_inputs: &'static [&'static str],
    /// Whether its entry has a forward formula (`result:`): forward-mode AD goes through it;
    /// a differentiable operator without one raises PyTorch's forward-AD error.
    pub forward_formula: bool,
}

impl OperatorAutograd {
    /// Whether gradients flow through the operator's own Autograd kernel.
    pub fn is_differentiable(&self) -> bool {
        matches!(self.kind, AutogradKind::Formula | AutogradKind::Inplace)
    }
}

/// How operator `name` (`add.Tensor`) takes part in autograd, if switchboard-ops declares it.
pub fn operator_autograd(name: &str) -> Option<&'static OperatorAutograd> {
    OPERATORS.iter().find(|o| o.operator == name)
}

switchboard_dispatcher::library!(IMPL aten, Autograd, generated::register_autograd);
switchboard_dispatcher::library!(IMPL aten, ADInplaceOrView, generated::register_inplace_or_view);
