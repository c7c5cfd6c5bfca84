//! The meta functions of rounding and sign (`ceil`, `floor`, `round`, `round.decimals`,
//! `trunc`, `sign`, `sgn`): PyTorch's `build_borrowing_unary_op`, the result in `self`'s dtype.

use switchboard_tensor::Tensor;

use super::pointwise::unary_meta;
use super::{Elementwise, MetaOutput, Result};

unary_meta! {
    /// `ceil` (and `ceil_`, `ceil.out`).
    ceil;
    /// `floor`.
    floor;
    /// `round`.
    round;
    /// `trunc`.
    trunc;
    /// `sign`.
    sign;
    /// `sgn` (and `sgn_`, `sgn.out`): `sign` for real numbers.
    sgn;
}

/// `round.decimals` (and `round_.decimals`, `round.decimals_out`).
pub fn round_decimals(self_: &Tensor, _decimals: i64, out: Option<&Tensor>) -> Result<MetaOutput> {
    Elementwise::new(out, [self_]).compute()
}
