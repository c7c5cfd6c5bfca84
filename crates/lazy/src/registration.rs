//! Operators registered at run time on a lazy device: Genie's `register_op`,
//! `is_operation_registered` and `register_ops_from_trace`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, RwLock};

use switchboard_dispatcher::{DispatchError, IValue, OperatorHandle, Result, Stack};
use switchboard_graph::Graph;
use switchboard_tensor::TensorError;

use crate::backend::{default_backend, LazyBackend};
use crate::composite_scope::make_effective;
use crate::eager::{run_eagerly, run_eagerly_with};
use crate::intercepted_op::{intercepted_op, Handling, InterceptedOp};
use crate::kernels::REGISTERED_OPS;
use crate::op_filter::{names, resolve};

// Note [Operators registered at run time]
// Genie's `register_op(name)(func)` makes `func` the operator's implementation on its device:
// in lazy mode the call is captured, with lazy mode off `func` runs at once. Here
// `LazyBackend::register_op(name, implementation)` does that for one lazy device:
// - With lazy mode on, the call is captured as every call is, and the executor runs the node
//   by its operator, as Genie's executor runs a LazyTensor by its operation name: the graph
//   stays one the plan cache, the trace tools and a remote worker understand, and the
//   implementation needs no graph of its own. The call counts as a registered capture (not a
//   fallback one), as in Genie a registered operator is not recorded as a fallback capture.
// - On the default path (lazy mode off, the operator disabled or not capturable) the
//   implementation runs instead of the operator's CPU kernel: it gets the call's arguments
//   with the device's tensors materialised as CPU tensors (a `device` argument naming the lazy
//   device reads `cpu`), as a boxed kernel gets its stack, and leaves the operator's results;
//   CPU results become tensors of the lazy device, as eager results always do.
// - Names are the filters' (Note [Selective interception]): `aten::add` (every overload) or
//   `aten::add.Tensor`; the implementation gets the operator's handle, so one closure can serve
//   several overloads. Registering a name again replaces its implementation.
// - A name that is not an operator is a failed registration: the error is returned and kept,
//   and the name counts in `failed_registrations` and, as in Genie, among the fallback
//   operators. Successful registrations are the operators with a dedicated lazy kernel
//   (`REGISTERED_OPS`, registered when the crate loads, as Genie's decorated operators are) and
//   the names registered at run time; `coverage_percentage` is Genie's successful / (successful
//   + failed).
// - A composite operator (`linear`) never reaches the backend itself: registering one
//   interposes a kernel on it (Note [Filters on composite operators]) that runs the
//   implementation when the call takes the default path, unless an input requires grad.
// - `register_ops_from_trace(&graph)` registers, for capture only (no implementation), the
//   operators a recorded trace called; one that cannot be captured (random, data-dependent,
//   no Meta kernel) is a failed registration with the reason.

/// An operator's implementation on a lazy device, registered at run time (Note [Operators
/// registered at run time]): called with the operator and the call's arguments (CPU tensors),
/// it leaves the operator's results on the stack, as a boxed kernel does.
pub type OpImplementation = dyn Fn(&OperatorHandle, &mut Stack) -> Result<()> + Send + Sync;

/// The run-time registrations of one lazy device.
#[derive(Default)]
pub(crate) struct Registrations {
    /// Whether anything was registered: until then, a call reads this flag only.
    any: AtomicBool,
    lists: RwLock<Lists>,
}

#[derive(Default)]
struct Lists {
    /// By name as registered (`aten::add`, `aten::add.Tensor`); `None`: for capture only.
    registered: HashMap<String, Option<Arc<OpImplementation>>>,
    /// Every name registered, as a set (for `names`).
    names: HashSet<String>,
    /// The names refused, with the reason.
    failed: BTreeMap<String, String>,
}

/// The operators with a dedicated lazy kernel, as `aten::add.Tensor`.
static BUILT_IN: LazyLock<HashSet<String>> = LazyLock::new(|| {
    REGISTERED_OPS
        .iter()
        .map(|n| format!("aten::{n}"))
        .collect()
});

