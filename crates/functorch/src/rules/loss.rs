//! Written rules of the losses (functorch's `BatchRulesLoss.cpp`): the per-element loss of
//! every sample in one call, then each sample's reduction.

use switchboard_dispatcher::{IValue, Result};
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

use super::{batched, pad_to_logical_rank, tensor_arg};
use crate::batched_tensor::front_value_or_expand;
use crate::fallback::{self, BatchedCall};

/// PyTorch's `Reduction` enum.
const REDUCTION_NONE: i64 = 0;
const REDUCTION_MEAN: i64 = 1;

fn int_arg(call: &BatchedCall<'_>, i: usize) -> Option<i64> {
    match call.args.get(i) {
        Some(IValue::Int(v)) => Some(*v),
        _ => None,
    }
}

/// Reduces a physical per-element loss `[B, ...]` per sample.
fn reduce_per_sample(loss: Tensor, reduction: i64) -> Result<Tensor> {
    if reduction == REDUCTION_NONE || loss.dim() == 1 {
        return Ok(loss);
    }
    let dims: Vec<i64> = (1..loss.dim() as i64).collect();
    if reduction == REDUCTION_MEAN {
        ops::mean_dim(&loss, Some(&dims))
    } else {
        ops::sum_dim_int_list(&loss, Some(&dims))
    }
}

/// `nll_loss_forward(self, target, weight=None, reduction, ignore_index)`: the unreduced loss
/// of the `[B * N, C]` log-probabilities, then each sample's sum, divided for `mean` by the
/// sample's count of targets that are not `ignore_index` (its total weight).
pub(crate) fn nll_loss_forward_rule(call: &BatchedCall<'_>) -> Result<Vec<IValue>> {
    let (Some(input), Some(target)) = (tensor_arg(call, 0), tensor_arg(call, 1)) else {
        return fallback::loop_call(call);
    };
    let (Some(reduction), Some(ignore_index)) = (int_arg(call, 3), int_arg(call, 4)) else {
        return fallback::loop_call(call);
    };
    let weighted = !matches!(call.args.get(2), Some(IValue::None) | None);
    let rank = input.dim();
    if weighted || !(1..=2).contains(&rank) || target.dim() + 1 != rank {
        return fallback::loop_call(call);
    }
    let (level, b) = (call.level, call.batch_size);
    let mut x = front_value_or_expand(input, level, b)?;
    let mut t = front_value_or_expand(target, level, b)?;
    if rank == 1 {
        x = ops::unsqueeze(&x, 1)?;
        t = ops::unsqueeze(&t, 1)?;
    }
    let (n, classes) = (x.sizes()[1], x.sizes()[2]);
    let flat = ops::reshape(&x, &[b * n, classes])?;
    let flat_target = ops::reshape(&t, &[b * n])?;
    let (loss, _) = ops::nll_loss_forward(&flat, &flat_target, None, REDUCTION_NONE, ignore_index)?;
    let loss = ops::reshape(&loss, &[b, n])?;
    let counted = ops::_to_copy_with(
        &ops::ne_scalar(&t, ignore_index)?,
        ops::ToCopyOptions::default().dtype(input.dtype()),
    )?;
    let total_weight = if reduction == REDUCTION_NONE {
        // The kernel leaves it 0 without a reduction.
        ops::mul_scalar(&ops::sum_dim_int_list(&counted, Some(&[1]))?, 0)?
    } else {
        ops::sum_dim_int_list(&counted, Some(&[1]))?
    };
    let output = match reduction {
        REDUCTION_NONE if rank == 1 => ops::squeeze_dim(&loss, 1)?,
        REDUCTION_NONE => loss,
        REDUCTION_MEAN => ops::div(&ops::sum_dim_int_list(&loss, Some(&[1]))?, &total_weight)?,
        _ => ops::sum_dim_int_list(&loss, Some(&[1]))?,
    };
    Ok(vec![batched(call, output)?, batched(call, total_weight)?])
}

/// `mse_loss(self, target, reduction)`: the squared differences of every sample, then each
/// sample's reduction.
pub(crate) fn mse_loss_rule(call: &BatchedCall<'_>) -> Result<Vec<IValue>> {
    let (Some(input), Some(target)) = (tensor_arg(call, 0), tensor_arg(call, 1)) else {
        return fallback::loop_call(call);
    };
    let Some(reduction) = int_arg(call, 2) else {
        return fallback::loop_call(call);
    };
    if input.sizes() != target.sizes() {
        // PyTorch warns and broadcasts: the per-sample path does the same.
        return fallback::loop_call(call);
    }
    let (level, b) = (call.level, call.batch_size);
    let rank = input.dim();
    let x = pad_to_logical_rank(front_value_or_expand(input, level, b)?, rank)?;
    let y = pad_to_logical_rank(front_value_or_expand(target, level, b)?, rank)?;
    let loss = ops::mse_loss_with(
        &x,
        &y,
        ops::MseLossOptions::default().reduction(REDUCTION_NONE),
    )?;
    batched(call, reduce_per_sample(loss, reduction)?).map(|v| vec![v])
}
