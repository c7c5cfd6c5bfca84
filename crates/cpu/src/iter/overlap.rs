//! Memory-overlap checks for written tensors: the structured meta functions' (switchboard-ops),
//! which the iterator runs as well.

pub use switchboard_ops::structured::{
    check_internal_overlap, check_no_overlap, check_no_partial_overlap, result_device,
};
