//! `DispatchKeySet`: a set of dispatch keys in one `u64`, with PyTorch's bit layout.

use std::fmt;
use std::ops::{BitAnd, BitOr, Sub};

use crate::backend::{BackendComponent, FULL_BACKEND_MASK, NUM_BACKENDS};
use crate::key::{DispatchKey, NUM_FUNCTIONALITY_KEYS};

// Note [DispatchKeySet layout]
// Bits 0..16 are backend bits (bit b = BackendComponent b+1: CPU = bit 0 ... Meta = bit 15).
// Bit 16 + f - 1 is the functionality key with value f (Dense = bit 16 ... PythonDispatcher =
// bit 61). A per-backend runtime key sets two bits (AutogradCUDA = AutogradFunctionality bit +
// CUDA bit), so a set holding {CPU, AutogradCUDA} also "has" CUDA and AutogradCPU: PyTorch
// accepts this cross product on purpose, since a tensor has one backend at a time.
// Priority follows bit order: the highest functionality bit wins, then the highest backend bit.

/// A set of dispatch keys, bit-compatible with PyTorch's `c10::DispatchKeySet`
/// (see Note [DispatchKeySet layout]).
///
/// ```
/// use switchboard_keys::{DispatchKey as K, DispatchKeySet};
/// let ks = DispatchKeySet::from_keys(&[K::CPU, K::ADInplaceOrView, K::AutogradCPU, K::AutocastCPU]);
/// assert_eq!(ks.to_string(), "DispatchKeySet(CPU, ADInplaceOrView, AutogradCPU, AutocastCPU)");
/// assert_eq!(ks.highest_priority_type_id(), K::AutocastCPU);
/// let below_autograd = ks & DispatchKeySet::full_after(K::AutogradCPU);
/// assert_eq!(below_autograd.highest_priority_type_id(), K::ADInplaceOrView);
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct DispatchKeySet(u64);

/// Number of slots in an operator's dispatch table: one per runtime key
/// (`num_runtime_entries` = 47 functionalities + 6 per-backend functionalities x 15 more backends).
pub const NUM_RUNTIME_ENTRIES: usize =
    NUM_FUNCTIONALITY_KEYS as usize + PER_BACKEND_COUNT * (NUM_BACKENDS as usize - 1);
const PER_BACKEND_COUNT: usize = crate::key::PER_BACKEND_FUNCTIONALITIES.len();

/// Where a functionality's slots start in a dispatch table, and which backend bits select among
/// them (all of them for per-backend functionalities, none otherwise).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FunctionalityOffsetAndMask {
    /// First slot of the functionality.
    pub offset: u16,
    /// Backend bits that select among its slots (0 for a single-slot functionality).
    pub mask: u16,
}

/// Entries for functionality indices `0..=48`: `dispatch_table_index` computes the index from
/// the highest bit, and bits 62 and 63 (never set by a real key set) give 47 and 48; those two
/// point at the `Undefined` slot instead of reading past the table as PyTorch would.
const OFFSET_TABLE_LEN: usize = 64 - NUM_BACKENDS as usize + 1;

/// The per-functionality offsets and masks, computed at compile time.
pub const OFFSETS_AND_MASKS: [FunctionalityOffsetAndMask; OFFSET_TABLE_LEN] = {
    let mut table = [FunctionalityOffsetAndMask { offset: 0, mask: 0 }; OFFSET_TABLE_LEN];
    let mut f = 1;
    while f < NUM_FUNCTIONALITY_KEYS as usize {
        let prev = table[f - 1];
        let offset = prev.offset
            + if prev.mask == 0 {
                1
            } else {
                NUM_BACKENDS as u16
            };
        let mask = if DispatchKey::ALL[f].is_per_backend_functionality() {
            FULL_BACKEND_MASK as u16
        } else {
            0
        };
        table[f] = FunctionalityOffsetAndMask { offset, mask };
        f += 1;
    }
    // The last functionality must end the table (PyTorch asserts the same).
    assert!(table[NUM_FUNCTIONALITY_KEYS as usize - 1].offset as usize == NUM_RUNTIME_ENTRIES - 1);
    // Every index `dispatch_table_index` can produce is a slot: offset + at most 15 when a
    // backend selects. Checked here, at compile time, so dispatch tables can be indexed without
    // a bounds check (see Note [Dispatch table index in range]).
    let mut f = 0;
    while f < OFFSET_TABLE_LEN {
        let last = table[f].offset as usize + if table[f].mask == 0 { 0 } else { 15 };
        assert!(last < NUM_RUNTIME_ENTRIES);
        f += 1;
    }
    table
};

