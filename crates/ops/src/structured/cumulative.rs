//! The meta function of the structured cumulative operators of `ReduceOps.cpp`
//! (`meta_func_cum_ops`): `cumsum`.

use switchboard_tensor::{contiguous_strides, wrap_dim, DimVec, ScalarType, Tensor};

use super::{MetaOutput, Result};

/// `cumsum` (and `cumsum_`, `cumsum.out`): `self`'s shape, contiguous; the dtype is `dtype`,
/// else a given output's, else `self`'s with integers and bool accumulated in `Long`.
pub fn cumsum(
    self_: &Tensor,
    dim: i64,
    dtype: Option<ScalarType>,
    out: Option<&Tensor>,
) -> Result<MetaOutput> {
    wrap_dim(dim, self_.dim())?;
    let dtype = match (dtype, out) {
        (Some(d), _) => d,
        (None, Some(o)) => o.dtype(),
        (None, None) if self_.dtype().is_integral(true) => ScalarType::Long,
        (None, None) => self_.dtype(),
    };
    let sizes = DimVec::from_slice(self_.sizes());
    Ok(MetaOutput {
        strides: contiguous_strides(&sizes),
        sizes,
        dtype,
        device: self_.device(),
    })
}
