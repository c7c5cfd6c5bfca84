//! `OperatorSemantics`: what an operator's schema and tags say about it, computed once when the
//! operator is defined and read by every layer that needs it (graph planning, lazy capture,
//! tracing, the CPU fallback).

use switchboard_keys::DispatchKey;
use switchboard_schema::{Argument, FunctionSchema, Tag, Type};

use std::sync::Arc;

use crate::dispatcher::Registry;
use crate::table::Resolver;
use crate::{Dispatcher, KernelKind, OperatorHandle, Provenance, SchemaRecord};

// Note [One home for an operator's facts]
// Aliasing, mutation, the kind of an overload, purity, randomness and a data-dependent output
// shape are facts of an operator's definition (its schema and tags), as PyTorch's
// `FunctionSchema` alias info, `torch::utils::SchemaInfo` and torchgen's `SchemaKind` are. They
// are computed once, at `def` time, into the `SchemaRecord` (`OperatorHandle::semantics`), so
// that a layer reading them on a hot path reads precomputed data and no layer keeps its own
// copy of the rules. The functional counterpart of an in-place, out= or mutable overload is
// the one fact that depends on another operator, which may be defined later: it is resolved by
// name when asked (`Dispatcher::functional_counterpart`). Where a key's kernel comes from is a
// fact of the dispatch table, not of the definition: `Dispatcher::kernel_origin` gives it as a
// `Provenance`.

/// torchgen's `SchemaKind`: how an overload treats the tensors it is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchemaKind {
    /// Writes no argument (`add.Tensor`, `view`).
    Functional,
    /// Writes `self` and is named with a trailing underscore (`add_.Tensor`).
    Inplace,
    /// Writes keyword-only `out` arguments (`add.out`, `max.dim_max`).
    Out,
    /// Writes some other argument (`_native_batch_norm_legit`'s running statistics).
    Mutable,
}

/// Where the kernel of one dispatch key of an operator comes from
/// (`Dispatcher::kernel_origin`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelOrigin {
    /// Why the slot holds its kernel: registered to the key, a composite kernel (explicit:
    /// `DefaultBackend`, implicit: `Math`), the backend fallback, missing...
    pub provenance: Provenance,
    /// The kernel's kind: computes, falls through, missing, ambiguous.
    pub kind: KernelKind,
}

impl KernelOrigin {
    /// A kernel that computes the operator itself at this key: registered to it or composite
    /// (not a fallthrough, a backend fallback or missing).
    pub fn is_operator_kernel(self) -> bool {
        self.kind == KernelKind::Regular
            && matches!(
                self.provenance,
                Provenance::Kernel | Provenance::DefaultBackend | Provenance::Math
            )
    }
}

/// The facts of one operator's definition (Note [One home for an operator's facts]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperatorSemantics {
    /// The arguments the operator writes (`Tensor(a!)`, `Tensor(a!)[]`), in order.
    pub written: Box<[usize]>,
    /// For each return, the argument it aliases, if any (`-> Tensor(a)` aliases the argument
    /// annotated `(a)`; a returned list `Tensor(a)[]` aliases none, its items are views).
    pub return_aliases: Box<[Option<usize>]>,
    /// For each return, whether it is a write alias (`-> Tensor(a!)`: the written argument
    /// itself) rather than a view.
    pub return_writes: Box<[bool]>,
    /// For each return, whether it is a view of an argument (annotated without `!`:
    /// `-> Tensor(a)`, `-> Tensor(a)[]`).
    pub return_views: Box<[bool]>,
    /// The overload's kind.
    pub kind: SchemaKind,
    /// Some return is a view of an argument (torchgen's `is_view_op`: a return annotated
    /// without `!`).
    pub is_view: bool,
    /// Calls draw random numbers: the operator is tagged `nondeterministic_seeded`, or it takes
    /// a `Generator` (torchgen requires the tag of those, but an operator defined elsewhere may
    /// lack it).
    pub is_random: bool,
    /// Calls are pure functions of their arguments: nothing written, nothing random, and the
    /// result is not uninitialised memory (`empty`). Identical pure calls give equal results.
    pub is_pure: bool,
    /// The shape or the values of the outputs depend on the input data (tags
    /// `dynamic_output_shape`, `data_dependent_output`): no Meta kernel can tell them.
    pub is_data_dependent: bool,
}

