//! The computed dispatch table: which kernel each runtime key runs, and why.

use std::sync::Arc;

use switchboard_keys::{
    BackendComponent, DispatchKey, DispatchKeySet, AUTOGRADOTHER_BACKENDS, FULL_BACKEND_MASK,
    NUM_BACKENDS, NUM_FUNCTIONALITY_KEYS, NUM_RUNTIME_ENTRIES,
};

use crate::operator::{AnnotatedKernel, KernelStacks};

// Note [Computing the dispatch table]
// Every runtime key of an operator gets one kernel, chosen by PyTorch's precedence
// (OperatorEntry::computeDispatchTableEntryWithDebug):
//   1. a kernel registered directly to the key;
//   2. an alias kernel covering the key, in the order CompositeExplicitAutogradNonFunctional >
//      CompositeExplicitAutograd > CompositeImplicitAutogradNestedTensor >
//      CompositeImplicitAutograd > Autograd > FuncTorchBatchedDecomposition, where a
//      CompositeImplicitAutograd kernel is skipped for a key whose backend has a kernel (or when a
//      CompositeExplicitAutograd kernel exists), and is ambiguous for AutogradOther when a backend
//      mapped to AutogradOther has a kernel;
//   3. the dispatcher's backend fallback for the key;
//   4. nothing ("missing").
// `Undefined` (slot 0) takes the CEANF, CEA and CIA kernels only.
// The table depends only on what is registered, never on the order it was registered in: a
// change recomputes every slot whose answer it can change (Note [Refreshing the slots a key can
// change]), which PyTorch's incremental `updateDispatchTable_` does not always do (it can keep
// stale slots, e.g. AutogradCPU after a CompositeExplicitAutograd kernel is added to an operator
// with a CompositeImplicitAutograd kernel).

// Note [Refreshing the slots a key can change]
// A registration or deregistration at key `k` changes the kernels of `k` only, so it can change
// only the slots whose resolution reads them: the slots `k` covers (its own slot, or every
// runtime key of an alias, plus `Undefined` for CEANF, CEA and CIA); for CEA, every slot CIA
// covers too (a CEA kernel makes CIA skip them); and for a non-alias key, the CIA-covered slots
// whose "has a backend kernel" or AutogradOther-ambiguity test looks at `k` (AutogradCPU for CPU,
// AutogradOther for the backends mapped to it). `SlotSet::touched_by` is that set, computed at
// compile time for every key from the same predicates the resolver uses; a test checks it
// against a brute-force comparison of whole tables. A registration then resolves a few slots
// (two for a CPU kernel) instead of 137, and the table still equals a full recomputation.

/// Why a slot holds its kernel: PyTorch's `kind` strings of `_dispatch_dump_table`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provenance {
    /// Registered to the key itself.
    Kernel,
    /// From CompositeExplicitAutograd or CompositeExplicitAutogradNonFunctional.
    DefaultBackend,
    /// From CompositeImplicitAutogradNestedTensor.
    Nested,
    /// From CompositeImplicitAutograd.
    Math,
    /// From the Autograd alias.
    Autograd,
    /// From FuncTorchBatchedDecomposition.
    Batched,
    /// The AutogradOther ambiguity marker.
    AmbiguousAutogradOther,
    /// The dispatcher's backend fallback.
    BackendFallback,
    /// No kernel.
    Missing,
}

impl Provenance {
    /// The text PyTorch prints in brackets.
    pub fn as_str(self) -> &'static str {
        match self {
            Provenance::Kernel => "kernel",
            Provenance::DefaultBackend => "default backend kernel",
            Provenance::Nested => "nested kernel",
            Provenance::Math => "math kernel",
            Provenance::Autograd => "autograd kernel",
            Provenance::Batched => "batched kernel",
            Provenance::AmbiguousAutogradOther => "ambiguous autogradother",
            Provenance::BackendFallback => "backend fallback",
            Provenance::Missing => "missing",
        }
    }
}

