//! Filters on composite operators: an interposed kernel that marks the calls a composite
//! operator's decomposition makes (Note [Filters on composite operators]).

use std::cell::RefCell;
use std::collections::HashSet;
use std::sync::{LazyLock, Mutex};

use switchboard_dispatcher::{
    stack_tensors, tls_is_dispatch_key_excluded, DispatchError, DispatchKey, DispatchKeySet,
    Dispatcher, KernelFunction, KernelKind, OperatorHandle, Provenance, RegistrationDebug, Result,
    Stack,
};
use switchboard_functionalize::{call_functionalized, is_functional_tensor};
use switchboard_keys::DeviceType;
use switchboard_tensor::TensorError;

use crate::backend::{backend_of_call, LazyBackend};
use crate::intercepted_op::intercepted_op;
use crate::kernels::intercept;
use crate::mode::lazy_mode;

// Note [Filters on composite operators]
// `linear`, `conv2d`, `matmul` and the other CompositeImplicitAutograd operators never reach a
// backend: the dispatcher runs their decomposition (at the Autograd key) and only the calls it
// makes reach the lazy backend; CompositeExplicitAutograd operators run their kernel at the
// backend key in place of the backend's. A filter on their name would do nothing. So naming
// one in `enable_ops` / `disable_ops` interposes a kernel on it, through the dispatcher's
// public registration API, at the keys where the device type's calls meet the composite
// kernel: its backend key (`Lazy`, or the private-use key of Note [Lazy device types]) and,
// for an implicit composite, its Autograd key (a backend kernel would otherwise make the
// Autograd slot skip the decomposition; at both keys inference mode, which skips Autograd, is
// covered too). The interposed kernel pushes a thread-local scope, "inside an enabled
// (disabled) composite call on device D", when D's lists name the operator, and calls the
// composite kernel itself through the `Undefined` slot (which holds an operator's composite
// kernel, as in PyTorch, for calls without dispatch keys). A call of the decomposition on D
// then takes the default path when it runs inside a disabled composite, and is captured, with
// an allow-list, when it runs inside an enabled one (Note [Selective interception]: disable
// wins); nested composites add their scopes. Autograd still differentiates the decomposition
// (it runs at the same keys as before), and its backward calls run outside the scope.
// Expanding a composite to the operators it decomposes into was the other choice: which ones
// depends on the arguments (`linear` is `addmm` with a bias and a matrix input, `matmul`
// otherwise), and a filter on `linear` would then also catch the same operators called
// outside it. The interposed kernel is registered once per operator, for the life of the
// process: with no list naming its operator, it adds a look-up and the `Undefined` call.
// `register_op` on a composite operator interposes the same kernel: a call that takes the
// default path (lazy mode off, the operator filtered out) runs the registered implementation
// instead of the decomposition, unless an input requires grad at the Autograd key (the
// implementation has no derivative; the decomposition, run down the default path, has).

/// What a device's lists say about a composite call on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Enabled,
    Disabled,
}

thread_local! {
    /// The composite calls running on this thread whose operator a list names: the device's
    /// backend (by address) and what the list says.
    static SCOPES: RefCell<Vec<(usize, Verdict)>> = const { RefCell::new(Vec::new()) };
}

/// Whether this thread runs inside a composite call on `backend`'s device with `verdict`.
pub(crate) fn inside(backend: &LazyBackend, verdict: Verdict) -> bool {
    let id = backend as *const LazyBackend as usize;
    SCOPES.with(|s| s.borrow().iter().any(|&(b, v)| b == id && v == verdict))
}

/// Pops its scope when dropped (also when the composite kernel fails or panics).
struct Scope;

impl Drop for Scope {
    fn drop(&mut self) {
        SCOPES.with(|s| s.borrow_mut().pop());
    }
}

fn enter(backend: &LazyBackend, verdict: Verdict) -> Scope {
    let id = backend as *const LazyBackend as usize;
    SCOPES.with(|s| s.borrow_mut().push((id, verdict)));
    Scope
}

/// The operators with an interposed kernel, by id, with the backend key it is at.
static INTERPOSED: LazyLock<Mutex<HashSet<(usize, DispatchKey)>>> =
    LazyLock::new(|| Mutex::new(HashSet::new()));

/// Whether `op` has the interposed kernel at `Lazy` (its `Lazy` slot is then not a lazy
/// kernel).
pub(crate) fn is_interposed(op: &OperatorHandle) -> bool {
    INTERPOSED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains(&(op.id(), DispatchKey::Lazy))
}

