//! Capturing a call on lazy tensors as a node of the pending graph (interception layers 1 and
//! 2 share this path): output metadata from the operator's Meta kernel, arguments as graph
//! values and constants, writes and views as Note [Lazy mutations and views] says.

use std::sync::Arc;

use smallvec::SmallVec;
use switchboard_dispatcher::{
    DispatchError, DispatchErrorKind, DispatchKey, DispatchKeySet, IValue, OperatorHandle, Result,
    Stack,
};
use switchboard_graph::{Arg, NodeId, Output, Source, TensorMeta, Value};
use switchboard_keys::DeviceType;
use switchboard_tensor::{Device, Storage, Tensor, TensorBuilder, TensorError, VersionCounter};

use crate::context::{context, Context};
use crate::op_info::OpInfo;
use crate::stats::STATS;
use crate::storage::{meta_like, storage_of, view_tensor, Geometry, LazyStorage, DEVICE};

/// The key set the shape functions run with.
const META: DispatchKeySet = DispatchKeySet::from_key(DispatchKey::Meta);

/// An argument as the capture sees it.
enum ArgKind {
    /// A lazy tensor and its storage.
    Lazy(Tensor, Arc<LazyStorage>),
    /// A host tensor, snapshotted (it becomes a graph input).
    Host(Tensor),
    /// A list of lazy or host tensors.
    List(Vec<Option<ArgKind>>, bool),
    /// Anything else (a constant; lazy devices normalised to `lazy:0`).
    Other(IValue),
}

/// The result of a capture: the returns to leave on the stack.
pub(crate) struct Captured {
    pub returns: Stack,
    /// The node, if one was added (views add none).
    pub node: Option<NodeId>,
}

/// Whether `t` may take part in a call on lazy tensors without being lazy: a zero-dim CPU
/// tensor (PyTorch's rule for CPU scalars mixed with device tensors), or any CPU tensor for an
/// operator that copies host data in (`copy_`'s source).
fn host_ok(t: &Tensor, accepts_host: bool) -> bool {
    t.is_cpu() && (t.dim() == 0 || accepts_host)
}

/// "Expected all tensors to be on the same device, but found at least two devices, lazy:0
/// and cpu!", with the devices in argument order, as eager reports it.
fn check_devices(args: &[IValue], accepts_host: bool) -> Result<()> {
    let mut first: Option<Device> = None;
    let mut visit = |t: &Tensor| -> Result<()> {
        if t.is_cpu() && t.dim() == 0 {
            return Ok(());
        }
        let d = if t.device().ty == DeviceType::Lazy {
            DEVICE
        } else if host_ok(t, accepts_host) {
            return Ok(());
        } else {
            t.device()
        };
        match first {
            None => first = Some(d),
            Some(f) if f != d => {
                return Err(TensorError::invalid(format!(
                    "Expected all tensors to be on the same device, but found at least two \
                     devices, {f} and {d}!"
                ))
                .into())
            }
            Some(_) => {}
        }
        Ok(())
    };
    for a in args {
        match a {
            IValue::Tensor(t) => visit(t)?,
            IValue::TensorList(ts) => ts.iter().try_for_each(&mut visit)?,
            IValue::OptionalTensorList(ts) => ts.iter().flatten().try_for_each(&mut visit)?,
            _ => {}
        }
    }
    Ok(())
}

/// A copy of a host tensor that later writes to the original cannot change (eager would
/// have read it now); wrapped numbers stay wrapped numbers.
fn snapshot(t: &Tensor) -> Result<Tensor> {
    let c = t.deep_clone()?;
    Ok(if t.is_wrapped_number() {
        c.to_builder().wrapped_number(true).build()?
    } else {
        c
    })
}