// Note [Dispatch table index in seven instructions]
// `dispatch_table_index` needs the position of the highest functionality bit and then of the
// highest selected backend bit, each 0 when there is none. A bit scan of zero is undefined, so
// each scan would need a guard bit or-ed in first. One guard serves both: `t = raw | 1`.
// - The highest bit of `t` is a functionality bit's position (16..63), or a backend position
//   (0..15) when there is none; `SLOT_BY_BIT` is indexed by that position directly (no shift):
//   entry `15 + f` is functionality `f`'s, entries 0..15 are `Undefined`'s.
// - Its masks carry bit 0 in addition: `t & (mask | 1)` is `(raw & mask) | 1`, never zero, whose
//   highest bit is the highest selected backend, or 0 when none is selected (a backend-less
//   functionality selects nothing and lands on its single slot).
// The sum `offset + backend` is the one the per-functionality table gives. The by-bit table
// keeps the masks as 32-bit words and the offsets as 64-bit words, in two arrays (PyTorch's
// table has 16-bit pairs): the mask is then and-ed straight from memory (`and mem32, reg`, which
// clears the upper half too) and the offset added straight from memory (`add mem64, reg`), both
// addressed from the one table base, instead of each being loaded into a register of its own.
// That is two instructions and two registers fewer, which matters in kernels that redispatch
// with all six argument registers live: a register fewer can be a callee-saved register fewer
// to push and pop.

/// The functionalities' backend masks and first slots by bit position, as
/// `dispatch_table_index` reads them (Note [Dispatch table index in seven instructions]).
struct SlotByBit {
    masks: [u32; 64],
    offsets: [u64; 64],
}

/// `OFFSETS_AND_MASKS` indexed by bit position, masks with bit 0 set (Note [Dispatch table index
/// in seven instructions]).
const SLOT_BY_BIT: SlotByBit = {
    let undefined = OFFSETS_AND_MASKS[0];
    let mut table = SlotByBit {
        masks: [undefined.mask as u32 | 1; 64],
        offsets: [undefined.offset as u64; 64],
    };
    let mut bit = NUM_BACKENDS as usize;
    while bit < 64 {
        let om = OFFSETS_AND_MASKS[bit + 1 - NUM_BACKENDS as usize];
        table.offsets[bit] = om.offset as u64;
        table.masks[bit] = om.mask as u32 | 1;
        bit += 1;
    }
    // The invariant `dispatch_table_index`'s unchecked non-zero value relies on.
    let mut i = 0;
    while i < 64 {
        assert!(table.masks[i] & 1 == 1);
        i += 1;
    }
    table
};

// Note [Dispatch table index in range]
// `dispatch_table_index` is `offset[f] + b` where `f` is the highest functionality bit's index
// (0..=48, the table above has an entry for each) and `b` the highest backend bit under that
// functionality's mask (0..=15, and 0 when the mask is empty). The const block above checks every
// such sum against NUM_RUNTIME_ENTRIES, so for every u64 the result is below it: a guarantee the
// dispatcher relies on to index its tables unchecked.

impl DispatchKeySet {
    /// The empty set.
    pub const EMPTY: DispatchKeySet = DispatchKeySet(0);

