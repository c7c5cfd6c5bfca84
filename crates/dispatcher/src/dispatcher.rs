//! The `Dispatcher`: the registry of operators and backend fallbacks.

use crate::semantics::OperatorSemantics;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use smallvec::SmallVec;

use switchboard_keys::{DispatchKey, DispatchKeySet, NUM_RUNTIME_ENTRIES};
use switchboard_schema::{FunctionSchema, Tag};

use crate::call::OperatorHandle;
use crate::debug::RegistrationDebug;
use crate::error::{DispatchError, DispatchErrorKind, Result};
pub use crate::handle::RegistrationHandle;
use crate::handle::Undo;
use crate::kernel::{KernelFunction, KernelKind};
use crate::op_map::OpMap;
use crate::operator::{
    AliasAnalysisKind, AnnotatedKernel, EntryState, OperatorEntry, SchemaRecord,
};
use crate::schema_check::{check_against_record, check_schema};
use crate::table::{BaseTable, Globals, SlotSet};
use switchboard_schema::OperatorName;

/// The keys whose backend fallback PyTorch's core makes a fallthrough.
pub const BUILTIN_FALLTHROUGH_KEYS: [DispatchKey; 10] = [
    DispatchKey::BackendSelect,
    DispatchKey::ADInplaceOrView,
    DispatchKey::AutocastCPU,
    DispatchKey::AutocastMTIA,
    DispatchKey::AutocastMAIA,
    DispatchKey::AutocastXPU,
    DispatchKey::AutocastMPS,
    DispatchKey::AutocastCUDA,
    DispatchKey::FuncTorchVmapMode,
    DispatchKey::VmapMode,
];

pub(crate) struct Registry {
    pub(crate) ops: OpMap,
    /// Backend fallbacks by dispatch-table slot.
    fallbacks: Vec<Option<Arc<AnnotatedKernel>>>,
    /// Derived from `fallbacks` (Note [Base dispatch table]).
    base: BaseTable,
    /// Namespaces with a DEF library, and where it was created.
    pub(crate) def_libraries: HashMap<String, String>,
    /// The functional counterparts found by name (`None`: none), forgotten whenever a schema
    /// is defined or removed (Note [Functional counterparts remembered]).
    pub(crate) functional_counterparts: HashMap<OperatorName, Option<OperatorHandle>>,
}

impl Registry {
    /// Whether a backend fallback is registered at dispatch-table slot `slot`.
    pub(crate) fn has_fallback(&self, slot: usize) -> bool {
        self.fallbacks.get(slot).is_some_and(Option::is_some)
    }
}

/// Kernels that operator tables may point at but no single operator owns: the markers and every
/// backend fallback ever registered. Shared by the dispatcher and all its operator entries, so
/// that a table never points at a freed fallback, even from an entry that outlives the
/// dispatcher (see Note [Lock-free dispatch table]).
pub(crate) struct SharedKernels {
    pub(crate) missing: Arc<AnnotatedKernel>,
    pub(crate) ambiguous: Arc<AnnotatedKernel>,
    pub(crate) fallbacks: Mutex<Vec<Arc<AnnotatedKernel>>>,
}

pub(crate) struct DispatcherInner {
    registry: Mutex<Registry>,
    shared: Arc<SharedKernels>,
    next_id: AtomicU64,
}

/// The operator registry: maps `ns::name.overload` to operators, holds the backend fallbacks,
/// and hands out registration handles.
///
/// `Dispatcher::global()` is the process-wide instance the operator library registers into;
/// `Dispatcher::new()` makes an independent one (tests, sandboxes). Cloning is cheap and gives
/// another handle to the same dispatcher.
#[derive(Clone)]
pub struct Dispatcher {
    pub(crate) inner: Arc<DispatcherInner>,
}

impl Default for Dispatcher {
    fn default() -> Self {
        Self::new()
    }
}

fn marker(kind: KernelKind, debug: &str) -> Arc<AnnotatedKernel> {
    Arc::new(AnnotatedKernel {
        kernel: KernelFunction::marker(kind),
        debug: debug.into(),
        id: 0,
    })
}

impl DispatcherInner {
    /// Sets every entry's copy of the observing state (Note [Observing calls for free]).
    pub(crate) fn set_observed(&self, on: bool) {
        let reg = self.registry.lock().unwrap_or_else(|e| e.into_inner());
        for entry in reg.ops.values() {
            entry.set_observed(on);
        }
    }
}

