//! [`Traced`]: the result of a trace, a graph with the constants it captured; printing,
//! export and re-running it.

use std::fmt;

use serde_json::{json, Value as Json};
use switchboard_dispatcher::{
    AutoDispatchBelowADInplaceOrView, ExcludeDispatchKeyGuard, IValue, Result, Stack,
};
use switchboard_graph::{meta_annotation, output_root, Arg, Graph, NodeKind, Source, Value};
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
    graph: Graph,
    /// For each graph input: `None` for a declared input, the snapshot for a constant.
    inputs: Vec<Option<Tensor>>,
    /// For each graph input: whether the graph writes its memory (such a constant is copied
    /// before each run, so that every run starts from the traced value).
    written: Vec<bool>,
}

impl Traced {
    pub(crate) fn new(graph: Graph, inputs: Vec<Option<Tensor>>) -> Traced {
        let written = written_inputs(&graph);
        Traced {
            graph,
            inputs,
            written,
        }
    }

    /// The graph.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Consumes the trace, returning its graph.
    pub fn into_graph(self) -> Graph {
        self.graph
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
        self.graph
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
        let _below = AutoDispatchBelowADInplaceOrView::new();
        let _no_autocast = ExcludeDispatchKeyGuard::new(AUTOCAST_DISPATCH_KEYSET);
        let mut slot_base = Vec::with_capacity(self.graph.nodes().len());
        let mut n_slots = 0usize;
        for n in self.graph.nodes() {
            slot_base.push(n_slots);
            n_slots += n.outputs().len();
        }
        let slot = |v: Value| slot_base[v.node.index()] + v.output as usize;
        // The last node reading each slot: it is freed after that node.
        let mut last_use = vec![usize::MAX; n_slots];
        for (i, n) in self.graph.nodes().enumerate() {
            for v in n.inputs() {
                last_use[slot(v)] = i;
            }
        }
        // The outputs are kept; a result nothing reads is dropped at once.
        for v in self.graph.outputs() {
            last_use[slot(*v)] = usize::MAX - 1;
        }
        let mut slots: Vec<Option<Tensor>> = vec![None; n_slots];
        let mut declared = inputs.iter();
        let mut stack: Stack = Vec::new();
        for (i, n) in self.graph.nodes().enumerate() {
            match n.kind() {
                NodeKind::Input { index } => {
                    let index = *index as usize;
                    let t = match &self.inputs[index] {
                        None => {
                            let t = declared.next().expect("counted");
                            let m = &n.outputs()[0].meta;
                            if t.dtype() != m.dtype || t.sizes() != m.sizes.as_slice() {
                                return Err(TensorError::invalid(format!(
                                    "trace: input {} is {} but the graph was traced for {}",
                                    index,
                                    t.type_string(),
                                    meta_annotation(m)
                                ))
                                .into());
                            }
                            t.clone()
                        }
                        Some(c) if self.written[index] => c.deep_clone()?,
                        Some(c) => c.clone(),
                    };
                    slots[slot_base[i]] = Some(t);
                }
                NodeKind::Call { op } => {
                    let args = n.args();
                    stack.clear();
                    for a in args {
                        stack.push(match a {
                            Arg::Value(v) => IValue::Tensor(read(&slots, slot(*v))?),
                            Arg::Values(vs) => IValue::TensorList(
                                vs.iter()
                                    .map(|v| read(&slots, slot(*v)))
                                    .collect::<Result<_>>()?,
                            ),
                            Arg::OptionalValues(vs) => IValue::OptionalTensorList(
                                vs.iter()
                                    .map(|v| v.map(|v| read(&slots, slot(v))).transpose())
                                    .collect::<Result<_>>()?,
                            ),
                            Arg::Const(c) => c.clone(),
                        });
                    }
                    op.call_boxed(&mut stack)?;
                    for (j, out) in n.outputs().iter().enumerate() {
                        let t = match out.source {
                            Source::Return(r) => {
                                stack.get(r as usize).and_then(IValue::as_tensor).cloned()
                            }
                            Source::ReturnItem(r, k) => match stack.get(r as usize) {
                                Some(IValue::TensorList(ts)) => ts.get(k as usize).cloned(),
                                _ => None,
                            },
                            Source::Argument(k) => match args.get(k as usize) {
                                Some(Arg::Value(v)) => Some(read(&slots, slot(*v))?),
                                _ => None,
                            },
                        };
                        let t = t.ok_or_else(|| {
                            TensorError::invalid(format!(
                                "trace: {} did not produce its output {j} ({:?})",
                                op.name(),
                                out.source
                            ))
                        })?;
                        if last_use[slot_base[i] + j] != usize::MAX {
                            slots[slot_base[i] + j] = Some(t);
                        }
                    }
                    stack.clear();
                    for v in n.inputs() {
                        if last_use[slot(v)] == i {
                            slots[slot(v)] = None;
                        }
                    }
                }
            }
        }
        self.graph
            .outputs()
            .iter()
            .map(|v| read(&slots, slot(*v)))
            .collect()
    }