    /// Every backend bit and every functionality bit (`DispatchKeySet(FULL)`).
    pub const FULL: DispatchKeySet =
        DispatchKeySet((1u64 << (NUM_BACKENDS + NUM_FUNCTIONALITY_KEYS - 1)) - 1);

    /// A set from its raw `u64` representation.
    #[inline]
    pub const fn from_raw(raw: u64) -> DispatchKeySet {
        DispatchKeySet(raw)
    }

    /// The raw `u64` representation (`raw_repr`).
    #[inline]
    pub const fn raw(self) -> u64 {
        self.0
    }

    /// The set of one key. Alias keys and `Undefined` give the empty set; a functionality key
    /// sets its functionality bit only; a runtime per-backend key sets its functionality bit and
    /// its backend bit.
    #[inline]
    pub const fn from_key(k: DispatchKey) -> DispatchKeySet {
        if matches!(k, DispatchKey::Undefined) || k.is_alias() {
            DispatchKeySet(0)
        } else if k.is_functionality() {
            DispatchKeySet(1u64 << (NUM_BACKENDS + k as u8 - 1))
        } else {
            let f = k.to_functionality_key() as u8;
            let bc = k.to_backend_component() as u8;
            let backend = if bc == 0 { 0 } else { 1u64 << (bc - 1) };
            DispatchKeySet((1u64 << (NUM_BACKENDS + f - 1)) | backend)
        }
    }

    /// The union of the sets of several keys.
    #[inline]
    pub const fn from_keys(keys: &[DispatchKey]) -> DispatchKeySet {
        let mut raw = 0;
        let mut i = 0;
        while i < keys.len() {
            raw |= Self::from_key(keys[i]).0;
            i += 1;
        }
        DispatchKeySet(raw)
    }

    /// The set holding one backend bit (empty for `InvalidBit`).
    #[inline]
    pub const fn from_backend(b: BackendComponent) -> DispatchKeySet {
        if b as u8 == 0 {
            DispatchKeySet(0)
        } else {
            DispatchKeySet(1u64 << (b as u8 - 1))
        }
    }

    /// Every backend bit and every functionality strictly below `k`'s functionality, plus
    /// `PythonDispatcher` (`DispatchKeySet(FULL_AFTER, k)`). Masking a call's key set with
    /// `full_after(k)` is how a kernel at `k` redispatches to the keys below it.
    #[inline]
    pub const fn full_after(k: DispatchKey) -> DispatchKeySet {
        let f = k.to_functionality_key() as u8;
        let below = (1u64 << (NUM_BACKENDS + f - 1)) - 1;
        DispatchKeySet(below | Self::from_key(DispatchKey::PythonDispatcher).0)
    }

    /// True when every bit of `k`'s set is in `self`. As in PyTorch, keys whose set is empty
    /// (`Undefined`, alias keys) are always "present".
    #[inline]
    pub const fn has(self, k: DispatchKey) -> bool {
        self.has_all(Self::from_key(k))
    }

    /// True when `self` has the backend bit `b`.
    #[inline]
    pub const fn has_backend(self, b: BackendComponent) -> bool {
        self.has_all(Self::from_backend(b))
    }

    /// True when `other ⊆ self`.
    #[inline]
    pub const fn has_all(self, other: DispatchKeySet) -> bool {
        self.0 & other.0 == other.0
    }

    /// True when the sets share any bit.
    #[inline]
    pub const fn has_any(self, other: DispatchKeySet) -> bool {
        self.0 & other.0 != 0
    }

    /// `self ∪ {k}`.
    #[inline]
    #[must_use]
    pub const fn add(self, k: DispatchKey) -> DispatchKeySet {
        DispatchKeySet(self.0 | Self::from_key(k).0)
    }

    /// Removes `k`'s *functionality* bit only, as PyTorch does: backend bits stay, since other
    /// keys of the set may share them.
    #[inline]
    #[must_use]
    pub const fn remove(self, k: DispatchKey) -> DispatchKeySet {
        DispatchKeySet(self.0 & !(Self::from_key(k).0 & !FULL_BACKEND_MASK))
    }