impl std::fmt::Debug for DispatcherInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Dispatcher")
    }
}

impl Dispatcher {
    /// A new, empty dispatcher: no operators, no backend fallbacks.
    pub fn new() -> Self {
        let missing = marker(KernelKind::Missing, "missing");
        let fallbacks = vec![None; NUM_RUNTIME_ENTRIES];
        let d = Dispatcher {
            inner: Arc::new(DispatcherInner {
                registry: Mutex::new(Registry {
                    ops: OpMap::default(),
                    base: BaseTable::compute(&fallbacks, &missing),
                    fallbacks,
                    def_libraries: HashMap::new(),
                    functional_counterparts: HashMap::new(),
                }),
                shared: Arc::new(SharedKernels {
                    missing,
                    ambiguous: marker(
                        KernelKind::AmbiguousAutogradOther,
                        "ambiguous_autogradother",
                    ),
                    fallbacks: Mutex::new(Vec::new()),
                }),
                next_id: AtomicU64::new(1),
            }),
        };
        crate::observe::register_dispatcher(&d.inner);
        d
    }

    /// A dispatcher with the fallthrough fallbacks PyTorch's core installs: BackendSelect,
    /// ADInplaceOrView, the Autocast keys of CPU, MTIA, MAIA, XPU, MPS and CUDA, FuncTorchVmapMode
    /// and VmapMode. Those keys are then skipped by every operator that has no kernel of its own
    /// for them. (The Autograd keys get their fallback from the autograd layer.)
    pub fn with_builtin_fallbacks() -> Self {
        let d = Dispatcher::new();
        for key in BUILTIN_FALLTHROUGH_KEYS {
            d.register_fallback(
                key,
                KernelFunction::fallthrough(),
                "registered by the dispatcher",
            )
            .expect("a new dispatcher has no fallbacks")
            .leak();
        }
        d
    }

