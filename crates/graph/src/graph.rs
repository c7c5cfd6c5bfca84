//! [`Graph`]: nodes in execution order, its inputs and outputs; building, dead-code
//! elimination.

use std::fmt;
use std::sync::Arc;

use switchboard_dispatcher::{IValue, OperatorHandle};

use crate::node::{Arg, Node, NodeEntry, NodeId, NodeKind, Output, TensorMeta, Value};

/// An error building a graph: a value that does not exist (yet), a tensor given as a
/// constant, an output of the wrong source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GraphError(pub String);

impl fmt::Display for GraphError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for GraphError {}

impl From<GraphError> for switchboard_dispatcher::DispatchError {
    fn from(e: GraphError) -> Self {
        switchboard_tensor::TensorError::invalid(e.0).into()
    }
}

// Note [Graph IR]
// A graph is a list of nodes in execution order: inputs (placeholders whose tensors are given
// when it runs) and operator calls. A call holds its operator's handle (so replaying it is a
// boxed call through the dispatcher, every layer and backend included), all its arguments in
// schema order (tensors as graph values, everything else as constant `IValue`s) and the
// metadata of each tensor it produces. Values are SSA: a node's outputs are defined once.
//
// Mutation is explicit, not hidden. An in-place or `out=` call is a node like any other; its
// write argument is the value it mutates, and its output (the returned `self`/`out`, or an
// `Argument` source for a written argument it does not return) is the *new* value of that
// memory. Readers of the old value come earlier in the list, readers of the new value later,
// so running the nodes in order with real aliasing (views are real views, in-place ops write
// in place) reproduces eager execution exactly; analyses that move or merge nodes must respect
// that (see Note [Merging identical nodes] in plan.rs). Who uses this: the lazy backend
// records the calls the functionalization layer makes on lazy values (Note [Lazy values] in
// switchboard-lazy), and a tracer records calls as they run.

// Note [Node store]
// A graph keeps its nodes in three vectors: the nodes (what each is, and two index ranges),
// every node's arguments one after the other, and every node's outputs likewise. A node is
// its index; its arguments and outputs are slices of the shared vectors. So adding a call
// allocates nothing once the vectors have grown, and `clear` keeps their capacity: the lazy
// backend's pending graph, cleared at every sync, captures each training step into the
// memory the previous step used. Nodes are never removed one by one (a graph only grows
// until it is cleared; `compact` makes a new graph), which is what makes ranges stable.

/// A graph of operator calls (see Note [Graph IR]).
///
/// ```
/// use switchboard_dispatcher::{Dispatcher, IValue};
/// use switchboard_graph::{Arg, Graph, Output, TensorMeta};
/// use switchboard_tensor::{ScalarType, Tensor};
/// use switchboard_cpu as _; // the CPU kernels
/// use switchboard_ops as _; // the schemas
///
/// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
/// let mut g = Graph::new();
/// let a = g.add_input(TensorMeta::of(&x));
/// let mul = Dispatcher::global().find_schema_or_throw("aten::mul.Scalar").unwrap();
/// let n = g
///     .add_call(mul, vec![Arg::Value(a), Arg::Const(IValue::Int(2))], vec![Output::ret(0, TensorMeta::of(&x))])
///     .unwrap();
/// g.set_outputs(vec![g.value(n, 0)]).unwrap();
/// assert_eq!(g.to_string(), "def graph(arg0: \"f32[3]\"):\n    mul: \"f32[3]\" = aten.mul.Scalar(arg0, 2)\n    return (mul,)\n");
/// let out = g.replay(vec![x]).unwrap();
/// assert_eq!(out[0].to_vec::<f32>().unwrap(), [2.0, 4.0, 6.0]);
/// ```
#[derive(Clone, Debug, Default)]
pub struct Graph {
    /// The nodes in execution order (Note [Node store]).
    pub(crate) nodes: Vec<NodeEntry>,
    /// The arguments of every call node, node after node.
    pub(crate) args: Vec<Arg>,
    /// The outputs of every node, node after node.
    pub(crate) node_outputs: Vec<Output>,
    pub(crate) inputs: Vec<NodeId>,
    pub(crate) outputs: Vec<Value>,
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Graph {
        Graph::default()
    }

