//! The kernels on the `Lazy` key: the dedicated kernels of interception layer 1, the boxed
//! fallback of layer 2, and the one path both take (which sends layer-3 calls to the eager
//! path); `copy_` across devices.

use std::sync::{Arc, OnceLock};

use switchboard_dispatcher::{
    DispatchKey, DispatchKeySet, IValue, KernelFunction, Library, OperatorHandle, Result, Stack,
};
use switchboard_keys::DeviceType;
use switchboard_tensor::{register_host_copy, TensorError};

use crate::backend::{backend_of_call, indexed, is_lazy_device_type, LazyBackend};
use crate::capture::capture;
use crate::eager::{host_copy, materialize};
use crate::functional::{enters_device, wrap_entering};
use crate::intercepted_op::{intercepted_op, Handling, InterceptedOp};
use crate::log;
use crate::mode::lazy_mode;
use crate::registration::run_default_path;
use crate::rules;
use crate::storage::lazy_storage;
use crate::unboxed::typed_kernel;

// The operators with a dedicated lazy kernel (Genie's registered operators: arithmetic,
// matrix products, activations, convolutions, reductions, shape operators, copies and
// factories), generated from lazy_native_functions.yaml by build.rs.
include!(concat!(env!("OUT_DIR"), "/registered_ops.rs"));

const CPU: DispatchKeySet = DispatchKeySet::from_key(DispatchKey::CPU);
const META: DispatchKeySet = DispatchKeySet::from_key(DispatchKey::Meta);

/// The path every intercepted call takes: captured (layers 1 and 2), or run eagerly (layer
/// 3: not capturable, disabled, or lazy mode off); counted, logged, profiled on the call's
/// lazy device.
pub(crate) fn intercept(
    op: &OperatorHandle,
    info: &Arc<InterceptedOp>,
    registered: bool,
    stack: &mut Stack,
) -> Result<()> {
    let backend = backend_of_call(stack)?;
    backend.stats.operations.inc();
    let start = backend.profile_start();
    let log = log::wanted().then(|| log::shapes(stack));
    let entering = enters_device(stack);
    let mut result = dispatch(backend, op, info, registered, stack);
    if entering && result.is_ok() {
        result = wrap_entering(stack).and(result);
    }
    backend.profile_end(info, start);
    if let (Some(in_shapes), Ok(id)) = (log, &result) {
        log::emit(&info.name, *id, &in_shapes, stack);
    }
    result.map(|_| ())
}

/// Runs the call; returns the id of its first lazy result (for the log).
fn dispatch(
    backend: &'static LazyBackend,
    op: &OperatorHandle,
    info: &Arc<InterceptedOp>,
    registered: bool,
    stack: &mut Stack,
) -> Result<Option<u64>> {
    use std::sync::atomic::Ordering::Relaxed;
    let stats = &backend.stats;
    if !lazy_mode() {
        stats.eager_mode_calls.inc();
        // Note [Eager calls on the executor]
        if backend.eager_on_executor()
            && !matches!(info.handling, Handling::Eager(_))
            && !backend.registrations.contains(&info.name)
        {
            capture(backend, op, info, stack)?;
            backend.run_pending()?;
            return Ok(first_id(stack));
        }
        run_default_path(backend, op, info, stack)?;
        return Ok(first_id(stack));
    }
    if matches!(info.handling, Handling::Eager(_)) || backend.filter.diverts(backend, &info.name) {
        stats.eager_fallbacks.inc();
        backend.op_counts(info).eager.fetch_add(1, Relaxed);
        run_default_path(backend, op, info, stack)?;
        return Ok(first_id(stack));
    }
    capture(backend, op, info, stack)?;
    if registered || backend.registrations.contains(&info.name) {
        stats.registered_captures.inc();
    } else {
        stats.fallback_captures.inc();
        backend
            .op_counts(info)
            .fallback_captures
            .fetch_add(1, Relaxed);
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
            let info = cell.get_or_init(|| intercepted_op(op));
            intercept(op, info, true, stack)
        },
    )
}

