//! Switchboard's neural-network building blocks, after `torch.nn` and `torch.optim`:
//!
//! - [`Module`]s: [`Linear`] (PyTorch's default initialization), [`ReLU`], [`Sequential`],
//!   and [`mlp`] to stack them;
//! - optimizers: [`Sgd`] (momentum, dampening, weight decay, Nesterov) and [`Adam`], with
//!   PyTorch's update rules written as dispatched in-place tensor operators under
//!   [`no_grad`](switchboard_autograd::no_grad).
//!
//! Every computation goes through `switchboard_ops`, so the dispatcher (and its observers,
//! and the autograd layer) sees each call. A backend must be linked (e.g. `switchboard-cpu`
//! with its `register` feature).
//!
//! ```ignore
//! use switchboard_nn::{mlp, Module, Optimizer, Sgd};
//! let model = mlp(&[64, 128, 10], 0)?;
//! let mut opt = Sgd::new(model.parameters(), 0.1).momentum(0.9);
//! let loss = ops::cross_entropy_loss(&model.forward(&x)?, &y, None, 1, -100, 0.0)?;
//! opt.zero_grad();
//! loss.backward(None, false, false)?;
//! opt.step()?;
//! ```
#![warn(missing_docs)]

mod module;
mod optim;

pub use module::{mlp, Linear, Module, ReLU, Sequential};
pub use optim::{Adam, Optimizer, Sgd};
pub use switchboard_dispatcher::Result;
