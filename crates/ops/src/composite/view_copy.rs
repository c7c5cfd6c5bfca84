//! The `*_copy` forms of the views (CompositeExplicitAutogradNonFunctional, as torchgen
//! generates them): the view, then a contiguous `clone`. Functionalization calls them when it
//! removes views (`functionalize(f, remove="mutations_and_views")`).

use switchboard_dispatcher::Result;
use switchboard_tensor::{MemoryFormat, RawOps, ScalarType, Tensor};

/// The view's result as a new contiguous tensor.
fn copied(view: Tensor) -> Result<Tensor> {
    crate::clone_with(
        &view,
        crate::CloneOptions::default().memory_format(MemoryFormat::Contiguous),
    )
}

/// `view_copy`: as PyTorch's, a `reshape` (a contiguous copy) when the strides cannot express
/// the shape as a view.
pub fn view_copy(self_: &Tensor, size: &[i64]) -> Result<Tensor> {
    if self_.reshape_view(size)?.is_none() {
        return crate::reshape(self_, size);
    }
    copied(crate::view(self_, size)?)
}

/// `view_copy.dtype`.
pub fn view_copy_dtype(self_: &Tensor, dtype: ScalarType) -> Result<Tensor> {
    copied(crate::view_dtype(self_, dtype)?)
}

/// `t_copy`.
pub fn t_copy(self_: &Tensor) -> Result<Tensor> {
    copied(crate::t(self_)?)
}

/// `transpose_copy.int`.
pub fn transpose_copy(self_: &Tensor, dim0: i64, dim1: i64) -> Result<Tensor> {
    copied(crate::transpose(self_, dim0, dim1)?)
}

/// `permute_copy`.
pub fn permute_copy(self_: &Tensor, dims: &[i64]) -> Result<Tensor> {
    copied(crate::permute(self_, dims)?)
}

/// `expand_copy`.
pub fn expand_copy(self_: &Tensor, size: &[i64], implicit: bool) -> Result<Tensor> {
    copied(crate::expand_with(
        self_,
        size,
        crate::ExpandOptions::default().implicit(implicit),
    )?)
}

/// `squeeze_copy`.
pub fn squeeze_copy(self_: &Tensor) -> Result<Tensor> {
    copied(crate::squeeze(self_)?)
}

/// `squeeze_copy.dim`.
pub fn squeeze_copy_dim(self_: &Tensor, dim: i64) -> Result<Tensor> {
    copied(crate::squeeze_dim(self_, dim)?)
}

/// `squeeze_copy.dims`.
pub fn squeeze_copy_dims(self_: &Tensor, dim: &[i64]) -> Result<Tensor> {
    copied(crate::squeeze_dims(self_, dim)?)
}

/// `unsqueeze_copy`.
pub fn unsqueeze_copy(self_: &Tensor, dim: i64) -> Result<Tensor> {
    copied(crate::unsqueeze(self_, dim)?)
}

/// `select_copy.int`.
pub fn select_copy(self_: &Tensor, dim: i64, index: i64) -> Result<Tensor> {
    copied(crate::select(self_, dim, index)?)
}

/// `slice_copy.Tensor`.
pub fn slice_copy(
    self_: &Tensor,
    dim: i64,
    start: Option<i64>,
    end: Option<i64>,
    step: i64,
) -> Result<Tensor> {
    copied(crate::slice_with(
        self_,
        crate::SliceOptions {
            dim,
            start,
            end,
            step,
        },
    )?)
}

/// `as_strided_copy`.
pub fn as_strided_copy(
    self_: &Tensor,
    size: &[i64],
    stride: &[i64],
    storage_offset: Option<i64>,
) -> Result<Tensor> {
    copied(crate::as_strided_with(
        self_,
        size,
        stride,
        crate::AsStridedOptions { storage_offset },
    )?)
}

/// `diagonal_copy`.
pub fn diagonal_copy(self_: &Tensor, offset: i64, dim1: i64, dim2: i64) -> Result<Tensor> {
    copied(crate::diagonal_with(
        self_,
        crate::DiagonalOptions::default()
            .offset(offset)
            .dim1(dim1)
            .dim2(dim2),
    )?)
}

/// `alias_copy`.
pub fn alias_copy(self_: &Tensor) -> Result<Tensor> {
    copied(crate::alias(self_)?)
}

/// `split_with_sizes_copy`.
pub fn split_with_sizes_copy(self_: &Tensor, split_sizes: &[i64], dim: i64) -> Result<Vec<Tensor>> {
    crate::composite::split_with_sizes(self_, split_sizes, dim)?
        .into_iter()
        .map(copied)
        .collect()
}

/// `split_copy.Tensor`.
pub fn split_copy(self_: &Tensor, split_size: i64, dim: i64) -> Result<Vec<Tensor>> {
    crate::composite::split(self_, split_size, dim)?
        .into_iter()
        .map(copied)
        .collect()
}

/// `unbind_copy.int`.
pub fn unbind_copy(self_: &Tensor, dim: i64) -> Result<Vec<Tensor>> {
    crate::composite::unbind(self_, dim)?
        .into_iter()
        .map(copied)
        .collect()
}

/// `view_as_real_copy`.
pub fn view_as_real_copy(self_: &Tensor) -> Result<Tensor> {
    copied(crate::view_as_real(self_)?)
}

/// `view_as_complex_copy`.
pub fn view_as_complex_copy(self_: &Tensor) -> Result<Tensor> {
    copied(crate::view_as_complex(self_)?)
}
