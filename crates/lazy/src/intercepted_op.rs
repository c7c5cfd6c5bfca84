//! What the lazy backend knows about each operator it intercepts: whether it can be captured,
//! its aliasing, its shape rule; how many operators each interception layer handles.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, RwLock};

use switchboard_dispatcher::{
    DispatchKey, Dispatcher, OperatorHandle, OperatorSemantics, Provenance, Tag,
};
use switchboard_schema::{FunctionSchema, Type};

use crate::composite_scope::is_interposed;
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
    /// Whether a host tensor of any size may be an argument (`copy_`'s and `copy`'s source).
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
            accepts_host: name == "aten::copy_" || name == "aten::copy",
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
            // A filter's interposed kernel (Note [Filters on composite operators]).
            Provenance::Kernel if is_interposed(&op) => c.composite += 1,
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
