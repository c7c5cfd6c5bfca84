//! The collectives as dispatcher operators (`_c10d_functional::*`): eager calls, PyTorch's
//! argument errors, capture by the lazy backend and by the tracer. Runs in one process, on the
//! single-process group (no MPI needed); `functional_mpi.rs` runs them across ranks.

use std::sync::Once;

use switchboard_cpu as _;
use switchboard_distributed::functional::{self, pending_works};
use switchboard_distributed::{init_process_group, BackendKind, ReduceOp, WORLD};
use switchboard_meta as _;
use switchboard_ops::{self as ops, TensorOps};
use switchboard_tensor::{ScalarType, Tensor};

fn world() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        init_process_group(BackendKind::SingleProcess, Default::default()).unwrap();
    });
}

fn t(v: &[f32]) -> Tensor {
    Tensor::from_vec(v.to_vec(), &[v.len() as i64]).unwrap()
}

#[test]
fn eager_calls_return_the_results_after_wait_tensor() {
    world();
    let x = t(&[1., 2., 3., 4.]);
    for op in ReduceOp::ALL {
        let y = functional::all_reduce(&x, op, WORLD).unwrap();
        assert!(!y.is_same(&x), "a new tensor");
        let y = functional::wait_tensor(&y).unwrap();
        assert_eq!(y.to_vec::<f32>().unwrap(), [1., 2., 3., 4.]);
    }
    let g = functional::all_gather_into_tensor(&x.reshape(&[2, 2]).unwrap(), 1, WORLD).unwrap();
    assert_eq!(functional::wait_tensor(&g).unwrap().sizes(), &[2, 2]);
    let r = functional::reduce_scatter_tensor(&x, ReduceOp::Sum, 1, WORLD).unwrap();
    assert_eq!(functional::wait_tensor(&r).unwrap().sizes(), &[4]);
    let b = functional::broadcast(&x, 0, WORLD).unwrap();
    assert_eq!(
        functional::wait_tensor(&b)
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        [1., 2., 3., 4.]
    );
    let same = functional::all_reduce_(&x, ReduceOp::Sum, WORLD).unwrap();
    assert!(same.is_same(&x), "in place");
    functional::wait_tensor(&same).unwrap();
    assert_eq!(pending_works(), 0, "every work was waited for");
}

#[test]
fn argument_errors() {
    world();
    let x = t(&[1., 2., 3.]);
    let err = |r: switchboard_dispatcher::Result<Tensor>| r.unwrap_err().to_string();
    let op = |name: &str, args: Vec<switchboard_dispatcher::IValue>| {
        let op = switchboard_dispatcher::Dispatcher::global()
            .find_schema_or_throw(&format!("_c10d_functional::{name}"))
            .unwrap();
        let mut stack = args;
        op.call_boxed(&mut stack).map(|_| x.clone())
    };
    use switchboard_dispatcher::IValue;
    let s = |v: &str| IValue::Str(Box::new(v.into()));
    assert_eq!(
        err(op(
            "all_reduce",
            vec![IValue::Tensor(x.clone()), s("mean"), s(WORLD)]
        )),
        "Unrecognized reduce_op: mean"
    );
    assert_eq!(
        err(functional::all_reduce(&x, ReduceOp::Sum, "7")),
        "Could not resolve the process group registered under the name 7"
    );
    assert_eq!(
        err(functional::all_gather_into_tensor(&x, 2, WORLD)),
        "all_gather_into_tensor: group_size 2 does not match the size of process group 0 (1)"
    );
    assert_eq!(
        err(functional::reduce_scatter_tensor(
            &x,
            ReduceOp::Sum,
            2,
            WORLD
        )),
        "reduce_scatter_tensor: group_size 2 does not match the size of process group 0 (1)"
    );
    let b = Tensor::from_vec(vec![true, false], &[2]).unwrap();
    let y = functional::all_reduce(&b, ReduceOp::Avg, WORLD).unwrap();
    assert_eq!(
        err(functional::wait_tensor(&y)),
        "Cannot use ReduceOp.AVG with boolean inputs"
    );
    // On Meta: shapes only, with the same refusal of a bad split.
    let m = ops::empty_with(
        &[3, 2],
        ops::EmptyOptions::default().device(switchboard_tensor::Device::META),
    )
    .unwrap();
    assert_eq!(
        err(functional::reduce_scatter_tensor(
            &m,
            ReduceOp::Sum,
            2,
            WORLD
        )),
        "reduce_scatter_tensor: the first dimension of the input (sizes [3, 2]) must be \
         divisible by group_size (2)"
    );
    let g = functional::all_gather_into_tensor(&m, 4, WORLD).unwrap();
    assert_eq!((g.sizes(), g.dtype()), (&[12i64, 2][..], ScalarType::Float));
}