/// What the table computation reads besides the operator's own kernels.
pub(crate) struct Globals<'a> {
    /// Backend fallbacks, by dispatch-table slot.
    pub fallbacks: &'a [Option<Arc<AnnotatedKernel>>],
    /// What a slot holds when no kernel of the operator covers it.
    pub base: &'a BaseTable,
    pub missing: &'a Arc<AnnotatedKernel>,
    pub ambiguous: &'a Arc<AnnotatedKernel>,
}

// Note [Base dispatch table]
// Most slots of most operators are decided by no kernel of theirs: they hold the backend
// fallback of their key, or the missing marker. The dispatcher keeps that answer for every
// slot (and the fallthrough masks those kernels give) in one `BaseTable`, rebuilt when a
// fallback is registered or removed, so that computing an operator's table resolves only the
// slots its own kernels cover and copies the rest. A new operator's table is a copy of the base
// table; a fallback change refreshes all 137 slots of every operator; a kernel change refreshes
// only the slots its key can change (Note [Refreshing the slots a key can change]). The
// fallthrough mask is the base table's with the bits of the covered slots set again.

/// Every slot's kernel when the operator's own kernels do not cover it (see
/// Note [Base dispatch table]).
pub(crate) struct BaseTable {
    pub kernels: Vec<Arc<AnnotatedKernel>>,
    /// The fallthrough masks of the base table alone (see `FallthroughMasks`).
    pub masks: FallthroughMasks,
}

/// The pieces of an operator's fallthrough mask (Note [Fallthrough mask]): per backend, the
/// functionalities whose slot for that backend is not a fallthrough, and the backend-less
/// functionalities that are not. Each slot decides exactly one bit, so a table's masks are its
/// base table's with the bits of the slots its own kernels cover set again.
#[derive(Clone, Copy)]
pub(crate) struct FallthroughMasks {
    per_backend: [u64; NUM_BACKENDS as usize],
    everywhere: u64,
}

impl FallthroughMasks {
    pub(crate) const FULL: FallthroughMasks = FallthroughMasks {
        per_backend: [DispatchKeySet::FULL.raw(); NUM_BACKENDS as usize],
        everywhere: DispatchKeySet::FULL.raw(),
    };

    /// Records whether `slot` falls through (slot 0, Undefined, never leaves the mask).
    #[inline]
    pub(crate) fn set(&mut self, slot: usize, falls_through: bool) {
        // The bit and word of every slot are computed at compile time (`SLOT_MASK_BITS`): a
        // table refresh may set a hundred slots.
        let (backend, bit) = SLOT_MASK_BITS[slot];
        let word = match backend {
            0 => &mut self.everywhere,
            b => &mut self.per_backend[b as usize - 1],
        };
        if falls_through {
            *word &= !bit;
        } else {
            *word |= bit;
        }
    }

    /// The mask: a functionality leaves it only when it falls through on every backend.
    pub(crate) fn mask(&self) -> u64 {
        self.per_backend.iter().fold(0, |m, w| m | w) & self.everywhere
    }
}

/// For each slot, the word of `FallthroughMasks` it decides (0: `everywhere`, b: the per-backend
/// word of backend b) and its bit there; slot 0 (Undefined) decides none (bit 0).
const SLOT_MASK_BITS: [(u8, u64); NUM_RUNTIME_ENTRIES] = {
    let mut bits = [(0u8, 0u64); NUM_RUNTIME_ENTRIES];
    let mut slot = 1;
    while slot < NUM_RUNTIME_ENTRIES {
        let k = RUNTIME_KEYS[slot];
        let f = k.to_functionality_key();
        let bit = DispatchKeySet::from_key(f).raw() & !FULL_BACKEND_MASK;
        let backend = if f.is_per_backend_functionality() {
            k.to_backend_component() as u8
        } else {
            0
        };
        bits[slot] = (backend, bit);
        slot += 1;
    }
    bits
};

impl BaseTable {
    pub(crate) fn compute(
        fallbacks: &[Option<Arc<AnnotatedKernel>>],
        missing: &Arc<AnnotatedKernel>,
    ) -> BaseTable {
        let mut masks = FallthroughMasks::FULL;
        let kernels = (0..NUM_RUNTIME_ENTRIES)
            .map(|slot| match &fallbacks[slot] {
                Some(fallback) if slot != 0 => {
                    if fallback.kernel.is_fallthrough() {
                        masks.set(slot, true);
                    }
                    fallback.clone()
                }
                _ => missing.clone(),
            })
            .collect();
        BaseTable { kernels, masks }
    }
}

