//! What every recorder of calls (the lazy backend, the tracer) needs from a graph besides
//! adding nodes: a tensor whose layout no value has, read as an `as_strided` view of a value
//! of its memory; and the outputs a call has for the arguments it writes without returning
//! them (Note [Graph IR]).

use std::sync::{Arc, OnceLock};

use switchboard_dispatcher::{Dispatcher, IValue, OperatorHandle, OperatorSemantics, Result};

use crate::graph::Graph;
use crate::node::{Arg, Output, TensorMeta, Value};

/// `aten::as_strided`, looked up on first use (the graph crate sits below the crate that
/// defines it).
fn as_strided_op() -> Result<&'static OperatorHandle> {
    static OP: OnceLock<OperatorHandle> = OnceLock::new();
    if let Some(op) = OP.get() {
        return Ok(op);
    }
    let op = Dispatcher::global().find_schema_or_throw("aten::as_strided")?;
    Ok(OP.get_or_init(|| op))
}

impl Graph {
    /// Adds `aten::as_strided(of, sizes, strides, offset)` with `meta`'s layout: the elements
    /// of a view no value stands for, read from `of` (a value of the same memory). On the
    /// device a graph runs on this is a real view, so writes through it reach `of`'s memory.
    pub fn add_as_strided(&mut self, of: Value, meta: Arc<TensorMeta>) -> Result<Value> {
        let op = as_strided_op()?.clone();
        let args = [
            Arg::Value(of),
            Arg::Const(IValue::IntList(meta.sizes.iter().copied().collect())),
            Arg::Const(IValue::IntList(meta.strides.iter().copied().collect())),
            Arg::Const(IValue::Int(meta.storage_offset)),
        ];
        let id = self.add_call_unchecked(op, args, std::iter::once(Output::ret(0, meta)));
        Ok(Value::new(id, 0))
    }
}

/// The arguments a call of an operator with `semantics` writes without returning them (the
/// `out=` arguments of a form with several outputs, a custom operator's `Tensor(a!)`): each has
/// a new value after the call, an output of its node with source `Source::Argument(k)`.
pub fn unreturned_writes(semantics: &OperatorSemantics) -> impl Iterator<Item = usize> + '_ {
    semantics
        .written
        .iter()
        .copied()
        .filter(|k| !semantics.return_aliases.contains(&Some(*k)))
}
