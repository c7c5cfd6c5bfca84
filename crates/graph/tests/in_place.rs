//! Plans write a pure call's result into its first argument when that argument dies with the
//! call and nothing else holds its memory (Note [Writing into a dying argument]).

use switchboard_dispatcher::{Dispatcher, IValue, OperatorHandle};
use switchboard_graph::{Arg, Graph, Output, Plan, RunOptions, TensorMeta, Value};
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

use switchboard_cpu as _;

fn op(name: &str) -> OperatorHandle {
    Dispatcher::global().find_schema_or_throw(name).unwrap()
}

fn f32s(v: &[f32], sizes: &[i64]) -> Tensor {
    Tensor::from_slice(v, sizes).unwrap()
}

/// `add(a, b)` recorded with the eager result's metadata.
fn add(g: &mut Graph, a: Value, b: Value, like: &Tensor) -> Value {
    let n = g
        .add_call(
            op("aten::add.Tensor"),
            vec![Arg::Value(a), Arg::Value(b), Arg::Const(IValue::Int(1))],
            vec![Output::ret(0, TensorMeta::of(like))],
        )
        .unwrap();
    g.value(n, 0)
}

/// `x + y` (then `+ y` again when `twice`), `x` read again at the end when `reread`.
fn graph(x: &Tensor, y: &Tensor, reread: bool) -> Graph {
    let mut g = Graph::new();
    let a = g.add_input(TensorMeta::of(x));
    let b = g.add_input(TensorMeta::of(y));
    let like = ops::add(x, y).unwrap();
    let s = add(&mut g, a, b, &like);
    let out = if reread { add(&mut g, s, a, &like) } else { s };
    g.set_outputs(vec![out]).unwrap();
    g
}

#[test]
fn a_dying_argument_takes_the_result() {
    let (x, y) = (
        f32s(&[1.0, 2.0, 3.0], &[3]),
        f32s(&[10.0, 20.0, 30.0], &[3]),
    );
    let opts = RunOptions::default();
    let plan = Plan::new(graph(&x, &y, false));
    // Handed over: `x`'s memory holds the sum.
    let given = x.deep_clone().unwrap();
    let memory = given.data_ptr();
    let r = plan.run(vec![given, y.clone()], &opts).unwrap();
    assert_eq!(r[0].data_ptr(), memory);
    assert_eq!(r[0].to_vec::<f32>().unwrap(), [11.0, 22.0, 33.0]);
    // Kept by the caller: a fresh result, `x` unchanged.
    let r = plan.run(vec![x.clone(), y.clone()], &opts).unwrap();
    assert_ne!(r[0].data_ptr(), x.data_ptr());
    assert_eq!(x.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0]);
    // A view of it is alive: the same.
    let given = x.deep_clone().unwrap();
    let view = ops::view(&given, &[1, 3]).unwrap();
    let r = plan.run(vec![given, y.clone()], &opts).unwrap();
    assert_ne!(r[0].data_ptr(), view.data_ptr());
    assert_eq!(view.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0]);
    // Replayed call by call, every call is the recorded one.
    let given = x.deep_clone().unwrap();
    let memory = given.data_ptr();
    let r = Plan::every_call(graph(&x, &y, false))
        .run(vec![given, y.clone()], &opts)
        .unwrap();
    assert_ne!(r[0].data_ptr(), memory);
}

#[test]
fn an_argument_read_later_or_laid_out_otherwise_keeps_its_memory() {
    let (x, y) = (
        f32s(&[1.0, 2.0, 3.0], &[3]),
        f32s(&[10.0, 20.0, 30.0], &[3]),
    );
    let opts = RunOptions::default();
    // `x` is read by the second call: the first writes fresh memory, the second (its first
    // argument the dying sum) writes into the sum.
    let given = x.deep_clone().unwrap();
    let memory = given.data_ptr();
    let r = Plan::new(graph(&x, &y, true))
        .run(vec![given, y.clone()], &opts)
        .unwrap();
    assert_ne!(r[0].data_ptr(), memory);
    assert_eq!(r[0].to_vec::<f32>().unwrap(), [12.0, 24.0, 36.0]);
    // A result of another shape (broadcast): fresh memory.
    let row = f32s(&[1.0, 2.0, 3.0], &[1, 3]);
    let grid = f32s(&[0.0; 6], &[2, 3]);
    let given = row.deep_clone().unwrap();
    let memory = given.data_ptr();
    let r = Plan::new(graph(&row, &grid, false))
        .run(vec![given, grid], &opts)
        .unwrap();
    assert_ne!(r[0].data_ptr(), memory);
    assert_eq!(
        r[0].to_vec::<f32>().unwrap(),
        [1.0, 2.0, 3.0, 1.0, 2.0, 3.0]
    );
}

#[test]
fn a_result_recorded_on_the_device_the_run_maps_takes_a_dying_input() {
    // A lazy graph: its inputs recorded with their data's device (CPU), its results with the
    // lazy device the run maps to the CPU.
    let (x, y) = (f32s(&[1.0, 2.0], &[2]), f32s(&[3.0, 4.0], &[2]));
    let mut g = Graph::new();
    let a = g.add_input(TensorMeta::of(&x));
    let b = g.add_input(TensorMeta::of(&y));
    let mut on_lazy = TensorMeta::of(&x);
    on_lazy.device = switchboard_tensor::Device::with_index(switchboard_keys::DeviceType::Lazy, 0);
    let n = g
        .add_call(
            op("aten::mul.Tensor"),
            vec![Arg::Value(a), Arg::Value(b)],
            vec![Output::ret(0, on_lazy)],
        )
        .unwrap();
    g.set_outputs(vec![g.value(n, 0)]).unwrap();
    let opts = RunOptions {
        device_map: Some((
            switchboard_keys::DeviceType::Lazy,
            switchboard_tensor::Device::CPU,
        )),
        ..RunOptions::default()
    };
    let given = x.deep_clone().unwrap();
    let memory = given.data_ptr();
    let r = Plan::new(g).run(vec![given, y], &opts).unwrap();
    assert_eq!(r[0].data_ptr(), memory);
    assert_eq!(r[0].to_vec::<f32>().unwrap(), [3.0, 8.0]);
}