/// Resolves runtime keys to kernels for one operator (see Note [Computing the dispatch table]).
/// Built once per table computation: the alias kernels are looked up once, and an alias's
/// coverage is only tested when the alias has a kernel.
pub(crate) struct Resolver<'a> {
    kernels: &'a KernelStacks,
    globals: &'a Globals<'a>,
    ceanf: Option<&'a Arc<AnnotatedKernel>>,
    cea: Option<&'a Arc<AnnotatedKernel>>,
    cia_nested: Option<&'a Arc<AnnotatedKernel>>,
    cia: Option<&'a Arc<AnnotatedKernel>>,
    autograd: Option<&'a Arc<AnnotatedKernel>>,
    batched: Option<&'a Arc<AnnotatedKernel>>,
}

impl<'a> Resolver<'a> {
    pub(crate) fn new(kernels: &'a KernelStacks, globals: &'a Globals<'a>) -> Self {
        use DispatchKey as K;
        Resolver {
            kernels,
            globals,
            ceanf: kernels.front(K::CompositeExplicitAutogradNonFunctional),
            cea: kernels.front(K::CompositeExplicitAutograd),
            cia_nested: kernels.front(K::CompositeImplicitAutogradNestedTensor),
            cia: kernels.front(K::CompositeImplicitAutograd),
            autograd: kernels.front(K::Autograd),
            batched: kernels.front(K::FuncTorchBatchedDecomposition),
        }
    }

    /// The kernel of runtime key `k` and why.
    pub(crate) fn resolve(&self, k: DispatchKey) -> (&'a Arc<AnnotatedKernel>, Provenance) {
        self.resolve_slot(DispatchKeySet::from_key(k).dispatch_table_index(), k)
    }

    /// Like [`resolve`](Self::resolve) for `k`, the key of table slot `slot`.
    pub(crate) fn resolve_slot(
        &self,
        slot: usize,
        k: DispatchKey,
    ) -> (&'a Arc<AnnotatedKernel>, Provenance) {
        use DispatchKey as K;
        // Whether `alias` covers the slot: `ALIAS_SLOTS` holds `is_included_in_alias` for every
        // slot (and `Undefined` for the aliases that fill it), a bit test instead of key-set
        // arithmetic per slot and alias.
        let covers = |alias: DispatchKey| SlotSet::affected_by(alias).contains(slot);
        if let Some(kernel) = self.kernels.front(k) {
            return (kernel, Provenance::Kernel);
        }
        if let Some(kernel) = self.ceanf {
            if covers(K::CompositeExplicitAutogradNonFunctional) {
                return (kernel, Provenance::DefaultBackend);
            }
        }
        if let Some(kernel) = self.cea {
            if covers(K::CompositeExplicitAutograd) {
                return (kernel, Provenance::DefaultBackend);
            }
        }
        if let Some(kernel) = self.cia_nested {
            if covers(K::CompositeImplicitAutogradNestedTensor) {
                return (kernel, Provenance::Nested);
            }
        }
        if let Some(kernel) = self.cia {
            if covers(K::CompositeImplicitAutograd) {
                if k == K::AutogradOther && self.kernels.has_kernel_for_any(AUTOGRADOTHER_BACKENDS)
                {
                    return (self.globals.ambiguous, Provenance::AmbiguousAutogradOther);
                }
                let has_backend_kernel = self.cea.is_some()
                    || self
                        .kernels
                        .has_kernel_for_any(k.backend_key_set_from_autograd());
                if !has_backend_kernel {
                    return (kernel, Provenance::Math);
                }
            }
        }
        if let Some(kernel) = self.autograd {
            if covers(K::Autograd) {
                return (kernel, Provenance::Autograd);
            }
        }
        if let Some(kernel) = self.batched {
            if covers(K::FuncTorchBatchedDecomposition) {
                return (kernel, Provenance::Batched);
            }
        }
        if k != K::Undefined {
            if let Some(fallback) = &self.globals.fallbacks[slot] {
                return (fallback, Provenance::BackendFallback);
            }
        }
        (self.globals.missing, Provenance::Missing)
    }
}

