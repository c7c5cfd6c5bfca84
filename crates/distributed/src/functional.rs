//! The collectives as dispatcher operators: PyTorch's `_c10d_functional` namespace (the
//! functional collectives that return new tensors, their in-place forms, and `wait_tensor`).
//!
//! Their CPU kernels launch the collective on the group registered under `group_name` and
//! return at once; `wait_tensor` waits for the collective that writes its argument. Their Meta
//! kernels give the output shapes, so the lazy backend captures them into its graphs (and
//! runs them when the graph runs) and the tracer records them like any operator.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use switchboard_dispatcher::{library, Dispatcher, IValue, KernelFunction, Result, Stack};
use switchboard_tensor::{Device, Tensor};

use crate::buffer::Buffer;
use crate::error::DistError;
use crate::process_group::ProcessGroup;
use crate::reduce_op::ReduceOp;
use crate::registry::resolve_process_group;
use crate::work::Work;

/// The schemas, as PyTorch 2.15 defines them (torch/csrc/distributed/c10d/Functional.cpp).
pub const SCHEMAS: [&str; 8] = [
    "all_reduce(Tensor input, str reduce_op, str group_name) -> Tensor",
    "all_reduce_(Tensor(a!) input, str reduce_op, str group_name) -> Tensor(a!)",
    "all_gather_into_tensor(Tensor input, int group_size, str group_name) -> Tensor",
    "reduce_scatter_tensor(Tensor input, str reduce_op, int group_size, str group_name) -> Tensor",
    "broadcast(Tensor input, int src, str group_name) -> Tensor",
    "broadcast_(Tensor(a!) input, int src, str group_name) -> Tensor(a!)",
    "all_to_all_single(Tensor input, SymInt[] output_split_sizes, SymInt[] input_split_sizes, \
     str group_name) -> Tensor",
    "wait_tensor(Tensor tensor) -> Tensor",
];

library!(DEF _c10d_functional, |lib| {
    for s in SCHEMAS {
        lib.def(s)?;
    }
    Ok(())
});

library!(IMPL _c10d_functional, CPU, |lib| {
    lib.impl_("all_reduce", None, KernelFunction::from_fn(all_reduce_cpu))?;
    lib.impl_("all_reduce_", None, KernelFunction::from_fn(all_reduce_in_place_cpu))?;
    lib.impl_(
        "all_gather_into_tensor",
        None,
        KernelFunction::from_fn(all_gather_into_tensor_cpu),
    )?;
    lib.impl_(
        "reduce_scatter_tensor",
        None,
        KernelFunction::from_fn(reduce_scatter_tensor_cpu),
    )?;
    lib.impl_("broadcast", None, KernelFunction::from_fn(broadcast_cpu))?;
    lib.impl_("broadcast_", None, KernelFunction::from_fn(broadcast_in_place_cpu))?;
    lib.impl_(
        "all_to_all_single",
        None,
        KernelFunction::from_fn(all_to_all_single_cpu),
    )?;
    lib.impl_("wait_tensor", None, KernelFunction::from_fn(wait_tensor_cpu))?;
    Ok(())
});

library!(IMPL _c10d_functional, Meta, |lib| {
    lib.impl_("all_reduce", None, KernelFunction::from_fn(all_reduce_meta))?;
    lib.impl_("all_reduce_", None, KernelFunction::from_fn(in_place_meta))?;
    lib.impl_(
        "all_gather_into_tensor",
        None,
        KernelFunction::from_fn(all_gather_into_tensor_meta),
    )?;
    lib.impl_(
        "reduce_scatter_tensor",
        None,
        KernelFunction::from_fn(reduce_scatter_tensor_meta),
    )?;
    lib.impl_("broadcast", None, KernelFunction::from_fn(broadcast_meta))?;
    lib.impl_("broadcast_", None, KernelFunction::from_fn(broadcast_in_place_meta))?;
    lib.impl_(
        "all_to_all_single",
        None,
        KernelFunction::from_fn(all_to_all_single_meta),
    )?;
    lib.impl_("wait_tensor", None, KernelFunction::from_fn(wait_tensor_meta))?;
    Ok(())
});

/// Calls `_c10d_functional::NAME` through the dispatcher with `args`; its one tensor result.
fn call(name: &str, args: Vec<IValue>) -> Result<Tensor> {
    call_op(&format!("_c10d_functional::{name}"), args)
}

