//! `OperatorEntry`: one operator's schema, registered kernels and computed dispatch table.

use crate::semantics::OperatorSemantics;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use smallvec::SmallVec;

use switchboard_keys::{DispatchKey, DispatchKeySet, NUM_RUNTIME_ENTRIES};
use switchboard_schema::{FunctionSchema, Tag};

use crate::debug::RegistrationDebug;
use crate::dispatch_args::DispatchArgs;
use crate::dispatcher::{DispatcherInner, SharedKernels};
use crate::kernel::KernelFunction;
use crate::table::{runtime_keys, BaseTable, Globals, Provenance, Resolver, SlotSet, RUNTIME_KEYS};
use switchboard_schema::OperatorName;

/// A registered kernel with what the dumps print about it.
pub struct AnnotatedKernel {
    /// The kernel.
    pub kernel: KernelFunction,
    /// Where it came from (`registered at file:line`, or the name given at registration);
    /// shared by the registrations of one library.
    pub debug: RegistrationDebug,
    /// Identifies the registration, for deregistration.
    pub(crate) id: u64,
}

impl AnnotatedKernel {
    /// The schema inferred from the kernel's Rust signature, printed
    /// (`(Tensor _0) -> Tensor _0`); `None` for boxed kernels and fallthroughs.
    pub fn inferred_schema(&self) -> Option<String> {
        crate::schema_check::inferred_schema_string(&self.kernel)
    }
}

/// How an operator's schema may alias its arguments (`c10::AliasAnalysisKind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AliasAnalysisKind {
    /// Assume anything may alias anything.
    Conservative,
    /// Trust the schema's alias annotations.
    FromSchema,
    /// No side effects, no aliasing.
    PureFunction,
    /// Handled by the JIT itself.
    InternalSpecialCase,
}

impl AliasAnalysisKind {
    /// PyTorch's name (`CONSERVATIVE`, `FROM_SCHEMA`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            AliasAnalysisKind::Conservative => "CONSERVATIVE",
            AliasAnalysisKind::FromSchema => "FROM_SCHEMA",
            AliasAnalysisKind::PureFunction => "PURE_FUNCTION",
            AliasAnalysisKind::InternalSpecialCase => "INTERNAL_SPECIAL_CASE",
        }
    }

    /// Parses PyTorch's names; `""` is FROM_SCHEMA, as in `torch.library.Library.define`.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "" | "FROM_SCHEMA" => AliasAnalysisKind::FromSchema,
            "CONSERVATIVE" => AliasAnalysisKind::Conservative,
            "PURE_FUNCTION" => AliasAnalysisKind::PureFunction,
            "INTERNAL_SPECIAL_CASE" => AliasAnalysisKind::InternalSpecialCase,
            _ => return None,
        })
    }
}

/// A defined schema and where it was defined.
pub struct SchemaRecord {
    /// The schema, with its namespace.
    pub schema: FunctionSchema,
    /// Where it was defined (shared by the registrations of one library).
    pub debug: RegistrationDebug,
    /// Its alias analysis; `None` when never set (printed `CONSERVATIVE (default)`).
    pub alias_analysis: Option<AliasAnalysisKind>,
    /// The tags given at def time, in the order given (Note [Operator tags] in
    /// switchboard-schema).
    pub tags: Box<[Tag]>,
    /// What the schema and tags say about the operator, computed at def time (Note [One home
    /// for an operator's facts]).
    pub semantics: Arc<OperatorSemantics>,
    /// The signature id of the last kernel found to fit the schema, 0 for none (Note [Schema
    /// checks remembered per signature]).
    pub(crate) fitting_signature: AtomicU64,
}

/// The kernels registered per key, newest first; keys in numeric order.
#[derive(Default)]
pub(crate) struct KernelStacks {
    /// A key's stack holds one kernel inline: the usual single registration per key allocates
    /// nothing beyond this list.
    entries: Vec<(DispatchKey, SmallVec<[Arc<AnnotatedKernel>; 1]>)>,
}

impl KernelStacks {
    pub(crate) fn front(&self, k: DispatchKey) -> Option<&Arc<AnnotatedKernel>> {
        self.entries
            .iter()
            .find(|(key, _)| *key == k)
            .and_then(|(_, v)| v.first())
    }

    /// True when a non-alias key of `ks` has a kernel (`hasKernelForAnyDispatchKey`).
    pub(crate) fn has_kernel_for_any(&self, ks: DispatchKeySet) -> bool {
        self.entries
            .iter()
            .any(|(k, v)| !k.is_alias() && !v.is_empty() && ks.has(*k))
    }