/// Factories whose results are uninitialised memory: deterministic in their metadata only.
const UNINITIALISED: &[&str] = &[
    "empty",
    "empty_like",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
];

/// The semantics of an operator without a schema: nothing known written or aliased, and not
/// known to be pure.
impl Default for OperatorSemantics {
    fn default() -> Self {
        OperatorSemantics {
            written: Box::new([]),
            return_aliases: Box::new([]),
            return_writes: Box::new([]),
            return_views: Box::new([]),
            kind: SchemaKind::Functional,
            is_view: false,
            is_random: false,
            is_pure: false,
            is_data_dependent: false,
        }
    }
}

impl OperatorSemantics {
    /// The semantics of an operator defined with `schema` and `tags`.
    pub fn of(schema: &FunctionSchema, tags: &[Tag]) -> OperatorSemantics {
        let args = schema.arguments();
        let written: Box<[usize]> = args
            .iter()
            .enumerate()
            .filter(|(_, a)| a.is_write())
            .map(|(i, _)| i)
            .collect();
        let return_aliases = schema
            .returns()
            .iter()
            .map(|r| {
                let info = r.alias_info()?;
                args.iter().position(|a| {
                    a.alias_info().is_some_and(|ai| {
                        ai.before_set()
                            .any(|s| s != "*" && info.before_set().any(|t| t == s))
                    })
                })
            })
            .collect();
        let return_writes = schema
            .returns()
            .iter()
            .map(|r| r.alias_info().is_some_and(|i| i.is_write()))
            .collect();
        let return_views: Box<[bool]> = schema
            .returns()
            .iter()
            .map(|r| r.alias_info().is_some_and(|i| !i.is_write()))
            .collect();
        let is_view = return_views.contains(&true);
        let is_random = tags.contains(&Tag::NondeterministicSeeded)
            || args.iter().any(|a| mentions_generator(a.ty()));
        let is_pure =
            written.is_empty() && !is_random && !UNINITIALISED.contains(&schema.base_name());
        OperatorSemantics {
            kind: schema_kind(schema),
            written,
            return_aliases,
            return_writes,
            return_views,
            is_view,
            is_random,
            is_pure,
            is_data_dependent: tags.contains(&Tag::DynamicOutputShape)
                || tags.contains(&Tag::DataDependentOutput),
        }
    }

    /// The argument a view operator's returns are views of, read from its schema: the one a
    /// return aliases, or the one whose alias set the items of a returned list carry
    /// (`Tensor(a -> *) self -> Tensor(a)[]`, `split`: each item is a view of `self`). Not a
    /// field: only functionalization's view calls ask, and every operator's semantics would
    /// carry it (the heap per operator is held under 2 KB, `tests/heap.rs`).
    pub fn viewed_argument(schema: &FunctionSchema) -> Option<usize> {
        let args = schema.arguments();
        schema
            .returns()
            .iter()
            .filter_map(|r| r.alias_info().filter(|i| !i.is_write()))
            .find_map(|info| {
                let sets: Vec<&str> = info
                    .before_set()
                    .chain(info.contained_types().iter().flat_map(|c| c.before_set()))
                    .filter(|s| *s != "*")
                    .collect();
                args.iter().position(|a| {
                    a.alias_info()
                        .is_some_and(|ai| ai.before_set().any(|s| sets.contains(&s)))
                })
            })
    }

    /// Whether the operator writes any argument.
    pub fn is_mutating(&self) -> bool {
        !self.written.is_empty()
    }

    /// Whether every return is a view of an argument (a view operator: `view`, `t`, ...).
    pub fn returns_only_views(&self) -> bool {
        !self.return_aliases.is_empty()
            && self
                .return_aliases
                .iter()
                .zip(self.return_writes.iter())
                .all(|(a, w)| a.is_some() && !w)
    }
}

/// torchgen's `FunctionSchema.kind()`: out= first (an out= overload may also write `self`),
/// then a trailing underscore, then any other written argument.
fn schema_kind(schema: &FunctionSchema) -> SchemaKind {
    let args = schema.arguments();
    if args.iter().any(|a| a.is_out()) {
        SchemaKind::Out
    } else if is_inplace_name(schema.base_name()) {
        SchemaKind::Inplace
    } else if args.iter().any(|a| a.is_write()) {
        SchemaKind::Mutable
    } else {
        SchemaKind::Functional
    }
}

