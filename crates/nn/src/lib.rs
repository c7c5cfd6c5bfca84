//! Switchboard's neural-network building blocks, after `torch.nn` and `torch.optim`:
//!
//! - [`Module`]s: [`Linear`] and [`Conv2d`] (PyTorch's default initialization from a seeded
//!   generator), [`Embedding`], [`EmbeddingBag`], [`ReLU`], [`GELU`], [`Dropout`],
//!   [`Flatten`], [`Sequential`], and [`mlp`] to stack them; [`BatchNorm2d`], [`GroupNorm`] and [`LayerNorm`];
//!   [`AdaptiveAvgPool2d`], [`AvgPool2d`] and [`MaxPool2d`]; a small [`ResNet`] of
//!   [`BasicBlock`]s; [`MultiheadAttention`] over [`scaled_dot_product_attention`] (the fused
//!   flash kernel or the math path, as PyTorch chooses on CPU) and a decoder-only [`DecoderLm`] of [`DecoderBlock`]s; `train()` / `eval()`
//!   modes (batch norm's running statistics, dropout);
//!   parameters and buffers with PyTorch's dotted names (`layer1.0.conv1.weight`);
//! - state dicts ([`state_dict`], [`load_state_dict`] with PyTorch's strict checks and errors),
//!   saved and loaded as safetensors files that PyTorch reads and writes;
//! - optimizers: [`Sgd`] (momentum, dampening, weight decay, Nesterov) and [`Adam`] (and
//!   AdamW: [`Adam::adamw`], decoupled weight decay; AMSGrad), with PyTorch's update rules
//!   written as dispatched in-place tensor operators under
//!   [`no_grad`](switchboard_autograd::no_grad); [`LambdaLR`] and
//!   [`cosine_schedule_with_warmup`]; [`clip_grad_norm_`].
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

mod activation;
mod attention;
mod clip_grad;
mod conv;
mod decoder;
mod embedding;
mod embedding_bag;
mod init;
mod interpolate;
mod lr_scheduler;
mod module;
mod norm;
mod optim;
mod pooling;
mod resnet;
mod state_dict;

pub use activation::{Dropout, Flatten, GELU};
pub use attention::{scaled_dot_product_attention, MultiheadAttention};
// The attention backends and the flash switch (`torch.backends.cuda.enable_flash_sdp`).
pub use clip_grad::clip_grad_norm_;
pub use conv::{Conv2d, Conv2dOptions, Pair};
pub use decoder::{DecoderBlock, DecoderLm};
pub use embedding::Embedding;
pub use embedding_bag::EmbeddingBag;
pub use interpolate::{interpolate, Interpolate};
pub use lr_scheduler::{cosine_schedule_with_warmup, cosine_with_warmup_factor, LambdaLR};
pub use module::{mlp, Linear, Module, ReLU, Sequential};
pub use norm::{BatchNorm2d, GroupNorm, LayerNorm};
pub use optim::{Adam, Optimizer, Sgd};
pub use pooling::{AdaptiveAvgPool2d, AvgPool2d, MaxPool2d};
pub use resnet::{BasicBlock, ResNet};
pub use state_dict::{load_state_dict, load_state_dict_file, save_state_dict, state_dict};
pub use switchboard_dispatcher::Result;
pub use switchboard_ops::{flash_sdp_enabled, sdp_backend, set_flash_sdp_enabled, SdpBackend};
