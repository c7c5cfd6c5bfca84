//! The collectives as PyTorch's `c10d` operators (torch/csrc/distributed/c10d/Ops.cpp): in
//! place on the tensors they are given, taking the process group and the reduction as custom
//! class objects and returning the `Work` to wait on, as `torch.distributed` calls them.

use std::sync::Arc;
use std::time::Duration;

use switchboard_dispatcher::{
    library, CustomClass, Dispatcher, IValue, KernelFunction, Object, Result, Stack,
};
use switchboard_tensor::Tensor;

use crate::error::DistError;
use crate::process_group::ProcessGroup;
use crate::reduce_op::ReduceOp;
use crate::work::Work;

impl CustomClass for ProcessGroup {
    const QUALIFIED_NAME: &'static str = "__torch__.torch.classes.c10d.ProcessGroup";
}
impl CustomClass for Work {
    const QUALIFIED_NAME: &'static str = "__torch__.torch.classes.c10d.Work";
}
impl CustomClass for ReduceOp {
    const QUALIFIED_NAME: &'static str = "__torch__.torch.classes.c10d.ReduceOp";
}

/// The schemas, as PyTorch 2.15 defines them (the collectives this crate's process groups run).
pub const SCHEMAS: [&str; 9] = [
    "allreduce_(Tensor[] tensors, __torch__.torch.classes.c10d.ProcessGroup process_group, \
     __torch__.torch.classes.c10d.ReduceOp reduce_op, Tensor? sparse_indices, \
     bool async_op=True, int timeout=-1) -> (Tensor[], __torch__.torch.classes.c10d.Work)",
    "broadcast_(Tensor[] tensors, __torch__.torch.classes.c10d.ProcessGroup process_group, \
     int root_rank, int root_tensor, bool async_op=True, int timeout=-1) \
     -> (Tensor[], __torch__.torch.classes.c10d.Work)",
    "_allgather_base_(Tensor output_tensor, Tensor input_tensor, \
     __torch__.torch.classes.c10d.ProcessGroup process_group, bool async_op=True, \
     int timeout=-1) -> (Tensor, __torch__.torch.classes.c10d.Work)",
    "_reduce_scatter_base_(Tensor output_tensor, Tensor input_tensor, \
     __torch__.torch.classes.c10d.ProcessGroup process_group, \
     __torch__.torch.classes.c10d.ReduceOp reduce_op, bool async_op=True, int timeout=-1) \
     -> (Tensor, __torch__.torch.classes.c10d.Work)",
    "reduce_(Tensor[] tensors, __torch__.torch.classes.c10d.ProcessGroup process_group, \
     __torch__.torch.classes.c10d.ReduceOp reduce_op, int root_rank, int root_tensor, \
     bool async_op=True, int timeout=-1) -> __torch__.torch.classes.c10d.Work",
    "alltoall_base_(Tensor output, Tensor input, \
     __torch__.torch.classes.c10d.ProcessGroup process_group, int[] output_split_sizes, \
     int[] input_split_sizes, bool async_op=True, int timeout=-1) \
     -> __torch__.torch.classes.c10d.Work",
    "barrier(Tensor tensor, __torch__.torch.classes.c10d.ProcessGroup process_group, \
     int[] device_ids, bool async_op=True, int timeout=-1) -> __torch__.torch.classes.c10d.Work",
    "send(Tensor[] tensors, __torch__.torch.classes.c10d.ProcessGroup process_group, int dst, \
     int tag) -> __torch__.torch.classes.c10d.Work",
    "recv_(Tensor[] tensors, __torch__.torch.classes.c10d.ProcessGroup process_group, int src, \
     int tag) -> __torch__.torch.classes.c10d.Work",
];

library!(DEF c10d, |lib| {
    for s in SCHEMAS {
        lib.def(s)?;
    }
    Ok(())
});

library!(IMPL c10d, CPU, |lib| {
    lib.impl_("allreduce_", None, KernelFunction::from_fn(allreduce_cpu))?;
    lib.impl_("broadcast_", None, KernelFunction::from_fn(broadcast_cpu))?;
    lib.impl_("_allgather_base_", None, KernelFunction::from_fn(allgather_base_cpu))?;
    lib.impl_(
        "_reduce_scatter_base_",
        None,
        KernelFunction::from_fn(reduce_scatter_base_cpu),
    )?;
    lib.impl_("reduce_", None, KernelFunction::from_fn(reduce_cpu))?;
    lib.impl_("alltoall_base_", None, KernelFunction::from_fn(alltoall_base_cpu))?;
    lib.impl_("barrier", None, KernelFunction::from_fn(barrier_cpu))?;
    lib.impl_("send", None, KernelFunction::from_fn(send_cpu))?;
    lib.impl_("recv_", None, KernelFunction::from_fn(recv_cpu))?;
    Ok(())
});