/// torchgen's `BaseOperatorName.inplace`: `add_`, and the in-place dunders (`__iadd__`).
fn is_inplace_name(base: &str) -> bool {
    match base.strip_prefix("__").and_then(|b| b.strip_suffix("__")) {
        Some(dunder) => dunder.starts_with('i') && !matches!(dunder, "init" | "invert"),
        None => base.ends_with('_'),
    }
}

fn mentions_generator(t: &Type) -> bool {
    match t {
        Type::Generator => true,
        Type::Optional(e) | Type::List(e) => mentions_generator(e),
        _ => false,
    }
}

/// The base names the functional counterpart of an overload of `kind` named `base` may have,
/// by torchgen's naming rules: `add_` -> `add`, `__iadd__` -> `__add__`, `add` (out=) ->
/// `add`; a functional form named with `_functional` when the plain name is taken or itself
/// mutable (`normal_` -> `normal_functional`, `_native_batch_norm_legit` ->
/// `_native_batch_norm_legit_functional`). Empty for a functional overload.
pub(crate) fn functional_base_names(kind: SchemaKind, base: &str) -> Vec<String> {
    let plain = match kind {
        SchemaKind::Functional => return Vec::new(),
        SchemaKind::Mutable => return vec![format!("{base}_functional")],
        SchemaKind::Out => base.to_string(),
        SchemaKind::Inplace => match base.strip_prefix("__i").and_then(|b| b.strip_suffix("__")) {
            Some(dunder) => return vec![format!("__{dunder}__")],
            None => base.trim_end_matches('_').to_string(),
        },
    };
    let suffixed = format!("{plain}_functional");
    vec![plain, suffixed]
}

/// The keyword arguments torchgen groups as `TensorOptions`: a factory's out= overload has none
/// (`full.out` vs `full`), and torchgen's `Arguments.signature()` drops them.
const TENSOR_OPTIONS: &[&str] = &["dtype", "layout", "device", "pin_memory"];

// Note [Functional counterparts remembered]
// An in-place or out= overload's functional counterpart is found by name among every operator
// defined (it may be defined after the overload, or by another library), a search over the
// whole registry. Functionalization asks for it on every write it removes, so the registry
// remembers the answers, and forgets them all whenever a schema is defined or removed: an
// answer is searched again only when the set of schemas may have changed.

/// Whether `candidate` (a functional overload) is the functional counterpart of `schema` (of
/// `kind`): torchgen's `FunctionSchema.signature()` equality, i.e. the same arguments by name
/// and type once the out= and TensorOptions arguments are dropped, and as many returns (alias
/// annotations and defaults do not count).
pub(crate) fn is_functional_counterpart(
    schema: &FunctionSchema,
    kind: SchemaKind,
    candidate: &FunctionSchema,
) -> bool {
    let signature = |a: &&Argument| !a.is_out() && !TENSOR_OPTIONS.contains(&a.name());
    let ours = schema
        .arguments()
        .iter()
        .filter(signature)
        .map(|a| (a.name(), a.ty()));
    let theirs = candidate
        .arguments()
        .iter()
        .filter(signature)
        .map(|a| (a.name(), a.ty()));
    let returns = match kind {
        // An out= overload returns its out arguments; `_functional` adds the updated
        // buffers to the returns.
        SchemaKind::Out => schema.arguments().iter().filter(|a| a.is_out()).count(),
        SchemaKind::Mutable => schema.returns().len() + schema.written_arguments().len(),
        _ => schema.returns().len(),
    };
    ours.eq(theirs) && candidate.returns().len() == returns
}

impl Dispatcher {
    /// The `*_copy` form of view operator `op` (torchgen's view-copy operators, which
    /// functionalization calls for views: `transpose.int` -> `transpose_copy.int`), if defined.
    pub fn view_copy_form(&self, op: &OperatorHandle) -> Option<OperatorHandle> {
        let record = op.schema()?;
        if !record.semantics.is_view {
            return None;
        }
        let name = op.name();
        let qualified = match name.overload_name() {
            "" => format!("{}_copy", name.name()),
            overload => format!("{}_copy.{overload}", name.name()),
        };
        self.find_schema(&qualified)
    }