/// Calls the operator `name` through the dispatcher with `args`; its one tensor result.
pub(crate) fn call_op(name: &str, args: Vec<IValue>) -> Result<Tensor> {
    let op = Dispatcher::global().find_schema_or_throw(name)?;
    let mut stack: Stack = args;
    op.call_boxed(&mut stack)?;
    match stack.pop() {
        Some(IValue::Tensor(t)) => Ok(t),
        other => {
            Err(DistError::Backend(format!("{name} returned {other:?} instead of a tensor")).into())
        }
    }
}

pub(crate) fn s(v: &str) -> IValue {
    IValue::Str(Box::new(v.to_string()))
}

/// `_c10d_functional::all_reduce`: a new tensor, the reduction of `input` over the group
/// registered as `group_name`, once [`wait_tensor`] returned it.
pub fn all_reduce(input: &Tensor, op: ReduceOp, group_name: &str) -> Result<Tensor> {
    call(
        "all_reduce",
        vec![IValue::Tensor(input.clone()), s(op.name()), s(group_name)],
    )
}

/// `_c10d_functional::all_reduce_`: `input` reduced in place (after [`wait_tensor`]).
pub fn all_reduce_(input: &Tensor, op: ReduceOp, group_name: &str) -> Result<Tensor> {
    call(
        "all_reduce_",
        vec![IValue::Tensor(input.clone()), s(op.name()), s(group_name)],
    )
}

/// `_c10d_functional::all_gather_into_tensor`: every rank's `input`, along the first dimension.
pub fn all_gather_into_tensor(input: &Tensor, group_size: i64, group_name: &str) -> Result<Tensor> {
    call(
        "all_gather_into_tensor",
        vec![
            IValue::Tensor(input.clone()),
            IValue::Int(group_size),
            s(group_name),
        ],
    )
}

/// `_c10d_functional::reduce_scatter_tensor`: this rank's chunk of the reduction.
pub fn reduce_scatter_tensor(
    input: &Tensor,
    op: ReduceOp,
    group_size: i64,
    group_name: &str,
) -> Result<Tensor> {
    call(
        "reduce_scatter_tensor",
        vec![
            IValue::Tensor(input.clone()),
            s(op.name()),
            IValue::Int(group_size),
            s(group_name),
        ],
    )
}

/// `_c10d_functional::broadcast`: a new tensor holding rank `src`'s `input`.
pub fn broadcast(input: &Tensor, src: i64, group_name: &str) -> Result<Tensor> {
    call(
        "broadcast",
        vec![
            IValue::Tensor(input.clone()),
            IValue::Int(src),
            s(group_name),
        ],
    )
}

/// `_c10d_functional::broadcast_`: `input` overwritten with rank `src`'s.
pub fn broadcast_(input: &Tensor, src: i64, group_name: &str) -> Result<Tensor> {
    call(
        "broadcast_",
        vec![
            IValue::Tensor(input.clone()),
            IValue::Int(src),
            s(group_name),
        ],
    )
}

/// `_c10d_functional::all_to_all_single`: `input`'s rows scattered to the ranks
/// (`input_split_sizes[r]` rows to rank `r`) and theirs gathered (`output_split_sizes[r]` rows
/// from rank `r`), in a new tensor; empty split lists mean equal shares.
pub fn all_to_all_single(
    input: &Tensor,
    output_split_sizes: &[i64],
    input_split_sizes: &[i64],
    group_name: &str,
) -> Result<Tensor> {
    call(
        "all_to_all_single",
        vec![
            IValue::Tensor(input.clone()),
            output_split_sizes.to_vec().into(),
            input_split_sizes.to_vec().into(),
            s(group_name),
        ],
    )
}

/// `_c10d_functional::wait_tensor`: waits for the collective writing `t`, then returns it.
pub fn wait_tensor(t: &Tensor) -> Result<Tensor> {
    call("wait_tensor", vec![IValue::Tensor(t.clone())])
}

// Note [Work registry]
// As PyTorch's: a functional collective returns its output at once and files its `Work` under
// the output's storage; `wait_tensor` on that output (or a view of it: same storage) takes the
// work out and waits, after which the data is the collective's result. A tensor no collective
// writes waits for nothing.

static WORKS: Mutex<Option<HashMap<usize, Work>>> = Mutex::new(None);

fn works() -> MutexGuard<'static, Option<HashMap<usize, Work>>> {
    WORKS.lock().unwrap_or_else(|e| e.into_inner())
}