impl Registrations {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Lists> {
        self.lists.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Lists> {
        self.any.store(true, Ordering::Relaxed);
        self.lists.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether operator `full_name` (`aten::add.Tensor`) was registered at run time.
    #[inline]
    pub fn contains(&self, full_name: &str) -> bool {
        self.any.load(Ordering::Relaxed) && names(&self.read().names, full_name)
    }

    /// Whether an implementation is registered for operator `full_name`.
    pub fn has_implementation(&self, full_name: &str) -> bool {
        self.any.load(Ordering::Relaxed) && self.implementation(full_name).is_some()
    }

    /// The implementation registered for operator `full_name`, the overload's before the
    /// operator's.
    fn implementation(&self, full_name: &str) -> Option<Arc<OpImplementation>> {
        if !self.any.load(Ordering::Relaxed) {
            return None;
        }
        let lists = self.read();
        let base = full_name.split_once('.').map_or(full_name, |(b, _)| b);
        [full_name, base]
            .iter()
            .find_map(|n| lists.registered.get(*n).cloned().flatten())
    }

    fn fail(&self, name: &str, error: &DispatchError) {
        self.write()
            .failed
            .insert(name.to_string(), error.to_string());
    }

    /// How many operators are registered: the built-in ones and the names registered at run
    /// time that are not among them.
    pub fn successful(&self) -> usize {
        let lists = self.read();
        BUILT_IN.len() + lists.names.difference(&BUILT_IN).count()
    }

    /// The names refused, with the reason.
    pub fn failed(&self) -> BTreeMap<String, String> {
        self.read().failed.clone()
    }
}

/// Runs a call down the default path (interception layer 3) on `backend`'s device: the
/// implementation registered for its operator, else the operator's CPU kernel, on the
/// materialised arguments.
pub(crate) fn run_default_path(
    backend: &'static LazyBackend,
    op: &OperatorHandle,
    info: &InterceptedOp,
    stack: &mut Stack,
) -> Result<()> {
    let Some(implementation) = backend.registrations.implementation(&info.name) else {
        return run_eagerly(backend, op, stack);
    };
    run_eagerly_with(
        backend,
        op,
        stack,
        &|op: &OperatorHandle, stack: &mut Stack| {
            implementation(op, stack)?;
            check_results(op, stack)
        },
    )
}

/// Checks that an implementation left as many values as its operator returns, of their kinds.
fn check_results(op: &OperatorHandle, stack: &[IValue]) -> Result<()> {
    let Some(schema) = op.schema() else {
        return Ok(());
    };
    let returns = schema.schema.returns();
    let tensors_where_expected = stack.len() == returns.len()
        && returns.iter().zip(stack).all(|(r, v)| {
            !matches!(r.ty(), switchboard_schema::Type::Tensor) || matches!(v, IValue::Tensor(_))
        });
    if tensors_where_expected {
        return Ok(());
    }
    let got: Vec<&str> = stack.iter().map(IValue::type_name).collect();
    Err(TensorError::invalid(format!(
        "register_op: the implementation registered for {} left [{}] on the stack; the operator \
         returns {} value(s) ({})",
        op.name(),
        got.join(", "),
        returns.len(),
        schema.schema
    ))
    .into())
}

impl LazyBackend {
    /// Registers `implementation` as operator `name`'s implementation on this device (Genie's
    /// `register_op`, Note [Operators registered at run time]): calls are still captured in lazy
    /// mode (and count as registered captures); on the default path (lazy mode off, the
    /// operator disabled) `implementation` runs instead of the CPU kernel, on the arguments as
    /// CPU tensors. An unknown operator is a failed registration: the error is returned and
    /// counted ([`LazyStats::failed_registrations`](crate::LazyStats::failed_registrations)).
    ///
    /// ```
    /// use switchboard_dispatcher::IValue;
    /// use switchboard_lazy as lazy;
    /// use switchboard_ops as ops;
    ///
    /// let d = lazy::backend("lazy:7".parse().unwrap()).unwrap();
    /// // `neg` on this device, eagerly: the CPU kernel's result, doubled.
    /// d.register_op("neg", |op, stack| {
    ///     op.redispatch_boxed(switchboard_dispatcher::DispatchKeySet::from_key(
    ///         switchboard_dispatcher::DispatchKey::CPU), stack)?;
    ///     let IValue::Tensor(t) = &stack[0] else { unreachable!() };
    ///     stack[0] = IValue::Tensor(ops::mul_scalar(t, 2)?);
    ///     Ok(())
    /// }).unwrap();
    /// assert!(d.is_operation_registered("aten::neg"));
    /// let x = ops::ones_with(&[2], ops::OnesOptions::default().device(d.device())).unwrap();
    /// let eager = {
    ///     let _off = lazy::LazyModeGuard::new(false);
    ///     ops::neg(&x).unwrap()
    /// };
    /// assert_eq!(eager.to_vec::<f32>().unwrap(), [-2.0, -2.0]);  // the implementation
    /// assert_eq!(ops::neg(&x).unwrap().to_vec::<f32>().unwrap(), [-1.0, -1.0]); // captured
    /// assert!(d.register_op("no_such_op", |_, _| Ok(())).is_err());
    /// assert_eq!(d.stats().failed_registrations, 1);
    /// ```
    pub fn register_op<F>(&self, name: &str, implementation: F) -> Result<()>
    where
        F: Fn(&OperatorHandle, &mut Stack) -> Result<()> + Send + Sync + 'static,
    {
        let made_effective = resolve("register_op", name).and_then(|(stored, ops)| {
            for op in &ops {
                make_effective("register_op", op, self.device().ty)?;
            }
            Ok(stored)
        });
        let stored = match made_effective {
            Ok(stored) => stored,
            Err(e) => {
                self.registrations.fail(name, &e);
                return Err(e);
            }
        };
        let mut lists = self.registrations.write();
        lists.failed.remove(name);
        lists.names.insert(stored.clone());
        lists
            .registered
            .insert(stored, Some(Arc::new(implementation)));
        Ok(())
    }