    pub(crate) fn push(&mut self, k: DispatchKey, kernel: Arc<AnnotatedKernel>) {
        match self.entries.binary_search_by_key(&k, |(key, _)| *key) {
            Ok(i) => self.entries[i].1.insert(0, kernel),
            Err(i) => {
                // Operators have few keys: grow one entry at a time.
                self.entries.reserve_exact(1);
                self.entries.insert(i, (k, smallvec::smallvec![kernel]));
            }
        }
    }

    /// Removes the kernel of registration `id` from key `k`, if it is there.
    pub(crate) fn remove(&mut self, k: DispatchKey, id: u64) -> Option<Arc<AnnotatedKernel>> {
        let i = self
            .entries
            .binary_search_by_key(&k, |(key, _)| *key)
            .ok()?;
        let stack = &mut self.entries[i].1;
        let pos = stack.iter().position(|a| a.id == id)?;
        let removed = stack.remove(pos);
        if stack.is_empty() {
            self.entries.remove(i);
        }
        Some(removed)
    }

    /// The keys that have kernels.
    pub(crate) fn keys(&self) -> impl Iterator<Item = DispatchKey> + '_ {
        self.entries.iter().map(|(k, _)| *k)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (DispatchKey, &Arc<AnnotatedKernel>)> {
        self.entries
            .iter()
            .flat_map(|(k, v)| v.iter().map(move |a| (*k, a)))
    }
}

/// The registration state of an operator; changed only under the dispatcher's lock.
#[derive(Default)]
pub(crate) struct EntryState {
    pub kernels: KernelStacks,
    pub def_count: u32,
    pub def_and_impl_count: u32,
    /// Set when the entry leaves the registry: handles that still refer to it have nothing
    /// left to undo (an operator defined again is a new entry).
    pub removed: bool,
    /// Kernels deregistered from this operator, kept alive for calls that may still be running
    /// them (see Note [Lock-free dispatch table]); under the entry's lock like the rest.
    pub retired: Vec<Arc<AnnotatedKernel>>,
}

// Note [Lock-free dispatch table]
// A call reads one slot of `table`: an `AtomicPtr` to an `AnnotatedKernel`. Registration (under
// the dispatcher's lock) recomputes the slots and swaps pointers one by one, so a concurrent call
// sees either the old or the new kernel of its slot, each complete: never a torn state. A call
// holds the entry (through its `OperatorHandle`) while it runs, and every kernel a slot may
// point at lives at least as long as the entry: the kernels registered to the operator are in
// its state, the ones deregistered move to `retired`, and the markers and backend fallbacks live
// in the `SharedKernels` every entry holds. Kernels are immutable once registered. The cost is
// that a kernel deregistered from a living operator is freed with the operator (a few dozen bytes
// per registration), against no reference counting, epoch or hazard pointer on the hot path.

// Note [Fallthrough mask]
// A call's key set is masked with the operator's non-fallthrough keys before the table lookup,
// so a fallthrough key costs nothing (PyTorch's `nonFallthroughKeys_`). PyTorch keeps one mask
// per backend for operators with a fallthrough on some backends only (say AutogradCPU but not
// AutogradCUDA) and branches between the two forms on every call. We keep the single mask, with
// a per-backend functionality left in unless it falls through on every backend, and let the
// rare call that lands on a per-backend fallthrough slot skip it at run time (Note [Fallthrough
// reached at run time]): the same result, one branch and 128 bytes per operator less.

/// An operator: its name, schema, kernels and computed dispatch table.
pub struct OperatorEntry {
    name: OperatorName,
    /// Creation sequence number, for listings in creation order.
    pub(crate) seq: u64,
    /// The dispatcher, for error messages that list the keys with kernels.
    pub(crate) dispatcher: Weak<DispatcherInner>,
    pub(crate) state: Mutex<EntryState>,
    /// A mutex rather than a lock for readers: it is read at registration and in errors only,
    /// and is 8 bytes smaller.
    schema: Mutex<Option<Arc<SchemaRecord>>>,
    table: [AtomicPtr<AnnotatedKernel>; NUM_RUNTIME_ENTRIES],
    /// The keys whose slot is not a fallthrough on every backend (see Note [Fallthrough mask]).
    non_fallthrough: AtomicU64,
    /// True while calls are observed (Note [Observing calls for free]).
    /// `OBSERVED_BIT` while observed, else 0: the hot path xors it into the signature id it
    /// compares (Note [Observed calls miss the typed fast path]).
    observed: AtomicU64,
    /// The schema's argument count and its dispatch arguments, packed in one word (see
    /// Note [Boxed dispatch arguments]).
    dispatch_args: DispatchArgs,
    /// Keeps the markers and fallbacks the table may point at alive.
    _shared: Arc<SharedKernels>,
}

