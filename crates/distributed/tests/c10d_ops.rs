//! The in-place `c10d::*` operators (PyTorch's Ops.cpp): custom class arguments (the process
//! group, the reduction) and the `Work` they return through the dispatcher, their Meta kernels,
//! the tracer and dispatch modes. One process, on a single-process group; `c10d_ops_mpi.rs`
//! runs them across ranks.

use std::sync::Arc;

use switchboard_cpu as _;
use switchboard_dispatcher::{Dispatcher, IValue, Object};
use switchboard_distributed::{c10d_ops, ProcessGroup, ReduceOp, SingleProcess, Work};
use switchboard_keys::DeviceType;
use switchboard_meta as _;
use switchboard_ops as ops;
use switchboard_tensor::{Device, Tensor};

fn group() -> Arc<ProcessGroup> {
    Arc::new(ProcessGroup::new(
        Box::new(SingleProcess::default()),
        "c10d-ops-test",
        Default::default(),
    ))
}

fn t(v: &[f32]) -> Tensor {
    Tensor::from_vec(v.to_vec(), &[v.len() as i64]).unwrap()
}

fn call(name: &str, args: Vec<IValue>) -> switchboard_dispatcher::Result<Vec<IValue>> {
    let op = Dispatcher::global()
        .find_schema_or_throw(&format!("c10d::{name}"))
        .unwrap();
    let mut stack = args;
    op.call_boxed(&mut stack)?;
    Ok(stack)
}

fn obj<T: switchboard_dispatcher::CustomClass>(v: T) -> IValue {
    IValue::Object(Object::new(Arc::new(v)))
}

#[test]
fn the_schemas_are_pytorchs() {
    let op = Dispatcher::global()
        .find_schema_or_throw("c10d::allreduce_")
        .unwrap();
    assert_eq!(
        op.schema().unwrap().schema.to_string(),
        "c10d::allreduce_(Tensor[] tensors, __torch__.torch.classes.c10d.ProcessGroup \
         process_group, __torch__.torch.classes.c10d.ReduceOp reduce_op, Tensor? \
         sparse_indices, bool async_op=True, int timeout=-1) -> (Tensor[], \
         __torch__.torch.classes.c10d.Work)"
    );
    assert_eq!(c10d_ops::SCHEMAS.len(), 9);
    let schema = |name: &str| {
        Dispatcher::global()
            .find_schema_or_throw(&format!("c10d::{name}"))
            .unwrap()
            .schema()
            .unwrap()
            .schema
            .to_string()
    };
    assert_eq!(
        schema("reduce_"),
        "c10d::reduce_(Tensor[] tensors, __torch__.torch.classes.c10d.ProcessGroup \
         process_group, __torch__.torch.classes.c10d.ReduceOp reduce_op, int root_rank, int \
         root_tensor, bool async_op=True, int timeout=-1) -> __torch__.torch.classes.c10d.Work"
    );
    assert_eq!(
        schema("alltoall_base_"),
        "c10d::alltoall_base_(Tensor output, Tensor input, \
         __torch__.torch.classes.c10d.ProcessGroup process_group, int[] output_split_sizes, \
         int[] input_split_sizes, bool async_op=True, int timeout=-1) -> \
         __torch__.torch.classes.c10d.Work"
    );
}

#[test]
fn eager_calls_return_a_work_object() {
    let pg = group();
    let x = t(&[1., 2., 3.]);
    let out = call(
        "allreduce_",
        vec![
            vec![x.clone()].into(),
            obj_arc(&pg),
            obj(ReduceOp::Sum),
            IValue::None,
            true.into(),
            (-1i64).into(),
        ],
    )
    .unwrap();
    assert_eq!(out.len(), 2);
    assert!(matches!(&out[0], IValue::TensorList(v) if v[0].is_same(&x)));
    let IValue::Object(work) = &out[1] else {
        panic!("{:?}", out[1])
    };
    assert_eq!(work.qualified_name(), "__torch__.torch.classes.c10d.Work");
    assert_eq!(out[1].type_name(), "__torch__.torch.classes.c10d.Work");
    work.downcast::<Work>().unwrap().wait().unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap(), [1., 2., 3.]);

    // The typed wrappers: each collective in place, its work waited for.
    c10d_ops::allreduce_(&x, ReduceOp::Max, &pg)
        .unwrap()
        .wait()
        .unwrap();
    c10d_ops::broadcast_(&x, 0, &pg).unwrap().wait().unwrap();
    let gathered = Tensor::zeros(&[3], x.dtype()).unwrap();
    c10d_ops::allgather_base_(&gathered, &x, &pg)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(gathered.to_vec::<f32>().unwrap(), [1., 2., 3.]);
    let scattered = Tensor::zeros(&[3], x.dtype()).unwrap();
    c10d_ops::reduce_scatter_base_(&scattered, &x, ReduceOp::Sum, &pg)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(scattered.to_vec::<f32>().unwrap(), [1., 2., 3.]);
    assert_eq!(pg.sequence_number(), 5, "five collectives launched");
}