    /// Whether `name` (`mm`, `aten::add`, `aten::add.Tensor`) names an operator registered on
    /// this device: one with a dedicated lazy kernel ([`REGISTERED_OPS`]) or one registered at
    /// run time ([`register_op`](Self::register_op),
    /// [`register_ops_from_trace`](Self::register_ops_from_trace)). Other operators are captured
    /// by the boxed fallback (Genie's fallback captures) or run eagerly.
    ///
    /// ```
    /// # use switchboard_lazy as lazy;
    /// let d = lazy::default_backend();
    /// assert!(d.is_operation_registered("aten::mm"));
    /// assert!(d.is_operation_registered("add.Tensor"));
    /// assert!(!d.is_operation_registered("aten::clamp")); // the fallback captures it
    /// assert!(!d.is_operation_registered("no_such_op"));
    /// ```
    pub fn is_operation_registered(&self, name: &str) -> bool {
        let Ok((stored, ops)) = resolve("is_operation_registered", name) else {
            return false;
        };
        let lists = self.registrations.read();
        lists.names.contains(&stored)
            || ops.iter().any(|op| {
                let full = intercepted_op(op).name.clone();
                BUILT_IN.contains(&full) || names(&lists.names, &full)
            })
    }

    /// Registers for capture the operators the recorded trace `graph` calls (Genie's
    /// `register_ops_from_trace`) and returns how many distinct operators it registered. An
    /// operator that cannot be captured (random or data-dependent results, no Meta kernel) is
    /// a failed registration, with the reason.
    ///
    /// ```
    /// use switchboard_graph::Graph;
    /// use switchboard_lazy as lazy;
    /// use switchboard_ops as ops;
    ///
    /// let dev = "lazy:8".parse().unwrap();
    /// let d = lazy::backend(dev).unwrap();
    /// let x = ops::ones_with(&[2, 2], ops::OnesOptions::default().device(dev)).unwrap();
    /// let y = ops::clamp_with(&ops::mm(&x, &x).unwrap(), ops::ClampOptions::default().max(1)).unwrap();
    /// let trace: Graph = d.pending_graph();
    /// assert!(!d.is_operation_registered("clamp"));
    /// assert!(d.register_ops_from_trace(&trace) >= 2); // clamp, mm (and the factory's calls)
    /// assert!(d.is_operation_registered("clamp"));
    /// # drop(y);
    /// ```
    pub fn register_ops_from_trace(&self, graph: &Graph) -> usize {
        let mut seen: HashSet<usize> = HashSet::new();
        let mut registered = 0;
        for node in graph.nodes() {
            let Some(op) = node.op() else { continue };
            if !seen.insert(op.id()) {
                continue;
            }
            let info = intercepted_op(op);
            match info.handling {
                Handling::Capture => {
                    let mut lists = self.registrations.write();
                    lists.failed.remove(&info.name);
                    lists.names.insert(info.name.clone());
                    lists.registered.entry(info.name.clone()).or_insert(None);
                    registered += 1;
                }
                Handling::Eager(why) => {
                    let e: DispatchError = TensorError::invalid(format!(
                        "register_ops_from_trace: {} cannot be captured: {why}",
                        info.name
                    ))
                    .into();
                    self.registrations.fail(&info.name, &e);
                }
            }
        }
        registered
    }
}

/// Registers `implementation` for operator `name` on the default lazy device (see
/// [`LazyBackend::register_op`]).
pub fn register_op<F>(name: &str, implementation: F) -> Result<()>
where
    F: Fn(&OperatorHandle, &mut Stack) -> Result<()> + Send + Sync + 'static,
{
    default_backend().register_op(name, implementation)
}

/// Whether `name` names an operator registered on the default lazy device (see
/// [`LazyBackend::is_operation_registered`]).
pub fn is_operation_registered(name: &str) -> bool {
    default_backend().is_operation_registered(name)
}

/// Registers for capture, on the default lazy device, the operators a recorded trace calls
/// (see [`LazyBackend::register_ops_from_trace`]).
pub fn register_ops_from_trace(graph: &Graph) -> usize {
    default_backend().register_ops_from_trace(graph)
}