// Note [c10d operators on Meta]
// As PyTorch's (torch/distributed/_meta_registrations.py): nothing is communicated; the
// in-place collectives return their first argument and every one a work that is already
// complete (`FakeWork`), so that shape propagation and capturing backends see the calls.
library!(IMPL c10d, Meta, |lib| {
    lib.impl_("allreduce_", None, KernelFunction::from_fn(allreduce_meta))?;
    lib.impl_("broadcast_", None, KernelFunction::from_fn(broadcast_meta))?;
    lib.impl_("_allgather_base_", None, KernelFunction::from_fn(allgather_base_meta))?;
    lib.impl_(
        "_reduce_scatter_base_",
        None,
        KernelFunction::from_fn(reduce_scatter_base_meta),
    )?;
    lib.impl_("reduce_", None, KernelFunction::from_fn(reduce_meta))?;
    lib.impl_("alltoall_base_", None, KernelFunction::from_fn(alltoall_base_meta))?;
    lib.impl_("barrier", None, KernelFunction::from_fn(barrier_meta))?;
    lib.impl_("send", None, KernelFunction::from_fn(point_to_point_meta))?;
    lib.impl_("recv_", None, KernelFunction::from_fn(point_to_point_meta))?;
    Ok(())
});

/// The one tensor of a collective's list: the MPI process group runs one tensor per call, as
/// PyTorch's (`checkSingleTensor`).
fn single_tensor(tensors: &[Tensor]) -> Result<&Tensor> {
    match tensors {
        [t] => Ok(t),
        _ => Err(DistError::Invalid(format!(
            "MPI process group does not support multi-GPU collectives (got {} tensors, \
             expected 1)",
            tensors.len()
        ))
        .into()),
    }
}

/// The work with the call's own timeout in milliseconds (`-1`: the group's).
fn timed(work: Work, timeout_ms: i64) -> Result<Arc<Work>> {
    match timeout_ms {
        -1 => Ok(Arc::new(work)),
        ms => match u64::try_from(ms) {
            Ok(ms) => Ok(Arc::new(work.with_timeout(Duration::from_millis(ms)))),
            Err(_) => Err(DistError::Invalid(format!(
                "timeout must be -1 (the process group's) or a number of milliseconds >= 0, \
                 but got {ms}"
            ))
            .into()),
        },
    }
}

/// The root's tensor in its list: the first, the only one (`single_tensor`).
fn check_root_tensor(root_tensor: i64) -> Result<()> {
    if root_tensor != 0 {
        return Err(DistError::Invalid(format!(
            "root_tensor must be 0 with one tensor per call, but got {root_tensor}"
        ))
        .into());
    }
    Ok(())
}

fn rank_arg(what: &str, r: i64, pg: &Arc<ProcessGroup>) -> Result<usize> {
    usize::try_from(r).map_err(|_| {
        DistError::Invalid(format!(
            "Invalid {what} rank: should be within the range of [0, {}), but got {r}.",
            pg.size()
        ))
        .into()
    })
}

fn tag_arg(tag: i64) -> Result<i32> {
    i32::try_from(tag).map_err(|_| {
        DistError::Invalid(format!("tag must fit in a 32-bit int, but got {tag}")).into()
    })
}

fn allreduce_cpu(
    tensors: &[Tensor],
    pg: &Arc<ProcessGroup>,
    op: &Arc<ReduceOp>,
    sparse_indices: Option<&Tensor>,
    _async_op: bool,
    timeout: i64,
) -> Result<(Vec<Tensor>, Arc<Work>)> {
    if sparse_indices.is_some() {
        return Err(DistError::Invalid(
            "ProcessGroupMPI does not support sparse allreduce (sparse_indices must be None)"
                .into(),
        )
        .into());
    }
    let t = single_tensor(tensors)?;
    let work = timed(pg.all_reduce(t, **op), timeout)?;
    Ok((tensors.to_vec(), work))
}

fn broadcast_cpu(
    tensors: &[Tensor],
    pg: &Arc<ProcessGroup>,
    root_rank: i64,
    root_tensor: i64,
    _async_op: bool,
    timeout: i64,
) -> Result<(Vec<Tensor>, Arc<Work>)> {
    let t = single_tensor(tensors)?;
    check_root_tensor(root_tensor)?;
    let root = rank_arg("root", root_rank, pg)?;
    let work = timed(pg.broadcast(t, root), timeout)?;
    Ok((tensors.to_vec(), work))
}