    /// Adds an input (a placeholder for a tensor with metadata `meta`) and returns its value.
    pub fn add_input(&mut self, meta: impl Into<Arc<TensorMeta>>) -> Value {
        let index = self.inputs.len() as u32;
        let id = self.push_node(
            NodeKind::Input { index },
            &[],
            [],
            std::iter::once(Output::ret(0, meta)),
        );
        self.inputs.push(id);
        Value::new(id, 0)
    }

    /// Adds a call of `op` with `args` (schema order) producing `outputs`. The values read
    /// must already exist and constants must not be tensors.
    pub fn add_call(
        &mut self,
        op: OperatorHandle,
        args: impl IntoIterator<Item = Arg>,
        outputs: impl IntoIterator<Item = Output>,
    ) -> Result<NodeId, GraphError> {
        let args: Vec<Arg> = args.into_iter().collect();
        for arg in &args {
            for v in arg.values() {
                self.check_value(v)?;
            }
            if let Arg::Const(c) = arg {
                if holds_tensor(c) {
                    return Err(GraphError(format!(
                        "{}: a tensor argument must be a graph value, not a constant",
                        op.name()
                    )));
                }
            }
        }
        Ok(self.add_call_unchecked(op, args, outputs))
    }

    /// Adds a call without checking its arguments: for recorders that only pass values they
    /// got from this graph and constants that are not tensors (the lazy backend's hot path).
    /// A bad value is reported when the graph is planned or run, never undefined behaviour.
    #[inline]
    pub fn add_call_unchecked(
        &mut self,
        op: OperatorHandle,
        args: impl IntoIterator<Item = Arg>,
        outputs: impl IntoIterator<Item = Output>,
    ) -> NodeId {
        self.add_call_unchecked_after(op, &[], args, outputs)
    }

    /// [`add_call_unchecked`](Self::add_call_unchecked) for a call whose first arguments are
    /// the tensors `values`, followed by `args`: what a recorder usually has at hand, added
    /// without chaining the two (the shorter code of two slice copies is what a capture's
    /// hot path wants).
    #[inline]
    pub fn add_call_unchecked_after(
        &mut self,
        op: OperatorHandle,
        values: &[Value],
        args: impl IntoIterator<Item = Arg>,
        outputs: impl IntoIterator<Item = Output>,
    ) -> NodeId {
        self.push_node(NodeKind::Call { op }, values, args, outputs)
    }

    /// Adds a node whose arguments are `values` then `args`.
    #[inline]
    fn push_node(
        &mut self,
        kind: NodeKind,
        values: &[Value],
        args: impl IntoIterator<Item = Arg>,
        outputs: impl IntoIterator<Item = Output>,
    ) -> NodeId {
        let id = NodeId(self.nodes.len() as u32);
        let a = self.args.len() as u32;
        // Pushed one by one: a call has a few arguments and outputs, and `extend` is an
        // out-of-line call each time (~40 instructions), more than the pushes.
        for v in values {
            self.args.push(Arg::Value(*v));
        }
        for arg in args {
            self.args.push(arg);
        }
        let o = self.node_outputs.len() as u32;
        for output in outputs {
            self.node_outputs.push(output);
        }
        self.nodes.push(NodeEntry {
            kind,
            args: (a, self.args.len() as u32),
            outputs: (o, self.node_outputs.len() as u32),
        });
        id
    }

    /// Sets the graph's outputs (the values a run returns, in order).
    pub fn set_outputs(&mut self, outputs: Vec<Value>) -> Result<(), GraphError> {
        for v in &outputs {
            self.check_value(*v)?;
        }
        self.outputs = outputs;
        Ok(())
    }

    fn check_value(&self, v: Value) -> Result<(), GraphError> {
        match self.nodes.get(v.node.index()) {
            Some(n) if v.output < n.outputs.1 - n.outputs.0 => Ok(()),
            _ => Err(GraphError(format!(
                "value %{}.{} is not defined in this graph",
                v.node.0, v.output
            ))),
        }
    }

    /// Value `output` of node `node`.
    pub fn value(&self, node: NodeId, output: u32) -> Value {
        Value::new(node, output)
    }

    /// The nodes, in execution order.
    pub fn nodes(&self) -> impl ExactSizeIterator<Item = Node<'_>> + '_ {
        self.nodes.iter().map(|e| self.view(e))
    }

