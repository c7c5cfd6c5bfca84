//! The pieces of a graph: values, arguments, outputs and nodes.

use std::sync::Arc;

use switchboard_dispatcher::{IValue, OperatorHandle};
use switchboard_tensor::{Device, DimVec, Scalar, ScalarType, Tensor, TensorImpl};

/// The index of a node in its graph (nodes are numbered in the order they were added, which
/// is a valid execution order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

impl NodeId {
    /// The index as a `usize`.
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A tensor value of a graph: output `output` of node `node` (a graph input is the single
/// output of its input node).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Value {
    /// The node producing it.
    pub node: NodeId,
    /// Which of the node's outputs.
    pub output: u32,
}

impl Value {
    /// Output `output` of node `node`.
    #[inline]
    pub const fn new(node: NodeId, output: u32) -> Value {
        Value { node, output }
    }
}

/// The metadata of a tensor value: what eager code could read from it without its data.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorMeta {
    /// Sizes.
    pub sizes: DimVec,
    /// Strides, in elements.
    pub strides: DimVec,
    /// Offset of the first element in the storage, in elements.
    pub storage_offset: i64,
    /// Element type.
    pub dtype: ScalarType,
    /// Device.
    pub device: Device,
}

impl TensorMeta {
    /// The metadata of `t`.
    pub fn of(t: &Tensor) -> TensorMeta {
        TensorMeta {
            sizes: DimVec::from_slice(t.sizes()),
            strides: DimVec::from_slice(t.strides()),
            storage_offset: t.storage_offset(),
            dtype: t.dtype(),
            device: t.device(),
        }
    }

    /// Whether `t` has these sizes, strides, offset and dtype: the one layout comparison of
    /// recorders and executors (the device is not compared: an executor may run a graph on
    /// another device than it was captured for).
    #[inline]
    pub fn matches_layout(&self, t: &TensorImpl) -> bool {
        if self.storage_offset != t.storage_offset() || self.dtype != t.dtype() {
            return false;
        }
        // One loop over the four lists (a lazy capture compares every operand).
        let (sizes, strides) = (&self.sizes[..], &self.strides[..]);
        let (t_sizes, t_strides) = (t.sizes(), t.strides());
        let n = sizes.len();
        n == t_sizes.len()
            && n == strides.len()
            && n == t_strides.len()
            && (0..n).all(|d| sizes[d] == t_sizes[d] && strides[d] == t_strides[d])
    }

    /// Whether the strides are the contiguous ones for the sizes.
    pub fn is_contiguous(&self) -> bool {
        switchboard_tensor::is_contiguous(&self.sizes, &self.strides)
    }
}

/// An argument of a call node, in schema order.
#[derive(Clone, Debug)]
pub enum Arg {
    /// A tensor (`Tensor`, or a present `Tensor?`).
    Value(Value),
    /// A `Tensor[]`.
    Values(Vec<Value>),
    /// A `Tensor?[]`.
    OptionalValues(Vec<Option<Value>>),
    /// Any other argument (a number, a list of ints, a dtype, a device, `None`...). Never a
    /// tensor: tensors are graph values.
    Const(IValue),
    /// A number passed for a `Tensor` argument: PyTorch's wrapped number, as the Python
    /// binding makes of `buf.mul_(0.9)` (`mul_.Tensor(buf, 0.9)`). It is a literal of the
    /// graph, as in `make_fx`'s, and runs as a 0-d wrapped-number CPU tensor
    /// ([`Tensor::wrapped_scalar`]).
    Number(Scalar),
}

impl Arg {
    /// The values this argument reads.
    pub fn values(&self) -> impl Iterator<Item = Value> + '_ {
        let (one, many, opt): (Option<Value>, &[Value], &[Option<Value>]) = match self {
            Arg::Value(v) => (Some(*v), &[], &[]),
            Arg::Values(vs) => (None, vs, &[]),
            Arg::OptionalValues(vs) => (None, &[], vs),
            Arg::Const(_) | Arg::Number(_) => (None, &[], &[]),
        };
        one.into_iter()
            .chain(many.iter().copied())
            .chain(opt.iter().flatten().copied())
    }

    /// The argument for tensor `t` when it stands for a number: a wrapped number of
    /// PyTorch's kinds (`Bool`, `Long`, `Double`), else `None`.
    pub fn number_of(t: &Tensor) -> Option<Arg> {
        let wrapped = t.is_wrapped_number()
            && matches!(
                t.dtype(),
                ScalarType::Bool | ScalarType::Long | ScalarType::Double
            );
        wrapped.then(|| t.item().ok().map(Arg::Number)).flatten()
    }

    /// The number as the `IValue` of a Python number, for printing and encoding.
    pub(crate) fn number_ivalue(value: Scalar) -> IValue {
        match value {
            Scalar::Bool(b) => IValue::Bool(b),
            Scalar::Int(i) => IValue::Int(i),
            Scalar::Float(f) => IValue::Double(f),
        }
    }
}

