//! Decoding a [`WireGraph`]: every check a graph from the network needs before it runs (Note
//! [Graph wire format] in wire.rs).

use std::sync::Arc;

use switchboard_dispatcher::{Dispatcher, IValue, OperatorHandle};
use switchboard_keys::DeviceType;
use switchboard_schema::{Argument, OperatorName, Type};
use switchboard_tensor::{Device, DimVec, Layout, MemoryFormat, Scalar, ScalarType};

use crate::graph::{Graph, GraphError};
use crate::node::{Arg, NodeId, Output, Source, TensorMeta, Value};
use crate::wire::{
    layout_name, memory_format_name, WireArg, WireCall, WireConst, WireGraph, WireItem, WireMeta,
    WireNode, WireSource, WireValue, WIRE_VERSION,
};

/// The most dimensions a tensor on the wire may have (PyTorch's limit for dense tensors).
pub const MAX_WIRE_DIMS: usize = 64;

fn err(msg: impl Into<String>) -> GraphError {
    GraphError(msg.into())
}

impl WireMeta {
    /// The metadata, checked: a known dtype and device, as many strides as sizes, no negative
    /// size, stride or offset, and an extent (`offset + sum((size - 1) * stride) + 1` elements,
    /// in bytes) that fits in an `isize` without overflow.
    pub fn to_meta(&self) -> Result<TensorMeta, GraphError> {
        let dtype: ScalarType = self
            .dtype
            .parse()
            .map_err(|_| err(format!("unknown dtype \"{}\"", self.dtype)))?;
        let device = parse_wire_device(&self.device)?;
        check_geometry(&self.sizes, &self.strides, self.storage_offset, dtype)?;
        Ok(TensorMeta {
            sizes: DimVec::from_slice(&self.sizes),
            strides: DimVec::from_slice(&self.strides),
            storage_offset: self.storage_offset,
            dtype,
            device,
        })
    }
}

/// Checks a tensor's geometry from untrusted input (see [`WireMeta::to_meta`]) and returns its
/// number of elements.
pub fn check_geometry(
    sizes: &[i64],
    strides: &[i64],
    storage_offset: i64,
    dtype: ScalarType,
) -> Result<u64, GraphError> {
    if sizes.len() > MAX_WIRE_DIMS {
        return Err(err(format!(
            "a tensor of {} dimensions: at most {MAX_WIRE_DIMS} are supported",
            sizes.len()
        )));
    }
    if sizes.len() != strides.len() {
        return Err(err(format!(
            "{} sizes but {} strides: a tensor needs one stride per dimension",
            sizes.len(),
            strides.len()
        )));
    }
    if let Some(s) = sizes.iter().find(|s| **s < 0) {
        return Err(err(format!(
            "negative size {s} in sizes {sizes:?}: sizes must be non-negative"
        )));
    }
    if let Some(s) = strides.iter().find(|s| **s < 0) {
        return Err(err(format!(
            "negative stride {s} in strides {strides:?}: strides must be non-negative"
        )));
    }
    if storage_offset < 0 {
        return Err(err(format!(
            "negative storage offset {storage_offset}: it must be non-negative"
        )));
    }
    let overflow = || {
        err(format!(
            "sizes {sizes:?} with strides {strides:?} and offset {storage_offset} overflow the \
             address space"
        ))
    };
    let mut numel: u64 = 1;
    let mut last: i64 = storage_offset;
    for (&size, &stride) in sizes.iter().zip(strides) {
        numel = numel.checked_mul(size as u64).ok_or_else(overflow)?;
        if size > 0 {
            let span = (size - 1).checked_mul(stride).ok_or_else(overflow)?;
            last = last.checked_add(span).ok_or_else(overflow)?;
        }
    }
    if numel > 0 {
        let bytes = last
            .checked_add(1)
            .and_then(|n| n.checked_mul(dtype.element_size() as i64))
            .ok_or_else(overflow)?;
        if isize::try_from(bytes).is_err() {
            return Err(overflow());
        }
    }
    Ok(numel)
}

