//! The batching layer's boxed kernel on `FuncTorchBatched`: a batching rule when the operator
//! has one, the operator's CompositeImplicitAutograd decomposition when it has one, and
//! otherwise PyTorch's slow path (`batchedTensorForLoopFallback`): a loop over the batch
//! calling the operator per sample, then stacking the results.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use switchboard_dispatcher::{
    DispatchError, DispatchErrorKind, Dispatcher, IValue, OperatorHandle, Provenance, Result,
    SchemaKind, Stack,
};
use switchboard_keys::{DispatchKey, DispatchKeySet};
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

use crate::batched_tensor::{batch_size_at, batched_value, make_batched};
use crate::random;
use crate::rules;

static FALLBACK_WARNING: AtomicBool = AtomicBool::new(true);

/// Whether the slow path warns that an operator has no batching rule
/// (`torch._C._functorch._set_vmap_fallback_warning_enabled`; on by default, as in PyTorch 2.15).
pub fn set_vmap_fallback_warning_enabled(enabled: bool) {
    FALLBACK_WARNING.store(enabled, Ordering::Relaxed);
}

/// A kernel error with PyTorch's message.
pub(crate) fn vmap_error(message: String) -> DispatchError {
    DispatchError::from(DispatchErrorKind::Kernel(message))
}

/// PyTorch's error for reading a batched value as a number.
pub(crate) fn item_error() -> DispatchError {
    vmap_error(
        "vmap: It looks like you're calling .item() on a Tensor. We don't support vmap over \
         calling .item() on a Tensor, please try to rewrite what you're doing with other \
         operations. If error is occurring somewhere inside PyTorch internals, please file a \
         bug report."
            .into(),
    )
}

/// One call being batched: the operator, its arguments and the level being unwrapped.
pub(crate) struct BatchedCall<'a> {
    pub op: &'a OperatorHandle,
    pub args: Vec<IValue>,
    pub level: u32,
    pub batch_size: i64,
}

impl BatchedCall<'_> {
    /// `aten::name` or `aten::name.overload`, as PyTorch prints an operator in vmap errors.
    pub fn display_name(&self) -> String {
        let name = self.op.name();
        match name.overload_name() {
            "" => name.name().to_string(),
            o => format!("{}.{o}", name.name()),
        }
    }
}

/// Every tensor of an argument list (Tensor, Tensor[] and Tensor?[] values).
pub(crate) fn arg_tensors(args: &[IValue]) -> impl Iterator<Item = &Tensor> {
    args.iter().flat_map(|a| a.tensors())
}

/// The boxed kernel of `FuncTorchBatched`.
pub(crate) fn batched_kernel(
    op: &OperatorHandle,
    keys: DispatchKeySet,
    stack: &mut Stack,
) -> Result<()> {
    let record = op
        .schema()
        .ok_or_else(|| vmap_error(format!("vmap: {} has no schema", op.name().name())))?;
    let n = record.schema.arguments().len();
    let args: Vec<IValue> = stack.drain(stack.len() - n..).collect();
    let level = arg_tensors(&args)
        .filter_map(|t| batched_value(t).map(|b| b.level))
        .max();
    let Some(level) = level else {
        stack.extend(args);
        return op.redispatch_boxed(
            keys & DispatchKeySet::full_after(DispatchKey::FuncTorchBatched),
            stack,
        );
    };
    let batch_size = arg_tensors(&args)
        .find_map(|t| batch_size_at(t, level))
        .unwrap_or(0);
    let semantics = &record.semantics;
    let base = op.name().base_name();
    if base == "_local_scalar_dense" || base == "item" {
        return Err(item_error());
    }
    if semantics.is_data_dependent {
        return Err(vmap_error(format!(
            "vmap: We do not support batching operators that can output dynamic shape. \
             Attempted to vmap over {}. Please file an issue at \
             https://github.com/pytorch/pytorch/issues if you need this feature.",
            op.name().name()
        )));
    }
    let call = BatchedCall {
        op,
        args,
        level,
        batch_size,
    };
    if let Some(rule) = rules::find(op, semantics) {
        let outputs = rule(&call)?;
        stack.extend(outputs);
        return Ok(());
    }
    if let Some(key) = composite_key(op, keys) {
        // The decomposition's own calls reach this layer again, each with its rule.
        stack.extend(call.args);
        return op.redispatch_boxed(DispatchKeySet::from_key(key) | backend_bits(keys), stack);
    }
    let outputs = slow_path(&call, semantics.kind, semantics.is_view)?;
    stack.extend(outputs);
    Ok(())
}

/// The backend bits of a key set (which backend a per-backend key is for).
fn backend_bits(keys: DispatchKeySet) -> DispatchKeySet {
    DispatchKeySet::from_backend(keys.highest_backend_key())
}

thread_local! {
    /// Whether an operator's backend slot holds its CompositeImplicitAutograd kernel, by
    /// operator id and backend (the table lookup takes the registry lock).
    static COMPOSITE: RefCell<HashMap<(usize, DispatchKey), bool>> = RefCell::new(HashMap::new());
}

