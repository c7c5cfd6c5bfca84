//! The graph IR: building, printing, exports, structural keys, plans (dead code, merging,
//! freeing) and replay through the global dispatcher.

use std::sync::{Mutex, OnceLock};

use switchboard_dispatcher::{
    Dispatcher, IValue, KernelFunction, Library, LibraryKind, OperatorHandle, Result,
};
use switchboard_graph::{
    Arg, Graph, NodeId, Output, Plan, RunOptions, Source, StructuralKey, TensorMeta, Value,
};
use switchboard_keys::DispatchKey;
use switchboard_tensor::{ScalarType, Tensor, WeakTensor};

use switchboard_cpu as _;
use switchboard_ops as _;

fn op(name: &str) -> OperatorHandle {
    Dispatcher::global().find_schema_or_throw(name).unwrap()
}

fn f32s(v: &[f32], sizes: &[i64]) -> Tensor {
    Tensor::from_slice(v, sizes).unwrap()
}

fn ret(t: &Tensor) -> Vec<Output> {
    vec![Output::ret(0, TensorMeta::of(t))]
}

/// x -> exp(x) -> x * exp(x), with a dead relu.
fn small_graph(x: &Tensor) -> (Graph, NodeId) {
    let mut g = Graph::new();
    let a = g.add_input(TensorMeta::of(x));
    let e = g
        .add_call(op("aten::exp"), vec![Arg::Value(a)], ret(x))
        .unwrap();
    let dead = g
        .add_call(op("aten::relu"), vec![Arg::Value(a)], ret(x))
        .unwrap();
    let m = g
        .add_call(
            op("aten::mul.Tensor"),
            vec![Arg::Value(a), Arg::Value(g.value(e, 0))],
            ret(x),
        )
        .unwrap();
    g.set_outputs(vec![g.value(m, 0)]).unwrap();
    (g, dead)
}

#[test]
fn build_print_and_replay() {
    let x = f32s(&[0.0, 1.0, 2.0], &[3]);
    let (g, _) = small_graph(&x);
    assert_eq!(g.len(), 4);
    assert_eq!(g.num_calls(), 3);
    assert_eq!(
        g.to_string(),
        "def graph(arg0: \"f32[3]\"):\n    exp: \"f32[3]\" = aten.exp.default(arg0)\n    relu: \
         \"f32[3]\" = aten.relu.default(arg0)\n    mul: \"f32[3]\" = aten.mul.Tensor(arg0, exp)\n    \
         return (mul,)\n"
    );
    let y = g.replay(vec![x.clone()]).unwrap();
    let want: Vec<f32> = [0.0f32, 1.0, 2.0].iter().map(|v| v * v.exp()).collect();
    assert_eq!(y[0].to_vec::<f32>().unwrap(), want);
}

#[test]
fn keyword_arguments_strides_and_several_outputs() {
    let x = f32s(&[1.0, 5.0, 3.0, 2.0, 0.0, 9.0], &[2, 3]);
    let xt = Tensor::empty_strided(&[3, 2], &[1, 3], ScalarType::Float, x.device()).unwrap();
    let idx = Tensor::zeros(&[2], ScalarType::Long).unwrap();
    let mut g = Graph::new();
    let a = g.add_input(TensorMeta::of(&x));
    let t = g
        .add_call(op("aten::t"), vec![Arg::Value(a)], ret(&xt))
        .unwrap();
    let vals = Tensor::zeros(&[2], ScalarType::Float).unwrap();
    let m = g
        .add_call(
            op("aten::max.dim"),
            vec![
                Arg::Value(a),
                Arg::Const(IValue::Int(1)),
                Arg::Const(IValue::Bool(false)),
            ],
            vec![
                Output::ret(0, TensorMeta::of(&vals)),
                Output::ret(1, TensorMeta::of(&idx)),
            ],
        )
        .unwrap();
    let s = g
        .add_call(
            op("aten::add.Tensor"),
            vec![
                Arg::Value(g.value(m, 0)),
                Arg::Value(g.value(m, 0)),
                Arg::Const(IValue::Int(2)),
            ],
            ret(&vals),
        )
        .unwrap();
    g.set_outputs(vec![g.value(t, 0), g.value(s, 0), g.value(m, 1)])
        .unwrap();
    let code = g.to_string();
    assert!(
        code.contains("t: \"f32[3, 2][1, 3]\" = aten.t.default(arg0)"),
        "{code}"
    );
    assert!(
        code.contains("max: \"(f32[2], i64[2])\" = aten.max.dim(arg0, 1, False)"),
        "{code}"
    );
    assert!(
        code.contains("add: \"f32[2]\" = aten.add.Tensor(max[0], max[0], alpha=2)"),
        "{code}"
    );
    assert!(code.ends_with("return (t, add, max[1])\n"), "{code}");
    let out = g.replay(vec![x]).unwrap();
    assert_eq!(out[0].strides(), &[1, 3]);
    assert_eq!(out[1].to_vec::<f32>().unwrap(), [15.0, 27.0]);
    assert_eq!(out[2].to_vec::<i64>().unwrap(), [1, 2]);

    let j = g.to_json();
    assert_eq!(j["nodes"][1]["op"], "aten::max.dim");
    assert_eq!(j["nodes"][1]["inputs"][1]["name"], "dim");
    assert_eq!(j["nodes"][1]["inputs"][1]["const"], 1);
    assert_eq!(j["nodes"][1]["outputs"][1]["dtype"], "int64");
    assert_eq!(j["nodes"][2]["inputs"][0]["value"], "max[0]");
    assert_eq!(j["outputs"], serde_json::json!(["t", "add", "max[1]"]));
    let dot = g.to_dot();
    assert!(dot.contains("n0 -> n2 [label=\"self\"]"), "{dot}");
    assert!(dot.contains("aten::add.Tensor\\nalpha=2"), "{dot}");
    assert!(dot.contains("out2 [shape=plaintext"), "{dot}");
}

