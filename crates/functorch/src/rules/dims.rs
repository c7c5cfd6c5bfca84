//! Rules of operators that index dimensions (functorch's `BatchRulesReduceOps.cpp`,
//! `BatchRulesViews.cpp`): with the batch in front, a logical dimension `d` is physical
//! dimension `d + 1`, and a size list gets the batch size in front.

use switchboard_dispatcher::{IValue, OperatorHandle, Result, Stack, Tag};
use switchboard_ops as ops;
use switchboard_schema::Type;
use switchboard_tensor::Tensor;

use super::{batch_returns, batched, front, pad_to_logical_rank, tensor_arg, wrap_logical_dim};
use crate::batched_tensor::{front_value_or_expand, is_batched_at};
use crate::fallback::{self, BatchedCall};

/// The names of arguments that index `self`'s dimensions.
const DIM_ARGUMENTS: &[&str] = &[
    "dim",
    "dim0",
    "dim1",
    "dim2",
    "start_dim",
    "end_dim",
    "source",
    "destination",
];

/// Whether `op` takes `self` first and an argument indexing its dimensions.
pub(crate) fn has_dim_arguments(op: &OperatorHandle) -> bool {
    let Some(record) = op.schema() else {
        return false;
    };
    let args = record.schema.arguments();
    let self_first = args
        .first()
        .is_some_and(|a| matches!(a.ty(), Type::Tensor) && a.name() == "self");
    let is_dim = |t: &Type| {
        let inner = t.optional_element().unwrap_or(t);
        matches!(inner, Type::Int | Type::SymInt)
            || inner
                .list_element()
                .is_some_and(|e| matches!(e, Type::Int | Type::SymInt))
    };
    self_first
        && args
            .iter()
            .any(|a| DIM_ARGUMENTS.contains(&a.name()) && is_dim(a.ty()))
}

/// Reductions (base name, overload) whose empty `dim` list reduces no dimension
/// (`allow_empty_dims` in PyTorch's `make_dim_mask`), where `sum`'s legacy rule reduces all of
/// them.
const EMPTY_DIMS_REDUCE_NOTHING: &[(&str, &str)] = &[("any", "dims")];

/// Operators whose other tensor arguments index `self` position by position, or fill a view of
/// it (the `*_scatter` of the views): they are batched along with it (expanded when they are
/// not batched).
const INDEX_LIKE: &[&str] = &[
    "gather",
    "scatter",
    "scatter_add",
    "scatter_reduce",
    "select_scatter",
    "slice_scatter",
    "diagonal_scatter",
];

/// Operators with a `dim` argument that refuse a 0-dim `self`.
const NEEDS_A_DIMENSION: &[&str] = &["split_with_sizes", "split", "unbind", "chunk"];

