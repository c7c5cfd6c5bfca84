//! Capturing a call on lazy tensors as a node of the pending graph (interception layers 1 and
//! 2 share this path): output metadata from a shape rule (Note [Shape rules]) or the
//! operator's Meta kernel (Note [Output metadata of a capture]), arguments as graph values and
//! constants, writes as Note [Lazy values] says.

use std::sync::Arc;

use smallvec::SmallVec;
use switchboard_dispatcher::{
    DispatchError, DispatchErrorKind, DispatchKey, DispatchKeySet, IValue, OperatorHandle, Result,
    Stack, ThinVec,
};
use switchboard_graph::{unreturned_writes, Arg, NodeId, Output, Source, Value};
use switchboard_tensor::{Device, Storage, Tensor, TensorError, VersionCounter};

use crate::args::{check_devices, classify, ArgKind};
use crate::backend::LazyBackend;
use crate::intercepted_op::InterceptedOp;
use crate::pending_graph::PendingGraph;
use crate::rules::{self, RuledCall};
use crate::shapes::{MetaReturn, OutMeta, Shapes};
use crate::storage::{lazy_meta, meta_like, storage_of, view_error, LazyStorage};

/// The key set the shape functions run with.
const META: DispatchKeySet = DispatchKeySet::from_key(DispatchKey::Meta);

/// The metadata of a lazy tensor of `device` laid out as `t` (a meta tensor a shape function
/// returned).
fn out_meta(t: &Tensor, device: Device) -> OutMeta {
    (Arc::new(lazy_meta(t, device)), t.storage().nbytes())
}

