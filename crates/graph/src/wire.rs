//! The graph wire format: a graph as serde structs and as bytes, for sending a captured graph to
//! another process (a remote worker) that rebuilds it against its own operator registry.

use serde::{Deserialize, Serialize};

use switchboard_dispatcher::IValue;
use switchboard_tensor::{Device, Layout, MemoryFormat};

use crate::graph::{Graph, GraphError};
use crate::node::{Arg, NodeKind, Source, TensorMeta, Value};

/// The version of the wire format ([`WireGraph::version`]); a reader refuses other versions.
pub const WIRE_VERSION: u32 = 1;

// Note [Graph wire format]
// A graph travels as the list of its nodes in execution order, each an input (its metadata) or
// a call (operator name and overload, arguments in schema order, outputs' metadata and
// sources), then its outputs: the same shape as the in-memory graph (Note [Node store]), so
// node indices and values mean the same on both sides. Operators travel by name, not by
// handle: the reader looks each one up in its own dispatcher and refuses names it does not
// know. Everything a reader gets is untrusted, so decoding (`wire_decode.rs`) checks what the
// in-memory graph assumes: values defined before they are read, arguments that fit the
// operator's schema, known dtypes and devices, tensor geometry without negative sizes or
// arithmetic overflow. Constants nest at most one level (a list or tuple of plain constants),
// which is every constant a captured call holds, and keeps the decoder's recursion bounded
// whatever the bytes say. Bytes are bincode 1 with its default options (variable-length
// integers, little-endian, trailing bytes refused); floats keep their bit patterns, so NaNs
// and infinities travel unchanged. Devices travel by their types' built-in names
// (`privateuseone:0`, not the name a process gave the backend): the reader may have named its
// private-use backends otherwise, or not at all.

/// A graph on the wire (Note [Graph wire format]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WireGraph {
    /// [`WIRE_VERSION`].
    pub version: u32,
    /// The nodes in execution order.
    pub nodes: Vec<WireNode>,
    /// The values a run returns.
    pub outputs: Vec<WireValue>,
}

/// A tensor's metadata on the wire.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireMeta {
    /// The dtype's name (`float32`).
    pub dtype: String,
    /// Sizes.
    pub sizes: Vec<i64>,
    /// Strides, in elements.
    pub strides: Vec<i64>,
    /// Offset of the first element, in elements.
    pub storage_offset: i64,
    /// The device (`lazy:0`).
    pub device: String,
}

/// A node on the wire.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum WireNode {
    /// A graph input with its metadata.
    Input(WireMeta),
    /// An operator call.
    Call(WireCall),
}

/// A call on the wire.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WireCall {
    /// The operator's name with namespace (`aten::add`).
    pub op: String,
    /// Its overload name (`Tensor`; empty for the default overload).
    pub overload: String,
    /// The arguments in schema order.
    pub args: Vec<WireArg>,
    /// The tensors it produces.
    pub outputs: Vec<WireOutput>,
}

/// A value on the wire: output `output` of node `node` (an index into [`WireGraph::nodes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireValue {
    /// The node's index.
    pub node: u32,
    /// Which of its outputs.
    pub output: u32,
}

/// An argument on the wire (see [`Arg`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum WireArg {
    /// A tensor.
    Value(WireValue),
    /// A `Tensor[]`.
    Values(Vec<WireValue>),
    /// A `Tensor?[]`.
    OptionalValues(Vec<Option<WireValue>>),
    /// Any other argument.
    Const(WireConst),
    /// A number passed for a `Tensor` argument (`Arg::Number`): an `Int`, `Double` or
    /// `Bool` item.
    Number(WireItem),
}

/// A constant on the wire: every `IValue` a captured call holds but tensors and generators.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum WireConst {
    /// A plain constant.
    Item(WireItem),
    /// A tuple of plain constants.
    Tuple(Vec<WireItem>),
    /// A list of plain constants (`GenericList`).
    List(Vec<WireItem>),
}