    /// The view operator whose `*_copy` form `op` is (`transpose_copy.int` ->
    /// `transpose.int`); `None` when `op` is not a view's copy form.
    pub fn view_of_copy_form(&self, op: &OperatorHandle) -> Option<OperatorHandle> {
        let name = op.name();
        let base = name.name().strip_suffix("_copy")?;
        let qualified = match name.overload_name() {
            "" => base.to_string(),
            overload => format!("{base}.{overload}"),
        };
        self.find_schema(&qualified)
            .filter(|view| view.schema().is_some_and(|r| r.semantics.is_view))
    }

    /// The in-place overload whose functional counterpart is `op` (`add.Tensor` ->
    /// `add_.Tensor`, `relu` -> `relu_`): the same computation written into its first argument.
    /// `None` for an overload that is not functional, or when no such overload is defined.
    pub fn inplace_form(&self, op: &OperatorHandle) -> Option<OperatorHandle> {
        let record = op.schema()?;
        if record.semantics.kind != SchemaKind::Functional {
            return None;
        }
        let name = op.name();
        let qualified = match name.overload_name() {
            "" => format!("{}_", name.name()),
            overload => format!("{}_.{overload}", name.name()),
        };
        self.find_schema(&qualified).filter(|inplace| {
            inplace
                .schema()
                .is_some_and(|r| r.semantics.kind == SchemaKind::Inplace)
                && self
                    .functional_counterpart(inplace)
                    .is_some_and(|f| f.ptr_eq(op))
        })
    }

    /// The functional overload an in-place, out= or mutable overload `op` corresponds to
    /// (torchgen's `NativeFunctionsGroup`: `add_.Tensor` and `add.out` -> `add.Tensor`,
    /// `_native_batch_norm_legit` -> `_native_batch_norm_legit_functional`), resolved by name
    /// now, so a counterpart defined after `op` is found. `None` for a functional overload, an
    /// operator without a schema, or when no counterpart is defined.
    pub fn functional_counterpart(&self, op: &OperatorHandle) -> Option<OperatorHandle> {
        let record = op.schema()?;
        if record.semantics.kind == SchemaKind::Functional {
            return None;
        }
        let mut reg = self.registry();
        if let Some(found) = reg.functional_counterparts.get(op.name()) {
            return found.clone();
        }
        let found = Self::find_functional_counterpart(&reg, &record);
        reg.functional_counterparts
            .insert(op.name().clone(), found.clone());
        found
    }

    /// [`functional_counterpart`](Self::functional_counterpart), searched among the operators
    /// defined now.
    fn find_functional_counterpart(
        reg: &Registry,
        record: &SchemaRecord,
    ) -> Option<OperatorHandle> {
        let schema = &record.schema;
        let kind = record.semantics.kind;
        let names: Vec<String> = functional_base_names(kind, schema.base_name())
            .into_iter()
            .map(|base| match schema.namespace() {
                Some(ns) => format!("{ns}::{base}"),
                None => base,
            })
            .collect();
        if names.is_empty() {
            return None;
        }
        Self::entries_in_creation_order(reg)
            .into_iter()
            .filter(|entry| names.iter().any(|n| n == entry.name().name()))
            .find(|entry| {
                entry.schema().is_some_and(|c| {
                    c.semantics.kind == SchemaKind::Functional
                        && is_functional_counterpart(schema, kind, &c.schema)
                })
            })
            .map(|entry| OperatorHandle(Arc::clone(entry)))
    }

    /// Where the kernel `op` runs for runtime key `key` comes from, and what kind of kernel
    /// it is (a fallthrough registered to the key, a backend fallback, missing...).
    pub fn kernel_origin(&self, op: &OperatorHandle, key: DispatchKey) -> KernelOrigin {
        let reg = self.registry();
        let state = op.0.state();
        let globals = self.globals(&reg);
        let (kernel, provenance) = Resolver::new(&state.kernels, &globals).resolve(key);
        KernelOrigin {
            provenance,
            kind: kernel.kernel.kind(),
        }
    }
}
