//! The meta functions of the binary math operators of `BinaryOps.cpp` beyond arithmetic:
//! `atan2` (PyTorch's `build_borrowing_binary_float_op`: integers compute in float) and the
//! remainders `fmod` and `remainder` (`build_borrowing_binary_op`).

use switchboard_tensor::Tensor;

use super::pointwise::binary_meta;
use super::{Elementwise, MetaOutput, Result};

binary_meta! {
    /// `atan2` (and `atan2_`, `atan2.out`).
    atan2(self_, other).int_to_float();
    /// `fmod.Tensor` (and `fmod_.Tensor`, `fmod.Tensor_out`).
    fmod_tensor(self_, other);
    /// `remainder.Tensor` (and `remainder_.Tensor`, `remainder.Tensor_out`).
    remainder_tensor(self_, other);
}