/// The runtime keys in table-dump order: `Undefined`, then the iteration order of FULL. The
/// position of a key in this list is its dispatch-table slot.
pub fn runtime_keys() -> impl Iterator<Item = DispatchKey> {
    RUNTIME_KEYS.iter().copied()
}

/// [`runtime_keys`], computed at compile time.
pub const RUNTIME_KEYS: [DispatchKey; NUM_RUNTIME_ENTRIES] = {
    let mut keys = [DispatchKey::Undefined; NUM_RUNTIME_ENTRIES];
    let mut slot = 1;
    let mut f = 1;
    while f < NUM_FUNCTIONALITY_KEYS as usize {
        let functionality = DispatchKey::ALL[f];
        if functionality.is_per_backend_functionality() {
            let mut b = 1;
            while b <= NUM_BACKENDS as usize {
                keys[slot] = DispatchKey::to_runtime_per_backend_functionality_key(
                    functionality,
                    BackendComponent::ALL[b],
                );
                slot += 1;
                b += 1;
            }
        } else {
            keys[slot] = functionality;
            slot += 1;
        }
        f += 1;
    }
    assert!(slot == NUM_RUNTIME_ENTRIES);
    keys
};

/// A set of table slots.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub(crate) struct SlotSet([u64; SLOT_WORDS]);

const SLOT_WORDS: usize = NUM_RUNTIME_ENTRIES.div_ceil(64);

impl SlotSet {
    /// Every slot.
    pub(crate) const ALL: SlotSet = {
        let mut set = SlotSet([0; SLOT_WORDS]);
        let mut slot = 0;
        while slot < NUM_RUNTIME_ENTRIES {
            set = set.with(slot);
            slot += 1;
        }
        set
    };

    const fn with(mut self, slot: usize) -> Self {
        self.0[slot / 64] |= 1 << (slot % 64);
        self
    }

    pub(crate) const fn contains(&self, slot: usize) -> bool {
        self.0[slot / 64] & (1 << (slot % 64)) != 0
    }

    const fn union(mut self, other: SlotSet) -> Self {
        let mut i = 0;
        while i < SLOT_WORDS {
            self.0[i] |= other.0[i];
            i += 1;
        }
        self
    }

    /// Calls `f` with each slot in the set, in increasing order (a plain loop: cheaper than
    /// [`iter`](Self::iter) on the registration path).
    #[inline]
    pub(crate) fn for_each(self, mut f: impl FnMut(usize)) {
        for (w, mut bits) in self.0.into_iter().enumerate() {
            while bits != 0 {
                f(w * 64 + bits.trailing_zeros() as usize);
                bits &= bits - 1;
            }
        }
    }

    /// The slots in the set, in increasing order.
    #[cfg(test)]
    pub(crate) fn iter(self) -> impl Iterator<Item = usize> {
        self.0.into_iter().enumerate().flat_map(|(w, mut bits)| {
            std::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                Some(w * 64 + b)
            })
        })
    }

    /// The slots whose kernel a registration at `k` can decide: its own slot for a runtime key,
    /// every covered slot (and `Undefined` where it applies) for an alias key.
    pub(crate) const fn affected_by(k: DispatchKey) -> SlotSet {
        if k.is_alias() {
            return ALIAS_SLOTS[k as usize - DispatchKey::Autograd as usize];
        }
        let slot = DispatchKeySet::from_key(k).dispatch_table_index();
        if matches!(k, DispatchKey::Undefined) || slot == 0 || k.is_per_backend_functionality() {
            return SlotSet([0; SLOT_WORDS]);
        }
        SlotSet([0; SLOT_WORDS]).with(slot)
    }

    /// The slots whose kernel can change when the kernels registered at `k` change (see
    /// Note [Refreshing the slots a key can change]).
    pub(crate) fn touched_by(k: DispatchKey) -> SlotSet {
        TOUCHED_SLOTS[k as usize]
    }

    /// The union over the keys that have kernels.
    pub(crate) fn affected_by_all(kernels: &KernelStacks) -> SlotSet {
        kernels.keys().fold(SlotSet::default(), |acc, k| {
            acc.union(SlotSet::affected_by(k))
        })
    }
}