fn decode_item(c: &WireItem) -> Result<IValue, GraphError> {
    Ok(match c {
        WireItem::None => IValue::None,
        WireItem::Int(v) => IValue::Int(*v),
        WireItem::Double(v) => IValue::Double(*v),
        WireItem::Bool(v) => IValue::Bool(*v),
        WireItem::Str(s) => IValue::Str(Box::new(s.clone())),
        WireItem::ScalarType(s) => IValue::ScalarType(
            s.parse()
                .map_err(|_| err(format!("unknown dtype \"{s}\"")))?,
        ),
        WireItem::Layout(s) => IValue::Layout(
            [Layout::Strided]
                .into_iter()
                .find(|l| layout_name(*l) == s)
                .ok_or_else(|| err(format!("unknown layout \"{s}\"")))?,
        ),
        WireItem::Device(s) => IValue::Device(parse_wire_device(s)?),
        WireItem::MemoryFormat(s) => IValue::MemoryFormat(
            [
                MemoryFormat::Contiguous,
                MemoryFormat::ChannelsLast,
                MemoryFormat::ChannelsLast3d,
                MemoryFormat::Preserve,
            ]
            .into_iter()
            .find(|f| memory_format_name(*f) == s)
            .ok_or_else(|| err(format!("unknown memory format \"{s}\"")))?,
        ),
        WireItem::IntList(v) => IValue::IntList(v.iter().copied().collect()),
        WireItem::DoubleList(v) => IValue::DoubleList(v.iter().copied().collect()),
        WireItem::BoolList(v) => IValue::BoolList(v.iter().copied().collect()),
        // Bounded by the bytes that carried the list, at 16 bytes per `None`.
        WireItem::NoneList(n) => IValue::OptionalTensorList((0..*n).map(|_| None).collect()),
    })
}

fn decode_const(c: &WireConst) -> Result<IValue, GraphError> {
    let items = |vs: &[WireItem]| vs.iter().map(decode_item).collect::<Result<_, _>>();
    Ok(match c {
        WireConst::Item(i) => decode_item(i)?,
        WireConst::Tuple(vs) => IValue::Tuple(items(vs)?),
        WireConst::List(vs) => IValue::GenericList(items(vs)?),
    })
}

/// What kind of graph argument a schema type takes.
enum Slot {
    Tensor,
    OptionalTensor,
    TensorList,
    OptionalTensorList,
    Constant,
}

fn slot_of(ty: &Type) -> Slot {
    match ty {
        Type::Tensor => Slot::Tensor,
        Type::Optional(t) if matches!(**t, Type::Tensor) => Slot::OptionalTensor,
        Type::List(t) if matches!(**t, Type::Tensor) => Slot::TensorList,
        Type::List(t) if matches!(&**t, Type::Optional(u) if matches!(**u, Type::Tensor)) => {
            Slot::OptionalTensorList
        }
        _ => Slot::Constant,
    }
}

/// Whether constant `c` can be an argument of type `ty` (loosely: the kinds a boxed call
/// accepts; types this does not know take any constant, the kernel checks them).
fn const_fits(ty: &Type, c: &IValue) -> bool {
    match (ty, c) {
        (Type::Optional(_), IValue::None) => true,
        (Type::Optional(t), c) => const_fits(t, c),
        (Type::Int | Type::SymInt, IValue::Int(_)) => true,
        (Type::Float, IValue::Double(_) | IValue::Int(_)) => true,
        (Type::Bool | Type::SymBool, IValue::Bool(_)) => true,
        (Type::Str, IValue::Str(_)) => true,
        (Type::Scalar, IValue::Int(_) | IValue::Double(_) | IValue::Bool(_)) => true,
        (Type::ScalarType, IValue::ScalarType(_) | IValue::Int(_)) => true,
        (Type::Layout, IValue::Layout(_) | IValue::Int(_)) => true,
        (Type::MemoryFormat, IValue::MemoryFormat(_) | IValue::Int(_)) => true,
        (Type::Device, IValue::Device(_) | IValue::Str(_)) => true,
        (Type::List(t), IValue::IntList(_)) => matches!(**t, Type::Int | Type::SymInt),
        (Type::List(t), IValue::DoubleList(_)) => matches!(**t, Type::Float),
        (Type::List(t), IValue::BoolList(_)) => matches!(**t, Type::Bool),
        (Type::List(t), IValue::GenericList(vs)) => vs.iter().all(|v| const_fits(t, v)),
        (Type::Tuple(ts), IValue::Tuple(vs)) => {
            ts.len() == vs.len() && ts.iter().zip(vs.iter()).all(|(t, v)| const_fits(t, v))
        }
        (
            Type::Int
            | Type::SymInt
            | Type::Float
            | Type::Bool
            | Type::SymBool
            | Type::Str
            | Type::Scalar
            | Type::ScalarType
            | Type::Layout
            | Type::MemoryFormat
            | Type::Device
            | Type::List(_)
            | Type::Tuple(_),
            _,
        ) => false,
        _ => true,
    }
}