#[test]
fn the_lazy_backend_captures_them() {
    world();
    let lazy = switchboard_lazy::DEVICE;
    let x = ops::to_device(&t(&[1., 2., 3., 4.]), lazy, ScalarType::Float).unwrap();
    let y = ops::mul(&x, &x).unwrap();
    let r = functional::all_reduce(&y, ReduceOp::Avg, WORLD).unwrap();
    let r = functional::wait_tensor(&r).unwrap();
    let g = functional::all_gather_into_tensor(&r, 1, WORLD).unwrap();
    let g = functional::wait_tensor(&g).unwrap();
    assert_eq!(g.device(), lazy);
    let graph = switchboard_lazy::pending_graph().to_string();
    for name in [
        "_c10d_functional.all_reduce",
        "_c10d_functional.wait_tensor",
        "_c10d_functional.all_gather_into_tensor",
    ] {
        assert!(graph.contains(name), "{name} not captured:\n{graph}");
    }
    // Running the graph runs the collectives.
    assert_eq!(g.to_vec::<f32>().unwrap(), [1., 4., 9., 16.]);
    assert_eq!(pending_works(), 0);
}

#[test]
fn the_tracer_records_them() {
    world();
    let x = t(&[1., 2.]);
    let traced = switchboard_trace::trace(std::slice::from_ref(&x), |a| {
        let y = ops::add(&a[0], &a[0])?;
        let y = functional::all_reduce(&y, ReduceOp::Sum, WORLD)?;
        let y = functional::wait_tensor(&y)?;
        Ok(vec![y])
    })
    .unwrap();
    assert_eq!(
        traced.op_names(),
        [
            "aten::add.Tensor",
            "_c10d_functional::all_reduce",
            "_c10d_functional::wait_tensor"
        ]
    );
    // Replaying runs them again.
    let out = traced.run(&[t(&[3., 4.])]).unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), [6., 8.]);
}

#[test]
fn the_autograd_forms_differentiate() {
    use switchboard_autograd::AutogradTensor;
    use switchboard_distributed::functional_autograd;
    world();
    let x = t(&[1., 2.]).requires_grad_(true).unwrap();
    let y = functional_autograd::all_gather_into_tensor(&x, 1, WORLD).unwrap();
    let w = t(&[3., 4.]);
    ops::sum(&ops::mul(&y, &w).unwrap())
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), [3., 4.]);
    let z = functional_autograd::reduce_scatter_tensor(&x, 1, WORLD).unwrap();
    assert!(z.requires_grad());
    let err = {
        let op = switchboard_dispatcher::Dispatcher::global()
            .find_schema_or_throw("_c10d_functional_autograd::reduce_scatter_tensor")
            .unwrap();
        let s = |v: &str| switchboard_dispatcher::IValue::Str(Box::new(v.into()));
        let mut stack = vec![
            switchboard_dispatcher::IValue::Tensor(x.clone()),
            s("max"),
            switchboard_dispatcher::IValue::Int(1),
            s(WORLD),
        ];
        op.call_boxed(&mut stack).unwrap_err().to_string()
    };
    assert_eq!(err, "Only sum reduce op is supported");
}

#[test]
fn dispatch_modes_see_them() {
    world();
    let log = std::rc::Rc::new(switchboard_modes::LoggingMode::new());
    let x = t(&[1., 2.]);
    {
        let _mode = switchboard_modes::push_mode(log.clone());
        let y = functional::all_reduce(&x, ReduceOp::Max, WORLD).unwrap();
        functional::wait_tensor(&y).unwrap();
    }
    let lines = log.lines();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].starts_with("_c10d_functional::all_reduce(f32[2]"),
        "{lines:?}"
    );
    assert!(
        lines[1].starts_with("_c10d_functional::wait_tensor(f32[2])"),
        "{lines:?}"
    );
}

#[test]
fn collectives_refuse_tensors_without_values() {
    let pg = switchboard_distributed::ProcessGroup::new(
        Box::new(switchboard_distributed::SingleProcess::default()),
        "meta-test",
        Default::default(),
    );
    let m = ops::empty_with(
        &[2],
        ops::EmptyOptions::default().device(switchboard_tensor::Device::META),
    )
    .unwrap();
    assert_eq!(
        pg.all_reduce(&m, ReduceOp::Sum)
            .wait()
            .unwrap_err()
            .to_string(),
        "all_reduce: collectives need tensors with data, but got one on meta"
    );
    assert_eq!(pg.sequence_number(), 0, "nothing launched");
}

#[test]
fn collectives_refuse_complex_tensors() {
    let pg = switchboard_distributed::ProcessGroup::new(
        Box::new(switchboard_distributed::SingleProcess::default()),
        "complex-test",
        Default::default(),
    );
    let z = Tensor::zeros(&[2], ScalarType::ComplexFloat).unwrap();
    let expected = "collectives do not support complex tensors here (got ComplexFloat); send \
                    torch.view_as_real(tensor) instead";
    let err = pg.all_reduce(&z, ReduceOp::Sum).wait().unwrap_err();
    assert_eq!(err.to_string(), expected);
}
