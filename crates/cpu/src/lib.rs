//! Switchboard's CPU kernels: PyTorch's operators as plain Rust functions over
//! [`Tensor`](switchboard_tensor::Tensor)s, computing for real on CPU tensors of any strides
//! (and propagating metadata only for meta tensors where that is cheap).
//!
//! Each kernel is named after its PyTorch operator and overload (`add_tensor` is
//! `add.Tensor`, `sum_dim_int_list` is `sum.dim_IntList`, `max_dim` is `max.dim`), takes the
//! schema's arguments in the schema's order (`out` last for `.out` overloads) and returns the
//! tensor crate's [`TensorError`](switchboard_tensor::TensorError) with PyTorch's message on
//! failure; kernels never panic on bad input.
//!
//! Elementwise kernels share one iterator, [`iter::TensorIter`] (broadcasting, type promotion,
//! casting, coalescing, contiguous fast paths and rayon parallelism); reductions share
//! [`reduce`]'s helper. See each module for its operators.
//!
//! ```
//! use switchboard_cpu as cpu;
//! use switchboard_tensor::{Scalar, Tensor};
//! let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
//! let b = cpu::mul_scalar(&a, Scalar::Float(2.0)).unwrap();
//! let s = cpu::sum(&cpu::add_tensor(&a, &b, Scalar::Int(1)).unwrap(), None).unwrap();
//! assert_eq!(s.item().unwrap(), Scalar::Float(30.0));
//! ```
#![warn(missing_docs)]

pub mod dispatch_dtype;
mod dispatch_macros;
pub mod error;
pub mod iter;
pub mod loops;
pub mod promote;
pub mod reduce;
pub mod threads;

mod activation;
mod activation_backward;
mod adaptive_pool;
mod adaptive_pool3d;
mod any;
mod atan2;
mod avg_pool;
mod avg_pool3d;
mod batch_norm;
mod binary;
mod bitwise;
mod clamp;
mod compare;
mod conj;
mod constant_pad;
mod conv;
mod copy;
mod cumulative;
mod distance;
mod elu;
mod embedding;
mod embedding_bag;
mod embedding_bag_backward;
mod extrema;
mod factory;
mod fft;
mod flash_attention;
mod flash_attention_kernel;
mod flip;
mod fold;
mod fresh_output;
mod gemm_dot;
mod grid_sampler;
mod group_norm;
mod index;
mod item;
mod linalg;
mod logical;
mod loss;
mod loss_nll2d;
mod max_pool3d;
mod modulo;
#[cfg(test)]
mod nn_testutil;
mod nonzero;
mod norm;
mod overloads;
mod padding;
mod pointwise_ops;
mod pool;
mod pow;
mod prod;
mod random;
mod randperm;
mod reductions;
mod repeat;
mod repeat_interleave;
mod rounding;
mod sdp_choice;
mod shape;
mod softmax;
mod sorting;
mod structured_output;
mod ternary;
mod triangular;
mod unary;
mod unary_float;
mod upsample;
mod vectorized_math;

#[cfg(feature = "register")]
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
mod registrations;

pub use activation::*;
pub use activation_backward::*;
pub use adaptive_pool::*;
pub use adaptive_pool3d::*;
pub use any::*;
pub use atan2::*;
pub use avg_pool::*;
pub use avg_pool3d::*;
pub use batch_norm::*;
pub use binary::*;
pub use bitwise::*;
pub use clamp::*;
pub use compare::*;
pub use conj::*;
pub use constant_pad::*;
pub use conv::*;
pub use copy::*;
pub use cumulative::*;
pub use distance::*;
pub use elu::*;
pub use embedding::*;
pub use embedding_bag::{_embedding_bag, _embedding_bag_forward_only};
pub use embedding_bag_backward::*;
pub use error::Result;
pub use extrema::*;
pub use factory::*;
pub use fft::*;
pub use flash_attention::*;
pub use flip::*;
pub use fold::*;
pub use grid_sampler::*;
pub use group_norm::*;
pub use index::*;
pub use item::*;
pub use linalg::*;
pub use logical::*;
pub use loss::*;
pub use loss_nll2d::*;
pub use max_pool3d::*;
pub use modulo::*;
pub use nonzero::*;
pub use norm::*;
pub use overloads::*;
pub use padding::*;
pub use pointwise_ops::*;
pub use pool::*;
pub use pow::*;
pub use prod::*;
pub use random::*;
pub use randperm::*;
pub use reductions::*;
pub use repeat::*;
pub use repeat_interleave::*;
pub use rounding::*;
pub use sdp_choice::*;
pub use shape::*;
pub use softmax::*;
pub use sorting::*;
pub use ternary::*;
pub use triangular::*;
pub use unary::*;
pub use unary_float::*;
pub use upsample::*;