/// The rule of operators with `dim` arguments on a batched `self`.
pub(crate) fn dim_rule(call: &BatchedCall<'_>) -> Result<Vec<IValue>> {
    let Some(self_) = tensor_arg(call, 0) else {
        return fallback::loop_call(call);
    };
    let Some(self_p) = front(call, self_)? else {
        return fallback::loop_call(call);
    };
    let record = call
        .op
        .schema()
        .expect("rules are found for defined operators");
    let base = call.op.name().base_name();
    // The operators splitting along a dimension refuse a 0-dim sample ("split expects at
    // least a 1-dimensional tensor"): the loop raises their error.
    if self_.dim() == 0 && NEEDS_A_DIMENSION.contains(&base) {
        return fallback::loop_call(call);
    }
    // A 0-dim sample takes its dimension arguments as a 1-dim one does (0 and -1): the
    // physical tensor gets a size-1 dimension for them, dropped again from results that keep
    // it (`sum(x, 0, keepdim=True)` of a 0-dim tensor is 0-dim).
    let scalar_sample = self_.dim() == 0 && base != "unsqueeze";
    let self_p = if scalar_sample {
        ops::unsqueeze(&self_p, 1)?
    } else {
        self_p
    };
    let rank = self_.dim().max(usize::from(scalar_sample));
    let index_like = INDEX_LIKE.contains(&base);
    let reduction = call.op.has_tag(Tag::Reduction);
    let overload = (base, call.op.name().overload_name());
    // `unsqueeze` and `movedim`'s destination name a position in the result.
    let dim_rank = if base == "unsqueeze" { rank + 1 } else { rank };
    let mut stack: Stack = Vec::with_capacity(call.args.len());
    for (i, (arg, a)) in call.args.iter().zip(record.schema.arguments()).enumerate() {
        if i == 0 {
            stack.push(IValue::Tensor(self_p.clone()));
            continue;
        }
        let value = match arg {
            IValue::Tensor(t) if index_like => {
                let p = front_value_or_expand(t, call.level, call.batch_size)?;
                IValue::Tensor(if scalar_sample {
                    ops::unsqueeze(&p, 1)?
                } else {
                    p
                })
            }
            _ if arg.tensors().any(|t| is_batched_at(t, call.level)) => {
                return fallback::loop_call(call);
            }
            IValue::Int(d) if DIM_ARGUMENTS.contains(&a.name()) => {
                IValue::Int(wrap_logical_dim(*d, dim_rank)? + 1)
            }
            IValue::IntList(ds) if DIM_ARGUMENTS.contains(&a.name()) => {
                if ds.is_empty() && reduction && !EMPTY_DIMS_REDUCE_NOTHING.contains(&overload) {
                    IValue::IntList((1..=rank as i64).collect())
                } else {
                    let shifted: Result<Vec<i64>> = ds
                        .iter()
                        .map(|&d| Ok(wrap_logical_dim(d, dim_rank)? + 1))
                        .collect();
                    IValue::IntList(shifted?.into_iter().collect())
                }
            }
            IValue::None if a.name() == "dim" && reduction => {
                if matches!(a.ty().optional_element(), Some(Type::Int | Type::SymInt)) {
                    // An `int?` dim of None reduces the flattened tensor.
                    stack[0] = IValue::Tensor(ops::reshape(&self_p, &[call.batch_size, -1])?);
                    IValue::Int(1)
                } else {
                    IValue::IntList((1..=rank as i64).collect())
                }
            }
            other => other.clone(),
        };
        stack.push(value);
    }
    call.op.call_boxed(&mut stack)?;
    if scalar_sample && base != "flatten" {
        for v in &mut stack {
            v.try_map_tensors(|t| {
                if t.dim() == 2 {
                    ops::squeeze_dim(t, 1)
                } else {
                    Ok(t.clone())
                }
            })?;
        }
    }
    batch_returns(call, stack)
}

/// `squeeze(self)`: the sample's size-1 dimensions, not the batch.
pub(crate) fn squeeze_rule(call: &BatchedCall<'_>) -> Result<Vec<IValue>> {
    let Some(self_) = tensor_arg(call, 0) else {
        return fallback::loop_call(call);
    };
    let Some(p) = front(call, self_)? else {
        return fallback::loop_call(call);
    };
    let dims: Vec<i64> = (0..self_.dim())
        .filter(|&d| self_.sizes()[d] == 1)
        .map(|d| d as i64 + 1)
        .collect();
    batched(call, ops::squeeze_dims(&p, &dims)?).map(|v| vec![v])
}