fn storage_key(t: &Tensor) -> usize {
    t.storage().data_ptr() as usize
}

fn register_work(t: &Tensor, w: Work) {
    works()
        .get_or_insert_with(HashMap::new)
        .insert(storage_key(t), w);
}

/// The number of collectives launched through the operators and not waited for yet.
pub fn pending_works() -> usize {
    works().as_ref().map_or(0, HashMap::len)
}

fn group(name: &str) -> Result<std::sync::Arc<ProcessGroup>> {
    Ok(resolve_process_group(name)?)
}

/// A contiguous copy of `t`, made without an operator call (the kernel's output).
fn contiguous_copy(t: &Tensor) -> std::result::Result<Tensor, DistError> {
    Buffer::from_tensor(t)?.into_tensor(t.sizes())
}

fn check_group_size(op: &str, pg: &ProcessGroup, group_size: i64) -> Result<()> {
    if usize::try_from(group_size).ok() != Some(pg.size()) {
        return Err(DistError::Invalid(format!(
            "{op}: group_size {group_size} does not match the size of process group {} ({})",
            pg.name(),
            pg.size()
        ))
        .into());
    }
    Ok(())
}

fn all_reduce_cpu(input: &Tensor, reduce_op: &str, group_name: &str) -> Result<Tensor> {
    let out = contiguous_copy(input)?;
    all_reduce_in_place_cpu(&out, reduce_op, group_name)
}

fn all_reduce_in_place_cpu(input: &Tensor, reduce_op: &str, group_name: &str) -> Result<Tensor> {
    let op = ReduceOp::parse(reduce_op)?;
    let work = group(group_name)?.all_reduce(input, op);
    register_work(input, work);
    Ok(input.clone())
}

fn all_gather_into_tensor_cpu(input: &Tensor, group_size: i64, group_name: &str) -> Result<Tensor> {
    let pg = group(group_name)?;
    check_group_size("all_gather_into_tensor", &pg, group_size)?;
    let out = Tensor::empty(&gathered_sizes(input, group_size)?, input.dtype())?;
    let work = pg.all_gather_into_tensor(&out, input);
    register_work(&out, work);
    Ok(out)
}

fn reduce_scatter_tensor_cpu(
    input: &Tensor,
    reduce_op: &str,
    group_size: i64,
    group_name: &str,
) -> Result<Tensor> {
    let op = ReduceOp::parse(reduce_op)?;
    let pg = group(group_name)?;
    check_group_size("reduce_scatter_tensor", &pg, group_size)?;
    let out = Tensor::empty(&scattered_sizes(input, group_size)?, input.dtype())?;
    let work = pg.reduce_scatter_tensor(&out, input, op);
    register_work(&out, work);
    Ok(out)
}

fn broadcast_cpu(input: &Tensor, src: i64, group_name: &str) -> Result<Tensor> {
    let out = contiguous_copy(input)?;
    broadcast_in_place_cpu(&out, src, group_name)
}

fn broadcast_in_place_cpu(input: &Tensor, src: i64, group_name: &str) -> Result<Tensor> {
    let pg = group(group_name)?;
    let root = usize::try_from(src).map_err(|_| {
        DistError::Invalid(format!(
            "Invalid root rank: should be within the range of [0, {}), but got {src}.",
            pg.size()
        ))
    })?;
    let work = pg.broadcast(input, root);
    register_work(input, work);
    Ok(input.clone())
}

/// The output sizes of `all_to_all_single`: `input`'s, with the first dimension the sum of
/// `output_split_sizes` when they are given (PyTorch's meta function).
fn all_to_all_sizes(input: &Tensor, output_split_sizes: &[i64]) -> Result<Vec<i64>> {
    let mut sizes = input.sizes().to_vec();
    if output_split_sizes.is_empty() {
        return Ok(sizes);
    }
    let mut rows: i64 = 0;
    for &s in output_split_sizes {
        if s < 0 {
            return Err(
                DistError::Invalid(format!("split sizes must be >= 0, but got {s}")).into(),
            );
        }
        rows = rows.checked_add(s).ok_or_else(|| {
            DistError::Invalid("all_to_all_single: the split sizes overflow".into())
        })?;
    }
    match sizes.first_mut() {
        Some(first) => *first = rows,
        None => {
            return Err(DistError::Invalid(
                "all_to_all_single: a 0-dim input has no rows to split".into(),
            )
            .into())
        }
    }
    Ok(sizes)
}