    /// The process-wide dispatcher: [`with_builtin_fallbacks`](Self::with_builtin_fallbacks)
    /// plus every start-up registration of the program (see [`library!`](crate::library!)).
    pub fn global() -> &'static Dispatcher {
        static GLOBAL: OnceLock<Dispatcher> = OnceLock::new();
        GLOBAL.get_or_init(|| {
            let d = Dispatcher::with_builtin_fallbacks();
            crate::library::run_static_registrations(&d);
            d
        })
    }

    pub(crate) fn registry(&self) -> MutexGuard<'_, Registry> {
        self.inner
            .registry
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn globals<'a>(&'a self, reg: &'a Registry) -> Globals<'a> {
        Globals {
            fallbacks: &reg.fallbacks,
            base: &reg.base,
            missing: &self.inner.shared.missing,
            ambiguous: &self.inner.shared.ambiguous,
        }
    }

    fn handle(&self, undo: Undo) -> RegistrationHandle {
        RegistrationHandle {
            dispatcher: Arc::downgrade(&self.inner),
            undo: smallvec::smallvec![undo],
        }
    }

    fn next_id(&self) -> u64 {
        self.inner.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The entry of `name`, created (with the base table, Note [Base dispatch table]) if there
    /// is none; true when created.
    fn find_or_create(
        &self,
        reg: &mut Registry,
        name: &OperatorName,
    ) -> (Arc<OperatorEntry>, bool) {
        if let Some(e) = reg.ops.get(name) {
            return (e.clone(), false);
        }
        let entry = Arc::new(OperatorEntry::new(
            name.clone(),
            self.next_id(),
            Arc::downgrade(&self.inner),
            self.inner.shared.clone(),
            &reg.base,
        ));
        reg.ops.insert(entry.clone());
        (entry, true)
    }

    /// Removes `entry` from the registry when nothing is registered to it any more.
    fn cleanup(reg: &mut Registry, entry: &OperatorEntry, state: &mut EntryState) {
        if state.def_and_impl_count == 0 && !state.removed {
            state.removed = true;
            reg.ops.remove(entry.name());
        }
    }

    /// Claims namespace `ns` for a DEF library (`Dispatcher::registerLibrary`): only one DEF
    /// library may exist per namespace; FRAGMENT libraries are not limited.
    pub fn register_library(
        &self,
        ns: &str,
        debug: impl Into<RegistrationDebug>,
    ) -> Result<RegistrationHandle> {
        let debug = debug.into();
        let mut reg = self.registry();
        if let Some(previous) = reg.def_libraries.get(ns) {
            return Err(DispatchError::from(DispatchErrorKind::Registration(format!(
                "Only a single TORCH_LIBRARY can be used to register the namespace {ns}; please put \
                 all of your definitions in a single TORCH_LIBRARY block.  If you were trying to \
                 specify implementations, consider using TORCH_LIBRARY_IMPL (which can be \
                 duplicated).  If you really intended to define operators for a single namespace \
                 in a distributed way, you can use TORCH_LIBRARY_FRAGMENT to explicitly indicate \
                 this.  Previous registration of TORCH_LIBRARY was {previous}; latest registration \
                 was {debug}"
            ))));
        }
        reg.def_libraries.insert(ns.to_owned(), debug.to_string());
        Ok(self.handle(Undo::Library(ns.into())))
    }

    /// Defines an operator (`Dispatcher::registerDef`). `debug` says where (`registered at
    /// file:line`); `alias_analysis` `None` leaves it unset (printed `CONSERVATIVE (default)`).
    pub fn register_def(
        &self,
        schema: FunctionSchema,
        debug: impl Into<RegistrationDebug>,
        alias_analysis: Option<AliasAnalysisKind>,
    ) -> Result<RegistrationHandle> {
        self.register_def_with_tags(schema, debug, alias_analysis, Vec::new())
    }

    /// Like [`register_def`](Self::register_def), giving the operator `tags` (kept in the
    /// order given, as `OperatorEntry::registerSchema` keeps them; see Note [Operator tags]).
    pub fn register_def_with_tags(
        &self,
        schema: FunctionSchema,
        debug: impl Into<RegistrationDebug>,
        alias_analysis: Option<AliasAnalysisKind>,
        tags: Vec<Tag>,
    ) -> Result<RegistrationHandle> {
        let debug = debug.into();
        let mut reg = self.registry();
        let (entry, created) = self.find_or_create(&mut reg, schema.operator_name());
        let mut state = entry.state();
        if state.def_count != 0 {
            let original = entry
                .schema()
                .map(|r| r.debug.to_string())
                .unwrap_or_default();
            let err = DispatchError::from(DispatchErrorKind::Registration(format!(
                "Tried to register an operator ({schema}) with the same name and overload name \
                 multiple times. Each overload's schema should only be registered with a single \
                 call to def(). Duplicate registration: {debug}. Original registration: {original}"
            )));
            return Err(err);
        }
        let mismatch = state
            .kernels
            .iter()
            .find_map(|(_, k)| check_schema(entry.name(), &schema, &debug, k).err());
        if let Some(e) = mismatch {
            if created {
                Self::cleanup(&mut reg, &entry, &mut state);
            }
            return Err(e);
        }
        entry.set_schema(Some(SchemaRecord {
            semantics: Arc::new(OperatorSemantics::of(&schema, &tags)),
            schema,
            debug,
            alias_analysis,
            tags: tags.into_boxed_slice(),
            fitting_signature: AtomicU64::new(0),
        }));
        reg.functional_counterparts.clear();
        state.def_count += 1;
        state.def_and_impl_count += 1;
        drop(state);
        Ok(self.handle(Undo::Def(Arc::downgrade(&entry))))
    }

    /// Registers a kernel for `key` of operator `name` (`None`: catch-all, stored as
    /// CompositeImplicitAutograd). The operator need not be defined yet.
    pub fn register_impl(
        &self,
        name: OperatorName,
        key: Option<DispatchKey>,
        kernel: KernelFunction,
        debug: impl Into<RegistrationDebug>,
    ) -> Result<RegistrationHandle> {
        let key = match key {
            None | Some(DispatchKey::Undefined) => DispatchKey::CompositeImplicitAutograd,
            Some(k) => k,
        };
        let annotated = Arc::new(AnnotatedKernel {
            kernel,
            debug: debug.into(),
            id: self.next_id(),
        });
        let mut reg = self.registry();
        let (entry, created) = self.find_or_create(&mut reg, &name);
        if !created {
            if let Some(record) = entry.schema() {
                check_against_record(&name, &record, &annotated)?;
            }
        }
        let mut state = entry.state();
        let id = annotated.id;
        state.kernels.push(key, annotated);
        state.def_and_impl_count += 1;
        entry.refresh(&state, &self.globals(&reg), SlotSet::touched_by(key));
        drop(state);
        Ok(self.handle(Undo::Impl {
            op: Arc::downgrade(&entry),
            key,
            id,
        }))
    }

    /// Registers a boxed fallback for every operator at `key` (for an alias key, at each of its
    /// runtime keys). A key may have one fallback; a second is an error and registers nothing.
    pub fn register_fallback(
        &self,
        key: DispatchKey,
        kernel: KernelFunction,
        debug: impl Into<RegistrationDebug>,
    ) -> Result<RegistrationHandle> {
        let debug = debug.into();
        let keys: Vec<DispatchKey> = if key.is_alias() {
            key.runtime_key_set().iter().collect()
        } else {
            vec![key]
        };
        let mut reg = self.registry();
        for &k in &keys {
            if k == DispatchKey::Undefined || k.is_per_backend_functionality() {
                return Err(DispatchError::from(DispatchErrorKind::Registration(
                    format!(
                        "Tried to register a backend fallback for {k}, which is not a runtime key"
                    ),
                )));
            }
            let slot = DispatchKeySet::from_key(k).dispatch_table_index();
            if let Some(previous) = &reg.fallbacks[slot] {
                return Err(DispatchError::from(DispatchErrorKind::Registration(
                    format!(
                    "Tried to register multiple backend fallbacks for the same dispatch key {k}; \
                     previous registration {}, new registration {debug}",
                    previous.debug
                ),
                )));
            }
        }
        let mut handle = RegistrationHandle {
            dispatcher: Arc::downgrade(&self.inner),
            undo: SmallVec::new(),
        };
        for &k in &keys {
            let slot = DispatchKeySet::from_key(k).dispatch_table_index();
            let id = self.next_id();
            let fallback = Arc::new(AnnotatedKernel {
                kernel: kernel.clone(),
                debug: debug.clone(),
                id,
            });
            let mut shared = self
                .inner
                .shared
                .fallbacks
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            shared.push(fallback.clone());
            reg.fallbacks[slot] = Some(fallback);
            handle.undo.push(Undo::Fallback { slot, id });
        }
        reg.base = BaseTable::compute(&reg.fallbacks, &self.inner.shared.missing);
        self.refresh_all(&reg);
        Ok(handle)
    }

    fn refresh_all(&self, reg: &Registry) {
        let globals = self.globals(reg);
        for entry in reg.ops.values() {
            let state = entry.state();
            entry.refresh(&state, &globals, SlotSet::ALL);
        }
    }

    pub(crate) fn undo(&self, undo: Undo) {
        let mut reg = self.registry();
        match undo {
            Undo::Library(ns) => {
                reg.def_libraries.remove(&*ns);
            }
            Undo::Def(op) => {
                let Some(entry) = op.upgrade() else {
                    return;
                };
                let mut state = entry.state();
                if state.removed {
                    return;
                }
                state.def_count -= 1;
                state.def_and_impl_count -= 1;
                if state.def_count == 0 {
                    entry.set_schema(None);
                    reg.functional_counterparts.clear();
                }
                Self::cleanup(&mut reg, &entry, &mut state);
            }
            Undo::Impl { op, key, id } => {
                let Some(entry) = op.upgrade() else {
                    return;
                };
                let mut state = entry.state();
                if state.removed {
                    return;
                }
                if let Some(removed) = state.kernels.remove(key, id) {
                    state.def_and_impl_count -= 1;
                    entry.refresh(&state, &self.globals(&reg), SlotSet::touched_by(key));
                    state.retired.push(removed);
                }
                Self::cleanup(&mut reg, &entry, &mut state);
            }
            Undo::Fallback { slot, id } => {
                if reg.fallbacks[slot].as_ref().is_some_and(|f| f.id == id) {
                    reg.fallbacks[slot] = None;
                    reg.base = BaseTable::compute(&reg.fallbacks, &self.inner.shared.missing);
                    self.refresh_all(&reg);
                }
            }
        }
    }

    pub(crate) fn entries_in_creation_order(reg: &Registry) -> Vec<&Arc<OperatorEntry>> {
        let mut entries: Vec<&Arc<OperatorEntry>> = reg.ops.values().collect();
        entries.sort_by_key(|e| e.seq);
        entries
    }

    /// The operator named `name`, if it exists (defined or with kernels).
    pub fn find_op(&self, name: &OperatorName) -> Option<OperatorHandle> {
        self.registry().ops.get(name).cloned().map(OperatorHandle)
    }

    /// The operator named `name` (`ns::name.overload`), if it has a schema.
    pub fn find_schema(&self, name: &str) -> Option<OperatorHandle> {
        self.find_op(&OperatorName::parse(name).ok()?)
            .filter(|op| op.schema().is_some())
    }

    fn entry(&self, reg: &Registry, name: &str) -> Option<Arc<OperatorEntry>> {
        reg.ops.get(&OperatorName::parse(name).ok()?).cloned()
    }

    /// Like [`find_schema`](Self::find_schema), with PyTorch's error (and the closest names)
    /// when there is none.
    pub fn find_schema_or_throw(&self, name: &str) -> Result<OperatorHandle> {
        if let Some(op) = self.find_schema(name) {
            return Ok(op);
        }
        let parsed = OperatorName::parse(name)
            .map_err(|e| DispatchError::from(DispatchErrorKind::Schema(e.to_string())))?;
        let has_impls = self.find_op(&parsed).is_some();
        let mut suggestions = String::new();
        if has_impls {
            suggestions
                .push_str(" but we found an implementation; did you forget to def() the operator?");
        } else {
            let close = self.closest_names(&parsed.to_string(), 3);
            if !close.is_empty() {
                suggestions = format!(" Did you mean {}?", close.join(", "));
            }
        }
        Err(DispatchError::from(DispatchErrorKind::UnknownOperator {
            name: format!("{}.{}", parsed.name(), parsed.overload_name()),
            suggestions,
        }))
    }

    fn closest_names(&self, wanted: &str, n: usize) -> Vec<String> {
        let mut scored: Vec<(usize, String)> = self
            .list_operators()
            .into_iter()
            .map(|name| {
                let s = name.to_string();
                (crate::edit_distance::edit_distance(wanted, &s), s)
            })
            .filter(|(d, s)| *d <= (s.len().max(wanted.len()) / 2).max(2))
            .collect();
        scored.sort();
        scored
            .into_iter()
            .take(n)
            .map(|(_, s)| format!("'{s}'"))
            .collect()
    }

    /// Every operator, in creation order.
    pub fn list_operators(&self) -> Vec<OperatorName> {
        let reg = self.registry();
        Self::entries_in_creation_order(&reg)
            .into_iter()
            .map(|e| e.name().clone())
            .collect()
    }

    /// `_dispatch_dump` of an operator: its schema and registered kernels; `""` when unknown.
    pub fn dump_state(&self, name: &str) -> String {
        let reg = self.registry();
        match self.entry(&reg, name) {
            Some(entry) => entry.dump_state(&entry.state()),
            None => String::new(),
        }
    }

    /// `_dispatch_dump_table` of an operator: the kernel of each runtime key and why; `""`
    /// when unknown.
    pub fn dump_table(&self, name: &str) -> String {
        let reg = self.registry();
        match self.entry(&reg, name) {
            Some(entry) => entry.dump_table(&entry.state(), &self.globals(&reg)),
            None => String::new(),
        }
    }

    /// Which kernel runtime key `key` of operator `name` runs, and why (`"kernel"`, `"math
    /// kernel"`, `"backend fallback"`, `"missing"`, ...).
    pub fn computed_kernel(&self, name: &str, key: DispatchKey) -> Option<(String, &'static str)> {
        let reg = self.registry();
        let entry = self.entry(&reg, name)?;
        let state = entry.state();
        let globals = self.globals(&reg);
        let (k, why) = crate::table::Resolver::new(&state.kernels, &globals).resolve(key);
        Some((k.debug.to_string(), why.as_str()))
    }

    /// `dump_state` of every operator that has kernels but no schema
    /// (`_dispatch_find_dangling_impls`).
    pub fn find_dangling_impls(&self) -> Vec<String> {
        let reg = self.registry();
        Self::entries_in_creation_order(&reg)
            .into_iter()
            .filter(|e| e.schema().is_none())
            .map(|e| e.dump_state(&e.state()))
            .collect()
    }

    /// The runtime keys with a kernel for `op`, for error messages.
    pub(crate) fn available_keys(&self, op: &OperatorEntry) -> Vec<DispatchKey> {
        let reg = self.registry();
        let state = op.state();
        op.keys_with_kernels(&state, &self.globals(&reg))
    }
}