/// `view`, `_unsafe_view`, `reshape`: the size list gets the batch in front.
pub(crate) fn view_rule(call: &BatchedCall<'_>) -> Result<Vec<IValue>> {
    let (Some(self_), Some(IValue::IntList(size))) = (tensor_arg(call, 0), call.args.get(1)) else {
        return fallback::loop_call(call);
    };
    let Some(p) = front(call, self_)? else {
        return fallback::loop_call(call);
    };
    if call.op.name().base_name() == "view" && call.batch_size > 0 {
        // The sample must be viewable with its own strides, whatever the batch's are.
        ops::view(&ops::select(&p, 0, 0)?, size)?;
    }
    let mut physical_size = Vec::with_capacity(size.len() + 1);
    physical_size.push(call.batch_size);
    physical_size.extend_from_slice(size);
    let mut stack: Stack = vec![
        IValue::Tensor(p),
        IValue::IntList(physical_size.into_iter().collect()),
    ];
    call.op.call_boxed(&mut stack)?;
    batch_returns(call, stack)
}

/// `expand`: the batched tensor gets the new leading dimensions after its batch.
pub(crate) fn expand_rule(call: &BatchedCall<'_>) -> Result<Vec<IValue>> {
    let (Some(self_), Some(IValue::IntList(size))) = (tensor_arg(call, 0), call.args.get(1)) else {
        return fallback::loop_call(call);
    };
    let Some(p) = front(call, self_)? else {
        return fallback::loop_call(call);
    };
    if size.len() < self_.dim() {
        // PyTorch's own message, from the operator on the logical sample.
        return fallback::loop_call(call);
    }
    let p = pad_to_logical_rank(p, size.len())?;
    let mut physical_size = Vec::with_capacity(size.len() + 1);
    physical_size.push(call.batch_size);
    physical_size.extend_from_slice(size);
    batched(call, ops::expand(&p, &physical_size)?).map(|v| vec![v])
}

/// `permute`: the batch stays in front.
pub(crate) fn permute_rule(call: &BatchedCall<'_>) -> Result<Vec<IValue>> {
    let (Some(self_), Some(IValue::IntList(dims))) = (tensor_arg(call, 0), call.args.get(1)) else {
        return fallback::loop_call(call);
    };
    let Some(p) = front(call, self_)? else {
        return fallback::loop_call(call);
    };
    let mut physical = vec![0i64];
    for &d in dims.iter() {
        physical.push(wrap_logical_dim(d, self_.dim())? + 1);
    }
    batched(call, ops::permute(&p, &physical)?).map(|v| vec![v])
}

/// `t`: a transpose of the two logical dimensions, or the tensor itself below two.
pub(crate) fn t_rule(call: &BatchedCall<'_>) -> Result<Vec<IValue>> {
    let Some(self_) = tensor_arg(call, 0) else {
        return fallback::loop_call(call);
    };
    let Some(p) = front(call, self_)? else {
        return fallback::loop_call(call);
    };
    match self_.dim() {
        0 | 1 => batched(call, p).map(|v| vec![v]),
        2 => batched(call, ops::transpose(&p, 1, 2)?).map(|v| vec![v]),
        _ => fallback::loop_call(call),
    }
}

/// `stack`, `cat`: every element with the batch in front (expanded when not batched), the
/// dimension shifted past the batch.
pub(crate) fn list_dim_rule(call: &BatchedCall<'_>) -> Result<Vec<IValue>> {
    let (Some(IValue::TensorList(tensors)), Some(IValue::Int(dim))) =
        (call.args.first(), call.args.get(1))
    else {
        return fallback::loop_call(call);
    };
    let Some(first) = tensors.first() else {
        return fallback::loop_call(call);
    };
    let rank = first.dim();
    if tensors.iter().any(|t| t.dim() != rank) {
        return fallback::loop_call(call);
    }
    let stacking = call.op.name().base_name() == "stack";
    let dim = wrap_logical_dim(*dim, if stacking { rank + 1 } else { rank })? + 1;
    let physical: Vec<Tensor> = tensors
        .iter()
        .map(|t| front_value_or_expand(t, call.level, call.batch_size))
        .collect::<Result<_>>()?;
    let mut stack: Stack = vec![
        IValue::TensorList(physical.into_iter().collect()),
        IValue::Int(dim),
    ];
    call.op.call_boxed(&mut stack)?;
    batch_returns(call, stack)
}

