//! The registry's entries, by kind of operator.

mod activation;
mod binary_math;
mod cumulative;
mod diagonal;
mod factory;
mod fft;
mod indexing;
mod linalg;
mod nn;
mod nn_attention;
mod nn_distance;
mod nn_embedding_bag;
mod nn_fold;
mod nn_grid_sampler;
mod nn_norm;
mod nn_padding;
mod nn_pool;
mod nn_pool3d;
mod nn_upsample;
mod pointwise;
mod pointwise_ops;
mod random;
mod reduction;
mod rounding;
mod shape;
mod sorting;
mod tiling;
mod unary_float;
mod view_copy;

use crate::Registry;

/// Adds every family's entries.
pub fn register(r: &mut Registry) {
    pointwise::register(r);
    pointwise_ops::register(r);
    reduction::register(r);
    cumulative::register(r);
    linalg::register(r);
    nn::register(r);
    nn_norm::register(r);
    nn_padding::register(r);
    nn_pool::register(r);
    nn_pool3d::register(r);
    nn_fold::register(r);
    nn_distance::register(r);
    nn_upsample::register(r);
    nn_grid_sampler::register(r);
    nn_embedding_bag::register(r);
    nn_attention::register(r);
    shape::register(r);
    diagonal::register(r);
    indexing::register(r);
    sorting::register(r);
    tiling::register(r);
    factory::register(r);
    fft::register(r);
    fft::register_composites(r);
    random::register(r);
    unary_float::register(r);
    rounding::register(r);
    binary_math::register(r);
    activation::register(r);
    // After every view's entry, whose samples the copies take.
    view_copy::register(r);
}