/// The top bit: no signature id has it (Note [Signature ids]).
const OBSERVED_BIT: u64 = 1 << 63;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding an entry's lock cannot leave it half-updated in a way later calls
    // would misread (tables are swapped slot by slot), so poisoning is ignored.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl OperatorEntry {
    pub(crate) fn new(
        name: OperatorName,
        seq: u64,
        dispatcher: Weak<DispatcherInner>,
        shared: Arc<SharedKernels>,
        base: &BaseTable,
    ) -> Self {
        // No kernels yet: the table is the base table (Note [Base dispatch table]).
        let ptr = |slot: usize| Arc::as_ptr(&base.kernels[slot]) as *mut AnnotatedKernel;
        OperatorEntry {
            name,
            seq,
            dispatcher,
            state: Mutex::new(EntryState::default()),
            schema: Mutex::new(None),
            table: std::array::from_fn(|slot| AtomicPtr::new(ptr(slot))),
            non_fallthrough: AtomicU64::new(base.masks.mask()),
            observed: AtomicU64::new(if crate::observe::observing() {
                OBSERVED_BIT
            } else {
                0
            }),
            dispatch_args: DispatchArgs::new(crate::observe::observing()),
            _shared: shared,
        }
    }

    /// The operator's name.
    pub fn name(&self) -> &OperatorName {
        &self.name
    }

    /// The defined schema, if any.
    pub fn schema(&self) -> Option<Arc<SchemaRecord>> {
        lock(&self.schema).clone()
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, EntryState> {
        lock(&self.state)
    }

    pub(crate) fn set_schema(&self, record: Option<SchemaRecord>) {
        match &record {
            Some(r) => {
                let args = r.schema.arguments();
                self.dispatch_args
                    .set(args.len(), args.iter().map(|a| a.is_tensor_like()));
            }
            None => self.dispatch_args.set(0, std::iter::empty()),
        }
        *lock(&self.schema) = record.map(Arc::new);
    }

    /// The kernel a call with the (already masked) key set `ks` runs.
    #[inline(always)]
    pub(crate) fn lookup(&self, ks: DispatchKeySet) -> &AnnotatedKernel {
        // SAFETY: `dispatch_table_index` is below NUM_RUNTIME_ENTRIES, the table's length, for
        // every key set (checked at compile time, see Note [Dispatch table index in range]).
        let slot = unsafe { self.table.get_unchecked(ks.dispatch_table_index()) };
        // SAFETY: every pointer stored in `table` comes from an `Arc<AnnotatedKernel>` that is
        // kept alive at least as long as `self` (see
        // Note [Lock-free dispatch table]); the returned reference borrows `self`, so the pointee
        // outlives it. `AnnotatedKernel` is immutable after construction.
        unsafe { &*slot.load(Ordering::Acquire) }
    }

    /// True when calls may be observed: the cold path then checks (Note [Observing calls for
    /// free]).
    #[inline(always)]
    pub(crate) fn observed(&self) -> bool {
        self.observed_bit() != 0
    }

    /// `OBSERVED_BIT` while observed, else 0.
    #[inline(always)]
    pub(crate) fn observed_bit(&self) -> u64 {
        self.observed.load(Ordering::Relaxed)
    }

    pub(crate) fn set_observed(&self, on: bool) {
        self.observed
            .store(if on { OBSERVED_BIT } else { 0 }, Ordering::Relaxed);
        self.dispatch_args.set_observed(on);
    }

    /// Removes the keys whose kernel is a fallthrough (the call's key set is then dispatched
    /// to the next key).
    #[inline(always)]
    pub(crate) fn mask_fallthrough(&self, ks: DispatchKeySet) -> DispatchKeySet {
        ks & DispatchKeySet::from_raw(self.non_fallthrough.load(Ordering::Relaxed))
    }

    /// The union of the key sets of the dispatch arguments among the last values of `stack`
    /// (the arguments of a boxed call, see Note [Boxed dispatch arguments]).
    pub(crate) fn boxed_key_set(&self, stack: &[crate::IValue]) -> DispatchKeySet {
        self.dispatch_args.key_set(stack)
    }

    /// The fast path of [`boxed_key_set`](Self::boxed_key_set) (`None`: take the slow path, see
    /// Note [Boxed dispatch arguments]).
    #[inline(always)]
    pub(crate) fn fast_boxed_key_set(&self, stack: &[crate::IValue]) -> Option<DispatchKeySet> {
        self.dispatch_args.fast_key_set(stack)
    }

    /// Recomputes the slots of `touched` and the fallthrough mask (see Note [Computing the
    /// dispatch table]). Called under the dispatcher's lock after any change that may affect
    /// this entry, with the slots that change can affect (`SlotSet::ALL` after a fallback
    /// change, `SlotSet::touched_by(key)` after a kernel change at `key`, see
    /// Note [Refreshing the slots a key can change]).
    pub(crate) fn refresh(&self, state: &EntryState, globals: &Globals<'_>, touched: SlotSet) {
        let base = globals.base;
        let resolver = Resolver::new(&state.kernels, globals);
        // Only slots some registered kernel covers need the precedence rules; the others
        // take the dispatcher's base table (Note [Base dispatch table]).
        let covered = SlotSet::affected_by_all(&state.kernels);
        // Whether some slot's "falls through" changed: only then can the mask change.
        let mut fallthrough_changed = false;
        touched.for_each(|slot| {
            let kernel = if covered.contains(slot) {
                resolver.resolve_slot(slot, RUNTIME_KEYS[slot]).0
            } else {
                &base.kernels[slot]
            };
            let ptr = Arc::as_ptr(kernel) as *mut AnnotatedKernel;
            let cell = &self.table[slot];
            let old = cell.load(Ordering::Relaxed);
            if old != ptr {
                // SAFETY: as in `lookup`: the old pointee lives at least as long as `self`.
                let was = unsafe { &*old }.kernel.is_fallthrough();
                fallthrough_changed |= was != kernel.kernel.is_fallthrough();
                cell.store(ptr, Ordering::Release);
            }
        });
        if !fallthrough_changed {
            // The mask is a function of the slots' "falls through" bits (Note [Fallthrough
            // mask]); none changed, so neither did the mask. This is the common case: most
            // registrations are regular kernels replacing regular kernels or fallbacks.
            return;
        }
        // The base table's fallthrough masks, with the covered slots' bits decided again from
        // the (now up to date) table.
        let mut masks = base.masks;
        covered.for_each(|slot| {
            // SAFETY: as in `lookup`: the pointee lives at least as long as `self`.
            let kernel = unsafe { &*self.table[slot].load(Ordering::Relaxed) };
            masks.set(slot, kernel.kernel.is_fallthrough());
        });
        self.non_fallthrough.store(masks.mask(), Ordering::Relaxed);
    }

    /// The kernel pointer in `slot` (for tests).
    #[cfg(test)]
    pub(crate) fn table_slot(&self, slot: usize) -> *const AnnotatedKernel {
        self.table[slot].load(Ordering::Relaxed)
    }

    /// The raw fallthrough mask (for tests).
    #[cfg(test)]
    pub(crate) fn non_fallthrough_raw(&self) -> u64 {
        self.non_fallthrough.load(Ordering::Relaxed)
    }

    /// PyTorch's `_dispatch_dump` of this operator.
    pub(crate) fn dump_state(&self, state: &EntryState) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "name: {}", self.name);
        match self.schema() {
            Some(r) => {
                let _ = writeln!(out, "schema: {}", r.schema);
                let _ = writeln!(out, "debug: {}", r.debug);
                let _ = match r.alias_analysis {
                    Some(kind) => writeln!(out, "alias analysis kind: {}", kind.as_str()),
                    None => writeln!(out, "alias analysis kind: CONSERVATIVE (default)"),
                };
            }
            None => out.push_str("schema: (none)\n"),
        }
        let mut previous = None;
        for (k, a) in state.kernels.iter() {
            let inactive = previous == Some(k);
            previous = Some(k);
            let _ = writeln!(
                out,
                "{}{}{}: {} :: {} [ {}]",
                k,
                if k.is_alias() { "[alias]" } else { "" },
                if inactive { " (inactive)" } else { "" },
                a.debug,
                a.inferred_schema().as_deref().unwrap_or("(none)"),
                a.kernel.dump_state()
            );
        }
        out
    }

    /// PyTorch's `_dispatch_dump_table` of this operator.
    pub(crate) fn dump_table(&self, state: &EntryState, globals: &Globals<'_>) -> String {
        let mut out = String::new();
        let resolver = Resolver::new(&state.kernels, globals);
        for (slot, k) in runtime_keys().enumerate() {
            let (kernel, why) = resolver.resolve_slot(slot, k);
            if why == Provenance::Missing {
                continue;
            }
            let ft = if kernel.kernel.is_fallthrough() {
                "fallthrough "
            } else {
                ""
            };
            let _ = writeln!(out, "{k}: {ft}{} [{}]", kernel.debug, why.as_str());
        }
        out
    }

    /// The runtime keys (in table order, without `Undefined`) whose slot has a kernel.
    pub(crate) fn keys_with_kernels(
        &self,
        state: &EntryState,
        globals: &Globals<'_>,
    ) -> Vec<DispatchKey> {
        let resolver = Resolver::new(&state.kernels, globals);
        runtime_keys()
            .skip(1)
            .filter(|k| resolver.resolve(*k).1 != Provenance::Missing)
            .collect()
    }
}
