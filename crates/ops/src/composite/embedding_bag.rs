//! `embedding_bag` and `embedding_bag.padding_idx` (CompositeImplicitAutograd, as in
//! PyTorch): `padding_idx` checked and wrapped, then `_embedding_bag` on contiguous indices and
//! offsets, which carries the gradients.

use switchboard_dispatcher::Result;
use switchboard_tensor::Tensor;

use super::error;

/// `embedding_bag(Tensor weight, Tensor indices, Tensor offsets, bool scale_grad_by_freq=False,
/// int mode=0, bool sparse=False, Tensor? per_sample_weights=None, bool
/// include_last_offset=False) -> (Tensor, Tensor, Tensor, Tensor)`: no padding index.
#[allow(clippy::too_many_arguments)]
pub fn embedding_bag(
    weight: &Tensor,
    indices: &Tensor,
    offsets: &Tensor,
    scale_grad_by_freq: bool,
    mode: i64,
    sparse: bool,
    per_sample_weights: Option<&Tensor>,
    include_last_offset: bool,
) -> Result<(Tensor, Tensor, Tensor, Tensor)> {
    embedding_bag_padding_idx(
        weight,
        indices,
        offsets,
        scale_grad_by_freq,
        mode,
        sparse,
        per_sample_weights,
        include_last_offset,
        None,
    )
}

/// `embedding_bag.padding_idx(Tensor weight, Tensor indices, Tensor offsets, bool
/// scale_grad_by_freq, int mode, bool sparse, Tensor? per_sample_weights, bool
/// include_last_offset, int? padding_idx) -> (Tensor, Tensor, Tensor, Tensor)`: a negative
/// `padding_idx` counts from the end of the table.
///
/// PyTorch calls `_embedding_bag_forward_only` instead when the weight requires no gradient,
/// which only changes one output: with `include_last_offset` in sum mode, its `bag_size` (all
/// zeros) has one more entry. This always calls `_embedding_bag`: whether a tensor requires
/// grad is not known here under functionalization, and the result must not depend on it.
#[allow(clippy::too_many_arguments)]
pub fn embedding_bag_padding_idx(
    weight: &Tensor,
    indices: &Tensor,
    offsets: &Tensor,
    scale_grad_by_freq: bool,
    mode: i64,
    sparse: bool,
    per_sample_weights: Option<&Tensor>,
    include_last_offset: bool,
    padding_idx: Option<i64>,
) -> Result<(Tensor, Tensor, Tensor, Tensor)> {
    let padding_idx = match padding_idx {
        None => -1,
        Some(p) => {
            let Some(&num) = weight.sizes().first() else {
                return Err(error(
                    "Dimension specified as 0 but tensor has no dimensions",
                ));
            };
            if p < -num || p >= num {
                return Err(error(format!(
                    "padding_idx must be within the number of embeddings, -{num} through {}, \
                     but got {p}",
                    num - 1
                )));
            }
            if p < 0 {
                p + num
            } else {
                p
            }
        }
    };
    crate::_embedding_bag_with(
        weight,
        &crate::contiguous(indices)?,
        &crate::contiguous(offsets)?,
        crate::UnderscoreEmbeddingBagOptions {
            scale_grad_by_freq,
            mode,
            sparse,
            per_sample_weights,
            include_last_offset,
            padding_idx,
        },
    )
}
