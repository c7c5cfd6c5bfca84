//! The graphs a lazy device runs are functional programs (Note [Lazy tensors are functional]):
//! the tensors users hold are functional tensors below autograd, so a training step's
//! forward, backward and optimizer reach the backend as pure operators.

mod common;

use std::sync::{Arc, Mutex};

use common::*;
use switchboard_autograd::AutogradTensor;
use switchboard_dispatcher::{Result, SchemaKind};
use switchboard_functionalize::is_functional_tensor;
use switchboard_graph::{Arg, Graph};
use switchboard_lazy as lazy;
use switchboard_nn::{mlp, Module, Optimizer, Sgd};
use switchboard_ops as ops;
use switchboard_tensor::{Device, Tensor};

/// An executor that keeps every graph it is given and delegates to the CPU executor.
struct Keeping(Arc<Mutex<Vec<Graph>>>);

impl lazy::Executor for Keeping {
    fn name(&self) -> &str {
        "keeping"
    }
    fn compile(&self, graph: Graph) -> Result<Arc<dyn lazy::Executable>> {
        self.0.lock().unwrap().push(graph.clone());
        lazy::CpuExecutor.compile(graph)
    }
}

/// The operators of `g`'s calls that write an argument, are out= forms or return views, but
/// for the writes of a factory's decomposition into the memory it just allocated (`ones_like`
/// is `empty_like` then `fill_`: a CompositeExplicitAutograd kernel, which the layer calls as a
/// whole on the values), which alias nothing else.
fn impure_calls(g: &Graph) -> Vec<String> {
    let fresh = |a: &Arg| match a {
        Arg::Value(v) => g
            .node(v.node)
            .op()
            .is_some_and(|op| op.name().to_string().starts_with("aten::empty")),
        _ => false,
    };
    g.nodes()
        .filter_map(|n| n.op().map(|op| (n, op)))
        .filter(|(n, op)| {
            let sem = op.semantics().unwrap_or_default();
            let impure = sem.kind != SchemaKind::Functional || sem.is_view;
            let into_fresh = sem.kind == SchemaKind::Inplace && fresh(&n.args()[0]);
            impure && !into_fresh
        })
        .map(|(_, op)| op.name().to_string())
        .collect()
}

/// Training steps of an MLP (forward, backward, SGD with momentum and weight decay).
fn train(device: Device, steps: usize) -> (Vec<f64>, Vec<f32>) {
    let mut model = mlp(&[8, 16, 4], 0).unwrap();
    let x = ops::sin(&seq(&[6, 8])).unwrap();
    let y = Tensor::from_slice(&[0i64, 1, 2, 3, 0, 1], &[6]).unwrap();
    model.to_device(device).unwrap();
    let (x, y) = (to(&x, device), to(&y, device));
    let mut opt = Sgd::new(model.parameters(), 0.1)
        .momentum(0.9)
        .weight_decay(1e-3);
    let mut losses = vec![];
    for _ in 0..steps {
        let loss = ops::cross_entropy_loss(&model.forward(&x).unwrap(), &y).unwrap();
        opt.zero_grad();
        loss.backward().unwrap();
        opt.step().unwrap();
        if device != Device::CPU {
            lazy::backend(device).unwrap().mark_step().unwrap();
        }
        losses.push(loss.item().unwrap().to_f64());
    }
    (losses, values(&model.parameters()[0]))
}

#[test]
fn a_training_steps_graphs_hold_only_pure_calls() {
    let d = own_device();
    let graphs = Arc::new(Mutex::new(Vec::new()));
    d.set_executor(Arc::new(Keeping(graphs.clone())));
    let lazy_run = train(d.device(), 3);
    // Eager's numbers, to rounding: the functional forms of the optimizer's in-place updates
    // round as their own kernels do.
    let eager_run = train(Device::CPU, 3);
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-5 * (1.0 + b.abs());
    assert!(lazy_run
        .0
        .iter()
        .zip(&eager_run.0)
        .all(|(a, b)| close(*a, *b)));
    assert!(lazy_run
        .1
        .iter()
        .zip(&eager_run.1)
        .all(|(a, b)| close(*a as f64, *b as f64)));
    let graphs = graphs.lock().unwrap();
    assert!(!graphs.is_empty());
    let calls: usize = graphs.iter().map(Graph::num_calls).sum();
    assert!(
        calls > 30,
        "forward, backward and optimizer were captured ({calls} calls)"
    );
    for g in graphs.iter() {
        assert_eq!(impure_calls(g), Vec::<String>::new(), "in {g}");
    }
}

#[test]
fn tensors_on_a_lazy_device_are_functional() {
    let d = own_device();
    let factory = ops::zeros_with(&[2], ops::ZerosOptions::default().device(d.device())).unwrap();
    let moved = to(&seq(&[2]), d.device());
    let result = ops::add(&factory, &moved).unwrap();
    for t in [&factory, &moved, &result] {
        assert!(is_functional_tensor(t));
        assert_eq!(t.device(), d.device());
    }
    // A write keeps the tensor: a view of it sees the new value, and reading needs no unwrapping.
    let row = ops::select(&moved, 0, 1).unwrap();
    ops::mul_(&moved, &ops::ones_like(&moved).unwrap()).unwrap();
    ops::add_(&moved, &moved).unwrap();
    assert_eq!(values(&row), [4.0]);
    // Back on the host, a plain tensor.
    let host = to(&result, Device::CPU);
    assert!(!is_functional_tensor(&host) && host.is_cpu());
    assert_eq!(values(&host), [1.0, 2.0]);
}

/// Note [Composite kernels over persistent functional tensors], Note [_unsafe_view is a view to
/// functionalization] in switchboard-functionalize: composite kernels that view their inputs
/// or write through views run functionalized on a lazy device, so its graph holds no view and
/// no write but a factory's into the memory it made (a lazy value has no view: Note [Lazy
/// values]), and the results are eager's.
#[test]
fn composite_kernels_that_view_run_functionalized() {
    let d = own_device();
    let w = seq(&[5, 3]);
    let idx = Tensor::from_slice(&[1i64, 4, 0, 1], &[2, 2]).unwrap();
    let grad = seq(&[2, 4]);
    let x = seq(&[2, 3, 4]);
    let calls = |on: &dyn Fn(&Tensor) -> Tensor| -> Vec<Tensor> {
        vec![
            // `embedding` reshapes its indices; `select_backward` writes into a select of zeros.
            ops::embedding(&on(&w), &on(&idx)).unwrap(),
            ops::select_backward(&on(&grad), &[2, 3, 4], 1, 1).unwrap(),
            ops::_unsafe_view(&on(&x), &[6, 4]).unwrap(),
            ops::linear(&on(&grad), &on(&seq(&[3, 4]))).unwrap(),
        ]
    };
    let eager = calls(&|t| t.clone());
    let lazy = calls(&|t| d.lz(t));
    let graph = d.pending_graph();
    let ops_of = |g: &Graph| -> Vec<String> {
        g.nodes()
            .filter_map(|n| n.op())
            .map(|op| op.name().to_string())
            .collect()
    };
    let impure = impure_calls(&graph);
    assert!(impure.is_empty(), "{impure:?} in {:?}", ops_of(&graph));
    for (i, (e, l)) in eager.iter().zip(&lazy).enumerate() {
        assert_eq!(l.sizes(), e.sizes(), "{i}");
        assert_eq!(values(l), values(e), "{i}");
    }
}