/// The dense backend key whose kernel is `op`'s CompositeImplicitAutograd decomposition, if it
/// has one for the backend of `keys`.
pub(crate) fn composite_key(op: &OperatorHandle, keys: DispatchKeySet) -> Option<DispatchKey> {
    let backend = keys.highest_backend_key();
    let key = DispatchKey::to_runtime_per_backend_functionality_key(DispatchKey::Dense, backend);
    if key == DispatchKey::Undefined {
        return None;
    }
    let is_math = COMPOSITE.with(|c| {
        *c.borrow_mut().entry((op.id(), key)).or_insert_with(|| {
            Dispatcher::global().kernel_origin(op, key).provenance == Provenance::Math
        })
    });
    is_math.then_some(key)
}

/// The slow path for a call a rule cannot take (its operands are batched in a way the rule
/// does not cover).
pub(crate) fn loop_call(call: &BatchedCall<'_>) -> Result<Vec<IValue>> {
    let semantics = call.op.semantics();
    let (kind, is_view) =
        semantics.map_or((SchemaKind::Functional, false), |s| (s.kind, s.is_view));
    slow_path(call, kind, is_view)
}

/// `batchedTensorForLoopFallback` and its in-place form.
fn slow_path(call: &BatchedCall<'_>, kind: SchemaKind, is_view: bool) -> Result<Vec<IValue>> {
    let name = call.display_name();
    if kind == SchemaKind::Out || is_view {
        return Err(vmap_error(format!(
            "Batching rule not implemented for {name}; the fallback path doesn't work on out= or \
             view ops."
        )));
    }
    if FALLBACK_WARNING.load(Ordering::Relaxed) {
        switchboard_keys::warn(&format!(
            "There is a performance drop because we have not yet implemented the batching rule \
             for {name}. Please file us an issue on GitHub so that we can prioritize its \
             implementation."
        ));
    }
    let level = call.level;
    if kind == SchemaKind::Inplace {
        let self_batched = call
            .args
            .first()
            .and_then(IValue::as_tensor)
            .is_some_and(|t| crate::batched_tensor::is_batched_at(t, level));
        if !self_batched {
            return Err(vmap_error(format!(
                "vmap: {name}(self, *extra_args) is not possible because there exists a Tensor \
                 `other` in extra_args that has more elements than `self`. This happened due to \
                 `other` being vmapped over but `self` not being vmapped over at level {level}. \
                 Please try to use out-of-place operators instead of {name}. If said operator is \
                 being called inside the PyTorch framework, please file a bug report instead."
            )));
        }
    }
    let returns = call.op.schema().map_or(0, |r| r.schema.returns().len());
    let mut per_output: Vec<Vec<IValue>> = vec![Vec::new(); returns];
    let same_randomness = random::same_randomness_state();
    for b in 0..call.batch_size {
        if let Some(state) = &same_randomness {
            state.restore();
        }
        let mut stack: Stack = call
            .args
            .iter()
            .map(|a| {
                let mut a = a.clone();
                a.try_map_tensors(|t| sample(t, level, b))?;
                Ok(a)
            })
            .collect::<Result<_>>()?;
        call.op.call_boxed(&mut stack)?;
        for (slot, value) in per_output.iter_mut().zip(stack) {
            slot.push(value);
        }
    }
    if kind == SchemaKind::Inplace {
        return Ok(vec![call.args[0].clone()]);
    }
    per_output
        .into_iter()
        .map(|values| stack_samples(values, level, &name))
        .collect()
}

/// Sample `b` of `t` at `level` (its physical tensor's slice), or `t` itself when it is not
/// batched there.
fn sample(t: &Tensor, level: u32, b: i64) -> Result<Tensor> {
    match batched_value(t) {
        Some(v) if v.level == level => ops::select(&v.value, v.bdim as i64, b),
        _ => Ok(t.clone()),
    }
}

/// Stacks one return's per-sample values into a batched value at `level`.
fn stack_samples(values: Vec<IValue>, level: u32, name: &str) -> Result<IValue> {
    let not_tensor = || {
        vmap_error(format!(
            "Batching rule not implemented for {name}. We could not generate a fallback."
        ))
    };
    match values.first() {
        Some(IValue::Tensor(_)) => {
            let ts: Vec<Tensor> = values
                .into_iter()
                .map(|v| match v {
                    IValue::Tensor(t) => Ok(t),
                    _ => Err(not_tensor()),
                })
                .collect::<Result<_>>()?;
            Ok(IValue::Tensor(make_batched(ops::stack(&ts)?, 0, level)?))
        }
        Some(IValue::TensorList(first)) => {
            let n = first.len();
            let mut out = Vec::with_capacity(n);
            for i in 0..n {
                let ts: Vec<Tensor> = values
                    .iter()
                    .map(|v| match v {
                        IValue::TensorList(l) if l.len() == n => Ok(l[i].clone()),
                        _ => Err(not_tensor()),
                    })
                    .collect::<Result<_>>()?;
                out.push(make_batched(ops::stack(&ts)?, 0, level)?);
            }
            Ok(IValue::TensorList(out.into_iter().collect()))
        }
        // A batch of 0 samples: nothing to stack (PyTorch's loop errors the same way).
        None => Err(vmap_error(format!(
            "vmap: {name}: cannot run the fallback over a batch of size 0"
        ))),
        Some(_) => Err(not_tensor()),
    }
}
