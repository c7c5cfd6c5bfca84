//! What the lazy backend knows about each operator it intercepts: whether it can be captured,
//! its aliasing, whether interception is disabled for it, its counts.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, RwLock};

use switchboard_dispatcher::{
    DispatchError, DispatchKey, Dispatcher, OperatorHandle, OperatorSemantics, Provenance, Tag,
};
use switchboard_schema::{FunctionSchema, OperatorName, Type};
use switchboard_tensor::TensorError;

use crate::backend::default_backend;
use crate::rules::{rule_for, ShapeRule};

/// How calls of an operator are handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Handling {
    /// Captured: a node of the pending graph, metadata from the Meta kernel.
    Capture,
    /// Run eagerly on CPU (interception layer 3), for this reason.
    Eager(&'static str),
}

/// An operator as the lazy backend sees it (one per operator, made on its first call; the
/// same on every lazy device, Note [Lazy devices]).
pub(crate) struct InterceptedOp {
    /// The operator's id in the dispatcher.
    pub id: usize,
    /// `aten::add.Tensor`.
    pub name: String,
    pub semantics: Arc<OperatorSemantics>,
    pub handling: Handling,
    /// The rule giving its output metadata without the Meta kernel (Note [Shape rules]).
    pub rule: Option<ShapeRule>,
    /// Whether a host tensor of any size may be an argument (`copy_`'s source).
    pub accepts_host: bool,
}

impl InterceptedOp {
    fn new(op: &OperatorHandle) -> InterceptedOp {
        let schema = op.schema();
        let handling = match &schema {
            None => Handling::Eager("the operator has no schema"),
            Some(r) => handling_of(op, &r.schema, &r.semantics),
        };
        let name = op.name().to_string();
        InterceptedOp {
            id: op.id(),
            rule: rule_for(&name),
            accepts_host: name == "aten::copy_",
            name,
            semantics: op.semantics().unwrap_or_default(),
            handling,
        }
    }
}

// Note [Data-dependent operators run eagerly]
// A captured call's output metadata comes from the Meta kernel before any data exists. Two tags
// say the data decides the outputs: `dynamic_output_shape` (the output shape: `nonzero`,
// `argwhere`) and `data_dependent_output` (a non-tensor output's value: `item`, `equal`).
// PyTorch's fake tensors refuse both the same way (`FakeTensorMode` raises
// DynamicOutputShapeException / DataDependentOutputException for ops with these tags, unless a
// fake implementation says otherwise), and so does capture here: such calls run eagerly. The
// tags come from the operator's definition (PyTorch's native_functions.yaml tags for aten
// operators, `Library::def_with_tags` for others), so a custom operator opts in the same way.
// Operators returning host values already run eagerly for that reason; the tag covers a
// data-dependent operator returning tensors too.

/// Whether calls of `op` can be captured (Genie's layer 2) or must run eagerly (layer 3).
fn handling_of(
    op: &OperatorHandle,
    schema: &FunctionSchema,
    semantics: &OperatorSemantics,
) -> Handling {
    for r in schema.returns() {
        if !is_tensor_return(r.ty()) {
            return Handling::Eager("it returns a host value");
        }
    }
    if semantics.is_random {
        return Handling::Eager("its results are random: it runs eagerly so that they match eager");
    }
    if semantics.is_data_dependent {
        return Handling::Eager(if op.has_tag(Tag::DynamicOutputShape) {
            "its output shape depends on the data (no Meta kernel can tell it)"
        } else {
            "its outputs depend on the data (no Meta kernel can tell them)"
        });
    }
    if Dispatcher::global()
        .kernel_origin(op, DispatchKey::Meta)
        .is_operator_kernel()
    {
        Handling::Capture
    } else {
        Handling::Eager("it has no Meta kernel to compute its output metadata")
    }
}

fn is_tensor_return(t: &Type) -> bool {
    match t {
        Type::Tensor => true,
        Type::Optional(e) | Type::List(e) => matches!(**e, Type::Tensor),
        _ => false,
    }
}

/// What each operator seen so far is to the lazy backend, by operator id.
static OPERATORS: LazyLock<RwLock<HashMap<usize, Arc<InterceptedOp>>>> =
    LazyLock::new(|| RwLock::new(HashMap::new()));

/// The information on `op` (made on first use).
pub(crate) fn intercepted_op(op: &OperatorHandle) -> Arc<InterceptedOp> {
    if let Some(i) = OPERATORS
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(&op.id())
    {
        return i.clone();
    }
    let info = Arc::new(InterceptedOp::new(op));
    OPERATORS
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .entry(op.id())
        .or_insert(info)
        .clone()
}

// Note [Selective interception]
// `disable_ops(["aten::add", "mm"])` sends the calls of those operators to the eager path
// (interception layer 3: inputs materialised, the operator run on CPU, its result wrapped);
// `enable_ops` takes operators off that list again, on one lazy device (Note [Lazy devices]).
// A name without namespace means `aten::`; a name without overload means every overload.
// Names must be registered operators. While no operator is disabled, an intercepted call reads
// one flag of the device's filter; otherwise it looks its operator's name up.

/// The operators `disable_ops` turned interception off for, on one lazy device.
#[derive(Default)]
pub(crate) struct OperatorFilter {
    /// `aten::add` (all overloads) or `aten::add.Tensor`.
    disabled: RwLock<HashSet<String>>,
    /// Whether `disabled` has any name: while it has none, an intercepted call reads this flag
    /// only.
    any: AtomicBool,
}