/// Where a call node's output comes from when the node runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// Return `i` (a `Tensor`).
    Return(u32),
    /// Item `j` of return `i` (a `Tensor[]`).
    ReturnItem(u32, u32),
    /// Argument `i` after the call: a tensor the operator writes in place (`Tensor(a!)`)
    /// without returning it, whose new value later nodes read.
    Argument(u32),
}

/// An output of a node: its metadata and where it comes from.
#[derive(Clone, Debug)]
pub struct Output {
    /// The metadata the capture computed (an executor can check its results against it);
    /// shared, as recorders often produce the same metadata many times.
    pub meta: Arc<TensorMeta>,
    /// Which return (or written argument) it is.
    pub source: Source,
}

impl Output {
    /// Return `i` with metadata `meta`.
    pub fn ret(i: u32, meta: impl Into<Arc<TensorMeta>>) -> Output {
        Output {
            meta: meta.into(),
            source: Source::Return(i),
        }
    }
}

/// What a node is.
#[derive(Clone, Debug)]
pub enum NodeKind {
    /// Graph input number `index` (a placeholder: its tensor is given when the graph runs).
    Input {
        /// Its position among the graph's inputs.
        index: u32,
    },
    /// A call of an operator (its arguments: [`Node::args`]).
    Call {
        /// The operator.
        op: OperatorHandle,
    },
}

/// A node's entry in its graph's node store: what it is, and where its arguments and outputs
/// are in the graph's argument and output stores (Note [Node store] in graph.rs).
#[derive(Clone, Debug)]
pub(crate) struct NodeEntry {
    pub kind: NodeKind,
    /// `args[start..end]` of the graph.
    pub args: (u32, u32),
    /// `outputs[start..end]` of the graph.
    pub outputs: (u32, u32),
}

/// A node of a graph (an input or an operator call, with its outputs' metadata), as
/// [`Graph::node`](crate::Graph::node) and [`Graph::nodes`](crate::Graph::nodes) show it: a view into the graph's stores.
#[derive(Clone, Copy)]
pub struct Node<'g> {
    pub(crate) entry: &'g NodeEntry,
    pub(crate) args: &'g [Arg],
    pub(crate) outputs: &'g [Output],
}

impl std::fmt::Debug for Node<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("kind", &self.entry.kind)
            .field("args", &self.args)
            .field("outputs", &self.outputs)
            .finish()
    }
}

impl<'g> Node<'g> {
    /// Input or call.
    pub fn kind(&self) -> &'g NodeKind {
        &self.entry.kind
    }

    /// The operator of a call node.
    pub fn op(&self) -> Option<&'g OperatorHandle> {
        match &self.entry.kind {
            NodeKind::Call { op } => Some(op),
            NodeKind::Input { .. } => None,
        }
    }

    /// The arguments of a call node, in schema order (empty for an input).
    pub fn args(&self) -> &'g [Arg] {
        self.args
    }

    /// The tensors it produces.
    pub fn outputs(&self) -> &'g [Output] {
        self.outputs
    }

    /// The values the node reads.
    pub fn inputs(&self) -> impl Iterator<Item = Value> + 'g {
        self.args.iter().flat_map(Arg::values)
    }

    /// Whether this is an input node.
    pub fn is_input(&self) -> bool {
        matches!(self.entry.kind, NodeKind::Input { .. })
    }
}

/// A copy of a tensor that a graph keeps as a constant (or a lazy capture as a host
/// argument): later writes to the original cannot change it, as eager code would have read
/// the value at the call; a wrapped number stays a wrapped number (type promotion treats it
/// as a Python scalar).
pub fn snapshot(t: &Tensor) -> switchboard_tensor::Result<Tensor> {
    let c = t.deep_clone()?;
    Ok(if t.is_wrapped_number() {
        c.to_builder().wrapped_number(true).build()?
    } else {
        c
    })
}
