//! The registry's entries, by kind of operator.

mod factory;
mod linalg;
mod nn;
mod nn_norm;
mod nn_padding;
mod nn_pool;
mod pointwise;
mod random;
mod reduction;
mod shape;
mod view_copy;

use crate::Registry;

/// Adds every family's entries.
pub fn register(r: &mut Registry) {
    pointwise::register(r);
    reduction::register(r);
    linalg::register(r);
    nn::register(r);
    nn_norm::register(r);
    nn_padding::register(r);
    nn_pool::register(r);
    shape::register(r);
    view_copy::register(r);
    factory::register(r);
    random::register(r);
}
