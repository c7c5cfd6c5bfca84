//! Switchboard's autograd (PyTorch 2.15 semantics): autograd metadata on tensors, the graph
//! of backward [`Node`]s, the engine (`backward`, [`grad`]), grad-mode guards, custom
//! functions, `gradcheck` / `gradgradcheck`, and the `Autograd` / `ADInplaceOrView` kernels of the aten
//! operators. Linking this crate registers the kernels in the global dispatcher.
//!
//! ```
//! use switchboard_autograd::AutogradTensor;
//! use switchboard_cpu as _; // links the CPU kernels
//! use switchboard_ops as ops;
//! use switchboard_tensor::Tensor;
//!
//! let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2])?.requires_grad_(true)?;
//! let y = ops::sum(&ops::mul(&x, &x)?)?;
//! y.backward()?;
//! assert_eq!(x.grad().unwrap().to_vec::<f32>()?, [2.0, 4.0]);
//! # Ok::<(), switchboard_autograd::DispatchError>(())
//! ```
#![warn(missing_docs)]

mod autograd_meta;
mod engine;
mod function;
mod grad_mode;
mod gradcheck;
mod kernels;
mod node;
mod recording;
mod tensor_ext;

pub use autograd_meta::AutogradMeta;
pub use engine::{grad, AccumulateGrad};
pub use function::{apply, Function, FunctionCtx};
pub use grad_mode::{
    enable_grad, is_grad_enabled, is_inference_mode_enabled, no_grad, set_grad_enabled,
    EnableGradGuard, GradModeGuard, InferenceMode, NoGradGuard,
};
pub use gradcheck::{gradcheck, gradgradcheck};
pub use node::{Edge, FnNode, Formula, Hook, InputMeta, Node, NodeMeta, SavedTensor};
pub use recording::sum_to;
pub use switchboard_dispatcher::{DispatchError, Result};
pub use tensor_ext::{AutogradTensor, BackwardOptions};

pub(crate) mod ops_impl {
    pub(crate) use crate::engine::AccumulateGrad;
}

switchboard_dispatcher::library!(IMPL aten, Autograd, |lib| {
    kernels::pointwise::register(lib)?;
    kernels::reduce::register(lib)?;
    kernels::nn::register(lib)?;
    kernels::shape::register(lib)?;
    kernels::inplace::register(lib)?;
    kernels::double_backward::register(lib)?;
    kernels::double_backward_nn::register(lib)?;
    kernels::out::register(lib)?;
    Ok(())
});
switchboard_dispatcher::library!(IMPL aten, ADInplaceOrView, kernels::ad_inplace_or_view::register);