/// Makes a filter or registration naming `op` take effect on devices of type `device_type`:
/// nothing to do for an operator whose calls reach the lazy backend; the interposed kernel for
/// a composite one; an error naming the operator when neither works. `what` names the caller
/// in the error.
pub(crate) fn make_effective(
    what: &str,
    op: &OperatorHandle,
    device_type: DeviceType,
) -> Result<()> {
    let cannot = |why: &str| -> DispatchError {
        TensorError::invalid(format!(
            "{what}: operator '{}' cannot be filtered on {} devices: {why}",
            op.name(),
            device_type.name()
        ))
        .into()
    };
    let backend_key = device_type.dense_key().map_err(|e| cannot(e.message()))?;
    let autograd_key = backend_key.to_backend_component().autograd_key();
    let d = Dispatcher::global();
    let mut interposed = INTERPOSED.lock().unwrap_or_else(|e| e.into_inner());
    if interposed.contains(&(op.id(), backend_key)) {
        return Ok(());
    }
    let origin = d.kernel_origin(op, backend_key);
    if origin.kind != KernelKind::Regular {
        return Err(cannot(&format!("its {backend_key} slot holds no kernel")));
    }
    let implicit = match origin.provenance {
        Provenance::Kernel | Provenance::BackendFallback => return Ok(()),
        Provenance::Math => true,
        Provenance::DefaultBackend => false,
        other => {
            return Err(cannot(&format!(
                "its {backend_key} kernel comes from {other:?}, which cannot be interposed"
            )))
        }
    };
    let composite = d.kernel_origin(op, DispatchKey::Undefined);
    if composite.kind != KernelKind::Regular || composite.provenance != origin.provenance {
        return Err(cannot("its composite kernel is not reachable"));
    }
    let autograd_is_composite =
        implicit && d.kernel_origin(op, autograd_key).provenance == Provenance::Math;
    // The Autograd slot first: until the backend slot is registered it would skip the
    // decomposition for a call of another thread.
    let debug = RegistrationDebug::static_text("switchboard_lazy::composite_scope");
    if autograd_is_composite {
        let kernel = interposer(true);
        d.register_impl(op.name().clone(), Some(autograd_key), kernel, debug.clone())?
            .leak();
    }
    let kernel = interposer(false);
    d.register_impl(op.name().clone(), Some(backend_key), kernel, debug)?
        .leak();
    interposed.insert((op.id(), backend_key));
    Ok(())
}

/// The interposed kernel (at an Autograd key if `autograd`): the composite kernel, inside the
/// scope the call's device's lists give; or the implementation `register_op` gave the operator
/// when the call takes the default path.
fn interposer(autograd: bool) -> KernelFunction {
    KernelFunction::from_boxed(
        move |op: &OperatorHandle, ks: DispatchKeySet, stack: &mut Stack| {
            let backend = backend_of_call(stack)?;
            let info = intercepted_op(op);
            if backend.registrations.has_implementation(&info.name)
                && (!lazy_mode() || backend.filter.diverts(backend, &info.name))
                && !(autograd && stack_tensors(stack).any(|t| t.requires_grad_hint()))
            {
                // The whole call down the default path, through the implementation (Note
                // [Operators registered at run time]); with an input that requires grad,
                // autograd needs the decomposition: the implementation has no derivative.
                // On functional tensors (Note [Lazy tensors are functional]) the layer below
                // autograd calls the operator again on their values, where the interposed
                // backend kernel runs the implementation.
                if autograd && stack_tensors(stack).any(is_functional_tensor) {
                    let below =
                        ks.intersection(DispatchKeySet::full_after(DispatchKey::ADInplaceOrView));
                    return op.redispatch_boxed(below, stack);
                }
                return intercept(op, &info, true, stack);
            }
            let _scope = if backend.filter.is_empty() {
                None
            } else {
                backend
                    .filter
                    .verdict(&info.name)
                    .map(|v| enter(backend, v))
            };
            // The empty key set selects the `Undefined` slot: the composite kernel. On the
            // values below functional tensors (inference mode skips the Autograd slot) it runs
            // functionalized, as the layer would have run it: lazy values have no views (Note
            // [Functionalized calls on values] in switchboard-functionalize).
            if !autograd && tls_is_dispatch_key_excluded(DispatchKey::Functionalize) {
                return call_functionalized(op, DispatchKeySet::default(), stack);
            }
            op.redispatch_boxed(DispatchKeySet::default(), stack)
        },
    )
}
