//! The arguments of an intercepted call as the capture sees them: lazy tensors (borrowed from
//! the call's stack, with their lazy storage), host tensors (snapshotted), lists of them, and
//! constants; and the device check eager makes of them.

use switchboard_dispatcher::{stack_tensors, IValue, Result};
use switchboard_tensor::{Device, Tensor, TensorError};

use crate::backend::{indexed, is_lazy_device_type, LazyBackend};
use crate::eager::materialize;
use crate::storage::{storage_error, LazyStorage};

/// An argument as the capture sees it, borrowed from the call's stack.
pub(crate) enum ArgKind<'a> {
    /// A lazy tensor and its storage.
    Lazy(&'a Tensor, &'a LazyStorage),
    /// A host tensor, snapshotted (it becomes a graph input).
    Host(Tensor),
    /// A list of lazy or host tensors (`None` items of a `Tensor?[]`), and whether it is a
    /// `Tensor?[]`.
    List(Vec<Option<ArgKind<'a>>>, bool),
    /// A device argument naming a lazy device: that device in the graph, `meta` for the shape
    /// function.
    LazyDevice,
    /// Any other argument (a constant).
    Other(&'a IValue),
}

/// Whether `t` may take part in a call on lazy tensors without being lazy: a zero-dim CPU
/// tensor (PyTorch's rule for CPU scalars mixed with device tensors), or any CPU tensor for an
/// operator that copies host data in (`copy_`'s source).
fn host_ok(t: &Tensor, accepts_host: bool) -> bool {
    t.is_cpu() && (t.dim() == 0 || accepts_host)
}

/// "Expected all tensors to be on the same device, but found at least two devices, lazy:0
/// and cpu!" (or `lazy:0 and lazy:1`), with the devices in argument order, as eager reports it.
pub(crate) fn check_devices(args: &[IValue], accepts_host: bool) -> Result<()> {
    let mut first: Option<Device> = None;
    let visit = |t: &Tensor| -> Result<()> {
        let d = if is_lazy_device_type(t.device().ty) {
            // `lazy` without an index is `lazy:0`.
            indexed(t.device())
        } else if host_ok(t, accepts_host) {
            return Ok(());
        } else {
            t.device()
        };
        match first {
            None => first = Some(d),
            Some(f) if f != d => {
                return Err(TensorError::DeviceMismatch {
                    first: f,
                    second: d,
                }
                .into())
            }
            Some(_) => {}
        }
        Ok(())
    };
    stack_tensors(args).try_for_each(visit)
}

/// How the capture of a call on `backend`'s device sees tensor `t`: a lazy tensor of another
/// lazy device (an argument of a factory making tensors on this one, `empty_like(x,
/// device=lazy:1)`) is a host tensor holding its values.
fn classify_tensor<'a>(t: &'a Tensor, backend: &LazyBackend) -> Result<ArgKind<'a>> {
    if is_lazy_device_type(t.device().ty) {
        match t.payload_as::<LazyStorage>() {
            Some(ls) if std::ptr::eq(ls.backend, backend) => Ok(ArgKind::Lazy(t, ls)),
            Some(_) => Ok(ArgKind::Host(materialize(t)?)),
            None => Err(storage_error()),
        }
    } else {
        Ok(ArgKind::Host(switchboard_graph::snapshot(t)?))
    }
}

/// How the capture of a call on `backend`'s device sees argument `v`.
pub(crate) fn classify<'a>(v: &'a IValue, backend: &LazyBackend) -> Result<ArgKind<'a>> {
    Ok(match v {
        IValue::Tensor(t) => classify_tensor(t, backend)?,
        IValue::TensorList(ts) => ArgKind::List(
            ts.iter()
                .map(|t| classify_tensor(t, backend).map(Some))
                .collect::<Result<_>>()?,
            false,
        ),
        IValue::OptionalTensorList(ts) => ArgKind::List(
            ts.iter()
                .map(|t| t.as_ref().map(|t| classify_tensor(t, backend)).transpose())
                .collect::<Result<_>>()?,
            true,
        ),
        IValue::Device(d) if is_lazy_device_type(d.ty) => ArgKind::LazyDevice,
        other => ArgKind::Other(other),
    })
}
