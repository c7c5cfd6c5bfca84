//! Pointwise operators PyTorch defines by decomposition (CompositeImplicitAutograd).

use switchboard_dispatcher::Result;
use switchboard_tensor::{result_type, Scalar, Tensor, DEFAULT_DTYPE};

/// The dtype `where` gives a scalar operand: PyTorch makes it a tensor of the result dtype
/// (`scalar_tensor`, a checked conversion: Note [Checked scalar conversion]).
fn where_scalar_operand(value: Scalar, tensors: &[&Tensor], scalars: &[Scalar]) -> Result<Tensor> {
    let dtype = result_type(tensors, scalars).unwrap_or(DEFAULT_DTYPE);
    value.check_fits_scalar_tensor(dtype)?;
    Ok(Tensor::wrapped_scalar(value))
}

/// `where.ScalarSelf`: `where(condition, self, other)` with `self` a wrapped number (it takes
/// part in type promotion as a Python number does), as PyTorch decomposes it.
pub fn where_scalar_self(condition: &Tensor, self_: Scalar, other: &Tensor) -> Result<Tensor> {
    let self_ = where_scalar_operand(self_, &[other], &[self_])?;
    crate::r#where(condition, &self_, other)
}

/// `where.Scalar`: `where(condition, self, other)` with both values wrapped numbers.
pub fn where_scalar(condition: &Tensor, self_: Scalar, other: Scalar) -> Result<Tensor> {
    let both = [self_, other];
    let self_ = where_scalar_operand(self_, &[], &both)?;
    let other = where_scalar_operand(other, &[], &both)?;
    crate::r#where(condition, &self_, &other)
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
    let other = where_scalar_operand(other, &[self_], &[other])?;
    crate::r#where(condition, self_, &other)
}