/// For each alias key (in numeric order from `Autograd`), the slots it covers, computed at
/// compile time; the CEANF, CEA and CIA aliases also fill the `Undefined` slot.
const ALIAS_SLOTS: [SlotSet; 6] = {
    let mut sets = [SlotSet([0; SLOT_WORDS]); 6];
    let mut a = 0;
    while a < 6 {
        let alias = DispatchKey::ALL[DispatchKey::Autograd as usize + a];
        let mut set = SlotSet([0; SLOT_WORDS]);
        if matches!(
            alias,
            DispatchKey::CompositeExplicitAutogradNonFunctional
                | DispatchKey::CompositeExplicitAutograd
                | DispatchKey::CompositeImplicitAutograd
        ) {
            set = set.with(0);
        }
        let mut slot = 1;
        while slot < NUM_RUNTIME_ENTRIES {
            if RUNTIME_KEYS[slot].is_included_in_alias(alias) {
                set = set.with(slot);
            }
            slot += 1;
        }
        sets[a] = set;
        a += 1;
    }
    sets
};

/// `SlotSet::touched_by` of every key, by key number (Note [Refreshing the slots a key can
/// change]).
const TOUCHED_SLOTS: [SlotSet; DispatchKey::ALL.len()] = {
    use DispatchKey as K;
    const fn alias_slots(k: DispatchKey) -> SlotSet {
        ALIAS_SLOTS[k as usize - K::Autograd as usize]
    }
    let cia = alias_slots(K::CompositeImplicitAutograd);
    let mut sets = [SlotSet([0; SLOT_WORDS]); DispatchKey::ALL.len()];
    let mut i = 0;
    while i < DispatchKey::ALL.len() {
        let k = DispatchKey::ALL[i];
        let mut set = SlotSet::affected_by(k);
        if matches!(k, K::CompositeExplicitAutograd) {
            // A CEA kernel makes the CIA kernel skip every slot (the resolver's
            // `has_backend_kernel`).
            set = set.union(cia);
        }
        if !k.is_alias() {
            // The CIA-covered slots whose backend-kernel or ambiguity test reads `k`'s kernels
            // (`KernelStacks::has_kernel_for_any` in `Resolver::resolve_slot`).
            let mut slot = 0;
            while slot < NUM_RUNTIME_ENTRIES {
                let rk = RUNTIME_KEYS[slot];
                if cia.contains(slot)
                    && ((matches!(rk, K::AutogradOther) && AUTOGRADOTHER_BACKENDS.has(k))
                        || rk.backend_key_set_from_autograd().has(k))
                {
                    set = set.with(slot);
                }
                slot += 1;
            }
        }
        sets[k as usize] = set;
        i += 1;
    }
    sets
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alias_slot_sets() {
        let count = |k: DispatchKey| {
            (0..NUM_RUNTIME_ENTRIES)
                .filter(|s| SlotSet::affected_by(k).contains(*s))
                .count()
        };
        assert_eq!(count(DispatchKey::Autograd), 18);
        assert_eq!(count(DispatchKey::CompositeExplicitAutograd), 69 + 1);
        assert_eq!(count(DispatchKey::CompositeImplicitAutograd), 103 + 1);
        assert_eq!(
            count(DispatchKey::CompositeImplicitAutogradNestedTensor),
            17
        );
        assert_eq!(count(DispatchKey::FuncTorchBatchedDecomposition), 1);
        assert_eq!(count(DispatchKey::CPU), 1);
        assert_eq!(count(DispatchKey::Dense), 0);
    }

    #[test]
    fn runtime_keys_follow_full_iteration_order_and_slots() {
        let iterated: Vec<DispatchKey> = std::iter::once(DispatchKey::Undefined)
            .chain(DispatchKeySet::FULL.iter())
            .collect();
        assert_eq!(iterated, RUNTIME_KEYS.to_vec());
        for (slot, k) in RUNTIME_KEYS.iter().enumerate() {
            assert_eq!(
                DispatchKeySet::from_key(*k).dispatch_table_index(),
                slot,
                "{k}"
            );
        }
    }
}