/// A constant that holds no other constant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum WireItem {
    /// `None`.
    None,
    /// `int`.
    Int(i64),
    /// `float` (any bit pattern: NaNs, infinities).
    Double(f64),
    /// `bool`.
    Bool(bool),
    /// `str`.
    Str(String),
    /// A dtype, by name (`float32`).
    ScalarType(String),
    /// A layout (`strided`).
    Layout(String),
    /// A device (`lazy:0`).
    Device(String),
    /// A memory format (`contiguous_format`, `channels_last`, `channels_last_3d`,
    /// `preserve_format`).
    MemoryFormat(String),
    /// `int[]`.
    IntList(Vec<i64>),
    /// `float[]`.
    DoubleList(Vec<f64>),
    /// `bool[]`.
    BoolList(Vec<bool>),
    /// A `Tensor?[]` of `n` absent tensors.
    NoneList(u32),
}

/// An output of a call on the wire.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WireOutput {
    /// Its metadata.
    pub meta: WireMeta,
    /// Where it comes from.
    pub source: WireSource,
}

/// Where an output comes from (see [`Source`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireSource {
    /// Return `i`.
    Return(u32),
    /// Item `j` of return `i`.
    ReturnItem(u32, u32),
    /// Argument `i`, written in place.
    Argument(u32),
}

impl From<&TensorMeta> for WireMeta {
    fn from(m: &TensorMeta) -> WireMeta {
        WireMeta {
            dtype: m.dtype.name().to_string(),
            sizes: m.sizes.to_vec(),
            strides: m.strides.to_vec(),
            storage_offset: m.storage_offset,
            device: wire_device(m.device),
        }
    }
}

/// A device on the wire: its type's built-in name (Note [Graph wire format]) and its index.
pub(crate) fn wire_device(d: Device) -> String {
    match d.index {
        Some(i) => format!("{}:{i}", d.ty.builtin_name()),
        None => d.ty.builtin_name().to_string(),
    }
}

/// The name of a memory format on the wire (PyTorch's, without `torch.`).
pub(crate) fn memory_format_name(f: MemoryFormat) -> &'static str {
    match f {
        MemoryFormat::Contiguous => "contiguous_format",
        MemoryFormat::ChannelsLast => "channels_last",
        MemoryFormat::ChannelsLast3d => "channels_last_3d",
        MemoryFormat::Preserve => "preserve_format",
    }
}

/// The name of a layout on the wire.
pub(crate) fn layout_name(l: Layout) -> &'static str {
    match l {
        Layout::Strided => "strided",
    }
}

fn wire_value(v: Value) -> WireValue {
    WireValue {
        node: v.node.0,
        output: v.output,
    }
}

fn encode_item(c: &IValue, op: &str) -> Result<WireItem, GraphError> {
    Ok(match c {
        IValue::None => WireItem::None,
        IValue::Int(v) => WireItem::Int(*v),
        IValue::Double(v) => WireItem::Double(*v),
        IValue::Bool(v) => WireItem::Bool(*v),
        IValue::Str(s) => WireItem::Str(s.to_string()),
        IValue::ScalarType(t) => WireItem::ScalarType(t.name().to_string()),
        IValue::Layout(l) => WireItem::Layout(layout_name(*l).to_string()),
        IValue::Device(d) => WireItem::Device(wire_device(*d)),
        IValue::MemoryFormat(f) => WireItem::MemoryFormat(memory_format_name(*f).to_string()),
        IValue::IntList(v) => WireItem::IntList(v.to_vec()),
        IValue::DoubleList(v) => WireItem::DoubleList(v.to_vec()),
        IValue::BoolList(v) => WireItem::BoolList(v.to_vec()),
        IValue::OptionalTensorList(ts) if ts.iter().all(Option::is_none) => {
            WireItem::NoneList(u32::try_from(ts.len()).map_err(|_| {
                GraphError(format!("{op}: a list of {} Nones is too long", ts.len()))
            })?)
        }
        other => {
            return Err(GraphError(format!(
                "{op}: the constant {} ({}) cannot be sent: only numbers, strings, dtypes, \
                 layouts, devices, memory formats, their lists and None travel",
                crate::print::const_code(other),
                other.type_name()
            )))
        }
    })
}

fn encode_const(c: &IValue, op: &str) -> Result<WireConst, GraphError> {
    let items = |vs: &[IValue]| -> Result<Vec<WireItem>, GraphError> {
        vs.iter().map(|v| encode_item(v, op)).collect()
    };
    Ok(match c {
        IValue::Tuple(vs) => WireConst::Tuple(items(vs)?),
        IValue::GenericList(vs) => WireConst::List(items(vs)?),
        c => WireConst::Item(encode_item(c, op)?),
    })
}

