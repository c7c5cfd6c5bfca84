//! `sort` and `sort.values`: PyTorch's CompositeExplicitAutograd kernels, `sort.stable` /
//! `sort.values_stable` with `stable=False`.

use switchboard_dispatcher::Result;
use switchboard_tensor::Tensor;

/// `sort`: `sort.stable` with `stable=False`.
pub fn sort(self_: &Tensor, dim: i64, descending: bool) -> Result<(Tensor, Tensor)> {
    crate::sort_stable_with(
        self_,
        Some(false),
        crate::SortStableOptions { dim, descending },
    )
}

/// `sort.values`: `sort.values_stable` with `stable=False`.
pub fn sort_out(
    self_: &Tensor,
    dim: i64,
    descending: bool,
    values: &Tensor,
    indices: &Tensor,
) -> Result<(Tensor, Tensor)> {
    crate::sort_values_stable_with(
        self_,
        Some(false),
        values,
        indices,
        crate::SortValuesStableOptions { dim, descending },
    )
}
