//! Tensor properties as operators (CompositeImplicitAutograd): `item`, `numel`, `size.int` and
//! their `sym_*` forms (`sym_size.int`, `sym_stride.int`, `sym_numel`, `sym_storage_offset`).
//! They return plain values, so autograd has nothing to record.

use switchboard_dispatcher::Result;
use switchboard_tensor::{wrap_dim, Scalar, Tensor};

use super::error;

/// `item`: the value of a one-element tensor, read by `_local_scalar_dense`.
pub fn item(self_: &Tensor) -> Result<Scalar> {
    let numel = self_.numel();
    if numel != 1 {
        return Err(error(format!(
            "a Tensor with {numel} elements cannot be converted to Scalar"
        )));
    }
    crate::_local_scalar_dense(self_)
}

/// `numel`: the number of elements.
pub fn numel(self_: &Tensor) -> Result<i64> {
    Ok(self_.numel())
}

/// `size.int`: the size of dimension `dim` (negative counts from the end).
pub fn size(self_: &Tensor, dim: i64) -> Result<i64> {
    if self_.dim() == 0 {
        return Err(error(format!(
            "dimension specified as {dim} but tensor has no dimensions"
        )));
    }
    Ok(self_.sizes()[wrap_dim(dim, self_.dim())?])
}

/// `sym_size.int`: `size.int` (sizes are plain integers here, never symbolic).
pub fn sym_size(self_: &Tensor, dim: i64) -> Result<i64> {
    size(self_, dim)
}

/// `sym_stride.int`: the stride of dimension `dim` (negative counts from the end).
pub fn sym_stride(self_: &Tensor, dim: i64) -> Result<i64> {
    if self_.dim() == 0 {
        return Err(error(format!(
            "dimension specified as {dim} but tensor has no dimensions"
        )));
    }
    Ok(self_.strides()[wrap_dim(dim, self_.dim())?])
}

/// `sym_numel`: `numel`.
pub fn sym_numel(self_: &Tensor) -> Result<i64> {
    Ok(self_.numel())
}

/// `sym_storage_offset`: the offset of the first element in the storage, in elements.
pub fn sym_storage_offset(self_: &Tensor) -> Result<i64> {
    Ok(self_.storage_offset())
}