impl Graph {
    /// The graph on the wire (Note [Graph wire format]). Fails for constants that cannot
    /// travel (generators, custom-class objects, nested lists).
    pub fn to_wire(&self) -> Result<WireGraph, GraphError> {
        let mut nodes = Vec::with_capacity(self.len());
        for n in self.nodes() {
            let node = match n.kind() {
                NodeKind::Input { .. } => WireNode::Input(WireMeta::from(&*n.outputs()[0].meta)),
                NodeKind::Call { op } => {
                    let name = op.name();
                    let full = name.to_string();
                    let args = n
                        .args()
                        .iter()
                        .map(|a| {
                            Ok(match a {
                                Arg::Value(v) => WireArg::Value(wire_value(*v)),
                                Arg::Values(vs) => {
                                    WireArg::Values(vs.iter().map(|v| wire_value(*v)).collect())
                                }
                                Arg::OptionalValues(vs) => WireArg::OptionalValues(
                                    vs.iter().map(|v| v.map(wire_value)).collect(),
                                ),
                                Arg::Const(c) => WireArg::Const(encode_const(c, &full)?),
                                Arg::Number(n) => {
                                    WireArg::Number(encode_item(&Arg::number_ivalue(*n), &full)?)
                                }
                            })
                        })
                        .collect::<Result<Vec<_>, GraphError>>()?;
                    let outputs = n
                        .outputs()
                        .iter()
                        .map(|o| WireOutput {
                            meta: WireMeta::from(&*o.meta),
                            source: match o.source {
                                Source::Return(r) => WireSource::Return(r),
                                Source::ReturnItem(r, j) => WireSource::ReturnItem(r, j),
                                Source::Argument(a) => WireSource::Argument(a),
                            },
                        })
                        .collect();
                    WireNode::Call(WireCall {
                        op: name.name().to_string(),
                        overload: name.overload_name().to_string(),
                        args,
                        outputs,
                    })
                }
            };
            nodes.push(node);
        }
        Ok(WireGraph {
            version: WIRE_VERSION,
            nodes,
            outputs: self.outputs.iter().map(|v| wire_value(*v)).collect(),
        })
    }

    /// The graph as bytes ([`to_wire`](Self::to_wire), then bincode).
    ///
    /// ```
    /// # use switchboard_graph::{Graph, TensorMeta};
    /// # use switchboard_tensor::{ScalarType, Tensor};
    /// let mut g = Graph::new();
    /// let x = g.add_input(TensorMeta::of(&Tensor::zeros(&[2], ScalarType::Float).unwrap()));
    /// g.set_outputs(vec![x]).unwrap();
    /// let back = Graph::from_bytes(&g.to_bytes().unwrap()).unwrap();
    /// assert_eq!(back.to_string(), g.to_string());
    /// assert!(Graph::from_bytes(b"garbage").is_err());
    /// ```
    pub fn to_bytes(&self) -> Result<Vec<u8>, GraphError> {
        self.to_wire()?.to_bytes()
    }

    /// The graph these bytes encode, checked (Note [Graph wire format]); an error names what
    /// is wrong.
    pub fn from_bytes(bytes: &[u8]) -> Result<Graph, GraphError> {
        WireGraph::from_bytes(bytes)?.to_graph()
    }
}

fn bincode_options() -> impl bincode::Options {
    bincode::DefaultOptions::new()
}

impl WireGraph {
    /// The bytes of this graph.
    pub fn to_bytes(&self) -> Result<Vec<u8>, GraphError> {
        use bincode::Options;
        bincode_options()
            .serialize(self)
            .map_err(|e| GraphError(format!("cannot encode the graph: {e}")))
    }

    /// The wire graph these bytes encode (not yet checked against the operator registry:
    /// [`to_graph`](Self::to_graph) does that).
    pub fn from_bytes(bytes: &[u8]) -> Result<WireGraph, GraphError> {
        use bincode::Options;
        // The limit keeps a length prefix from asking for more than the bytes hold.
        bincode_options()
            .with_limit(bytes.len() as u64)
            .deserialize(bytes)
            .map_err(|e| GraphError(format!("malformed graph bytes: {e}")))
    }
}