fn classify(v: IValue, accepts_host: bool) -> Result<(ArgKind, IValue)> {
    let tensor = |t: Tensor| -> Result<(ArgKind, Tensor)> {
        if t.device().ty == DeviceType::Lazy {
            let ls = storage_of(&t)?;
            let twin = ls.meta_twin(&t)?;
            Ok((ArgKind::Lazy(t, ls), twin))
        } else {
            // A zero-dim CPU tensor stays itself for the shape function (which accepts CPU
            // scalars); a host tensor copied in gets a meta stand-in.
            let snap = snapshot(&t)?;
            let twin = if t.dim() == 0 && !accepts_host {
                snap.clone()
            } else {
                meta_like(&snap)?
            };
            Ok((ArgKind::Host(snap), twin))
        }
    };
    Ok(match v {
        IValue::Tensor(t) => {
            let (k, twin) = tensor(t)?;
            (k, IValue::Tensor(twin))
        }
        IValue::TensorList(ts) => {
            let mut kinds = Vec::with_capacity(ts.len());
            let mut twins = switchboard_dispatcher::ThinVec::with_capacity(ts.len());
            for t in ts {
                let (k, twin) = tensor(t)?;
                kinds.push(Some(k));
                twins.push(twin);
            }
            (ArgKind::List(kinds, false), IValue::TensorList(twins))
        }
        IValue::OptionalTensorList(ts) => {
            let mut kinds = Vec::with_capacity(ts.len());
            let mut twins = switchboard_dispatcher::ThinVec::with_capacity(ts.len());
            for t in ts {
                match t {
                    Some(t) => {
                        let (k, twin) = tensor(t)?;
                        kinds.push(Some(k));
                        twins.push(Some(twin));
                    }
                    None => {
                        kinds.push(None);
                        twins.push(None);
                    }
                }
            }
            (
                ArgKind::List(kinds, true),
                IValue::OptionalTensorList(twins),
            )
        }
        IValue::Device(d) if d.ty == DeviceType::Lazy => (
            ArgKind::Other(IValue::Device(DEVICE)),
            IValue::Device(Device::META),
        ),
        other => {
            let twin = other.clone();
            (ArgKind::Other(other), twin)
        }
    })
}

/// Shape functions report the devices of the meta tensors standing for lazy ones; say
/// `lazy:0` as eager would.
fn translate(e: DispatchError) -> DispatchError {
    let msg = e.to_string();
    if msg.contains("found at least two devices") && msg.contains("meta") {
        let fixed = msg
            .replace("devices, meta and", "devices, lazy:0 and")
            .replace(" and meta!", " and lazy:0!");
        return TensorError::invalid(fixed).into();
    }
    e
}

/// The graph argument of a classified argument.
fn graph_arg(ctx: &mut Context, k: &ArgKind) -> Result<Arg> {
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
        ArgKind::Other(v) => Arg::Const(v.clone()),
    })
}

fn lazy_meta(t: &Tensor) -> TensorMeta {
    TensorMeta {
        device: DEVICE,
        ..TensorMeta::of(t)
    }
}

/// How a return becomes a lazy tensor once the node exists.
enum Pending {
    /// Already final (a view, a passed-through value).
    Done(IValue),
    /// A fresh storage holding output `o` (meta tensor `meta`), with its own version counter
    /// or the given one.
    Fresh(Tensor, u32, Option<VersionCounter>),
    /// A list of fresh storages.
    FreshList(Vec<(Tensor, u32)>),
}