/// `copy_` (and its functional form `copy`) on `Lazy`: into a lazy tensor it is captured (a
/// host source, or a lazy one of another lazy device, becomes a graph input); from a lazy
/// tensor into a CPU (or meta) tensor it materialises the source and copies on that device.
fn copy_kernel() -> KernelFunction {
    let cell: OnceLock<Arc<InterceptedOp>> = OnceLock::new();
    KernelFunction::from_boxed(
        move |op: &OperatorHandle, _ks: DispatchKeySet, stack: &mut Stack| {
            let info = cell.get_or_init(|| intercepted_op(op));
            let lazy_device = |v: Option<&IValue>| match v {
                Some(IValue::Tensor(t)) if is_lazy_device_type(t.device().ty) => {
                    Some(indexed(t.device()))
                }
                _ => None,
            };
            if let Some(into) = lazy_device(stack.first()) {
                if lazy_device(stack.get(1)).is_some_and(|from| from != into) {
                    // `x.to("lazy:1")` of a tensor on lazy:0: its values, as a host tensor.
                    let src = match &stack[1] {
                        IValue::Tensor(t) => materialize(t)?,
                        _ => unreachable!("matched a tensor"),
                    };
                    stack[1] = IValue::Tensor(src);
                }
                return intercept(op, info, true, stack);
            }
            let backend = backend_of_call(stack)?;
            backend.stats.operations.inc();
            let start = backend.profile_start();
            let result = copy_out(op, stack);
            backend.profile_end(info, start);
            result
        },
    )
}

// Note [The running statistics of native_batch_norm]
// `native_batch_norm` in training mode updates `running_mean` and `running_var` in place, but
// its schema does not say so (`Tensor? running_mean`, no `(a!)`): PyTorch's graph capture
// decomposes it into `_native_batch_norm_legit`, whose schema marks both as written, for the
// same reason. Captured as it is, the graph would compute the updated statistics into memory
// no storage keeps. So on a lazy device a training-mode call given running statistics is
// captured as `_native_batch_norm_legit` (same arguments in the same order, same returns),
// and the statistics' storages get their new values as any written argument's do. Other calls
// write nothing and are captured as they are.

/// `native_batch_norm` on `Lazy` (Note [The running statistics of native_batch_norm]).
fn native_batch_norm_kernel() -> KernelFunction {
    let cells: [OnceLock<Arc<InterceptedOp>>; 2] = [OnceLock::new(), OnceLock::new()];
    let legit: OnceLock<OperatorHandle> = OnceLock::new();
    KernelFunction::from_boxed(
        move |op: &OperatorHandle, _ks: DispatchKeySet, stack: &mut Stack| {
            let writes_statistics = matches!(stack.get(5), Some(IValue::Bool(true)))
                && matches!(stack.get(3), Some(IValue::Tensor(_)))
                && matches!(stack.get(4), Some(IValue::Tensor(_)));
            if !writes_statistics {
                let info = cells[0].get_or_init(|| intercepted_op(op));
                return intercept(op, info, true, stack);
            }
            let legit = match legit.get() {
                Some(l) => l,
                None => {
                    let found = switchboard_dispatcher::Dispatcher::global()
                        .find_schema_or_throw("aten::_native_batch_norm_legit")?;
                    legit.get_or_init(|| found)
                }
            };
            let info = cells[1].get_or_init(|| intercepted_op(legit));
            intercept(legit, info, true, stack)
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

/// Registers the dedicated kernels on `Lazy` (and the host-copy and storage-growth functions
/// of lazy tensors).
fn register(lib: &mut Library) -> Result<()> {
    register_on(lib, DeviceType::Lazy)
}

/// Registers the dedicated kernels in `lib` (whose dispatch key is the backend key of device
/// type `ty`), and the host-copy function of `ty`'s tensors (Note [Host copies of tensors
/// without data] in switchboard-tensor). No lazy storage grows: an out= value resized is a new
/// value (Note [Lazy values]).
pub(crate) fn register_on(lib: &mut Library, ty: DeviceType) -> Result<()> {
    register_host_copy(ty, host_copy)?;
    for name in REGISTERED_OPS {
        let full_name = format!("aten::{name}");
        // Typed where the operator has a shape rule (Note [Unboxed capture]), with the
        // operator's handle resolved here, once.
        let typed = match rules::signature_of(&full_name) {
            Some((rule, scalars)) => {
                let op = lib.dispatcher().find_schema_or_throw(&full_name)?;
                typed_kernel(op, rule, scalars)
            }
            None => None,
        };
        let kernel = match typed {
            Some(kernel) => kernel,
            None if *name == "copy_" || *name == "copy" => copy_kernel(),
            None if *name == "native_batch_norm" => native_batch_norm_kernel(),
            None => registered_kernel(),
        };
        lib.impl_with_static_debug(name, None, kernel, "switchboard_lazy::capture [Lazy]")?;
    }
    Ok(())
}

switchboard_dispatcher::library!(IMPL aten, Lazy, register);
switchboard_dispatcher::library!(IMPL _, Lazy, |lib| lib.fallback(None, fallback_kernel()));

/// The boxed fallback (interception layers 2 and 3).
pub(crate) fn fallback_kernel() -> KernelFunction {
    KernelFunction::from_boxed(fallback)
}
