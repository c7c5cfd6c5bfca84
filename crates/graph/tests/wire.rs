//! The graph wire format: round trips keep every node, constant and metadata; hostile bytes
//! give errors that name what is wrong, never a panic.

use proptest::prelude::*;

use switchboard_dispatcher::{Dispatcher, IValue, OperatorHandle};
use switchboard_graph::{
    Arg, Graph, Output, Source, TensorMeta, WireArg, WireConst, WireGraph, WireItem, WireNode,
    WireSource, WireValue,
};
use switchboard_tensor::{Device, Layout, MemoryFormat, Scalar, ScalarType, Tensor};

use switchboard_cpu as _;
use switchboard_ops as _;

fn op(name: &str) -> OperatorHandle {
    Dispatcher::global().find_schema_or_throw(name).unwrap()
}

fn meta() -> TensorMeta {
    TensorMeta::of(&Tensor::zeros(&[2, 3], ScalarType::Float).unwrap())
}

fn ret() -> Vec<Output> {
    vec![Output::ret(0, meta())]
}

/// A graph whose calls hold every kind of constant a captured call holds.
fn every_constant() -> Graph {
    let mut g = Graph::new();
    let x = g.add_input(meta());
    let y = g.add_input(TensorMeta {
        device: "lazy:3".parse().unwrap(),
        ..meta()
    });
    let clamp = g
        .add_call(
            op("aten::clamp"),
            vec![
                Arg::Value(x),
                Arg::Const(IValue::Double(f64::NEG_INFINITY)),
                Arg::Const(IValue::Double(f64::NAN)),
            ],
            ret(),
        )
        .unwrap();
    let sum = g
        .add_call(
            op("aten::sum.dim_IntList"),
            vec![
                Arg::Value(g.value(clamp, 0)),
                Arg::Const(IValue::IntList([1i64, -1].into_iter().collect())),
                Arg::Const(IValue::Bool(true)),
                Arg::Const(IValue::ScalarType(ScalarType::Double)),
            ],
            ret(),
        )
        .unwrap();
    let copy = g
        .add_call(
            op("aten::_to_copy"),
            vec![
                Arg::Value(y),
                Arg::Const(IValue::None),
                Arg::Const(IValue::Layout(Layout::Strided)),
                Arg::Const(IValue::Device("lazy:3".parse::<Device>().unwrap())),
                Arg::Const(IValue::None),
                Arg::Const(IValue::Bool(false)),
                Arg::Const(IValue::MemoryFormat(MemoryFormat::ChannelsLast)),
            ],
            ret(),
        )
        .unwrap();
    let div = g
        .add_call(
            op("aten::div.Tensor_mode"),
            vec![
                Arg::Value(x),
                Arg::Value(g.value(copy, 0)),
                Arg::Const(IValue::Str(Box::new("fl'oor\\".into()))),
            ],
            ret(),
        )
        .unwrap();
    let cat = g
        .add_call(
            op("aten::cat"),
            vec![
                Arg::Values(vec![g.value(div, 0), g.value(sum, 0)]),
                Arg::Const(IValue::Int(i64::MIN)),
            ],
            ret(),
        )
        .unwrap();
    let index = g
        .add_call(
            op("aten::index.Tensor"),
            vec![
                Arg::Value(g.value(cat, 0)),
                Arg::OptionalValues(vec![None, Some(x)]),
            ],
            ret(),
        )
        .unwrap();
    let add_ = g
        .add_call(
            op("aten::add_.Tensor"),
            vec![
                Arg::Value(g.value(index, 0)),
                Arg::Value(x),
                Arg::Const(IValue::Double(-0.0)),
            ],
            vec![Output {
                meta: meta().into(),
                source: Source::Argument(0),
            }],
        )
        .unwrap();
    // Numbers passed for tensors (PyTorch's wrapped numbers) are literals.
    let scaled = g
        .add_call(
            op("aten::mul.Tensor"),
            vec![
                Arg::Value(g.value(add_, 0)),
                Arg::Number(Scalar::Float(0.9)),
            ],
            ret(),
        )
        .unwrap();
    let shifted = g
        .add_call(
            op("aten::add.Tensor"),
            vec![
                Arg::Value(g.value(scaled, 0)),
                Arg::Number(Scalar::Int(3)),
                Arg::Const(IValue::Int(1)),
            ],
            ret(),
        )
        .unwrap();
    g.set_outputs(vec![g.value(add_, 0), x, g.value(shifted, 0)])
        .unwrap();
    g
}

