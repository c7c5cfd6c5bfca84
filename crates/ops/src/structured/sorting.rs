//! The meta functions of PyTorch's structured sorting operators (`TORCH_META_FUNC` in
//! `Sorting.cpp` and `TensorCompare.cpp`): `sort.stable` and `topk`, each with values of the
//! input's dtype and `Long` indices.

use switchboard_tensor::{contiguous_strides, wrap_dim, DimVec, ScalarType, Tensor, TensorError};

use super::{reorder_dims, strides_for_perm, MetaOutput, Result};

/// `sort.stable` (and `sort.values_stable`): values and indices of `self`'s shape, with
/// `self`'s strides when it is non-overlapping and dense, else dense strides in its stride
/// order (`infer_dense_strides`), so that a broadcast input does not make a huge output.
pub fn sort_stable(
    self_: &Tensor,
    _stable: Option<bool>,
    dim: i64,
    _descending: bool,
    _outputs: Option<[&Tensor; 2]>,
) -> Result<[MetaOutput; 2]> {
    wrap_dim(dim, self_.dim())?;
    let strides: DimVec = if self_.is_non_overlapping_and_dense() {
        DimVec::from_slice(self_.strides())
    } else {
        strides_for_perm(
            self_.sizes(),
            &reorder_dims(self_.sizes(), &[self_.strides()]),
        )
    };
    Ok(values_and_indices(
        self_,
        DimVec::from_slice(self_.sizes()),
        strides,
    ))
}

/// `topk` (and `topk.values`): `k` elements along `dim`, contiguous.
pub fn topk(
    self_: &Tensor,
    k: i64,
    dim: i64,
    _largest: bool,
    _sorted: bool,
    _outputs: Option<[&Tensor; 2]>,
) -> Result<[MetaOutput; 2]> {
    let dim = wrap_dim(dim, self_.dim())?;
    let slice_size = if self_.dim() == 0 {
        1
    } else {
        self_.sizes()[dim]
    };
    if k < 0 || k > slice_size {
        return Err(TensorError::invalid("selected index k out of range"));
    }
    let mut sizes = DimVec::from_slice(self_.sizes());
    if let Some(s) = sizes.get_mut(dim) {
        *s = k;
    }
    let strides = contiguous_strides(&sizes);
    Ok(values_and_indices(self_, sizes, strides))
}

/// Values of `self`'s dtype and `Long` indices, both of one geometry.
fn values_and_indices(self_: &Tensor, sizes: DimVec, strides: DimVec) -> [MetaOutput; 2] {
    let values = MetaOutput {
        sizes,
        strides,
        dtype: self_.dtype(),
        device: self_.device(),
    };
    let indices = MetaOutput {
        dtype: ScalarType::Long,
        ..values.clone()
    };
    [values, indices]
}