impl OperatorFilter {
    /// Whether no operator is disabled (one relaxed load).
    #[inline]
    pub fn is_empty(&self) -> bool {
        !self.any.load(Ordering::Relaxed)
    }

    /// Whether interception is off for operator `full_name` (`aten::add.Tensor`).
    pub fn is_disabled(&self, full_name: &str) -> bool {
        if self.is_empty() {
            return false;
        }
        let disabled = self.disabled.read().unwrap_or_else(|e| e.into_inner());
        let base = full_name.split('.').next().unwrap_or(full_name);
        disabled.contains(full_name) || disabled.contains(base)
    }

    pub fn update(&self, names: &[&str], disable: bool) -> Result<(), DispatchError> {
        let names: Vec<String> = names
            .iter()
            .map(|n| normalize(n))
            .collect::<Result<_, _>>()?;
        let mut f = self.disabled.write().unwrap_or_else(|e| e.into_inner());
        for n in names {
            if disable {
                f.insert(n);
            } else {
                f.remove(&n);
            }
        }
        self.any.store(!f.is_empty(), Ordering::Relaxed);
        Ok(())
    }

    /// The disabled names, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .disabled
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect();
        v.sort();
        v
    }
}

/// `aten::add` / `add` / `aten::add.Tensor` / `add.Tensor`, checked against the dispatcher's
/// operators, as the filter stores it.
fn normalize(name: &str) -> Result<String, DispatchError> {
    let qualified = if name.contains("::") {
        name.to_string()
    } else {
        format!("aten::{name}")
    };
    let (base, overload) = match qualified.split_once('.') {
        Some((b, o)) => (b.to_string(), Some(o.to_string())),
        None => (qualified.clone(), None),
    };
    let ops = Dispatcher::global().list_operators();
    let known = ops.iter().any(|o: &OperatorName| {
        o.name() == base && overload.as_deref().is_none_or(|ov| o.overload_name() == ov)
    }) || (overload.as_deref() == Some("default")
        && ops
            .iter()
            .any(|o| o.name() == base && o.overload_name().is_empty()));
    if !known {
        return Err(TensorError::invalid(format!(
            "enable_ops/disable_ops: unknown operator '{name}'"
        ))
        .into());
    }
    Ok(match overload.as_deref() {
        Some("default") => base,
        _ => qualified,
    })
}

/// Turns interception off for these operators on the default lazy device: their calls on lazy
/// tensors run eagerly on CPU (materialising their inputs) and their results are wrapped as
/// lazy tensors (Note [Selective interception]).
///
/// ```
/// # use switchboard_lazy as lazy;
/// lazy::disable_ops(&["aten::mm", "relu"]).unwrap();
/// assert_eq!(lazy::disabled_ops(), ["aten::mm", "aten::relu"]);
/// lazy::enable_ops(&["mm", "aten::relu"]).unwrap();
/// assert!(lazy::disabled_ops().is_empty());
/// assert!(lazy::disable_ops(&["no_such_op"]).is_err());
/// ```
pub fn disable_ops(names: &[&str]) -> Result<(), DispatchError> {
    default_backend().disable_ops(names)
}

/// Turns interception back on for these operators (see [`disable_ops`]).
pub fn enable_ops(names: &[&str]) -> Result<(), DispatchError> {
    default_backend().enable_ops(names)
}

/// The operators whose interception is turned off on the default lazy device, sorted.
pub fn disabled_ops() -> Vec<String> {
    default_backend().disabled_ops()
}

/// How many of the dispatcher's operators each interception layer handles.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StaticCoverage {
    /// Operators with a schema in the global dispatcher.
    pub operators: usize,
    /// With a dedicated lazy kernel (layer 1).
    pub registered: usize,
    /// Captured by the boxed fallback (layer 2): a Meta kernel, tensor results, not random.
    pub fallback: usize,
    /// Not intercepted themselves: a composite kernel decomposes them into operators that
    /// are (their calls are captured as those).
    pub composite: usize,
    /// Run eagerly (layer 3): no Meta kernel, host-value results or random results.
    pub eager_only: usize,
}

impl StaticCoverage {
    /// The share of operators that layers 1 and 2 (and composite decompositions) capture
    /// without an eager fallback, in percent.
    pub fn percentage(&self) -> f64 {
        if self.operators == 0 {
            return 0.0;
        }
        100.0 * (self.registered + self.fallback + self.composite) as f64 / self.operators as f64
    }
}

/// Classifies every operator of the global dispatcher by the kernel its `Lazy` slot holds.
pub(crate) fn static_coverage() -> StaticCoverage {
    let d = Dispatcher::global();
    let mut c = StaticCoverage::default();
    for name in d.list_operators() {
        let Some(op) = d.find_op(&name) else { continue };
        if op.schema().is_none() {
            continue;
        }
        c.operators += 1;
        match d.kernel_origin(&op, DispatchKey::Lazy).provenance {
            Provenance::Kernel => c.registered += 1,
            Provenance::DefaultBackend | Provenance::Math => c.composite += 1,
            _ => match intercepted_op(&op).handling {
                Handling::Capture => c.fallback += 1,
                Handling::Eager(_) => c.eager_only += 1,
            },
        }
    }
    c
}