    /// The graph as JSON, in execution order: `{"inputs": [...], "constants": [input
    /// indices], "nodes": [{"name", "op", "schema", "inputs": [...], "outputs": [{"shape",
    /// "dtype", "strides", ...}]}, ...], "outputs": [...]}`. A node's `inputs` are its
    /// arguments in schema order, each named and either a graph value (`{"name": "self",
    /// "value": "t"}`) or a constant (`{"name": "beta", "const": 1}`).
    pub fn to_json(&self) -> Json {
        let mut j = self.graph.to_json();
        rename_sizes(&mut j["inputs"]);
        if let Some(nodes) = j["nodes"].as_array_mut() {
            for n in nodes {
                if let Some(obj) = n.as_object_mut() {
                    if let Some(args) = obj.remove("args") {
                        obj.insert("inputs".into(), args);
                    }
                }
                rename_sizes(&mut n["outputs"]);
            }
        }
        j["constants"] = json!(self.constants().map(|(i, _)| i).collect::<Vec<_>>());
        j
    }

    /// The graph in Graphviz's DOT language ([`Graph::to_dot`]).
    pub fn to_dot(&self) -> String {
        self.graph.to_dot()
    }
}

/// `sizes` -> `shape` in each metadata object of a JSON array.
fn rename_sizes(metas: &mut Json) {
    if let Some(metas) = metas.as_array_mut() {
        for m in metas {
            if let Some(obj) = m.as_object_mut() {
                if let Some(s) = obj.remove("sizes") {
                    obj.insert("shape".into(), s);
                }
            }
        }
    }
}

fn read(slots: &[Option<Tensor>], s: usize) -> Result<Tensor> {
    slots[s].clone().ok_or_else(|| {
        TensorError::invalid(format!("trace: value slot {s} is read after it was freed")).into()
    })
}

/// For each graph input, whether some call writes its memory (directly or through a view).
fn written_inputs(g: &Graph) -> Vec<bool> {
    let nodes = g.nodes();
    // The input whose memory each value is, if any.
    let mut root: Vec<Vec<Option<usize>>> = Vec::with_capacity(nodes.len());
    let mut written = vec![false; g.inputs().len()];
    for n in nodes {
        let roots = match n.kind() {
            NodeKind::Input { index } => vec![Some(*index as usize)],
            NodeKind::Call { op } => {
                let args = n.args();
                let al = op.semantics().unwrap_or_default();
                let arg_root = |k: usize| match args.get(k) {
                    Some(Arg::Value(v)) => root[v.node.index()][v.output as usize],
                    _ => None,
                };
                for &k in &al.written {
                    if let Some(r) = arg_root(k) {
                        written[r] = true;
                    }
                }
                n.outputs()
                    .iter()
                    .map(|o| output_root(&al, o.source, arg_root))
                    .collect()
            }
        };
        root.push(roots);
    }
    written
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
        write!(f, "{}", self.graph)
    }
}
