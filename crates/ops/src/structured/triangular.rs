//! The meta functions of the structured triangular operators of `TriangularOps.cpp`: `triu`
//! and `tril`.

use switchboard_tensor::{contiguous_strides, DimVec, Tensor, TensorError};

use super::{MetaOutput, Result};

/// `self`'s shape and dtype, contiguous; at least two dimensions.
fn triangle(name: &str, self_: &Tensor) -> Result<MetaOutput> {
    if self_.dim() < 2 {
        return Err(TensorError::invalid(format!(
            "{name}: input tensor must have at least 2 dimensions"
        )));
    }
    let sizes = DimVec::from_slice(self_.sizes());
    Ok(MetaOutput {
        strides: contiguous_strides(&sizes),
        sizes,
        dtype: self_.dtype(),
        device: self_.device(),
    })
}

/// `triu` (and `triu_`, `triu.out`).
pub fn triu(self_: &Tensor, _diagonal: i64, _out: Option<&Tensor>) -> Result<MetaOutput> {
    triangle("triu", self_)
}

/// `tril` (and `tril_`, `tril.out`).
pub fn tril(self_: &Tensor, _diagonal: i64, _out: Option<&Tensor>) -> Result<MetaOutput> {
    triangle("tril", self_)
}