#[test]
fn round_trip_keeps_every_constant_and_metadata() {
    let g = every_constant();
    let bytes = g.to_bytes().unwrap();
    let back = Graph::from_bytes(&bytes).unwrap();
    // The structural key compares operators by identity, constants by bit pattern (NaN, -0.0)
    // and the inputs' metadata; the JSON adds every output's metadata and source.
    assert_eq!(back.structural_key(), g.structural_key());
    assert_eq!(back.to_json(), g.to_json());
    assert_eq!(back.to_string(), g.to_string());
    assert_eq!(back.to_bytes().unwrap(), bytes);
}

#[test]
fn nested_constants_round_trip_at_the_wire_level() {
    let c = WireConst::Tuple(vec![
        WireItem::DoubleList(vec![f64::INFINITY, 1.5]),
        WireItem::BoolList(vec![true]),
        WireItem::NoneList(2),
    ]);
    let mut w = every_constant().to_wire().unwrap();
    // clamp's `min` is a `Scalar?`: a tuple does not fit it.
    let WireNode::Call(call) = &mut w.nodes[2] else {
        panic!()
    };
    call.args[1] = WireArg::Const(c);
    let bytes = w.to_bytes().unwrap();
    // (Compared as bytes: NaN constants are not equal to themselves.)
    assert_eq!(
        WireGraph::from_bytes(&bytes).unwrap().to_bytes().unwrap(),
        bytes
    );
    let e = Graph::from_bytes(&bytes).unwrap_err().to_string();
    assert_eq!(
        e,
        "node 2 (aten::clamp): argument 1 (min: Scalar?) cannot be the constant Tuple"
    );
}

/// The error of decoding `every_constant`'s wire form after `edit`.
fn decode_error(edit: impl FnOnce(&mut WireGraph)) -> String {
    let mut w = every_constant().to_wire().unwrap();
    edit(&mut w);
    let bytes = w.to_bytes().unwrap();
    Graph::from_bytes(&bytes).unwrap_err().to_string()
}

fn call(w: &mut WireGraph, i: usize) -> &mut switchboard_graph::WireCall {
    match &mut w.nodes[i] {
        WireNode::Call(c) => c,
        WireNode::Input(_) => panic!("node {i} is an input"),
    }
}

