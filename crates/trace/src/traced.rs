//! [`Traced`]: the result of a trace, a graph with the constants it captured; printing,
//! export and re-running it.

use std::fmt;

use serde_json::{json, Value as Json};
use switchboard_dispatcher::{AutoDispatchBelowADInplaceOrView, ExcludeDispatchKeyGuard, Result};
use switchboard_graph::{meta_annotation, Graph, Plan, RunOptions, Value};
use switchboard_keys::AUTOCAST_DISPATCH_KEYSET;
use switchboard_tensor::{Tensor, TensorError};

/// A traced program: its [`Graph`] (inputs, calls in execution order, outputs) and the
/// constant tensors it read, which are inputs of the graph after (or among) the declared ones
/// (Note [Tensor identity in a trace]).
///
/// It prints as code (`Display`, in the style of FX's `graph_module.code`), exports as JSON
/// ([`Traced::to_json`]) and DOT ([`Traced::to_dot`]), and re-runs on new inputs
/// ([`Traced::run`]).
#[derive(Clone, Debug)]
pub struct Traced {
    /// The graph, planned once to run every call in order ([`Plan::every_call`]).
    plan: Plan,
    /// For each graph input: `None` for a declared input, the snapshot for a constant.
    inputs: Vec<Option<Tensor>>,
}

impl Traced {
    pub(crate) fn new(graph: Graph, inputs: Vec<Option<Tensor>>) -> Traced {
        Traced {
            plan: Plan::every_call(graph),
            inputs,
        }
    }

    /// The graph.
    pub fn graph(&self) -> &Graph {
        self.plan.graph()
    }

    /// Consumes the trace, returning its graph.
    pub fn into_graph(self) -> Graph {
        self.plan.into_graph()
    }

    /// The number of declared inputs ([`run`](Self::run) takes this many tensors).
    pub fn num_inputs(&self) -> usize {
        self.inputs.iter().filter(|i| i.is_none()).count()
    }

    /// The constants the program read: (graph input index, the tensor as it was when the
    /// trace first read it).
    pub fn constants(&self) -> impl Iterator<Item = (usize, &Tensor)> {
        self.inputs
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.as_ref().map(|c| (i, c)))
    }

    /// The operators called, in execution order, with their overload (`aten::t`,
    /// `aten::addmm`, `aten::sum.dim_IntList`): the list make_fx's graph gives as
    /// `[n.target for n in gm.graph.nodes if n.op == "call_function"]`.
    pub fn op_names(&self) -> Vec<String> {
        self.graph()
            .nodes()
            .filter_map(|n| n.op().map(|op| op.name().to_string()))
            .collect()
    }

    /// Runs the traced program on `inputs` (one per declared input, in order; the constants
    /// are supplied) and returns its outputs.
    ///
    /// Every call runs, in order, through the dispatcher, below the autograd and autocast
    /// layers (their work is in the graph already: a joint graph holds the backward calls, a
    /// graph traced under autocast its casts), in place where the program wrote in place: a
    /// program that updated its inputs (an optimizer step) updates the tensors given here.
    /// The graph is specialised to what the trace saw: the inputs must have its sizes and
    /// dtypes, and random operators draw new numbers.
    pub fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        if inputs.len() != self.num_inputs() {
            return Err(TensorError::invalid(format!(
                "trace: the graph takes {} inputs but {} tensors were given",
                self.num_inputs(),
                inputs.len()
            ))
            .into());
        }
        let graph = self.plan.graph();
        let mut declared = inputs.iter();
        let mut all = Vec::with_capacity(self.inputs.len());
        for (index, (input, &written)) in self
            .inputs
            .iter()
            .zip(self.plan.written_inputs())
            .enumerate()
        {
            all.push(match input {
                None => {
                    let t = declared.next().expect("counted");
                    let m = graph.meta(Value::new(graph.inputs()[index], 0));
                    if t.dtype() != m.dtype || t.sizes() != m.sizes.as_slice() {
                        return Err(TensorError::invalid(format!(
                            "trace: input {index} is {} but the graph was traced for {}",
                            t.type_string(),
                            meta_annotation(m)
                        ))
                        .into());
                    }
                    t.clone()
                }
                // Every run starts from the traced value of a constant the graph writes.
                Some(c) if written => c.deep_clone()?,
                Some(c) => c.clone(),
            });
        }
        let _below = AutoDispatchBelowADInplaceOrView::new();
        let _no_autocast = ExcludeDispatchKeyGuard::new(AUTOCAST_DISPATCH_KEYSET);
        self.plan.run(all, &RunOptions::default())
    }

    /// The graph as JSON ([`Graph::to_json`], the form every graph is written in), with
    /// `constants` listing the graph inputs that are constants the trace captured.
    pub fn to_json(&self) -> Json {
        let mut j = self.graph().to_json();
        j["constants"] = json!(self.constants().map(|(i, _)| i).collect::<Vec<_>>());
        j
    }

    /// The graph in Graphviz's DOT language ([`Graph::to_dot`]).
    pub fn to_dot(&self) -> String {
        self.graph().to_dot()
    }
}

impl fmt::Display for Traced {
    /// The graph as code, with a comment naming the constants.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let constants: Vec<String> = self.constants().map(|(i, _)| format!("arg{i}")).collect();
        if !constants.is_empty() {
            writeln!(
                f,
                "# constants (captured by the trace, supplied by run): {}",
                constants.join(", ")
            )?;
        }
        write!(f, "{}", self.graph())
    }
}