/// Runs the Meta kernel of the call on tensors standing for its arguments and records its
/// returns (Note [Output metadata of a capture]).
fn run_meta(
    op: &OperatorHandle,
    kinds: &[ArgKind<'_>],
    accepts_host: bool,
    device: Device,
) -> Result<Shapes> {
    let twin = |k: &ArgKind| -> Result<Tensor> {
        match k {
            ArgKind::Lazy(t, ls) => ls.meta_twin(t),
            // A zero-dim CPU tensor stays itself (shape functions accept CPU scalars); a host
            // tensor copied in gets a meta stand-in.
            ArgKind::Host(t) if t.dim() == 0 && !accepts_host => Ok(t.clone()),
            ArgKind::Host(t) => meta_like(t),
            _ => unreachable!("tensor arguments only"),
        }
    };
    let mut stack: Stack = Vec::with_capacity(kinds.len());
    // The storage each top-level tensor argument's stand-in has, to find aliased returns.
    let mut storages: SmallVec<[Option<Storage>; 6]> = SmallVec::new();
    for k in kinds {
        match k {
            ArgKind::Lazy(..) | ArgKind::Host(_) => {
                let t = twin(k)?;
                storages.push(Some(t.storage().clone()));
                stack.push(IValue::Tensor(t));
            }
            ArgKind::List(items, optional) => {
                storages.push(None);
                if *optional {
                    let ts: ThinVec<Option<Tensor>> = items
                        .iter()
                        .map(|i| i.as_ref().map(twin).transpose())
                        .collect::<Result<_>>()?;
                    stack.push(IValue::OptionalTensorList(ts));
                } else {
                    let ts: ThinVec<Tensor> =
                        items.iter().flatten().map(twin).collect::<Result<_>>()?;
                    stack.push(IValue::TensorList(ts));
                }
            }
            ArgKind::LazyDevice => {
                storages.push(None);
                stack.push(IValue::Device(Device::META));
            }
            ArgKind::Other(v) => {
                storages.push(None);
                stack.push((*v).clone());
            }
        }
    }
    op.redispatch_boxed(META, &mut stack)
        .map_err(|e| translate(e, device))?;
    Ok(stack
        .into_iter()
        .map(|r| match r {
            IValue::Tensor(t) => {
                let alias = storages
                    .iter()
                    .position(|s| s.as_ref().is_some_and(|s| Storage::ptr_eq(s, t.storage())))
                    .map(|k| k as u32);
                MetaReturn::Tensor {
                    meta: out_meta(&t, device),
                    alias,
                }
            }
            IValue::TensorList(ts) => {
                MetaReturn::List(ts.iter().map(|t| out_meta(t, device)).collect())
            }
            other => MetaReturn::Value(other),
        })
        .collect())
}

/// Shape functions report the devices of the meta tensors standing for lazy ones; say the
/// lazy device as eager would.
fn translate(e: DispatchError, device: Device) -> DispatchError {
    let on_lazy = |d: Device| if d == Device::META { device } else { d };
    match e.into_kind() {
        DispatchErrorKind::Tensor(TensorError::DeviceMismatch { first, second }) => {
            TensorError::DeviceMismatch {
                first: on_lazy(first),
                second: on_lazy(second),
            }
            .into()
        }
        kind => kind.into(),
    }
}

/// The graph argument of a classified argument of a call on `device`.
fn graph_arg(ctx: &mut PendingGraph, k: &ArgKind<'_>, device: Device) -> Result<Arg> {
    Ok(match k {
        ArgKind::Lazy(t, ls) => Arg::Value(ctx.read(t, ls)?),
        ArgKind::Host(t) => Arg::Value(ctx.host_input(t.clone())),
        ArgKind::List(items, optional) => {
            let mut values = Vec::with_capacity(items.len());
            for item in items {
                values.push(match item {
                    Some(ArgKind::Lazy(t, ls)) => Some(ctx.read(t, ls)?),
                    Some(ArgKind::Host(t)) => Some(ctx.host_input(t.clone())),
                    _ => None,
                });
            }
            if *optional {
                Arg::OptionalValues(values)
            } else {
                Arg::Values(values.into_iter().flatten().collect())
            }
        }
        ArgKind::LazyDevice => Arg::Const(IValue::Device(device)),
        ArgKind::Other(v) => Arg::Const((*v).clone()),
    })
}

/// A storage the call writes whole and the node output holding its new value.
type StorageWrite = (Arc<LazyStorage>, u32);

/// How a return becomes a lazy tensor once the node exists.
enum ReturnToMake {
    /// Already final (a written argument, a passed-through value).
    Done(IValue),
    /// A fresh storage holding output `o`, with its own version counter or the given one.
    Fresh(OutMeta, u32, Option<VersionCounter>),
    /// A list of fresh storages.
    FreshList(Vec<(OutMeta, u32)>),
}

/// Captures a call of `op` whose arguments are on `stack` on `backend`'s device, leaving its
/// returns there (see the module documentation). Errors of the shape function (shapes, dtypes, devices) are the
/// call's errors, with eager's messages; nothing is recorded then.
pub(crate) fn capture(
    backend: &'static LazyBackend,
    op: &OperatorHandle,
    info: &InterceptedOp,
    stack: &mut Stack,
) -> Result<()> {
    if let Some(call) = info.rule.and_then(|rule| rules::infer(rule, stack)) {
        let constants = stack[call.operands().len()..]
            .iter()
            .map(|c| Arg::Const(c.clone()));
        let t = record_ruled(op, call, constants)?;
        stack.clear();
        stack.push(IValue::Tensor(t));
        return Ok(());
    }
    check_devices(stack, info.accepts_host)?;
    let returns = {
        let kinds = stack
            .iter()
            .map(|v| classify(v, backend))
            .collect::<Result<SmallVec<[_; 6]>>>()?;
        record(backend, op, info, &kinds)?
    };
    stack.clear();
    stack.extend(returns);
    Ok(())
}

/// Records a call its shape rule applies to (`constants`: its arguments after the tensor
/// operands) and returns its result: the general path below without its cases (one fresh
/// result, no write, no list, no host tensor), and with no allocation but the result's once
/// the pending graph's memory is warm. The boxed path and the typed kernels (Note [Unboxed
/// capture]) share it.
// Inlined into the typed kernels' fast path, with the shape rules and the fresh tensor, so that
// a capture is one function: each call boundary on it cost ~20 instructions (Note [Unboxed
// capture]).
#[inline(always)]
pub(crate) fn record_ruled(
    op: &OperatorHandle,
    call: RuledCall<'_>,
    constants: impl Iterator<Item = Arg>,
) -> Result<Tensor> {
    let operands = call.operands();
    let backend = operands[0].1.backend;
    let mut ctx = backend.lock_pending_graph();
    let mut values = [Value::new(NodeId(0), 0); 2];
    for (v, &(t, ls, _)) in values.iter_mut().zip(operands) {
        *v = ctx.read(t, ls)?;
    }
    let n = operands.len();
    let (meta, nbytes) = call.out;
    let output = Output::ret(0, meta.clone());
    let id = ctx.graph.add_call_unchecked_after(
        op.clone(),
        &values[..n],
        constants,
        std::iter::once(output),
    );
    backend.stats.nodes_captured.inc();
    ctx.fresh(backend, meta, nbytes, Value::new(id, 0), None)
}

/// Records the call whose arguments are `kinds` on `backend`'s device and returns its returns.
fn record(
    backend: &'static LazyBackend,
    op: &OperatorHandle,
    info: &InterceptedOp,
    kinds: &[ArgKind<'_>],
) -> Result<SmallVec<[IValue; 2]>> {
    let device = backend.device();
    let shapes = run_meta(op, kinds, info.accepts_host, device)?;

    let al = &info.semantics;
    let lazy_arg = |k: usize| match kinds.get(k) {
        Some(ArgKind::Lazy(t, _)) => Some(*t),
        _ => None,
    };
    let mut outputs: SmallVec<[Output; 2]> = SmallVec::new();
    let mut writes: SmallVec<[StorageWrite; 1]> = SmallVec::new();
    let mut to_make: SmallVec<[ReturnToMake; 2]> = SmallVec::new();
    for (r, ret) in shapes.iter().enumerate() {
        match ret {
            MetaReturn::Tensor { meta, alias } => {
                let write = al.return_writes.get(r).copied().unwrap_or(false);
                match alias.and_then(|k| lazy_arg(k as usize)) {
                    // A value written whole, returned (`add_`, `copy_`, `out=`).
                    Some(t) if write && meta.0.matches_layout(t) => {
                        let o = outputs.len() as u32;
                        outputs.push(Output::ret(r as u32, meta.0.clone()));
                        writes.push((storage_of(t)?, o));
                        to_make.push(ReturnToMake::Done(IValue::Tensor(t.clone())));
                    }
                    // A value an out= kernel resized (Note [Functional resize] in
                    // switchboard-tensor): the resized handle is a new value, keeping the
                    // out tensor's version counter.
                    Some(t) if write => {
                        let o = outputs.len() as u32;
                        outputs.push(Output::ret(r as u32, meta.0.clone()));
                        let version = Some(t.version_counter());
                        to_make.push(ReturnToMake::Fresh(meta.clone(), o, version));
                    }
                    Some(_) => return Err(view_error(&info.name)),
                    None => {
                        let o = outputs.len() as u32;
                        outputs.push(Output::ret(r as u32, meta.0.clone()));
                        // An `out=` result in new memory (the out tensor grew, Note
                        // [Functional resize]) keeps the out tensor's version counter.
                        let version = match al.return_aliases.get(r).copied().flatten() {
                            Some(k) if write => lazy_arg(k).map(|t| t.version_counter()),
                            _ => None,
                        };
                        to_make.push(ReturnToMake::Fresh(meta.clone(), o, version));
                    }
                }
            }
            MetaReturn::List(metas) => {
                let mut list = Vec::with_capacity(metas.len());
                for (j, m) in metas.iter().enumerate() {
                    let o = outputs.len() as u32;
                    outputs.push(Output {
                        meta: m.0.clone(),
                        source: Source::ReturnItem(r as u32, j as u32),
                    });
                    list.push((m.clone(), o));
                }
                to_make.push(ReturnToMake::FreshList(list));
            }
            MetaReturn::Value(v) => to_make.push(ReturnToMake::Done(v.clone())),
        }
    }
    // Written arguments no return stands for: their new value is an output of the node too.
    for k in unreturned_writes(al) {
        if let Some(t) = lazy_arg(k) {
            let o = outputs.len() as u32;
            let m = Arc::new(lazy_meta(t, device));
            outputs.push(Output {
                meta: m.clone(),
                source: Source::Argument(k as u32),
            });
            writes.push((storage_of(t)?, o));
        }
    }

    let mut ctx = backend.lock_pending_graph();
    let id = if outputs.is_empty() {
        NodeId(u32::MAX) // views only: no node
    } else {
        let mut args: SmallVec<[Arg; 8]> = SmallVec::with_capacity(kinds.len());
        for k in kinds {
            args.push(graph_arg(&mut ctx, k, device)?);
        }
        backend.stats.nodes_captured.inc();
        ctx.graph.add_call_unchecked(op.clone(), args, outputs)
    };
    for (ls, o) in writes {
        ctx.write(&ls, Value::new(id, o));
    }
    let mut returns = SmallVec::with_capacity(to_make.len());
    for p in to_make {
        returns.push(match p {
            ReturnToMake::Done(v) => v,
            ReturnToMake::Fresh((m, nbytes), o, version) => {
                IValue::Tensor(ctx.fresh(backend, m, nbytes, Value::new(id, o), version)?)
            }
            ReturnToMake::FreshList(list) => {
                let mut ts = ThinVec::with_capacity(list.len());
                for (m, o) in list {
                    ts.push(ctx.fresh(backend, m.0, m.1, Value::new(id, o), None)?);
                }
                IValue::TensorList(ts)
            }
        });
    }
    Ok(returns)
}