#[test]
fn bad_graphs_are_errors() {
    let x = f32s(&[1.0], &[1]);
    let mut g = Graph::new();
    let a = g.add_input(TensorMeta::of(&x));
    let missing = Value::new(NodeId(7), 0);
    let e = g
        .add_call(op("aten::exp"), vec![Arg::Value(missing)], ret(&x))
        .unwrap_err();
    assert_eq!(e.to_string(), "value %7.0 is not defined in this graph");
    assert!(g
        .add_call(
            op("aten::exp"),
            vec![Arg::Const(IValue::Tensor(x.clone()))],
            ret(&x)
        )
        .unwrap_err()
        .to_string()
        .contains("must be a graph value"));
    assert!(g.set_outputs(vec![Value::new(a.node, 3)]).is_err());
    g.set_outputs(vec![a]).unwrap();
    // A run with the wrong number of inputs, or an output the kernel does not produce.
    let err = Plan::new(g.clone())
        .run(vec![], &RunOptions::default())
        .unwrap_err();
    assert!(err.to_string().contains("1 inputs but 0"), "{err}");
    let mut g = Graph::new();
    let a = g.add_input(TensorMeta::of(&x));
    let n = g
        .add_call(
            op("aten::exp"),
            vec![Arg::Value(a)],
            vec![Output {
                meta: TensorMeta::of(&x).into(),
                source: Source::Return(3),
            }],
        )
        .unwrap();
    g.set_outputs(vec![g.value(n, 0)]).unwrap();
    let err = g.replay(vec![x]).unwrap_err();
    assert!(
        err.to_string().contains("did not produce its output"),
        "{err}"
    );
}

#[test]
fn dead_code_and_keys() {
    let x = f32s(&[0.5, 1.5, 2.5], &[3]);
    let (g, dead) = small_graph(&x);
    let live = g.live_nodes();
    assert!(!live[dead.index()]);
    assert_eq!(live.iter().filter(|l| **l).count(), 3);
    let (pruned, inputs) = g.eliminate_dead_code();
    assert_eq!((pruned.num_calls(), inputs), (2, vec![0]));
    // The dead node does not change the key of the live part.
    assert_eq!(StructuralKey::of(&g, Some(&live)), pruned.structural_key());
    assert_ne!(g.structural_key(), pruned.structural_key());
    // Same structure on other data: same key; another shape or constant: another key.
    let (g2, _) = small_graph(&f32s(&[9.0, 8.0, 7.0], &[3]));
    assert_eq!(g.structural_key(), g2.structural_key());
    let (g3, _) = small_graph(&f32s(&[9.0, 8.0], &[2]));
    assert_ne!(g.structural_key(), g3.structural_key());
    let plan = Plan::new(g);
    assert_eq!(plan.calls(), 2, "the dead relu does not run");
}

