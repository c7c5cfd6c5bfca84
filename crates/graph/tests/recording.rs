//! The recording and replay API the lazy backend and the tracer share: `as_strided` reads of
//! views, the outputs of written arguments, and plans that run every call as a program does.

use std::sync::Arc;

use switchboard_dispatcher::{Dispatcher, IValue, Library, LibraryKind, OperatorHandle};
use switchboard_graph::{unreturned_writes, Arg, Graph, Output, Plan, RunOptions, TensorMeta};
use switchboard_tensor::{RawOps, ScalarType, Tensor, TensorImpl};

use switchboard_cpu as _;
use switchboard_ops as _;

fn op(name: &str) -> OperatorHandle {
    Dispatcher::global().find_schema_or_throw(name).unwrap()
}

fn f32s(v: &[f32], sizes: &[i64]) -> Tensor {
    Tensor::from_slice(v, sizes).unwrap()
}

#[test]
fn as_strided_reads_a_view_of_a_value() {
    let x = f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let column = RawOps::as_strided(&x, &[2], &[3], 1).unwrap();
    let mut g = Graph::new();
    let a = g.add_input(TensorMeta::of(&x));
    let v = g
        .add_as_strided(a, Arc::new(TensorMeta::of(&column)))
        .unwrap();
    assert_eq!(
        g.node(v.node).op().unwrap().name().to_string(),
        "aten::as_strided"
    );
    assert!(g.meta(v).matches_layout(&column));
    g.set_outputs(vec![v]).unwrap();
    assert_eq!(
        g.replay(vec![x]).unwrap()[0].to_vec::<f32>().unwrap(),
        [2.0, 5.0]
    );
}

#[test]
fn one_layout_comparison() {
    let x = f32s(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let m = TensorMeta::of(&x);
    let imp: &TensorImpl = &x;
    assert!(m.matches_layout(imp));
    assert!(!m.matches_layout(&x.t().unwrap()));
    assert!(!m.matches_layout(&x.reshape(&[4]).unwrap()));
    assert!(!m.matches_layout(
        &f32s(&[1.0; 4], &[2, 2])
            .view_dtype(ScalarType::Int)
            .unwrap()
    ));
}

#[test]
fn unreturned_writes_are_the_written_arguments_no_return_aliases() {
    let semantics = |name: &str| op(name).semantics().unwrap();
    // `add_` returns the argument it writes; `max.dim_max` returns both `out=` arguments.
    assert_eq!(
        unreturned_writes(&semantics("aten::add_.Tensor")).count(),
        0
    );
    assert_eq!(
        unreturned_writes(&semantics("aten::max.dim_max")).count(),
        0
    );
    assert_eq!(unreturned_writes(&semantics("aten::exp")).count(), 0);
    // A custom operator writing its second argument and returning nothing.
    let d = Dispatcher::global();
    let lib = {
        let mut lib = Library::new(d, LibraryKind::Def, "rectest", None).unwrap();
        lib.def("scale_into(Tensor x, Tensor(a!) out) -> ()")
            .unwrap();
        lib
    };
    let written: Vec<usize> = unreturned_writes(&semantics("rectest::scale_into")).collect();
    assert_eq!(written, [1]);
    drop(lib);
}

/// x.add_(1), whose result nothing reads; then the output exp(y).
fn writes_an_input(x: &Tensor, y: &Tensor) -> Graph {
    let mut g = Graph::new();
    let a = g.add_input(TensorMeta::of(x));
    let b = g.add_input(TensorMeta::of(y));
    g.add_call(
        op("aten::add_.Scalar"),
        vec![
            Arg::Value(a),
            Arg::Const(IValue::Int(1)),
            Arg::Const(IValue::Int(1)),
        ],
        vec![Output::ret(0, TensorMeta::of(x))],
    )
    .unwrap();
    let e = g
        .add_call(
            op("aten::exp"),
            vec![Arg::Value(b)],
            vec![Output::ret(0, TensorMeta::of(y))],
        )
        .unwrap();
    g.set_outputs(vec![g.value(e, 0)]).unwrap();
    g
}

#[test]
fn every_call_plans_keep_calls_whose_results_nothing_reads() {
    let (x, y) = (f32s(&[1.0, 2.0], &[2]), f32s(&[0.0], &[1]));
    let g = writes_an_input(&x, &y);
    // A plan for the outputs drops the write; a program's replay makes it.
    assert_eq!(Plan::new(g.clone()).calls(), 1);
    let plan = Plan::every_call(g);
    assert_eq!((plan.calls(), plan.merged()), (2, 0));
    assert_eq!(plan.written_inputs(), [true, false]);
    let out = plan
        .run(vec![x.clone(), y], &RunOptions::default())
        .unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), [1.0]);
    assert_eq!(x.to_vec::<f32>().unwrap(), [2.0, 3.0]);
}

#[test]
fn run_stops_at_the_first_failing_call() {
    // mm of mismatched shapes fails; nothing reads it, and the call after it must not run.
    let (x, y) = (f32s(&[1.0, 2.0], &[1, 2]), f32s(&[1.0, 2.0], &[2]));
    let mut g = Graph::new();
    let a = g.add_input(TensorMeta::of(&x));
    let b = g.add_input(TensorMeta::of(&y));
    g.add_call(
        op("aten::mm"),
        vec![Arg::Value(a), Arg::Value(a)],
        vec![Output::ret(0, TensorMeta::of(&x))],
    )
    .unwrap();
    g.add_call(
        op("aten::add_.Scalar"),
        vec![
            Arg::Value(b),
            Arg::Const(IValue::Int(1)),
            Arg::Const(IValue::Int(1)),
        ],
        vec![Output::ret(0, TensorMeta::of(&y))],
    )
    .unwrap();
    g.set_outputs(vec![b]).unwrap();
    let plan = Plan::every_call(g);
    let err = plan
        .run(vec![x.clone(), y.clone()], &RunOptions::default())
        .unwrap_err();
    assert!(err.to_string().contains("cannot be multiplied"), "{err}");
    assert_eq!(y.to_vec::<f32>().unwrap(), [1.0, 2.0]);
    // `run_each` runs the rest, failing only what depends on the failed call.
    let out = plan
        .run_each(vec![x, y.clone()], &RunOptions::default())
        .unwrap();
    assert!(out[0].is_ok());
    assert_eq!(y.to_vec::<f32>().unwrap(), [2.0, 3.0]);
}
