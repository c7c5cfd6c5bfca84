//! The tracing dispatch mode: each call it sees becomes a node of the graph.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use switchboard_dispatcher::{DispatchKey, DispatchKeySet, IValue, OperatorHandle, Result, Stack};
use switchboard_graph::{unreturned_writes, Arg, Graph, Output, Source, TensorMeta, Value};
use switchboard_modes::{push_mode, DispatchMode};
use switchboard_tensor::{Tensor, TensorError};

use crate::values::{Lookup, Values};

// Note [Tracing]
// A trace is a dispatch mode (crates/modes), as PyTorch's make_fx is one
// (`ProxyTorchDispatchMode`). A mode is entered at the Python key, which sits below Autograd,
// ADInplaceOrView and Autocast and above the backends, so it sees exactly the calls make_fx
// records:
// - the operators that *run*, not the composite ones: a CompositeImplicitAutograd operator
//   (`linear`, `cross_entropy_loss`, `log_softmax.int`) runs its decomposition at the
//   Autograd key, and the mode sees the calls it makes (`t`, `addmm`, `_log_softmax`, ...);
// - the calls autograd makes below itself: the forward calls it records a node for, and,
//   when backward runs inside the trace, the calls of the backward formulas and the engine
//   (`ones_like` of the root, `sum` + `view` where a gradient is summed to an input's shape,
//   `add` where gradients accumulate): a joint graph;
// - factories (`ones`, `zeros`, `randn`): with a mode pushed the Python key is in every call's
//   key set (Note [Modes switch the Python keys]), so calls without tensor arguments reach
//   the mode too and become nodes without inputs.
// The mode runs popped (Note [Modes run popped]): when it runs the call, the kernels' own
// calls are not seen, as make_fx does not see inside a kernel. A composite operator that does
// reach the mode (called with the Autograd keys excluded) is decomposed with the tracer
// pushed again, as make_fx's `func.decompose()`. Tensors the trace did not produce are
// constants (Note [Tensor identity in a trace]). With no trace the Python keys are in no
// call's key set and tracing costs nothing.

/// What a trace has recorded so far.
#[derive(Default)]
pub(crate) struct State {
    pub graph: Graph,
    pub values: Values,
    /// For each graph input, in order: `None` for an input the user declared, the snapshot
    /// for a constant.
    pub inputs: Vec<Option<Tensor>>,
}

impl State {
    /// Declares `t` an input of the graph.
    pub fn add_input(&mut self, t: &Tensor) -> Result<Value> {
        if !matches!(self.values.lookup(t), Lookup::Unknown) {
            return Err(TensorError::invalid(
                "trace: this tensor is already part of the trace (an input, a result of a traced \
                 call, a view of one, or a constant it used); declare inputs before using them",
            )
            .into());
        }
        let v = self.graph.add_input(TensorMeta::of(t));
        self.inputs.push(None);
        self.values.record(t, v);
        Ok(v)
    }

    /// The value of `t`: its traced value, an `as_strided` view of a traced value over its
    /// storage, or a new constant (Note [Tensor identity in a trace]).
    pub fn value_of(&mut self, t: &Tensor) -> Result<Value> {
        match self.values.lookup(t) {
            Lookup::Value(v) => Ok(v),
            Lookup::ViewOf(base) => {
                let v = self
                    .graph
                    .add_as_strided(base, Arc::new(TensorMeta::of(t)))?;
                self.values.record(t, v);
                Ok(v)
            }
            Lookup::Unknown => {
                let snapshot = switchboard_graph::snapshot(t)?;
                let v = self.graph.add_input(TensorMeta::of(&snapshot));
                self.inputs.push(Some(snapshot));
                self.values.record(t, v);
                Ok(v)
            }
        }
    }