#[test]
fn hostile_graphs_are_refused_with_clear_errors() {
    assert_eq!(
        decode_error(|w| {
            let c = call(w, 2);
            c.op = "aten::foo".into();
            c.overload = "bar".into();
        }),
        "node 2: unknown operator \"aten::foo.bar\""
    );
    assert_eq!(
        decode_error(|w| call(w, 2).args[0] = WireArg::Value(WireValue { node: 5, output: 0 })),
        "node 2 (aten::clamp): value %5.0 refers to node 5, which is not defined before node 2"
    );
    assert_eq!(
        decode_error(|w| call(w, 2).args[0] = WireArg::Value(WireValue { node: 0, output: 1 })),
        "node 2 (aten::clamp): value %0.1 refers to output 1 of a node with 1 outputs"
    );
    assert_eq!(
        decode_error(|w| {
            call(w, 2).args.pop();
        }),
        "node 2 (aten::clamp): 2 arguments given, its schema `aten::clamp(Tensor self, \
         Scalar? min=None, Scalar? max=None) -> Tensor` takes 3"
    );
    assert_eq!(
        decode_error(|w| call(w, 2).args[0] = WireArg::Const(WireConst::Item(WireItem::Int(1)))),
        "node 2 (aten::clamp): argument 0 (self: Tensor) cannot be a constant"
    );
    assert_eq!(
        decode_error(|w| call(w, 2).args[1] = WireArg::Number(WireItem::Int(1))),
        "node 2 (aten::clamp): argument 1 (min: Scalar?) cannot be a number"
    );
    assert_eq!(
        decode_error(|w| call(w, 2).args[0] = WireArg::Number(WireItem::Str("1".into()))),
        "node 2 (aten::clamp): argument 0 (self: Tensor) cannot be a number that is not an \
         int, float or bool"
    );
    assert_eq!(
        decode_error(|w| call(w, 2).args[1] = WireArg::Value(WireValue { node: 0, output: 0 })),
        "node 2 (aten::clamp): argument 1 (min: Scalar?) cannot be a tensor"
    );
    assert_eq!(
        decode_error(|w| call(w, 3).args[2] = WireArg::Const(WireConst::Item(WireItem::Int(1)))),
        "node 3 (aten::sum.dim_IntList): argument 2 (keepdim: bool) cannot be the constant int"
    );
    assert_eq!(
        decode_error(|w| call(w, 3).args[3] =
            WireArg::Const(WireConst::Item(WireItem::ScalarType("float33".into())))),
        "node 3 (aten::sum.dim_IntList): unknown dtype \"float33\""
    );
    assert_eq!(
        decode_error(|w| call(w, 2).outputs[0].meta.dtype = "complex7".into()),
        "node 2 (aten::clamp): output 0: unknown dtype \"complex7\""
    );
    assert_eq!(
        decode_error(|w| call(w, 2).outputs[0].source = WireSource::Return(1)),
        "node 2 (aten::clamp): output 0: return 1 is not a tensor"
    );
    assert_eq!(
        decode_error(|w| call(w, 2).outputs[0].source = WireSource::Argument(1)),
        "node 2 (aten::clamp): output 0: argument 1 is not a tensor"
    );
    let input = |w: &mut WireGraph| match &mut w.nodes[0] {
        WireNode::Input(m) => m.clone(),
        _ => unreachable!(),
    };
    let set_input = |w: &mut WireGraph, m| w.nodes[0] = WireNode::Input(m);
    assert_eq!(
        decode_error(|w| {
            let mut m = input(w);
            m.sizes[0] = -2;
            set_input(w, m);
        }),
        "input node 0: negative size -2 in sizes [-2, 3]: sizes must be non-negative"
    );
    assert_eq!(
        decode_error(|w| {
            let mut m = input(w);
            m.sizes = vec![i64::MAX, 3];
            set_input(w, m);
        }),
        "input node 0: sizes [9223372036854775807, 3] with strides [3, 1] and offset 0 \
         overflow the address space"
    );
    assert_eq!(
        decode_error(|w| {
            let mut m = input(w);
            m.sizes = vec![1 << 40, 1 << 40];
            m.strides = vec![1, 1];
            set_input(w, m);
        }),
        "input node 0: sizes [1099511627776, 1099511627776] with strides [1, 1] and offset 0 \
         overflow the address space"
    );
    assert_eq!(
        decode_error(|w| {
            let mut m = input(w);
            m.strides.pop();
            set_input(w, m);
        }),
        "input node 0: 2 sizes but 1 strides: a tensor needs one stride per dimension"
    );
    assert_eq!(
        decode_error(|w| {
            let mut m = input(w);
            m.device = "gpu:0".into();
            set_input(w, m);
        }),
        "input node 0: bad device \"gpu:0\": unknown device type"
    );
    assert_eq!(
        decode_error(|w| {
            let mut m = input(w);
            m.device = "cpu:-1".into();
            set_input(w, m);
        }),
        "input node 0: bad device \"cpu:-1\": the index must be a number from 0 to 32767"
    );
    assert_eq!(
        decode_error(|w| w.outputs.push(WireValue { node: 99, output: 0 })),
        "graph outputs: value %99.0 refers to node 99, which is not defined before the graph's 11 nodes"
    );
    assert_eq!(
        decode_error(|w| w.version = 7),
        "graph wire format version 7 (this build reads version 1)"
    );
    assert!(Graph::from_bytes(&[])
        .unwrap_err()
        .to_string()
        .starts_with("malformed graph bytes"));
}