    /// Removes a backend bit.
    #[inline]
    #[must_use]
    pub const fn remove_backend(self, b: BackendComponent) -> DispatchKeySet {
        DispatchKeySet(self.0 & !Self::from_backend(b).0)
    }

    /// `self | other`.
    #[inline]
    pub const fn union(self, other: DispatchKeySet) -> DispatchKeySet {
        DispatchKeySet(self.0 | other.0)
    }

    /// `self & other`.
    #[inline]
    pub const fn intersection(self, other: DispatchKeySet) -> DispatchKeySet {
        DispatchKeySet(self.0 & other.0)
    }

    /// `self - other` with PyTorch's semantics: removes `other`'s functionality bits and keeps
    /// every backend bit of `self`.
    #[inline]
    pub const fn difference(self, other: DispatchKeySet) -> DispatchKeySet {
        DispatchKeySet(self.0 & (FULL_BACKEND_MASK | !other.0))
    }

    /// True for the empty set.
    #[inline]
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// 1 + the index of the highest set bit, 0 for no bit (`indexOfHighestBit`).
    #[inline]
    const fn index_of_highest_bit(raw: u64) -> u32 {
        64 - raw.leading_zeros()
    }

    /// The highest functionality in the set; `Undefined` when it has none.
    #[inline]
    pub const fn highest_functionality_key(self) -> DispatchKey {
        let idx = Self::index_of_highest_bit(self.0 >> NUM_BACKENDS);
        // Bits 62 and 63 give 47 and 48, which are valid enum values (as in PyTorch).
        DispatchKey::ALL[idx as usize]
    }

    /// The highest backend bit in the set; `InvalidBit` when it has none.
    #[inline]
    pub const fn highest_backend_key(self) -> BackendComponent {
        let idx = Self::index_of_highest_bit(self.0 & FULL_BACKEND_MASK);
        BackendComponent::ALL[idx as usize]
    }

    /// The key that wins dispatch: the highest functionality, made a runtime key with the
    /// highest backend when it is per-backend (`highestPriorityTypeId`).
    #[inline]
    pub const fn highest_priority_type_id(self) -> DispatchKey {
        let f = self.highest_functionality_key();
        if f.is_per_backend_functionality() {
            DispatchKey::to_runtime_per_backend_functionality_key(f, self.highest_backend_key())
        } else {
            f
        }
    }

    /// The dispatch-table slot of the set's highest-priority key
    /// (`getDispatchTableIndexForDispatchKeySet`): two bit scans, one table load, no branch.
    /// Always below [`NUM_RUNTIME_ENTRIES`], whatever the bits (see Note [Dispatch table index in
    /// range]).
    #[inline]
    pub const fn dispatch_table_index(self) -> usize {
        // See Note [Dispatch table index in seven instructions].
        let t = self.0 | 1;
        let bit = (63 - t.leading_zeros()) as usize;
        // Position of the highest selected backend bit, 0 when none is selected.
        // SAFETY: bit 0 is set in `t` and in every mask of the by-bit table, so the value is
        // not zero. (Saying so lets the compiler emit a bare bit scan instead of a zero check.)
        let selected =
            unsafe { std::num::NonZeroU64::new_unchecked(t & SLOT_BY_BIT.masks[bit] as u64) };
        let backend = 63 - selected.leading_zeros();
        SLOT_BY_BIT.offsets[bit] as usize + backend as usize
    }

    /// The index (0-based bit position) of the highest backend bit, 0 when none.
    #[inline]
    pub const fn backend_index(self) -> usize {
        (63 - ((self.0 & FULL_BACKEND_MASK) | 1).leading_zeros()) as usize
    }

    /// The keys of the set in PyTorch's iteration order (the order of its `Display`).
    #[inline]
    pub fn iter(self) -> Iter {
        Iter {
            raw: self.0,
            next_functionality: NUM_BACKENDS as u32,
            next_backend: 0,
            after_per_backend: false,
        }
    }
}

