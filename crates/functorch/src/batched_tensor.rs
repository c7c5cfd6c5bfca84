//! The batched tensor (functorch's `BatchedTensorImpl`): a tensor on the `FuncTorchBatched`
//! key standing for one sample of an underlying tensor that carries the batch in one of its
//! dimensions, at one vmap level.

use std::sync::Arc;

use switchboard_dispatcher::{DispatchError, DispatchErrorKind, Result};
use switchboard_keys::{DispatchKey, DispatchKeySet};
use switchboard_ops as ops;
use switchboard_tensor::{Storage, Tensor, TensorBuilder};

// Note [Batched tensors]
// A batched tensor is what a function under `vmap` sees: one sample. Its metadata (sizes,
// strides, dtype, device) is the logical sample's; the data lives in `value`, the physical
// tensor, which has one more dimension, `bdim`, holding the batch. `level` says which vmap
// made it: nested vmaps give nested batched tensors, the outer level's inside the inner's, and
// an operator unwraps only the highest level among its arguments (the innermost vmap), the
// rest of the levels being handled when the rule's own calls dispatch again. The wrapper's
// key set is the value's plus `FuncTorchBatched`, which is above every backend, autograd and
// autocast key: every operator on a batched tensor goes to the batching layer first, which
// calls the operator again on physical tensors. The wrapper's own storage view is sample 0
// of the value (in bounds by construction); no kernel reads it, since the batching layer
// always runs first.

/// The payload of a batched tensor (Note [Batched tensors]).
#[derive(Clone, Debug)]
pub struct BatchedValue {
    /// The physical tensor, with the batch in dimension `bdim`.
    pub value: Tensor,
    /// The batch dimension of `value` (non-negative).
    pub bdim: usize,
    /// The vmap level that made it (1 for the outermost vmap).
    pub level: u32,
}

/// The batched tensor's payload, if `t` is one.
#[inline]
pub fn batched_value(t: &Tensor) -> Option<&BatchedValue> {
    if !t.key_set().has(DispatchKey::FuncTorchBatched) {
        return None;
    }
    t.payload_as::<BatchedValue>()
}

/// Whether `t` is batched at `level`.
pub fn is_batched_at(t: &Tensor, level: u32) -> bool {
    batched_value(t).is_some_and(|b| b.level == level)
}

/// `makeBatched`: wraps `value` as a batched tensor at `level` whose batch is dimension
/// `bdim` of `value`.
pub fn make_batched(value: Tensor, bdim: usize, level: u32) -> Result<Tensor> {
    if bdim >= value.dim() {
        return Err(internal(format!(
            "vmap: batch dimension {bdim} out of range for a tensor of dimension {}",
            value.dim()
        )));
    }
    let mut sizes: Vec<i64> = value.sizes().to_vec();
    let mut strides: Vec<i64> = value.strides().to_vec();
    sizes.remove(bdim);
    strides.remove(bdim);
    let key_set = value.key_set() | DispatchKeySet::from_key(DispatchKey::FuncTorchBatched);
    let payload = Arc::new(BatchedValue {
        value: value.clone(),
        bdim,
        level,
    });
    let over = |storage: Storage, strides: &[i64], offset: i64| {
        TensorBuilder::new(storage, value.dtype())
            .sizes(&sizes)
            .strides(strides)
            .storage_offset(offset)
            .device(value.device())
            .key_set(key_set)
            .payload(payload.clone())
            .version_counter(value.version_counter())
            .build()
    };
    // Sample 0 of the value, when the value has one; otherwise (a batch of 0) a storage of the
    // sample's size, never read.
    match over(value.storage().clone(), &strides, value.storage_offset()) {
        Ok(t) => Ok(t),
        Err(_) => {
            let contiguous = contiguous_strides(&sizes);
            let numel = sizes.iter().try_fold(1i64, |n, &s| n.checked_mul(s.max(1)));
            let nbytes = numel
                .and_then(|n| usize::try_from(n).ok())
                .and_then(|n| n.checked_mul(value.element_size()))
                .ok_or_else(|| internal("vmap: sample size overflows".to_string()))?;
            let storage = Storage::zeros_for(value.device(), nbytes, value.dtype())?;
            Ok(over(storage, &contiguous, 0)?)
        }
    }
}

fn contiguous_strides(sizes: &[i64]) -> Vec<i64> {
    let mut strides = vec![1i64; sizes.len()];
    for d in (0..sizes.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * sizes[d + 1].max(1);
    }
    strides
}

/// The physical tensor of `t` at `level` with its batch moved to dimension 0, or `None` when
/// `t` is not batched at `level` (`moveBatchDimToFront` of `unwrapTensorAtLevel`).
pub fn front_value(t: &Tensor, level: u32) -> Result<Option<Tensor>> {
    match batched_value(t) {
        Some(b) if b.level == level => Ok(Some(move_to_front(&b.value, b.bdim)?)),
        _ => Ok(None),
    }
}

/// `value` with dimension `bdim` moved to the front (a view).
pub fn move_to_front(value: &Tensor, bdim: usize) -> Result<Tensor> {
    if bdim == 0 {
        return Ok(value.clone());
    }
    let mut order: Vec<i64> = Vec::with_capacity(value.dim());
    order.push(bdim as i64);
    order.extend((0..value.dim() as i64).filter(|&d| d != bdim as i64));
    ops::permute(value, &order)
}

/// The physical tensor of `t` at `level` with the batch in front, materialising the batch
/// (an expanded view, no copy) when `t` is not batched at `level`.
pub fn front_value_or_expand(t: &Tensor, level: u32, batch_size: i64) -> Result<Tensor> {
    match front_value(t, level)? {
        Some(v) => Ok(v),
        None => {
            let mut sizes = Vec::with_capacity(t.dim() + 1);
            sizes.push(batch_size);
            sizes.extend_from_slice(t.sizes());
            ops::expand(&ops::unsqueeze(t, 0)?, &sizes)
        }
    }
}

/// The batch size of `t` at `level`, if batched there.
pub fn batch_size_at(t: &Tensor, level: u32) -> Option<i64> {
    batched_value(t)
        .filter(|b| b.level == level)
        .map(|b| b.value.sizes()[b.bdim])
}

pub(crate) fn internal(message: String) -> DispatchError {
    DispatchError::from(DispatchErrorKind::Kernel(message))
}