    /// A boxed argument as a graph argument.
    fn arg(&mut self, v: &IValue) -> Result<Arg> {
        Ok(match v {
            // A number the program passed for a tensor is a literal, as in make_fx's graphs
            // (unless the trace has seen that very tensor: then it is a value).
            IValue::Tensor(t) if matches!(self.values.lookup(t), Lookup::Unknown) => {
                match Arg::number_of(t) {
                    Some(number) => number,
                    None => Arg::Value(self.value_of(t)?),
                }
            }
            IValue::Tensor(t) => Arg::Value(self.value_of(t)?),
            IValue::TensorList(ts) => {
                Arg::Values(ts.iter().map(|t| self.value_of(t)).collect::<Result<_>>()?)
            }
            IValue::OptionalTensorList(ts) => Arg::OptionalValues(
                ts.iter()
                    .map(|t| t.as_ref().map(|t| self.value_of(t)).transpose())
                    .collect::<Result<_>>()?,
            ),
            other => Arg::Const(other.clone()),
        })
    }

    /// Adds the node of a call that ran: `rets` are its returns, `written` the tensors it
    /// wrote without returning them (by argument index: [`unreturned_writes`]).
    fn add_node(
        &mut self,
        op: &OperatorHandle,
        args: Vec<Arg>,
        rets: &[IValue],
        written: Vec<(usize, Tensor)>,
    ) -> Result<()> {
        let mut outputs = Vec::new();
        let mut produced: Vec<Tensor> = Vec::new();
        let mut output = |t: &Tensor, source: Source| {
            outputs.push(Output {
                meta: Arc::new(TensorMeta::of(t)),
                source,
            });
            produced.push(t.clone());
        };
        for (i, r) in rets.iter().enumerate() {
            match r {
                IValue::Tensor(t) => output(t, Source::Return(i as u32)),
                IValue::TensorList(ts) => {
                    for (j, t) in ts.iter().enumerate() {
                        output(t, Source::ReturnItem(i as u32, j as u32));
                    }
                }
                _ => {}
            }
        }
        // A written argument the call does not return has a new value all the same.
        for (k, t) in written {
            output(&t, Source::Argument(k as u32));
        }
        let node = self.graph.add_call(op.clone(), args, outputs)?;
        for (j, t) in produced.iter().enumerate() {
            self.values.record(t, self.graph.value(node, j as u32));
        }
        Ok(())
    }
}

/// The dispatch mode of a trace (Note [Tracing]).
pub(crate) struct TraceMode {
    pub state: Rc<RefCell<State>>,
}

/// Whether the call of `op` with `keys` runs a CompositeImplicitAutograd kernel below the
/// Python key (no kernel of its own at the call's backend): then the tracer decomposes it.
fn decomposes(op: &OperatorHandle, keys: DispatchKeySet) -> bool {
    op.has_kernel_for_dispatch_key(DispatchKey::CompositeImplicitAutograd)
        && !op
            .has_kernel_for_any_dispatch_key(keys & DispatchKeySet::full_after(DispatchKey::Python))
}

impl DispatchMode for TraceMode {
    fn dispatch(&self, op: &OperatorHandle, keys: DispatchKeySet, stack: &mut Stack) -> Result<()> {
        if decomposes(op, keys) {
            // `func.decompose()` with the mode on: the calls the decomposition makes are traced.
            let _again = push_mode(Rc::new(TraceMode {
                state: self.state.clone(),
            }));
            return op.redispatch_boxed(
                keys & DispatchKeySet::full_after(DispatchKey::Python),
                stack,
            );
        }
        let n_args = op
            .schema()
            .map_or(0, |r| r.schema.arguments().len())
            .min(stack.len());
        let base = stack.len() - n_args;
        // The arguments' values before the call (an in-place call reads the old value).
        let (args, written) = {
            let mut state = self.state.borrow_mut();
            let semantics = op.semantics().unwrap_or_default();
            let args = stack[base..]
                .iter()
                .map(|v| state.arg(v))
                .collect::<Result<Vec<_>>>()?;
            let written: Vec<(usize, Tensor)> = unreturned_writes(&semantics)
                .filter_map(|k| match stack.get(base + k) {
                    Some(IValue::Tensor(t)) => Some((k, t.clone())),
                    _ => None,
                })
                .collect();
            (args, written)
        };
        op.call_boxed(stack)?;
        let rets = stack.get(base..).unwrap_or_default();
        self.state.borrow_mut().add_node(op, args, rets, written)
    }
}
