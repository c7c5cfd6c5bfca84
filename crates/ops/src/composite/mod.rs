//! The composite kernels named in `native_functions.yaml`: CompositeImplicitAutograd
//! decompositions (autograd differentiates through the operators they call) and
//! CompositeExplicitAutograd kernels (backend-independent, with their own autograd
//! formulas). All of them call operators through the dispatcher, never kernels directly.

mod attention;
mod complex;
mod convert;
mod copy;
mod diagonal;
mod distance;
mod einsum;
mod embedding_bag;
mod factories;
mod fft;
mod grid_sampler;
mod logical;
mod nn;
mod nonzero;
mod normalization;
mod one_hot;
mod overloads;
mod padding;
mod pointwise;
mod pooling;
mod properties;
mod reduction;
mod scatter_views;
mod shape;
mod sorting;
mod split;
mod upsample;
mod view_copy;
mod wrapped_scalar;

pub use attention::*;
pub use complex::*;
pub use convert::*;
pub use copy::*;
pub use diagonal::*;
pub use distance::*;
pub use einsum::*;
pub use embedding_bag::*;
pub use factories::*;
pub use fft::*;
pub use grid_sampler::*;
pub use logical::*;
pub use nn::*;
pub use nonzero::*;
pub use normalization::*;
pub use one_hot::*;
pub use overloads::*;
pub use padding::*;
pub use pointwise::*;
pub use pooling::*;
pub use properties::*;
pub use reduction::*;
pub use scatter_views::*;
pub use shape::*;
pub use sorting::*;
pub use split::*;
pub use upsample::*;
pub use view_copy::*;
pub use wrapped_scalar::*;

use switchboard_dispatcher::{DispatchError, DispatchErrorKind};

/// An error raised by a composite kernel, with PyTorch's message.
#[cold]
pub(crate) fn error(msg: impl Into<String>) -> DispatchError {
    DispatchErrorKind::Kernel(msg.into()).into()
}

/// `v` as `n` values: PyTorch expands a one-element `int[N]` argument to N copies.
pub(crate) fn expand_param(name: &str, v: &[i64], n: usize) -> Result<Vec<i64>, DispatchError> {
    match v.len() {
        1 => Ok(vec![v[0]; n]),
        l if l == n => Ok(v.to_vec()),
        l => Err(error(format!(
            "expected {name} to be a single integer value or a list of {n} values to match the \
             convolution dimensions, but got {name}={v:?} ({l} values)"
        ))),
    }
}
