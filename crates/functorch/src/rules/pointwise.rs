//! The rule of pointwise operators (functorch's `BINARY_POINTWISE` / `UNARY_POINTWISE` and
//! their in-place forms): broadcasting with the batch in front.

use switchboard_dispatcher::{IValue, Result, SchemaKind};

use switchboard_ops as ops;
use switchboard_tensor::{result_type, ScalarType, Tensor};

use super::{batch_returns, front, pad_to_logical_rank};
use crate::batched_tensor::is_batched_at;
use crate::fallback::{arg_tensors, vmap_error, BatchedCall};

// Note [Pointwise batching]
// Each batched operand's batch goes in front and the operand gets size-1 dimensions after it
// up to the largest logical rank among the operands; the operands that are not batched stay as
// they are and broadcast from the right as usual. The physical call then computes every sample
// at once, and its result has the batch in front. An in-place operator writes into its `self`'s
// physical tensor, so `self` must be batched whenever another operand is: a batched value
// cannot be written into one tensor shared by every sample.

/// The dtype the operands promote to as logical tensors, when batching would change it: a
/// batched 0-dim operand is 1-dim physically and would take part in type promotion as a
/// dimensioned tensor (functorch casts the operands to the logical result type first).
fn logical_result_type(call: &BatchedCall<'_>, rank: usize, inplace: bool) -> Option<ScalarType> {
    if inplace || rank == 0 {
        return None;
    }
    let tensors: Vec<&Tensor> = arg_tensors(&call.args)
        .filter(|t| t.dtype() != ScalarType::Bool)
        .collect();
    let batched_scalar = tensors
        .iter()
        .any(|t| t.dim() == 0 && is_batched_at(t, call.level));
    if !batched_scalar || tensors.len() < 2 {
        return None;
    }
    result_type(&tensors, &[])
}

pub(crate) fn pointwise_rule(call: &BatchedCall<'_>) -> Result<Vec<IValue>> {
    let level = call.level;
    let inplace = call
        .op
        .schema()
        .is_some_and(|r| r.semantics.kind == SchemaKind::Inplace)
        || call.op.name().base_name().ends_with('_');
    if inplace {
        let self_batched = call
            .args
            .first()
            .and_then(IValue::as_tensor)
            .is_some_and(|t| is_batched_at(t, level));
        if !self_batched {
            return Err(vmap_error(
                "vmap: inplace arithmetic(self, *extra_args) is not possible because there \
                 exists a Tensor `other` in extra_args that has more elements than `self`. This \
                 happened due to `other` being vmapped over but `self` not being vmapped over in \
                 a vmap. Please try to use out-of-place operators instead of inplace arithmetic. \
                 If said operator is being called inside the PyTorch framework, please file a \
                 bug report instead."
                    .into(),
            ));
        }
    }
    let rank = arg_tensors(&call.args).map(|t| t.dim()).max().unwrap_or(0);
    let promoted = logical_result_type(call, rank, inplace);
    let mut stack = Vec::with_capacity(call.args.len());
    for (i, arg) in call.args.iter().enumerate() {
        let mut arg = arg.clone();
        // In place, `self` keeps its own rank: it is written with its own shape.
        let self_inplace = inplace && i == 0;
        arg.try_map_tensors(|t| -> Result<_> {
            let p = match front(call, t)? {
                Some(p) if self_inplace => return Ok(p),
                Some(p) => pad_to_logical_rank(p, rank)?,
                None => t.clone(),
            };
            match promoted {
                Some(dtype) if p.dtype() != dtype && p.dtype() != ScalarType::Bool => {
                    ops::_to_copy_with(&p, ops::ToCopyOptions::default().dtype(dtype))
                }
                _ => Ok(p),
            }
        })?;
        stack.push(arg);
    }
    call.op.call_boxed(&mut stack)?;
    if inplace {
        return Ok(vec![call.args[0].clone()]);
    }
    batch_returns(call, stack)
}
