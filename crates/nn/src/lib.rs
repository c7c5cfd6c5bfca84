//! Switchboard's neural-network building blocks, after `torch.nn` and `torch.optim`:
//!
//! - [`Module`]s: [`Linear`] (PyTorch's default initialization), [`ReLU`], [`Sequential`],
//!   and [`mlp`] to stack them; [`BatchNorm2d`] and [`GroupNorm`]; [`AdaptiveAvgPool2d`] and
//!   [`AvgPool2d`]; `train()` / `eval()` modes (batch norm's running statistics) and buffers
//!   with PyTorch's names;
//! - optimizers: [`Sgd`] (momentum, dampening, weight decay, Nesterov) and [`Adam`], with
//!   PyTorch's update rules written as dispatched in-place tensor operators under
//!   [`no_grad`](switchboard_autograd::no_grad).
//!
//! Every computation goes through `switchboard_ops`, so the dispatcher (and its observers,
//! and the autograd layer) sees each call. A backend must be linked (e.g. `switchboard-cpu`
//! with its `register` feature).
//!
//! ```
//! use switchboard_autograd::AutogradTensor;
//! use switchboard_cpu as _; // links the CPU kernels
//! use switchboard_nn::{mlp, Module, Optimizer, Sgd};
//! use switchboard_ops as ops;
//! use switchboard_tensor::Tensor;
//!
//! let model = mlp(&[64, 128, 10], 0)?;
//! let x = ops::randn(&[4, 64])?;
//! let y = Tensor::from_vec(vec![0i64, 3, 7, 9], &[4])?;
//! let mut opt = Sgd::new(model.parameters(), 0.1).momentum(0.9);
//! let loss = ops::cross_entropy_loss(&model.forward(&x)?, &y)?;
//! opt.zero_grad();
//! loss.backward()?;
//! opt.step()?;
//! # Ok::<(), switchboard_dispatcher::DispatchError>(())
//! ```
#![warn(missing_docs)]

mod module;
mod norm;
mod optim;
mod pooling;

pub use module::{mlp, Linear, Module, ReLU, Sequential};
pub use norm::{BatchNorm2d, GroupNorm};
pub use optim::{Adam, Optimizer, Sgd};
pub use pooling::{AdaptiveAvgPool2d, AvgPool2d};
pub use switchboard_dispatcher::Result;