/// Identical pure calls run once; calls whose results are written are never merged
/// (Note [Merging identical nodes]).
#[test]
fn merging_respects_writes_and_outputs() {
    let x = f32s(&[1.0, 2.0], &[2]);
    let m = TensorMeta::of(&x);
    let one = || Arg::Const(IValue::Int(1));
    let mut g = Graph::new();
    let a = g.add_input(m.clone());
    // y = x + 1; z = x + 1; y.add_(1); out = z * 1
    let y = g
        .add_call(
            op("aten::add.Scalar"),
            vec![Arg::Value(a), one(), one()],
            vec![Output::ret(0, m.clone())],
        )
        .unwrap();
    let z = g
        .add_call(
            op("aten::add.Scalar"),
            vec![Arg::Value(a), one(), one()],
            vec![Output::ret(0, m.clone())],
        )
        .unwrap();
    let w = g
        .add_call(
            op("aten::add_.Scalar"),
            vec![Arg::Value(g.value(y, 0)), one(), one()],
            vec![Output::ret(0, m.clone())],
        )
        .unwrap();
    let out = g
        .add_call(
            op("aten::mul.Scalar"),
            vec![Arg::Value(g.value(z, 0)), one()],
            vec![Output::ret(0, m.clone())],
        )
        .unwrap();
    g.set_outputs(vec![g.value(w, 0), g.value(out, 0)]).unwrap();
    let plan = Plan::new(g.clone());
    assert_eq!(plan.merged(), 0, "y is written: z must keep its own memory");
    let r = plan.run(vec![x.clone()], &RunOptions::default()).unwrap();
    assert_eq!(r[0].to_vec::<f32>().unwrap(), [3.0, 4.0]);
    assert_eq!(r[1].to_vec::<f32>().unwrap(), [2.0, 3.0]);

    // Without the write, the two adds merge, and what reads them reads one tensor.
    let mut g = Graph::new();
    let a = g.add_input(m.clone());
    let y = g
        .add_call(
            op("aten::exp"),
            vec![Arg::Value(a)],
            vec![Output::ret(0, m.clone())],
        )
        .unwrap();
    let z = g
        .add_call(
            op("aten::exp"),
            vec![Arg::Value(a)],
            vec![Output::ret(0, m.clone())],
        )
        .unwrap();
    let s = g
        .add_call(
            op("aten::add.Tensor"),
            vec![Arg::Value(g.value(y, 0)), Arg::Value(g.value(z, 0)), one()],
            vec![Output::ret(0, m.clone())],
        )
        .unwrap();
    g.set_outputs(vec![g.value(s, 0)]).unwrap();
    let plan = Plan::new(g.clone());
    assert_eq!((plan.calls(), plan.merged()), (2, 1));
    let r = plan.run(vec![x.clone()], &RunOptions::default()).unwrap();
    assert_eq!(
        r[0].to_vec::<f32>().unwrap(),
        [2.0 * 1f32.exp(), 2.0 * 2f32.exp()]
    );
    // Graph outputs are never merged away (a caller may write one later).
    g.set_outputs(vec![g.value(y, 0), g.value(z, 0)]).unwrap();
    let r = Plan::new(g.clone())
        .run(vec![x.clone()], &RunOptions::default())
        .unwrap();
    assert!(!r[0].is_alias_of(&r[1]));
    // A purity rule that merges nothing.
    g.set_outputs(vec![g.value(s, 0)]).unwrap();
    assert_eq!(Plan::with_purity(g, &|_| false).merged(), 0);
}

/// The test operators: `gtest::make` returns a fresh copy of its input and remembers it
/// weakly; `gtest::alive` reports whether that copy still exists when it runs.
fn probes() -> (OperatorHandle, OperatorHandle) {
    static LIB: OnceLock<(OperatorHandle, OperatorHandle)> = OnceLock::new();
    static MADE: Mutex<Option<WeakTensor>> = Mutex::new(None);
    LIB.get_or_init(|| {
        let d = Dispatcher::global();
        let mut lib = Library::new(d, LibraryKind::Def, "gtest", None).unwrap();
        lib.def("make(Tensor x) -> Tensor").unwrap();
        lib.def("alive(Tensor x) -> Tensor").unwrap();
        let make = |x: &Tensor| -> Result<Tensor> {
            let y = x.deep_clone()?;
            *MADE.lock().unwrap() = Some(y.downgrade());
            Ok(y)
        };
        let alive = |x: &Tensor| -> Result<Tensor> {
            let alive = MADE.lock().unwrap().as_ref().is_some_and(|w| !w.expired());
            let _ = x;
            Ok(Tensor::scalar_tensor(
                f64::from(u8::from(alive)),
                ScalarType::Float,
            ))
        };
        lib.impl_(
            "make",
            Some(DispatchKey::CPU),
            KernelFunction::from_fn(make),
        )
        .unwrap();
        lib.impl_(
            "alive",
            Some(DispatchKey::CPU),
            KernelFunction::from_fn(alive),
        )
        .unwrap();
        lib.leak();
        (op("gtest::make"), op("gtest::alive"))
    })
    .clone()
}