// Note [The end of a key set's iteration]
// PyTorch's iterator stops when its state equals the end iterator's: next functionality bit 63,
// current functionality 47 (`EndOfFunctionalityKeys`, printed `UnknownUnknown`), next backend 0,
// current backend 47. The current backend is written only when a per-backend runtime key is
// yielded, and starts at 47. So bit 62 (functionality 47, never set by a real key but reachable
// through `add(DispatchKey(47))` or a raw set) is yielded only after some per-backend key
// (`DispatchKeySet(CPU, UnknownUnknown)`); otherwise reaching it *is* the end state and the set
// prints without it (`DispatchKeySet(Negative)`, `DispatchKeySet()`). Bit 63 (functionality 48,
// printed `Undefined`) is yielded when bit 62 is clear; PyTorch then fails an internal assert on
// the next step, where we stop.

/// Iterator over a [`DispatchKeySet`]: functionality bits from low to high; a per-backend
/// functionality yields one runtime key per backend bit (low to high), none without backend bits.
/// The out-of-range bits 62 and 63 follow PyTorch's iterator (Note [The end of a key set's
/// iteration]).
#[derive(Clone, Debug)]
pub struct Iter {
    raw: u64,
    next_functionality: u32,
    next_backend: u32,
    /// Whether a per-backend runtime key was yielded (PyTorch's current backend is set).
    after_per_backend: bool,
}

/// One past the last bit the iterator visits (`end_iter_mask_val`): PyTorch stops at bit 63.
const END_ITER_BIT: u32 = (NUM_BACKENDS + NUM_FUNCTIONALITY_KEYS) as u32;

impl Iterator for Iter {
    type Item = DispatchKey;

    fn next(&mut self) -> Option<DispatchKey> {
        loop {
            if self.next_functionality >= 64 {
                return None;
            }
            let funcs = self.raw & (u64::MAX << self.next_functionality);
            if funcs == 0 || self.next_functionality == END_ITER_BIT {
                self.next_functionality = 64;
                return None;
            }
            let bit = funcs.trailing_zeros();
            // Bit 63 maps to value 48 (printed `Undefined`), which is not per-backend.
            let key = DispatchKey::ALL[(bit + 1 - NUM_BACKENDS as u32) as usize];
            if key == DispatchKey::EndOfFunctionalityKeys && !self.after_per_backend {
                // The state equals the end iterator's (Note [The end of a key set's iteration]).
                self.next_functionality = 64;
                return None;
            }
            if !key.is_per_backend_functionality() {
                self.next_functionality = bit + 1;
                return Some(key);
            }
            let backends = self.raw & FULL_BACKEND_MASK & (u64::MAX << self.next_backend);
            if backends == 0 {
                self.next_functionality = bit + 1;
                self.next_backend = 0;
                continue;
            }
            let b = backends.trailing_zeros();
            self.next_backend = b + 1;
            self.after_per_backend = true;
            let bc = BackendComponent::ALL[b as usize + 1];
            return Some(DispatchKey::to_runtime_per_backend_functionality_key(
                key, bc,
            ));
        }
    }
}

impl IntoIterator for DispatchKeySet {
    type Item = DispatchKey;
    type IntoIter = Iter;
    fn into_iter(self) -> Iter {
        self.iter()
    }
}

impl FromIterator<DispatchKey> for DispatchKeySet {
    fn from_iter<I: IntoIterator<Item = DispatchKey>>(iter: I) -> Self {
        iter.into_iter()
            .fold(DispatchKeySet::EMPTY, DispatchKeySet::add)
    }
}

impl From<DispatchKey> for DispatchKeySet {
    fn from(k: DispatchKey) -> Self {
        DispatchKeySet::from_key(k)
    }
}

