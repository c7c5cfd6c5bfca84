//! The meta functions of the bitwise operators (`bitwise_not`, `bitwise_and`, `bitwise_or`,
//! `bitwise_xor`): the result in the inputs' promoted dtype; floating dtypes are refused by
//! the kernels, not here, as in PyTorch.

use switchboard_tensor::Tensor;

use super::pointwise::{binary_meta, unary_meta};
use super::{Elementwise, MetaOutput, Result};

unary_meta! {
    /// `bitwise_not` (and `bitwise_not_`, `bitwise_not.out`).
    bitwise_not.all_same_dtype();
}

binary_meta! {
    /// `bitwise_and.Tensor` (and `bitwise_and_.Tensor`, `bitwise_and.Tensor_out`).
    bitwise_and_tensor(self_, other);
    /// `bitwise_or.Tensor`.
    bitwise_or_tensor(self_, other);
    /// `bitwise_xor.Tensor`.
    bitwise_xor_tensor(self_, other);
}