#[test]
fn intermediates_are_freed_after_their_last_use() {
    let (make, alive) = probes();
    let x = f32s(&[1.0, -2.0], &[2]);
    let m = TensorMeta::of(&x);
    let s = TensorMeta::of(&Tensor::scalar_tensor(0.0, ScalarType::Float));
    // a = make(x); b = relu(a); c = alive(b): a's last reader is relu, so it is gone when
    // alive runs.
    let build = |keep_a: bool| {
        let mut g = Graph::new();
        let i = g.add_input(m.clone());
        let a = g
            .add_call(
                make.clone(),
                vec![Arg::Value(i)],
                vec![Output::ret(0, m.clone())],
            )
            .unwrap();
        let b = g
            .add_call(
                op("aten::relu"),
                vec![Arg::Value(g.value(a, 0))],
                vec![Output::ret(0, m.clone())],
            )
            .unwrap();
        let c = g
            .add_call(
                alive.clone(),
                vec![Arg::Value(g.value(b, 0))],
                vec![Output::ret(0, s.clone())],
            )
            .unwrap();
        let mut outs = vec![g.value(c, 0)];
        if keep_a {
            outs.push(g.value(a, 0));
        }
        g.set_outputs(outs).unwrap();
        g
    };
    let r = build(false).replay(vec![x.clone()]).unwrap();
    assert_eq!(r[0].item().unwrap().to_f64(), 0.0, "freed before alive ran");
    // An output is kept to the end.
    let r = build(true).replay(vec![x.clone()]).unwrap();
    assert_eq!(r[0].item().unwrap().to_f64(), 1.0);
    assert_eq!(r[1].to_vec::<f32>().unwrap(), [1.0, -2.0]);
}

#[test]
fn device_mapping_and_metadata_checks() {
    let x = f32s(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let lazy: switchboard_tensor::Device = "lazy:0".parse().unwrap();
    let mut g = Graph::new();
    let z = g
        .add_call(
            op("aten::zeros"),
            vec![
                Arg::Const(IValue::IntList(vec![2, 2].into())),
                Arg::Const(IValue::None),
                Arg::Const(IValue::None),
                Arg::Const(IValue::Device(lazy)),
                Arg::Const(IValue::None),
            ],
            ret(&x),
        )
        .unwrap();
    g.set_outputs(vec![g.value(z, 0)]).unwrap();
    assert!(g.to_string().contains("device=device('lazy:0')"));
    let opts = RunOptions {
        device_map: Some((
            switchboard_keys::DeviceType::Lazy,
            switchboard_tensor::Device::CPU,
        )),
        check_metadata: true,
        ..RunOptions::default()
    };
    let r = Plan::new(g.clone()).run(vec![], &opts).unwrap();
    assert!(r[0].is_cpu());
    // Recorded strides that differ from the kernel's: the result is laid out as recorded.
    let mut g = Graph::new();
    let a = g.add_input(TensorMeta::of(&x));
    let mut meta = TensorMeta::of(&x);
    meta.strides = [1, 2].into_iter().collect();
    let n = g
        .add_call(
            op("aten::exp"),
            vec![Arg::Value(a)],
            vec![Output::ret(0, meta)],
        )
        .unwrap();
    g.set_outputs(vec![g.value(n, 0)]).unwrap();
    let r = Plan::new(g.clone()).run(vec![x.clone()], &opts).unwrap();
    assert_eq!(r[0].strides(), &[1, 2]);
    assert_eq!(
        r[0].to_vec::<f32>().unwrap(),
        [1f32.exp(), 2f32.exp(), 3f32.exp(), 4f32.exp()]
    );
    // A wrong shape is an error naming the operator.
    let mut g = Graph::new();
    let a = g.add_input(TensorMeta::of(&x));
    let n = g
        .add_call(
            op("aten::exp"),
            vec![Arg::Value(a)],
            ret(&f32s(&[1.0], &[1])),
        )
        .unwrap();
    g.set_outputs(vec![g.value(n, 0)]).unwrap();
    let err = Plan::new(g).run(vec![x], &opts).unwrap_err();
    assert!(err.to_string().contains("aten::exp produced"), "{err}");
}
