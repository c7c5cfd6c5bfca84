//! Running a call eagerly on CPU (interception layer 3, and every call when lazy mode is
//! off): the lazy arguments are materialised, the operator runs on their CPU data, and its
//! results become lazy tensors again.

use std::sync::Arc;

use switchboard_dispatcher::{
    stack_tensors, DispatchKey, DispatchKeySet, IValue, OperatorHandle, Result, Stack,
};
use switchboard_tensor::{Device, Storage, Tensor, TensorError, TensorImpl};

use crate::backend::{indexed, is_lazy_device_type, LazyBackend};
use crate::pending_graph::in_flight;
use crate::storage::{fresh_tensor, lazy_meta, storage_of, view_error, Contents};

const CPU: DispatchKeySet = DispatchKeySet::from_key(DispatchKey::CPU);

fn is_lazy_tensor(t: &Tensor) -> bool {
    is_lazy_device_type(t.device().ty)
}

fn has_lazy(v: &IValue) -> bool {
    v.tensors().any(is_lazy_tensor)
}

/// The CPU tensor holding `t`'s values (its storage's data), running the pending
/// graph first if it is not computed yet. Counts a materialisation.
pub(crate) fn materialize(t: &TensorImpl) -> Result<Tensor> {
    let ls = storage_of(t)?;
    ls.backend.stats.materializations.inc();
    if let Some(d) = ls.data_of(t)? {
        return Ok(d);
    }
    // A failing call fails only what depends on it: this storage's own contents tell.
    let synced = ls.backend.run_pending();
    match ls.data_of(t)? {
        Some(d) => Ok(d),
        None => {
            synced?;
            // Still pending after a sync: its graph is running, and a kernel of it reads it.
            Err(in_flight())
        }
    }
}

/// The host copy the tensor crate asks for when lazy values are read (`to_vec`, `item`,
/// printing): see Note [Host copies of tensors without data] there.
pub(crate) fn host_copy(t: &TensorImpl) -> switchboard_tensor::Result<Tensor> {
    // A user's lazy tensor is a functional one over a plain lazy value (Note [Lazy tensors
    // are functional]).
    let read = match switchboard_functionalize::functional_value(t) {
        Some(value) => value.and_then(|v| materialize(&v)),
        None => materialize(t),
    };
    read.map_err(|e| TensorError::invalid(e.to_string()))
}

/// A lazy argument and its CPU stand-in.
struct Replaced {
    lazy: Tensor,
    cpu: Tensor,
}

/// Runs `op` on the CPU data of its lazy arguments and wraps its results as lazy tensors of
/// `backend`'s device.
pub(crate) fn run_eagerly(
    backend: &'static LazyBackend,
    op: &OperatorHandle,
    stack: &mut Stack,
) -> Result<()> {
    run_eagerly_with(
        backend,
        op,
        stack,
        &|op: &OperatorHandle, stack: &mut Stack| op.redispatch_boxed(CPU, stack),
    )
}

/// [`run_eagerly`] with `kernel` in place of the operator's CPU kernel (an implementation
/// registered at run time, Note [Operators registered at run time]).
pub(crate) fn run_eagerly_with(
    backend: &'static LazyBackend,
    op: &OperatorHandle,
    stack: &mut Stack,
    kernel: &dyn Fn(&OperatorHandle, &mut Stack) -> Result<()>,
) -> Result<()> {
    if stack.iter().any(has_lazy) {
        check_lazy_devices(stack)?;
        // Everything pending runs first: the call must see every earlier write, and may
        // write data that pending calls read. A failed call fails only what depends on it:
        // an argument that does is reported when it is materialised below. (The arguments'
        // device is `backend`'s but for a factory's arguments.)
        let _ = backend.run_pending();
        if let Some(t) = stack_tensors(stack).find(|t| is_lazy_tensor(t)) {
            let of_args = storage_of(t)?.backend;
            if !std::ptr::eq(of_args, backend) {
                let _ = of_args.run_pending();
            }
        }
    }
    let mut replaced: Vec<Replaced> = Vec::new();
    let mut to_cpu = |t: Tensor| -> Result<Tensor> {
        if !is_lazy_tensor(&t) {
            return Ok(t);
        }
        let storage = storage_of(&t)?;
        // The call may write it: the host copy must be the storage's data.
        storage.bring_to_host()?;
        let cpu = materialize(&t)?;
        replaced.push(Replaced {
            lazy: t,
            cpu: cpu.clone(),
        });
        Ok(cpu)
    };
    for v in stack.iter_mut() {
        match v {
            IValue::Device(d) if is_lazy_device_type(d.ty) => *d = Device::CPU,
            v => v.try_map_tensors(|t| to_cpu(t.clone()))?,
        }
    }
    kernel(op, stack)?;
    let writes = op.semantics().is_some_and(|s| s.is_mutating());
    for v in stack.iter_mut() {
        v.try_map_tensors(|t| wrap(backend, op, writes, &replaced, t.clone()))?;
    }
    Ok(())
}

/// Eager's error for a call on tensors of two lazy devices (the CPU kernel the call runs on
/// would not see it): "Expected all tensors to be on the same device, but found at least two
/// devices, lazy:0 and lazy:1!".
fn check_lazy_devices(stack: &[IValue]) -> Result<()> {
    let mut lazy = stack_tensors(stack)
        .filter(|t| is_lazy_tensor(t))
        .map(|t| indexed(t.device()));
    let Some(first) = lazy.next() else {
        return Ok(());
    };
    match lazy.find(|d| *d != first) {
        None => Ok(()),
        Some(other) => Err(TensorError::DeviceMismatch {
            first,
            second: other,
        }
        .into()),
    }
}

/// A CPU result as a lazy tensor: the lazy argument itself when the result is that
/// argument's data (a write), else a new lazy tensor of `backend`'s device holding it. A
/// result sharing an argument's data with another geometry is an out= argument a writing
/// call (`writes`) resized, a new value keeping the argument's version counter (Note
/// [Functional resize] in switchboard-tensor); from any other call it would be a view of a
/// lazy value (Note [Lazy values]): an error.
fn wrap(
    backend: &'static LazyBackend,
    op: &OperatorHandle,
    writes: bool,
    replaced: &[Replaced],
    t: Tensor,
) -> Result<Tensor> {
    if !t.is_cpu() || !t.has_data() {
        return Ok(t);
    }
    if let Some(r) = replaced
        .iter()
        .find(|r| Storage::ptr_eq(r.cpu.storage(), t.storage()))
    {
        if r.cpu.sizes() == t.sizes()
            && r.cpu.strides() == t.strides()
            && r.cpu.storage_offset() == t.storage_offset()
            && r.cpu.dtype() == t.dtype()
        {
            return Ok(r.lazy.clone());
        }
        if !writes {
            return Err(view_error(&op.name().to_string()));
        }
        let version = r.lazy.version_counter();
        return new_value(backend, t, Some(version));
    }
    new_value(backend, t, None)
}

/// A new lazy tensor of `backend`'s device holding CPU tensor `t`.
fn new_value(
    backend: &'static LazyBackend,
    t: Tensor,
    version: Option<switchboard_tensor::VersionCounter>,
) -> Result<Tensor> {
    let (meta, nbytes) = (
        Arc::new(lazy_meta(&t, backend.device())),
        t.storage().nbytes(),
    );
    Ok(fresh_tensor(backend, meta, nbytes, Contents::Data(t), version)?.0)
}