fn obj_arc(pg: &Arc<ProcessGroup>) -> IValue {
    IValue::Object(Object::new(Arc::clone(pg)))
}

#[test]
fn argument_errors() {
    let pg = group();
    let x = t(&[1., 2.]);
    let err = |name: &str, args: Vec<IValue>| call(name, args).unwrap_err().to_string();
    // An object of another class where the process group is expected: a type error.
    let e = err(
        "allreduce_",
        vec![
            vec![x.clone()].into(),
            obj(ReduceOp::Sum),
            obj(ReduceOp::Sum),
            IValue::None,
            true.into(),
            (-1i64).into(),
        ],
    );
    assert!(
        e.contains("__torch__.torch.classes.c10d.ProcessGroup")
            && e.contains("__torch__.torch.classes.c10d.ReduceOp"),
        "{e}"
    );
    let e = err(
        "allreduce_",
        vec![
            vec![x.clone(), x.clone()].into(),
            obj_arc(&pg),
            obj(ReduceOp::Sum),
            IValue::None,
            true.into(),
            (-1i64).into(),
        ],
    );
    assert_eq!(
        e,
        "MPI process group does not support multi-GPU collectives (got 2 tensors, expected 1)"
    );
    let e = err(
        "broadcast_",
        vec![
            vec![x.clone()].into(),
            obj_arc(&pg),
            (-1i64).into(),
            0i64.into(),
            true.into(),
            (-1i64).into(),
        ],
    );
    assert_eq!(
        e,
        "Invalid root rank: should be within the range of [0, 1), but got -1."
    );
    let e = err(
        "barrier",
        vec![
            x.clone().into(),
            obj_arc(&pg),
            Vec::<i64>::new().into(),
            true.into(),
            (-5i64).into(),
        ],
    );
    assert_eq!(
        e,
        "timeout must be -1 (the process group's) or a number of milliseconds >= 0, but got -5"
    );
    let e = err(
        "send",
        vec![
            vec![x.clone()].into(),
            obj_arc(&pg),
            1i64.into(),
            (1i64 << 40).into(),
        ],
    );
    assert_eq!(e, "tag must fit in a 32-bit int, but got 1099511627776");
}

#[test]
fn meta_kernels_return_a_completed_work() {
    let pg = group();
    let m = ops::empty_with(&[4], ops::EmptyOptions::default().device(Device::META)).unwrap();
    let out = call(
        "allreduce_",
        vec![
            vec![m.clone()].into(),
            obj_arc(&pg),
            obj(ReduceOp::Sum),
            IValue::None,
            true.into(),
            (-1i64).into(),
        ],
    )
    .unwrap();
    assert!(matches!(&out[0], IValue::TensorList(v) if v[0].is_same(&m)));
    let IValue::Object(work) = &out[1] else {
        panic!("{:?}", out[1])
    };
    let work = work.downcast::<Work>().unwrap();
    assert!(work.is_completed());
    work.wait().unwrap();
    assert_eq!(pg.sequence_number(), 0, "nothing communicated");
}

#[test]
fn the_tracer_records_them() {
    let pg = group();
    let x = t(&[1., 2.]);
    let traced = switchboard_trace::trace(std::slice::from_ref(&x), |a| {
        let y = ops::add(&a[0], &a[0])?;
        c10d_ops::allreduce_(&y, ReduceOp::Sum, &pg)?.wait()?;
        Ok(vec![y])
    })
    .unwrap();
    assert_eq!(traced.op_names(), ["aten::add.Tensor", "c10d::allreduce_"]);
}

#[test]
fn dispatch_modes_see_them() {
    let pg = group();
    let log = std::rc::Rc::new(switchboard_modes::LoggingMode::new());
    let x = t(&[1., 2.]);
    {
        let _mode = switchboard_modes::push_mode(log.clone());
        c10d_ops::allreduce_(&x, ReduceOp::Max, &pg)
            .unwrap()
            .wait()
            .unwrap();
    }
    let lines = log.lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with(
            "c10d::allreduce_([f32[2]], <__torch__.torch.classes.c10d.ProcessGroup object>"
        ),
        "{lines:?}"
    );
}