fn allgather_base_cpu(
    output: &Tensor,
    input: &Tensor,
    pg: &Arc<ProcessGroup>,
    _async_op: bool,
    timeout: i64,
) -> Result<(Tensor, Arc<Work>)> {
    let work = timed(pg.all_gather_into_tensor(output, input), timeout)?;
    Ok((output.clone(), work))
}

fn reduce_scatter_base_cpu(
    output: &Tensor,
    input: &Tensor,
    pg: &Arc<ProcessGroup>,
    op: &Arc<ReduceOp>,
    _async_op: bool,
    timeout: i64,
) -> Result<(Tensor, Arc<Work>)> {
    let work = timed(pg.reduce_scatter_tensor(output, input, **op), timeout)?;
    Ok((output.clone(), work))
}

fn reduce_cpu(
    tensors: &[Tensor],
    pg: &Arc<ProcessGroup>,
    op: &Arc<ReduceOp>,
    root_rank: i64,
    root_tensor: i64,
    _async_op: bool,
    timeout: i64,
) -> Result<Arc<Work>> {
    let t = single_tensor(tensors)?;
    check_root_tensor(root_tensor)?;
    let root = rank_arg("root", root_rank, pg)?;
    timed(pg.reduce(t, root, **op), timeout)
}

#[allow(clippy::too_many_arguments)] // the operator's schema
fn alltoall_base_cpu(
    output: &Tensor,
    input: &Tensor,
    pg: &Arc<ProcessGroup>,
    output_split_sizes: &[i64],
    input_split_sizes: &[i64],
    _async_op: bool,
    timeout: i64,
) -> Result<Arc<Work>> {
    let work = pg.all_to_all_single(output, input, output_split_sizes, input_split_sizes);
    timed(work, timeout)
}

fn barrier_cpu(
    _tensor: &Tensor,
    pg: &Arc<ProcessGroup>,
    _device_ids: &[i64],
    _async_op: bool,
    timeout: i64,
) -> Result<Arc<Work>> {
    timed(pg.barrier(), timeout)
}

fn send_cpu(tensors: &[Tensor], pg: &Arc<ProcessGroup>, dst: i64, tag: i64) -> Result<Arc<Work>> {
    let t = single_tensor(tensors)?;
    Ok(Arc::new(pg.send(
        t,
        rank_arg("destination", dst, pg)?,
        tag_arg(tag)?,
    )))
}

fn recv_cpu(tensors: &[Tensor], pg: &Arc<ProcessGroup>, src: i64, tag: i64) -> Result<Arc<Work>> {
    let t = single_tensor(tensors)?;
    Ok(Arc::new(pg.recv(
        t,
        rank_arg("source", src, pg)?,
        tag_arg(tag)?,
    )))
}

fn fake_work() -> Arc<Work> {
    Arc::new(Work::completed("FakeWork"))
}

fn allreduce_meta(
    tensors: &[Tensor],
    _pg: &Arc<ProcessGroup>,
    _op: &Arc<ReduceOp>,
    _sparse_indices: Option<&Tensor>,
    _async_op: bool,
    _timeout: i64,
) -> Result<(Vec<Tensor>, Arc<Work>)> {
    Ok((tensors.to_vec(), fake_work()))
}

fn broadcast_meta(
    tensors: &[Tensor],
    _pg: &Arc<ProcessGroup>,
    _root_rank: i64,
    _root_tensor: i64,
    _async_op: bool,
    _timeout: i64,
) -> Result<(Vec<Tensor>, Arc<Work>)> {
    Ok((tensors.to_vec(), fake_work()))
}

fn allgather_base_meta(
    output: &Tensor,
    _input: &Tensor,
    _pg: &Arc<ProcessGroup>,
    _async_op: bool,
    _timeout: i64,
) -> Result<(Tensor, Arc<Work>)> {
    Ok((output.clone(), fake_work()))
}

fn reduce_scatter_base_meta(
    output: &Tensor,
    _input: &Tensor,
    _pg: &Arc<ProcessGroup>,
    _op: &Arc<ReduceOp>,
    _async_op: bool,
    _timeout: i64,
) -> Result<(Tensor, Arc<Work>)> {
    Ok((output.clone(), fake_work()))
}

#[allow(clippy::too_many_arguments)] // the operator's schema
fn reduce_meta(
    _tensors: &[Tensor],
    _pg: &Arc<ProcessGroup>,
    _op: &Arc<ReduceOp>,
    _root_rank: i64,
    _root_tensor: i64,
    _async_op: bool,
    _timeout: i64,
) -> Result<Arc<Work>> {
    Ok(fake_work())
}