/// Captures a call of `op` whose arguments are on `stack` (see the module documentation).
/// Errors of the shape function (shapes, dtypes, devices) are the call's errors, with eager's
/// messages; nothing is recorded then.
pub(crate) fn capture(op: &OperatorHandle, info: &OpInfo, stack: &mut Stack) -> Result<Captured> {
    let accepts_host = accepts_host(info);
    check_devices(stack, accepts_host)?;
    let n = stack.len();
    let mut kinds: SmallVec<[ArgKind; 6]> = SmallVec::with_capacity(n);
    let mut meta_stack: Stack = Vec::with_capacity(n.max(2));
    for v in stack.drain(..) {
        let (k, twin) = classify(v, accepts_host)?;
        kinds.push(k);
        meta_stack.push(twin);
    }
    op.redispatch_boxed(META, &mut meta_stack)
        .map_err(translate)?;

    let al = &info.aliasing;
    let mut ctx = context();
    let id = NodeId(ctx.graph.len() as u32);
    let mut outputs: SmallVec<[Output; 2]> = SmallVec::new();
    let mut writes: SmallVec<[(Arc<LazyStorage>, Geometry, u32); 1]> = SmallVec::new();
    let mut pending: SmallVec<[Pending; 2]> = SmallVec::with_capacity(meta_stack.len());
    let lazy_arg = |k: usize| match kinds.get(k) {
        Some(ArgKind::Lazy(t, ls)) => Some((t, ls)),
        _ => None,
    };
    for (r, ret) in meta_stack.into_iter().enumerate() {
        match ret {
            IValue::Tensor(mt) => {
                let alias = al.return_aliases.get(r).copied().flatten();
                let write = al.return_writes.get(r).copied().unwrap_or(false);
                match alias.and_then(|k| lazy_arg(k).map(|a| (k, a))) {
                    Some((k, (t, ls))) if Storage::ptr_eq(mt.storage(), ls.meta.storage()) => {
                        let _ = k;
                        if write {
                            let o = outputs.len() as u32;
                            outputs.push(Output::ret(r as u32, lazy_meta(&mt)));
                            writes.push((ls.clone(), Geometry::of(&mt), o));
                        }
                        pending.push(Pending::Done(IValue::Tensor(view_tensor(t, &mt)?)));
                    }
                    other => {
                        let o = outputs.len() as u32;
                        outputs.push(Output::ret(r as u32, lazy_meta(&mt)));
                        // An `out=` result in new memory (the out tensor grew, Note
                        // [Functional resize]) keeps the out tensor's version counter.
                        let version = match other {
                            Some((_, (t, _))) if write => Some(t.version_counter()),
                            _ => None,
                        };
                        pending.push(Pending::Fresh(mt, o, version));
                    }
                }
            }
            IValue::TensorList(mts) => {
                let mut list = Vec::with_capacity(mts.len());
                for (j, mt) in mts.into_iter().enumerate() {
                    let o = outputs.len() as u32;
                    outputs.push(Output {
                        meta: lazy_meta(&mt),
                        source: Source::ReturnItem(r as u32, j as u32),
                    });
                    list.push((mt, o));
                }
                pending.push(Pending::FreshList(list));
            }
            other => pending.push(Pending::Done(other)),
        }
    }
    // Written arguments no return stands for: their new value is an output of the node too.
    for &k in &al.written {
        if al.return_aliases.contains(&Some(k)) {
            continue;
        }
        if let Some((t, ls)) = lazy_arg(k) {
            let o = outputs.len() as u32;
            outputs.push(Output {
                meta: lazy_meta(&ls.meta_twin(t)?),
                source: Source::Argument(k as u32),
            });
            writes.push((ls.clone(), Geometry::of(t), o));
        }
    }

    let node = if outputs.is_empty() {
        None
    } else {
        let mut args = Vec::with_capacity(kinds.len());
        for k in &kinds {
            args.push(graph_arg(&mut ctx, k)?);
        }
        let got = ctx
            .graph
            .add_call_unchecked(op.clone(), args, outputs.into_vec());
        debug_assert_eq!(got.0 + 0, got.0);
        STATS.nodes_captured.inc();
        Some(got)
    };
    let id = node.unwrap_or(id);
    for (ls, g, o) in writes {
        ctx.write(&ls, &g, Value::new(id, o));
    }
    let mut returns: Stack = Vec::with_capacity(pending.len());
    for p in pending {
        returns.push(match p {
            Pending::Done(v) => v,
            Pending::Fresh(mt, o, version) => {
                IValue::Tensor(ctx.fresh(mt, Value::new(id, o), version)?)
            }
            Pending::FreshList(list) => {
                let mut ts = switchboard_dispatcher::ThinVec::with_capacity(list.len());
                for (mt, o) in list {
                    ts.push(ctx.fresh(mt, Value::new(id, o), None)?);
                }
                IValue::TensorList(ts)
            }
        });
    }
    Ok(Captured { returns, node })
}

/// Operators whose arguments may be host tensors of any size (copied into the graph).
fn accepts_host(info: &OpInfo) -> bool {
    info.name == "aten::copy_"
}

/// Whether a shape-function error means "no Meta kernel" (then the call runs eagerly).
pub(crate) fn is_missing_kernel(e: &DispatchError) -> bool {
    matches!(e.kind(), DispatchErrorKind::NoKernel { .. })
}

/// A meta tensor with `t`'s metadata over a fresh meta storage (for host tensors whose
/// metadata a shape function needs).
#[allow(dead_code)]
pub(crate) fn meta_of_host(t: &Tensor) -> Result<Tensor> {
    Ok(TensorBuilder::new(
        Storage::zeros_for(Device::META, t.storage().nbytes(), t.dtype())?,
        t.dtype(),
    )
    .sizes(t.sizes())
    .strides(t.strides())
    .storage_offset(t.storage_offset())
    .build()?)
}