// The c10d operators return a `Work`, a host object: the lazy backend runs them eagerly on
// its tensors' data (Note [Data-dependent operators run eagerly] in switchboard-lazy), in
// place, so that the collective runs when it is called and `wait` is the synchronisation
// point, as PyTorch's in-place collectives on any device.
#[test]
fn the_lazy_backend_runs_them_eagerly_in_place() {
    // Lazy tensors are functional tensors: the collective runs on the value (Note [Functional
    // calls in place] in switchboard-functionalize).
    {
        let pg = group();
        let lazy = Device::with_index(DeviceType::Lazy, 5);
        let backend = switchboard_lazy::backend(lazy).unwrap();
        let x = ops::to_device(
            &t(&[1., 2., 3.]),
            lazy,
            switchboard_tensor::ScalarType::Float,
        )
        .unwrap();
        assert!(switchboard_functionalize::is_functional_tensor(&x));
        let y = ops::mul(&x, &x).unwrap();
        let work = c10d_ops::allreduce_(&y, ReduceOp::Avg, &pg).unwrap();
        assert_eq!(pg.sequence_number(), 1, "launched at the call");
        let graph = backend.pending_graph().to_string();
        assert!(!graph.contains("c10d"), "{graph}");
        work.wait().unwrap();
        assert_eq!(y.device(), lazy);
        assert_eq!(y.to_vec::<f32>().unwrap(), [1., 4., 9.]);
    }
}

/// Under `functionalize(f)` they run on the functional tensors' values, as PyTorch's
/// functionalization fallback runs an operator whose schema has no alias annotation (Note
/// [Functional calls in place] in switchboard-functionalize).
#[test]
fn functionalize_runs_them_on_the_values() {
    use switchboard_functionalize::{functionalize, is_functional_tensor, Remove};
    let pg = group();
    let mut f = functionalize(
        |xs: &[Tensor]| {
            assert!(is_functional_tensor(&xs[0]));
            let y = ops::mul(&xs[0], &xs[0])?;
            c10d_ops::allreduce_(&y, ReduceOp::Sum, &pg)?.wait()?;
            Ok(vec![y])
        },
        Remove::Mutations,
    );
    let out = f(&[t(&[1., 2.])]).unwrap();
    assert!(!is_functional_tensor(&out[0]));
    assert_eq!(out[0].to_vec::<f32>().unwrap(), [1., 4.]);
    assert_eq!(pg.sequence_number(), 1);
}

#[test]
fn reduce_and_all_to_all_on_one_process() {
    let pg = group();
    let x = t(&[1., 2.]);
    c10d_ops::reduce_(&x, 0, ReduceOp::Avg, &pg)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap(), [1., 2.]);
    let out = t(&[0., 0., 0.]);
    c10d_ops::alltoall_base_(&out, &t(&[4., 5., 6.]), &[3], &[3], &pg)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), [4., 5., 6.]);
    let failed =
        |w: switchboard_dispatcher::Result<Work>| w.unwrap().wait().unwrap_err().to_string();
    // PyTorch's checkSplitSizes messages.
    assert!(
        failed(c10d_ops::alltoall_base_(&out, &x, &[3], &[1, 1], &pg))
            .contains("Number of tensor splits not equal to group size")
    );
    assert!(failed(c10d_ops::alltoall_base_(&out, &x, &[3], &[1], &pg))
        .contains("Split sizes doesn't match total dim 0 size"));
    assert!(failed(c10d_ops::alltoall_base_(&out, &x, &[3], &[-1], &pg))
        .contains("split sizes must be >= 0, but got -1"));
    let e = failed(c10d_ops::alltoall_base_(&out, &x, &[], &[], &pg));
    assert!(
        e.contains("the output takes 3 elements and the input has 2"),
        "{e}"
    );
    let long = Tensor::from_vec(vec![1i64, 2], &[2]).unwrap();
    assert!(failed(c10d_ops::alltoall_base_(&out, &long, &[], &[], &pg))
        .contains("output tensor must have the same type as input tensor"));
    assert!(failed(c10d_ops::reduce_(&x, 1, ReduceOp::Sum, &pg))
        .contains("Invalid root rank: should be within the range of [0, 1), but got 1."));
    let flags = Tensor::from_vec(vec![true], &[1]).unwrap();
    assert!(failed(c10d_ops::reduce_(&flags, 0, ReduceOp::Avg, &pg))
        .contains("Cannot use ReduceOp.AVG with boolean inputs"));
}