impl BitOr for DispatchKeySet {
    type Output = DispatchKeySet;
    #[inline]
    fn bitor(self, rhs: DispatchKeySet) -> DispatchKeySet {
        self.union(rhs)
    }
}

impl BitAnd for DispatchKeySet {
    type Output = DispatchKeySet;
    #[inline]
    fn bitand(self, rhs: DispatchKeySet) -> DispatchKeySet {
        self.intersection(rhs)
    }
}

impl Sub for DispatchKeySet {
    type Output = DispatchKeySet;
    #[inline]
    fn sub(self, rhs: DispatchKeySet) -> DispatchKeySet {
        self.difference(rhs)
    }
}

impl fmt::Display for DispatchKeySet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DispatchKeySet(")?;
        for (i, k) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(k.name())?;
        }
        f.write_str(")")
    }
}

impl fmt::Debug for DispatchKeySet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self} [raw {:#x}]", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use DispatchKey as K;

    #[test]
    fn table_shape() {
        assert_eq!(NUM_RUNTIME_ENTRIES, 137);
        assert_eq!(
            OFFSETS_AND_MASKS[1],
            FunctionalityOffsetAndMask {
                offset: 1,
                mask: 0xffff
            }
        );
        assert_eq!(OFFSETS_AND_MASKS[2].offset, 17);
    }

    #[test]
    fn every_runtime_key_has_its_own_slot() {
        let mut seen = [None; NUM_RUNTIME_ENTRIES];
        for k in DispatchKey::ALL {
            if k.is_alias() || k == K::EndOfFunctionalityKeys {
                continue;
            }
            if k.is_runtime_per_backend()
                && k.to_backend_component() == BackendComponent::InvalidBit
            {
                continue;
            }
            if k.is_per_backend_functionality() {
                continue;
            }
            let idx = DispatchKeySet::from_key(k).dispatch_table_index();
            assert!(
                seen[idx].is_none(),
                "{k} shares slot {idx} with {:?}",
                seen[idx]
            );
            seen[idx] = Some(k);
        }
        assert!(seen.iter().all(Option::is_some));
    }

    #[test]
    fn functionality_index_matches_highest_bit() {
        for bit in 0..64 {
            for extra in [0u64, 1, 0xffff, 1 << 15] {
                let raw = (1u64 << bit) | extra;
                let expected = DispatchKeySet::index_of_highest_bit(raw >> NUM_BACKENDS) as usize;
                let om = OFFSETS_AND_MASKS[expected];
                let b = 63 - ((raw & om.mask as u64) | 1).leading_zeros() as usize;
                assert_eq!(
                    DispatchKeySet::from_raw(raw).dispatch_table_index(),
                    om.offset as usize + b
                );
            }
        }
        assert_eq!(DispatchKeySet::EMPTY.dispatch_table_index(), 0);
        // Arbitrary bit patterns, against PyTorch's two-step formula.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            for raw in [x, x & 0xffff, x & !0xffff, x >> 20] {
                let f = DispatchKeySet::index_of_highest_bit(raw >> NUM_BACKENDS) as usize;
                let om = OFFSETS_AND_MASKS[f];
                let b = 63 - ((raw & om.mask as u64) | 1).leading_zeros() as usize;
                assert_eq!(
                    DispatchKeySet::from_raw(raw).dispatch_table_index(),
                    om.offset as usize + b,
                    "{raw:#x}"
                );
            }
        }
    }

    #[test]
    fn junk_bits_do_not_overflow_the_table() {
        for raw in [1u64 << 62, 1u64 << 63, u64::MAX] {
            let idx = DispatchKeySet::from_raw(raw).dispatch_table_index();
            assert!(idx < NUM_RUNTIME_ENTRIES);
        }
    }

    #[test]
    fn remove_keeps_backend_bits() {
        let ks = DispatchKeySet::from_key(K::CPU).remove(K::CPU);
        assert_eq!(ks.raw(), 1);
        assert_eq!(ks.to_string(), "DispatchKeySet()");
    }
}
