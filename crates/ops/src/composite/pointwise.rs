//! Pointwise operators PyTorch defines by decomposition (CompositeImplicitAutograd).

use switchboard_dispatcher::Result;
use switchboard_tensor::{Scalar, Tensor};

/// `where.ScalarSelf`: `where(condition, self, other)` with `self` a wrapped number (it takes
/// part in type promotion as a Python number does), as PyTorch decomposes it.
pub fn where_scalar_self(condition: &Tensor, self_: Scalar, other: &Tensor) -> Result<Tensor> {
    crate::r#where(condition, &Tensor::wrapped_scalar(self_), other)
}

/// `where.ScalarOther`: `where(condition, self, other)` with `other` a wrapped number.
pub fn where_scalar_other(condition: &Tensor, self_: &Tensor, other: Scalar) -> Result<Tensor> {
    crate::r#where(condition, self_, &Tensor::wrapped_scalar(other))
}