const OUTPUTS: &str = "graph outputs";

/// Decodes the graph's values as it builds it: each value must name an earlier node's output.
struct Decoder {
    graph: Graph,
}

impl Decoder {
    fn value(&self, v: &WireValue, at: usize, what: &str) -> Result<Value, GraphError> {
        if v.node as usize >= at {
            let here = if at == self.graph.len() && what == OUTPUTS {
                format!("the graph's {} nodes", self.graph.len())
            } else {
                format!("node {at}")
            };
            return Err(err(format!(
                "{what}: value %{}.{} refers to node {}, which is not defined before {here}",
                v.node, v.output, v.node
            )));
        }
        let outputs = self.graph.num_outputs(v.node as usize);
        if v.output >= outputs {
            return Err(err(format!(
                "{what}: value %{}.{} refers to output {} of a node with {outputs} outputs",
                v.node, v.output, v.output
            )));
        }
        Ok(Value::new(NodeId(v.node), v.output))
    }

    fn call(&mut self, at: usize, call: &WireCall) -> Result<(), GraphError> {
        let name = OperatorName::new(call.op.as_str(), call.overload.as_str());
        let full = name.to_string();
        let op: OperatorHandle = Dispatcher::global()
            .find_op(&name)
            .filter(|op| op.schema().is_some())
            .ok_or_else(|| err(format!("node {at}: unknown operator \"{full}\"")))?;
        let record = op.schema().ok_or_else(|| err("unreachable: no schema"))?;
        let params: &[Argument] = record.schema.arguments();
        let returns: &[Argument] = record.schema.returns();
        let what = format!("node {at} ({full})");
        if call.args.len() != params.len() {
            return Err(err(format!(
                "{what}: {} arguments given, its schema `{}` takes {}",
                call.args.len(),
                record.schema,
                params.len()
            )));
        }
        let mut args = Vec::with_capacity(call.args.len());
        for (k, (a, p)) in call.args.iter().zip(params).enumerate() {
            let mismatch = |got: &str| {
                err(format!(
                    "{what}: argument {k} ({}: {}) cannot be {got}",
                    p.name(),
                    p.ty()
                ))
            };
            let arg = match (slot_of(p.ty()), a) {
                (Slot::Tensor | Slot::OptionalTensor, WireArg::Value(v)) => {
                    Arg::Value(self.value(v, at, &what)?)
                }
                (Slot::TensorList, WireArg::Values(vs)) => Arg::Values(
                    vs.iter()
                        .map(|v| self.value(v, at, &what))
                        .collect::<Result<_, _>>()?,
                ),
                (Slot::OptionalTensorList, WireArg::OptionalValues(vs)) => Arg::OptionalValues(
                    vs.iter()
                        .map(|v| v.as_ref().map(|v| self.value(v, at, &what)).transpose())
                        .collect::<Result<_, _>>()?,
                ),
                (Slot::OptionalTensor, WireArg::Const(WireConst::Item(WireItem::None))) => {
                    Arg::Const(IValue::None)
                }
                (
                    Slot::OptionalTensorList,
                    WireArg::Const(c @ WireConst::Item(WireItem::NoneList(_))),
                ) => Arg::Const(decode_const(c)?),
                (Slot::Constant, WireArg::Const(c)) => {
                    let c = decode_const(c).map_err(|e| err(format!("{what}: {}", e.0)))?;
                    if !const_fits(p.ty(), &c) {
                        return Err(mismatch(&format!("the constant {}", c.type_name())));
                    }
                    Arg::Const(c)
                }
                (Slot::Tensor, WireArg::Number(n)) => Arg::Number(match n {
                    WireItem::Int(i) => Scalar::Int(*i),
                    WireItem::Double(f) => Scalar::Float(*f),
                    WireItem::Bool(b) => Scalar::Bool(*b),
                    _ => return Err(mismatch("a number that is not an int, float or bool")),
                }),
                (_, WireArg::Const(_)) => return Err(mismatch("a constant")),
                (_, WireArg::Number(_)) => return Err(mismatch("a number")),
                (_, WireArg::Value(_)) => return Err(mismatch("a tensor")),
                (_, WireArg::Values(_)) => return Err(mismatch("a list of tensors")),
                (_, WireArg::OptionalValues(_)) => {
                    return Err(mismatch("a list of optional tensors"))
                }
            };
            args.push(arg);
        }
        let mut outputs = Vec::with_capacity(call.outputs.len());
        for (j, o) in call.outputs.iter().enumerate() {
            let meta = o
                .meta
                .to_meta()
                .map_err(|e| err(format!("{what}: output {j}: {}", e.0)))?;
            let bad_source = |why: &str| err(format!("{what}: output {j}: {why}"));
            let source = match o.source {
                WireSource::Return(r) => match returns.get(r as usize).map(|a| slot_of(a.ty())) {
                    Some(Slot::Tensor | Slot::OptionalTensor) => Source::Return(r),
                    _ => return Err(bad_source(&format!("return {r} is not a tensor"))),
                },
                WireSource::ReturnItem(r, i) => {
                    match returns.get(r as usize).map(|a| slot_of(a.ty())) {
                        Some(Slot::TensorList) => Source::ReturnItem(r, i),
                        _ => return Err(bad_source(&format!("return {r} is not a tensor list"))),
                    }
                }
                WireSource::Argument(a) => match args.get(a as usize) {
                    Some(Arg::Value(_)) => Source::Argument(a),
                    _ => return Err(bad_source(&format!("argument {a} is not a tensor"))),
                },
            };
            outputs.push(Output {
                meta: Arc::new(meta),
                source,
            });
        }
        self.graph.add_call(op, args, outputs)?;
        Ok(())
    }
}