fn alltoall_base_meta(
    _output: &Tensor,
    _input: &Tensor,
    _pg: &Arc<ProcessGroup>,
    _output_split_sizes: &[i64],
    _input_split_sizes: &[i64],
    _async_op: bool,
    _timeout: i64,
) -> Result<Arc<Work>> {
    Ok(fake_work())
}

fn barrier_meta(
    _tensor: &Tensor,
    _pg: &Arc<ProcessGroup>,
    _device_ids: &[i64],
    _async_op: bool,
    _timeout: i64,
) -> Result<Arc<Work>> {
    Ok(fake_work())
}

fn point_to_point_meta(
    _tensors: &[Tensor],
    _pg: &Arc<ProcessGroup>,
    _peer: i64,
    _tag: i64,
) -> Result<Arc<Work>> {
    Ok(fake_work())
}

/// Calls `c10d::NAME` through the dispatcher with `args` (the defaults PyTorch's Python layer
/// passes included); the returned `Work`.
fn call(name: &str, args: Vec<IValue>) -> Result<Work> {
    let op = Dispatcher::global().find_schema_or_throw(&format!("c10d::{name}"))?;
    let mut stack: Stack = args;
    op.call_boxed(&mut stack)?;
    match stack.pop() {
        Some(IValue::Object(o)) if o.downcast::<Work>().is_some() => {
            Ok(Work::clone(o.downcast::<Work>().expect("tested above")))
        }
        other => Err(DistError::Backend(format!(
            "c10d::{name} returned {other:?} instead of a Work"
        ))
        .into()),
    }
}

fn group(pg: &Arc<ProcessGroup>) -> IValue {
    IValue::Object(Object::new(pg.clone()))
}

/// `dist.all_reduce(t, op, group, async_op=True)`: `c10d::allreduce_` on `t`.
pub fn allreduce_(t: &Tensor, op: ReduceOp, pg: &Arc<ProcessGroup>) -> Result<Work> {
    call(
        "allreduce_",
        vec![
            vec![t.clone()].into(),
            group(pg),
            IValue::Object(Object::new(Arc::new(op))),
            IValue::None,
            true.into(),
            (-1i64).into(),
        ],
    )
}

/// `dist.broadcast(t, src, group, async_op=True)`: `c10d::broadcast_` on `t`.
pub fn broadcast_(t: &Tensor, src: i64, pg: &Arc<ProcessGroup>) -> Result<Work> {
    call(
        "broadcast_",
        vec![
            vec![t.clone()].into(),
            group(pg),
            src.into(),
            0i64.into(),
            true.into(),
            (-1i64).into(),
        ],
    )
}

/// `dist.all_gather_into_tensor(output, input, group, async_op=True)`.
pub fn allgather_base_(output: &Tensor, input: &Tensor, pg: &Arc<ProcessGroup>) -> Result<Work> {
    call(
        "_allgather_base_",
        vec![
            output.into(),
            input.into(),
            group(pg),
            true.into(),
            (-1i64).into(),
        ],
    )
}

/// `dist.reduce_scatter_tensor(output, input, op, group, async_op=True)`.
pub fn reduce_scatter_base_(
    output: &Tensor,
    input: &Tensor,
    op: ReduceOp,
    pg: &Arc<ProcessGroup>,
) -> Result<Work> {
    call(
        "_reduce_scatter_base_",
        vec![
            output.into(),
            input.into(),
            group(pg),
            IValue::Object(Object::new(Arc::new(op))),
            true.into(),
            (-1i64).into(),
        ],
    )
}

/// `dist.reduce(t, dst, op, group, async_op=True)`: `c10d::reduce_` on `t`.
pub fn reduce_(t: &Tensor, dst: i64, op: ReduceOp, pg: &Arc<ProcessGroup>) -> Result<Work> {
    call(
        "reduce_",
        vec![
            vec![t.clone()].into(),
            group(pg),
            IValue::Object(Object::new(Arc::new(op))),
            dst.into(),
            0i64.into(),
            true.into(),
            (-1i64).into(),
        ],
    )
}

/// `dist.all_to_all_single(output, input, output_split_sizes, input_split_sizes, group,
/// async_op=True)`: `c10d::alltoall_base_`.
pub fn alltoall_base_(
    output: &Tensor,
    input: &Tensor,
    output_split_sizes: &[i64],
    input_split_sizes: &[i64],
    pg: &Arc<ProcessGroup>,
) -> Result<Work> {
    call(
        "alltoall_base_",
        vec![
            output.into(),
            input.into(),
            group(pg),
            output_split_sizes.to_vec().into(),
            input_split_sizes.to_vec().into(),
            true.into(),
            (-1i64).into(),
        ],
    )
}