    /// Node `id`.
    pub fn node(&self, id: NodeId) -> Node<'_> {
        self.view(&self.nodes[id.index()])
    }

    #[inline]
    pub(crate) fn view<'g>(&'g self, entry: &'g NodeEntry) -> Node<'g> {
        Node {
            entry,
            args: &self.args[entry.args.0 as usize..entry.args.1 as usize],
            outputs: &self.node_outputs[entry.outputs.0 as usize..entry.outputs.1 as usize],
        }
    }

    /// The number of outputs of node `id`.
    #[inline]
    pub(crate) fn num_outputs(&self, id: usize) -> u32 {
        let (start, end) = self.nodes[id].outputs;
        end - start
    }

    /// The input nodes, in input order.
    pub fn inputs(&self) -> &[NodeId] {
        &self.inputs
    }

    /// The outputs.
    pub fn outputs(&self) -> &[Value] {
        &self.outputs
    }

    /// Number of nodes (inputs included).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the graph has no node.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Number of call nodes.
    pub fn num_calls(&self) -> usize {
        self.nodes.len() - self.inputs.len()
    }

    /// The metadata of value `v`.
    pub fn meta(&self, v: Value) -> &TensorMeta {
        &self.node(v.node).outputs()[v.output as usize].meta
    }

    /// Removes every node and input, keeping the allocations (Note [Node store]).
    pub fn clear(&mut self) {
        self.nodes.clear();
        self.args.clear();
        self.node_outputs.clear();
        self.inputs.clear();
        self.outputs.clear();
    }

    /// Which nodes the outputs need (transitively): the others are dead and need not run.
    /// Input nodes are live when read.
    pub fn live_nodes(&self) -> Vec<bool> {
        let mut live = vec![false; self.nodes.len()];
        for v in &self.outputs {
            live[v.node.index()] = true;
        }
        // Nodes only read earlier nodes: one backward sweep finds every needed node.
        for i in (0..self.nodes.len()).rev() {
            if live[i] {
                for v in self.node(NodeId(i as u32)).inputs() {
                    if let Some(l) = live.get_mut(v.node.index()) {
                        *l = true;
                    }
                }
            }
        }
        live
    }

    /// A copy without the dead nodes (see [`live_nodes`](Self::live_nodes)) and without the
    /// inputs nothing reads, and for each input of the copy, its index in this graph.
    pub fn eliminate_dead_code(&self) -> (Graph, Vec<usize>) {
        let live = self.live_nodes();
        self.compact(&live)
    }

    /// The copy of the nodes marked in `keep` (which must include every node a kept node
    /// reads and every output, as [`live_nodes`](Self::live_nodes) does), renumbered, with
    /// the outputs of this graph; and for each input of the copy, its index in this graph.
    pub fn compact(&self, keep: &[bool]) -> (Graph, Vec<usize>) {
        let mut map = vec![u32::MAX; self.nodes.len()];
        let mut g = Graph::new();
        let mut input_map = Vec::new();
        let remap = |map: &[u32], v: Value| Value::new(NodeId(map[v.node.index()]), v.output);
        for (i, n) in self.nodes().enumerate() {
            if !keep[i] {
                continue;
            }
            map[i] = g.nodes.len() as u32;
            match n.kind() {
                NodeKind::Input { index } => {
                    input_map.push(*index as usize);
                    g.add_input(n.outputs()[0].meta.clone());
                }
                NodeKind::Call { op } => {
                    let args = n.args().iter().map(|a| match a {
                        Arg::Value(v) => Arg::Value(remap(&map, *v)),
                        Arg::Values(vs) => {
                            Arg::Values(vs.iter().map(|v| remap(&map, *v)).collect())
                        }
                        Arg::OptionalValues(vs) => Arg::OptionalValues(
                            vs.iter().map(|v| v.map(|v| remap(&map, v))).collect(),
                        ),
                        Arg::Const(c) => Arg::Const(c.clone()),
                        Arg::Number(s) => Arg::Number(*s),
                    });
                    g.add_call_unchecked(op.clone(), args, n.outputs().iter().cloned());
                }
            }
        }
        g.outputs = self.outputs.iter().map(|v| remap(&map, *v)).collect();
        (g, input_map)
    }
}

/// Whether a constant holds a tensor (which must be a graph value instead).
fn holds_tensor(c: &IValue) -> bool {
    match c {
        IValue::Tensor(_) | IValue::TensorList(_) => true,
        IValue::OptionalTensorList(ts) => ts.iter().any(Option::is_some),
        IValue::Tuple(vs) | IValue::GenericList(vs) => vs.iter().any(holds_tensor),
        _ => false,
    }
}
