//! The diagonal and alias views (CompositeExplicitAutograd, views of `self`'s storage) and
//! `diagonal_backward`.

use switchboard_dispatcher::Result;
use switchboard_tensor::{RawOps, Tensor};

use super::diagonal_geometry;

/// `diagonal(Tensor(a) self, int offset=0, int dim1=0, int dim2=1) -> Tensor(a)`: the view of
/// the diagonal `offset` of the matrices spanned by `dim1` and `dim2`, which become one last
/// dimension (the diagonal's length, 0 when `offset` is past the matrix).
pub fn diagonal(self_: &Tensor, offset: i64, dim1: i64, dim2: i64) -> Result<Tensor> {
    let (sizes, strides, storage_offset) = diagonal_geometry(self_, offset, dim1, dim2)?;
    Ok(RawOps::as_strided(self_, &sizes, &strides, storage_offset)?)
}

/// `alias(Tensor(a) self) -> Tensor(a)`: a view of all of `self`, as it is.
pub fn alias(self_: &Tensor) -> Result<Tensor> {
    Ok(RawOps::as_strided(
        self_,
        self_.sizes(),
        self_.strides(),
        self_.storage_offset(),
    )?)
}

/// `diagonal_backward` (CompositeExplicitAutograd): zeros of `input_sizes` with
/// `grad_output` copied into the diagonal, the gradient of `diagonal`.
pub fn diagonal_backward(
    grad_output: &Tensor,
    input_sizes: &[i64],
    offset: i64,
    dim1: i64,
    dim2: i64,
) -> Result<Tensor> {
    let grad_input = crate::zeros_with(
        input_sizes,
        crate::ZerosOptions::default()
            .dtype(grad_output.dtype())
            .device(grad_output.device()),
    )?;
    let diag = crate::diagonal_with(
        &grad_input,
        crate::DiagonalOptions::default()
            .offset(offset)
            .dim1(dim1)
            .dim2(dim2),
    )?;
    crate::copy_(&diag, grad_output)?;
    Ok(grad_input)
}