impl WireGraph {
    /// The graph, checked against this process's operator registry (Note [Graph wire format]).
    pub fn to_graph(&self) -> Result<Graph, GraphError> {
        if self.version != WIRE_VERSION {
            return Err(err(format!(
                "graph wire format version {} (this build reads version {WIRE_VERSION})",
                self.version
            )));
        }
        let mut d = Decoder {
            graph: Graph::new(),
        };
        for (at, node) in self.nodes.iter().enumerate() {
            match node {
                WireNode::Input(m) => {
                    let meta = m
                        .to_meta()
                        .map_err(|e| err(format!("input node {at}: {}", e.0)))?;
                    d.graph.add_input(meta);
                }
                WireNode::Call(call) => d.call(at, call)?,
            }
        }
        let outputs = self
            .outputs
            .iter()
            .map(|v| d.value(v, self.nodes.len(), OUTPUTS))
            .collect::<Result<_, _>>()?;
        d.graph.set_outputs(outputs)?;
        Ok(d.graph)
    }
}

/// A device as [`wire_device`](crate::wire::wire_device) writes it: a type's built-in name
/// (`privateuseone`, whatever this process calls it) and an optional index.
fn parse_wire_device(s: &str) -> Result<Device, GraphError> {
    let bad = |why: &str| err(format!("bad device \"{s}\": {why}"));
    let (name, index) = match s.split_once(':') {
        Some((n, i)) => (n, Some(i)),
        None => (s, None),
    };
    let ty = DeviceType::ALL
        .iter()
        .find(|t| t.builtin_name() == name)
        .ok_or_else(|| bad("unknown device type"))?;
    let index = match index {
        None => None,
        Some(i) => Some(
            i.parse::<i16>()
                .ok()
                .filter(|i| *i >= 0)
                .ok_or_else(|| bad("the index must be a number from 0 to 32767"))?,
        ),
    };
    Ok(match index {
        Some(i) => Device::with_index(*ty, i),
        None => Device::new(*ty),
    })
}
