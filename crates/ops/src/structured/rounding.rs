//! The meta functions of rounding and sign (`ceil`, `floor`, `round`, `round.decimals`,
//! `trunc`, `sign`, `sgn`): PyTorch's `build_borrowing_unary_op`, the result in `self`'s dtype,
//! and so must be a given output's.

use switchboard_tensor::Tensor;

use super::pointwise::unary_meta;
use super::{Elementwise, MetaOutput, Result};

unary_meta! {
    /// `ceil` (and `ceil_`, `ceil.out`).
    ceil.all_same_dtype();
    /// `floor`.
    floor.all_same_dtype();
    /// `round`.
    round.all_same_dtype();
    /// `trunc`.
    trunc.all_same_dtype();
    /// `sign`.
    sign.all_same_dtype();
    /// `sgn` (and `sgn_`, `sgn.out`): `sign` for real numbers.
    sgn.all_same_dtype();
}

/// `round.decimals` (and `round_.decimals`, `round.decimals_out`).
pub fn round_decimals(self_: &Tensor, _decimals: i64, out: Option<&Tensor>) -> Result<MetaOutput> {
    Elementwise::new(out, [self_]).all_same_dtype().compute()
}
