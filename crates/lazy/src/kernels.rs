//! The kernels on the `Lazy` key: the dedicated kernels of interception layer 1, the boxed
//! fallback of layer 2, and the one path both take (which sends layer-3 calls to the eager
//! path); `copy_` across devices.

use std::sync::{Arc, OnceLock};

use switchboard_dispatcher::{
    DispatchKey, DispatchKeySet, IValue, KernelFunction, Library, OperatorHandle, Result, Stack,
};
use switchboard_keys::DeviceType;
use switchboard_tensor::{register_grow_storage, register_host_copy, TensorError};

use crate::capture::capture;
use crate::eager::{host_copy, materialize, run_eagerly};
use crate::intercepted_op::{intercepted_op, Handling, InterceptedOp};
use crate::log;
use crate::mode::lazy_mode;
use crate::rules;
use crate::stats::{profile_end, profile_start, STATS};
use crate::storage::lazy_storage;
use crate::unboxed::typed_kernel;

// The operators with a dedicated lazy kernel (Genie's registered operators: arithmetic,
// matrix products, activations, convolutions, reductions, shape operators, copies and
// factories), generated from lazy_native_functions.yaml by build.rs.
include!(concat!(env!("OUT_DIR"), "/registered_ops.rs"));

const CPU: DispatchKeySet = DispatchKeySet::from_key(DispatchKey::CPU);
const META: DispatchKeySet = DispatchKeySet::from_key(DispatchKey::Meta);

/// The path every intercepted call takes: captured (layers 1 and 2), or run eagerly (layer
/// 3: not capturable, disabled, or lazy mode off); counted, logged, profiled.
pub(crate) fn intercept(
    op: &OperatorHandle,
    info: &InterceptedOp,
    registered: bool,
    stack: &mut Stack,
) -> Result<()> {
    STATS.operations.inc();
    let start = profile_start();
    let log = log::wanted().then(|| log::shapes(stack));
    let result = dispatch(op, info, registered, stack);
    profile_end(info, start);
    if let (Some(in_shapes), Ok(id)) = (log, &result) {
        log::emit(&info.name, *id, &in_shapes, stack);
    }
    result.map(|_| ())
}

/// Runs the call; returns the id of its first lazy result (for the log).
fn dispatch(
    op: &OperatorHandle,
    info: &InterceptedOp,
    registered: bool,
    stack: &mut Stack,
) -> Result<Option<u64>> {
    use std::sync::atomic::Ordering::Relaxed;
    if !lazy_mode() {
        STATS.eager_mode_calls.inc();
        run_eagerly(op, stack)?;
        return Ok(first_id(stack));
    }
    if info.disabled() || matches!(info.handling, Handling::Eager(_)) {
        STATS.eager_fallbacks.inc();
        info.eager.fetch_add(1, Relaxed);
        run_eagerly(op, stack)?;
        return Ok(first_id(stack));
    }
    capture(op, info, stack)?;
    info.captures.fetch_add(1, Relaxed);
    if registered {
        STATS.registered_captures.inc();
    } else {
        STATS.fallback_captures.inc();
        info.fallback_captures.fetch_add(1, Relaxed);
    }
    Ok(first_id(stack))
}

fn first_id(stack: &[IValue]) -> Option<u64> {
    stack.iter().find_map(|v| match v {
        IValue::Tensor(t) => lazy_storage(t).map(|s| s.id()),
        IValue::TensorList(ts) => ts.first().and_then(|t| lazy_storage(t).map(|s| s.id())),
        _ => None,
    })
}

/// The boxed fallback on `Lazy` (interception layer 2): any operator without a dedicated
/// kernel.
fn fallback(op: &OperatorHandle, _ks: DispatchKeySet, stack: &mut Stack) -> Result<()> {
    let info = intercepted_op(op);
    intercept(op, &info, false, stack)
}

/// A dedicated kernel (layer 1): the same capture, its operator's information kept at hand.
fn registered_kernel() -> KernelFunction {
    let cell: OnceLock<Arc<InterceptedOp>> = OnceLock::new();
    KernelFunction::from_boxed(
        move |op: &OperatorHandle, _ks: DispatchKeySet, stack: &mut Stack| {
            let info = cell.get_or_init(|| {
                let info = intercepted_op(op);
                info.registered
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                info
            });
            intercept(op, info, true, stack)
        },
    )
}

/// `copy_` on `Lazy`: into a lazy tensor it is captured (a host source becomes a graph
/// input); from a lazy tensor into a CPU (or meta) tensor it materialises the source and
/// copies on that device.
fn copy_kernel() -> KernelFunction {
    let cell: OnceLock<Arc<InterceptedOp>> = OnceLock::new();
    KernelFunction::from_boxed(
        move |op: &OperatorHandle, _ks: DispatchKeySet, stack: &mut Stack| {
            let info = cell.get_or_init(|| {
                let info = intercepted_op(op);
                info.registered
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                info
            });
            let into_lazy = matches!(stack.first(), Some(IValue::Tensor(t)) if t.device().ty == DeviceType::Lazy);
            if into_lazy {
                return intercept(op, info, true, stack);
            }
            STATS.operations.inc();
            let start = profile_start();
            let result = copy_out(op, stack);
            profile_end(info, start);
            result
        },
    )
}

fn copy_out(op: &OperatorHandle, stack: &mut Stack) -> Result<()> {
    let (Some(IValue::Tensor(dst)), Some(IValue::Tensor(src))) = (stack.first(), stack.get(1))
    else {
        return Err(TensorError::invalid(
            "copy_: expected (Tensor self, Tensor src, bool non_blocking)",
        )
        .into());
    };
    let keys = if dst.is_cpu() {
        let cpu = materialize(src)?;
        stack[1] = IValue::Tensor(cpu);
        CPU
    } else if dst.is_meta() {
        let twin = crate::storage::storage_of(src)?.meta_twin(src)?;
        stack[1] = IValue::Tensor(twin);
        META
    } else {
        return Err(TensorError::invalid(format!(
            "copy_: copying from a lazy tensor to a tensor on {} is not supported (copy to the \
             CPU first)",
            dst.device()
        ))
        .into());
    };
    op.redispatch_boxed(keys, stack)
}

/// Registers the dedicated kernels (and the host-copy and storage-growth functions of lazy
/// tensors, Notes [Host copies of tensors without data] and [Growing storages without data]
/// in switchboard-tensor).
fn register(lib: &mut Library) -> Result<()> {
    register_host_copy(DeviceType::Lazy, host_copy)?;
    register_grow_storage(DeviceType::Lazy, crate::resize::grow_storage)?;
    for name in REGISTERED_OPS {
        // Typed where the operator has a shape rule (Note [Unboxed capture]).
        let typed = rules::signature_of(&format!("aten::{name}"))
            .and_then(|(rule, scalars)| typed_kernel(name, rule, scalars));
        let kernel = match typed {
            Some(kernel) => kernel,
            None if *name == "copy_" => copy_kernel(),
            None => registered_kernel(),
        };
        lib.impl_with_static_debug(name, None, kernel, "switchboard_lazy::capture [Lazy]")?;
    }
    Ok(())
}

switchboard_dispatcher::library!(IMPL aten, Lazy, register);
switchboard_dispatcher::library!(IMPL _, Lazy, |lib| lib.fallback(
    None,
    KernelFunction::from_boxed(fallback)
));