fn all_to_all_single_cpu(
    input: &Tensor,
    output_split_sizes: &[i64],
    input_split_sizes: &[i64],
    group_name: &str,
) -> Result<Tensor> {
    let pg = group(group_name)?;
    let out = Tensor::empty(&all_to_all_sizes(input, output_split_sizes)?, input.dtype())?;
    let input = contiguous_copy(input)?;
    let work = pg.all_to_all_single(&out, &input, output_split_sizes, input_split_sizes);
    register_work(&out, work);
    Ok(out)
}

fn all_to_all_single_meta(
    input: &Tensor,
    output_split_sizes: &[i64],
    _input_split_sizes: &[i64],
    _group_name: &str,
) -> Result<Tensor> {
    let sizes = all_to_all_sizes(input, output_split_sizes)?;
    Ok(Tensor::empty_on(&sizes, input.dtype(), Device::META)?)
}

fn wait_tensor_cpu(t: &Tensor) -> Result<Tensor> {
    let work = works().as_mut().and_then(|m| m.remove(&storage_key(t)));
    if let Some(w) = work {
        w.wait()?;
    }
    Ok(t.clone())
}

/// `input`'s sizes with the first dimension times `group_size` (a 0-d input gathers into
/// `[group_size]`).
fn gathered_sizes(input: &Tensor, group_size: i64) -> Result<Vec<i64>> {
    let mut sizes = input.sizes().to_vec();
    match sizes.first_mut() {
        Some(d0) => {
            *d0 = d0.checked_mul(group_size).ok_or_else(|| {
                DistError::Invalid(format!(
                    "all_gather_into_tensor: {d0} x {group_size} rows overflow int64"
                ))
            })?
        }
        None => sizes.push(group_size),
    }
    Ok(sizes)
}

/// `input`'s sizes with the first dimension divided by `group_size`.
fn scattered_sizes(input: &Tensor, group_size: i64) -> Result<Vec<i64>> {
    let mut sizes = input.sizes().to_vec();
    match sizes.first_mut() {
        Some(d0) if group_size > 0 && *d0 % group_size == 0 => *d0 /= group_size,
        _ => {
            return Err(DistError::Invalid(format!(
                "reduce_scatter_tensor: the first dimension of the input (sizes {:?}) must be \
                 divisible by group_size ({group_size})",
                input.sizes()
            ))
            .into())
        }
    }
    Ok(sizes)
}

fn meta_empty(sizes: &[i64], like: &Tensor) -> Result<Tensor> {
    Ok(Tensor::empty_on(sizes, like.dtype(), Device::META)?)
}

fn all_reduce_meta(input: &Tensor, reduce_op: &str, _group_name: &str) -> Result<Tensor> {
    ReduceOp::parse(reduce_op)?;
    meta_empty(input.sizes(), input)
}

fn in_place_meta(input: &Tensor, reduce_op: &str, _group_name: &str) -> Result<Tensor> {
    ReduceOp::parse(reduce_op)?;
    Ok(input.clone())
}

fn all_gather_into_tensor_meta(
    input: &Tensor,
    group_size: i64,
    _group_name: &str,
) -> Result<Tensor> {
    meta_empty(&gathered_sizes(input, group_size)?, input)
}

fn reduce_scatter_tensor_meta(
    input: &Tensor,
    reduce_op: &str,
    group_size: i64,
    _group_name: &str,
) -> Result<Tensor> {
    ReduceOp::parse(reduce_op)?;
    meta_empty(&scattered_sizes(input, group_size)?, input)
}

fn broadcast_meta(input: &Tensor, _src: i64, _group_name: &str) -> Result<Tensor> {
    meta_empty(input.sizes(), input)
}

fn broadcast_in_place_meta(input: &Tensor, _src: i64, _group_name: &str) -> Result<Tensor> {
    Ok(input.clone())
}

// Note [wait_tensor's result on Meta]
// The schema returns a plain `Tensor` (no alias annotation), though the CPU kernel returns its
// argument, as PyTorch's does. On Meta the result is a new tensor of the same metadata: a
// capturing backend then records the wait as a node whose result later calls consume, so
// running the captured graph waits before they read (an aliasing result would be taken for a
// view and leave the wait out of the graph).
fn wait_tensor_meta(t: &Tensor) -> Result<Tensor> {
    meta_empty(t.sizes(), t)
}
