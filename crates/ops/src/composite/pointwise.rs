//! Pointwise operators PyTorch defines by decomposition (CompositeImplicitAutograd).

use switchboard_dispatcher::Result;
use switchboard_tensor::{Scalar, Tensor};

/// `where.ScalarSelf`: `where(condition, self, other)` with `self` a wrapped number (it takes
/// part in type promotion as a Python number does), as PyTorch decomposes it.
pub fn where_scalar_self(condition: &Tensor, self_: Scalar, other: &Tensor) -> Result<Tensor> {
    crate::r#where(condition, &Tensor::wrapped_scalar(self_), other)
}

/// `where.Scalar`: `where(condition, self, other)` with both values wrapped numbers.
pub fn where_scalar(condition: &Tensor, self_: Scalar, other: Scalar) -> Result<Tensor> {
    crate::r#where(
        condition,
        &Tensor::wrapped_scalar(self_),
        &Tensor::wrapped_scalar(other),
    )
}

/// `max.other`: PyTorch's alias of `maximum`.
pub fn max_other(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    crate::maximum(self_, other)
}

/// `max.out`: PyTorch's alias of `maximum.out`.
pub fn max_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Result<Tensor> {
    crate::maximum_out(self_, other, out)
}

/// `min.other`: PyTorch's alias of `minimum`.
pub fn min_other(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    crate::minimum(self_, other)
}

/// `min.out`: PyTorch's alias of `minimum.out`.
pub fn min_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Result<Tensor> {
    crate::minimum_out(self_, other, out)
}

/// `where.ScalarOther`: `where(condition, self, other)` with `other` a wrapped number.
pub fn where_scalar_other(condition: &Tensor, self_: &Tensor, other: Scalar) -> Result<Tensor> {
    crate::r#where(condition, self_, &Tensor::wrapped_scalar(other))
}