#[test]
fn constants_that_cannot_travel_are_refused_when_encoding() {
    let mut g = Graph::new();
    let x = g.add_input(meta());
    g.add_call(
        op("aten::clamp"),
        vec![
            Arg::Value(x),
            Arg::Const(IValue::GenericList(
                [IValue::GenericList(Default::default())]
                    .into_iter()
                    .collect(),
            )),
            Arg::Const(IValue::None),
        ],
        ret(),
    )
    .unwrap();
    let e = g.to_bytes().unwrap_err().to_string();
    assert!(
        e.starts_with("aten::clamp: the constant [] (List) cannot be sent"),
        "{e}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Flipped, truncated, inserted or overwritten bytes never panic the decoder; what still
    /// decodes is a graph that encodes again.
    #[test]
    fn mutated_bytes_never_panic(
        edits in prop::collection::vec((0usize..4, any::<prop::sample::Index>(), any::<u8>()), 1..6)
    ) {
        let mut bytes = every_constant().to_bytes().unwrap();
        for (kind, at, byte) in edits {
            let i = at.index(bytes.len().max(1));
            match kind {
                0 if !bytes.is_empty() => bytes[i] ^= byte | 1,
                1 => bytes.truncate(i),
                2 => bytes.insert(i.min(bytes.len()), byte),
                _ if !bytes.is_empty() => bytes[i] = byte,
                _ => {}
            }
        }
        if let Ok(g) = Graph::from_bytes(&bytes) {
            prop_assert!(Graph::from_bytes(&g.to_bytes().unwrap()).is_ok());
        }
    }

    /// Huge length prefixes (a list of 2^60 items) are refused without allocating them.
    #[test]
    fn huge_lengths_are_refused(len in (1u64 << 32)..u64::MAX) {
        // version 1, then a node count as a bincode varint (0xfd: u64 follows).
        let mut bytes = vec![1u8, 0xfd];
        bytes.extend_from_slice(&len.to_le_bytes());
        prop_assert!(Graph::from_bytes(&bytes).is_err());
    }
}

#[test]
fn devices_travel_by_their_built_in_names() {
    // This process names PrivateUse3; a reader may not: the bytes say `privateusethree`.
    switchboard_keys::BackendComponent::PrivateUse3Bit
        .rename("wire_accel")
        .unwrap();
    let d: Device = "wire_accel:2".parse().unwrap();
    let mut g = Graph::new();
    let x = g.add_input(TensorMeta {
        device: d,
        ..meta()
    });
    let n = g
        .add_call(
            op("aten::zeros_like"),
            vec![
                Arg::Value(x),
                Arg::Const(IValue::None),
                Arg::Const(IValue::None),
                Arg::Const(IValue::Device(d)),
                Arg::Const(IValue::None),
                Arg::Const(IValue::None),
            ],
            vec![Output::ret(
                0,
                TensorMeta {
                    device: d,
                    ..meta()
                },
            )],
        )
        .unwrap();
    g.set_outputs(vec![g.value(n, 0)]).unwrap();
    let w = g.to_wire().unwrap();
    let WireNode::Input(m) = &w.nodes[0] else {
        panic!("an input first")
    };
    assert_eq!(m.device, "privateusethree:2");
    let back = Graph::from_bytes(&g.to_bytes().unwrap()).unwrap();
    assert_eq!(
        back.meta(back.value(switchboard_graph::NodeId(0), 0))
            .device,
        d
    );
    assert_eq!(back.to_string(), g.to_string());
}