/// `sum(self)`, `mean(self)`: the reduction over every logical dimension.
pub(crate) fn full_reduction_rule(call: &BatchedCall<'_>) -> Result<Vec<IValue>> {
    let Some(self_) = tensor_arg(call, 0) else {
        return fallback::loop_call(call);
    };
    let Some(mut p) = front(call, self_)? else {
        return fallback::loop_call(call);
    };
    if p.dim() == 1 {
        p = ops::unsqueeze(&p, 1)?;
    }
    let dims: Vec<i64> = (1..p.dim() as i64).collect();
    let dtype = match call.args.get(1) {
        Some(IValue::ScalarType(s)) => Some(*s),
        _ => None,
    };
    let out = if call.op.name().base_name() == "sum" {
        let options = ops::SumDimIntListOptions {
            dtype,
            ..Default::default()
        };
        ops::sum_dim_int_list_with(&p, Some(&dims), options)?
    } else {
        let options = ops::MeanDimOptions {
            dtype,
            ..Default::default()
        };
        ops::mean_dim_with(&p, Some(&dims), options)?
    };
    batched(call, out).map(|v| vec![v])
}

/// Operators whose result has `self`'s shape and whose other arguments are not tensors
/// (`clone`, `contiguous`, `_to_copy`).
pub(crate) fn same_shape_rule(call: &BatchedCall<'_>) -> Result<Vec<IValue>> {
    let Some(self_) = tensor_arg(call, 0) else {
        return fallback::loop_call(call);
    };
    let Some(p) = front(call, self_)? else {
        return fallback::loop_call(call);
    };
    let mut stack: Stack = call.args.clone();
    stack[0] = IValue::Tensor(p);
    call.op.call_boxed(&mut stack)?;
    batch_returns(call, stack)
}

/// `gather`, `scatter`, `scatter_add`: the dim rule with the index (and source) batched too.
pub(crate) fn index_like_rule(call: &BatchedCall<'_>) -> Result<Vec<IValue>> {
    let Some(self_) = tensor_arg(call, 0) else {
        return fallback::loop_call(call);
    };
    if !is_batched_at(self_, call.level) {
        return fallback::loop_call(call);
    }
    dim_rule(call)
}

/// `as_strided(self, size, stride, storage_offset)`: each sample's view of the storage, the
/// samples `batch stride` elements apart.
pub(crate) fn as_strided_rule(call: &BatchedCall<'_>) -> Result<Vec<IValue>> {
    let (Some(self_), Some(IValue::IntList(size)), Some(IValue::IntList(stride))) =
        (tensor_arg(call, 0), call.args.get(1), call.args.get(2))
    else {
        return fallback::loop_call(call);
    };
    let Some(b) = crate::batched_tensor::batched_value(self_).filter(|b| b.level == call.level)
    else {
        return fallback::loop_call(call);
    };
    let offset = match call.args.get(3) {
        Some(IValue::Int(o)) => *o,
        _ => self_.storage_offset(),
    };
    let mut physical_size = vec![call.batch_size];
    physical_size.extend_from_slice(size);
    let mut physical_stride = vec![b.value.strides()[b.bdim]];
    physical_stride.extend_from_slice(stride);
    let out = ops::as_strided_with(
        &b.value,
        &physical_size,
        &physical_stride,
        ops::AsStridedOptions {
            storage_offset: Some(offset),
        },
    )?;
    batched(call, out).map(|v| vec![v])
}

/// `narrow.Tensor(self, dim, start)`: a batched `start` would be read per sample (PyTorch's
/// `.item()` error); a shared one is the dim rule's.
pub(crate) fn narrow_tensor_rule(call: &BatchedCall<'_>) -> Result<Vec<IValue>> {
    if tensor_arg(call, 2).is_some_and(|t| is_batched_at(t, call.level)) {
        return Err(crate::fallback::item_error());
    }
    dim_rule(call)
}
