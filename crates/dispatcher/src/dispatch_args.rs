//! Where a boxed call finds its dispatch keys: the positions of an operator's tensor-like
//! arguments, packed in one word (Note [Boxed dispatch arguments]).

use std::sync::atomic::{AtomicU64, Ordering};

use switchboard_keys::DispatchKeySet;

use crate::ivalue::IValue;

// Note [Boxed dispatch arguments]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A boxed call finds its dispatch keys in the tensor-like values among its arguments, the last
// `n` values of the stack (PyTorch's `DispatchKeyExtractor`, with its bitset of dispatch
// argument positions). All it needs is packed in one word, read with one (relaxed atomic) load,
// so that a call racing with a re-definition sees one consistent layout:
// - the top 16 bits: the argument count `n` (the stack must hold at least `n` values);
// - the common case, one or two dispatch arguments (`SLOW` clear): the low two 16-bit fields
//   hold each one's position as a negative byte offset from the stack's end (an operator with
//   one dispatch argument repeats it: or-ing its keys twice changes nothing). Extraction is
//   then two sign extensions, two addressed tag tests and two loads, with no loop: about twenty
//   instructions for `add(Tensor, Tensor)` against forty for the loop. A value that is not a
//   tensor there (a `None` for `Tensor?`, a list) takes an out-of-line path;
// - the mask layout (`MASK_LAYOUT`: no dispatch argument, more than two, or one too far from
//   the end): bit i of the low 44 bits is set when argument i is tensor-like, and extraction
//   loops over the set bits, one value read per dispatch argument. A tensor-like argument past
//   position 43 sets `SCAN_ALL` instead and every argument is scanned: correct, and too rare to
//   optimise;
// - `OBSERVED`, the entry's copy of the observing state (Note [Observing calls for free]).
// `SLOW` is set whenever `MASK_LAYOUT` or `OBSERVED` is: a boxed call tests that one bit and
// either takes the fast extraction and calls the kernel without any other test, or goes out
// of line for everything else. The observing state thus costs a boxed call nothing, as the
// signature id's `OBSERVED_BIT` does for a typed call.

/// Where the argument count starts.
const COUNT_SHIFT: u32 = 48;
/// Set when a boxed call cannot take the fast path: `MASK_LAYOUT` or `OBSERVED`.
const SLOW: u64 = 1 << 47;
/// Set for the mask layout (a mask of positions rather than two offsets).
const MASK_LAYOUT: u64 = 1 << 46;
/// Calls may be observed.
const OBSERVED: u64 = 1 << 45;
/// In the mask layout: some dispatch argument is beyond the mask's bits, scan every value.
const SCAN_ALL: u64 = 1 << 44;
/// The bits of the mask layout's mask.
const MASK_BITS: u32 = 44;
/// The size of one value, the unit of the offsets.
const VALUE_SIZE: usize = std::mem::size_of::<IValue>();

/// Packs a schema's argument count and the positions of its tensor-like arguments (see
/// Note [Boxed dispatch arguments]). A count beyond 16 bits (no real schema has one) is
/// clamped; the call then scans the last 65535 values. Only positions below `count` are
/// recorded: extraction relies on it.
pub(crate) fn pack(count: usize, tensor_like: impl Iterator<Item = bool>) -> u64 {
    let max_count = (1usize << (64 - COUNT_SHIFT)) - 1;
    let count_bits = (count.min(max_count) as u64) << COUNT_SHIFT;
    // One pass (no allocation: registration is timed too): the mask, and the first two
    // positions with how many there are.
    let mut mask = if count > max_count { SCAN_ALL } else { 0 };
    let (mut first, mut found) = ([0usize; 2], 0usize);
    for (i, _) in tensor_like.take(count).enumerate().filter(|&(_, t)| t) {
        if found < 2 {
            first[found] = i;
        }
        found += 1;
        mask |= if i < MASK_BITS as usize {
            1 << i
        } else {
            SCAN_ALL
        };
    }
    // The offset of position `i` from the end, if it fits a 16-bit field.
    let offset = |i: usize| -> Option<u64> {
        let bytes = i16::try_from((count - i).checked_mul(VALUE_SIZE)?).ok()?;
        Some(u64::from((-bytes) as u16))
    };
    if count <= max_count {
        let pair = match found {
            1 => offset(first[0]).map(|o| (o, o)),
            2 => offset(first[0]).zip(offset(first[1])),
            _ => None,
        };
        if let Some((o0, o1)) = pair {
            return count_bits | (o1 << 16) | o0;
        }
    }
    count_bits | MASK_LAYOUT | SLOW | mask
}

/// `word` with `SLOW` set exactly when it should be.
fn with_slow_bit(word: u64) -> u64 {
    if word & (MASK_LAYOUT | OBSERVED) != 0 {
        word | SLOW
    } else {
        word & !SLOW
    }
}

/// The packed dispatch arguments of an operator (see Note [Boxed dispatch arguments]).
pub(crate) struct DispatchArgs(AtomicU64);

impl DispatchArgs {
    /// No schema yet: no arguments.
    pub(crate) fn new(observed: bool) -> Self {
        // `pack(0, ..)`: the mask layout with an empty mask.
        let word = MASK_LAYOUT | if observed { OBSERVED } else { 0 };
        DispatchArgs(AtomicU64::new(with_slow_bit(word)))
    }

    /// Records a schema's arguments (`tensor_like[i]`: argument i is a tensor, an optional
    /// tensor or a tensor list).
    pub(crate) fn set(&self, count: usize, tensor_like: impl Iterator<Item = bool>) {
        let packed = pack(count, tensor_like);
        // An update rather than a store: the observing state may change concurrently.
        let _ = (self.0).fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
            Some(with_slow_bit(packed | (old & OBSERVED)))
        });
    }

    /// Records the observing state (Note [Observing calls for free]).
    pub(crate) fn set_observed(&self, on: bool) {
        let _ = (self.0).fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
            let word = if on { old | OBSERVED } else { old & !OBSERVED };
            Some(with_slow_bit(word))
        });
    }

    /// The fast path of a boxed call's key extraction: the union of the key sets of the one or
    /// two dispatch arguments among the last values of `stack` when they are tensors (none when
    /// the stack holds too few values); `None` when the call must take the slow path
    /// ([`key_set`](Self::key_set) and the observing check): another layout, calls observed, or
    /// a dispatch argument that is not a tensor.
    #[inline(always)]
    pub(crate) fn fast_key_set(&self, stack: &[IValue]) -> Option<DispatchKeySet> {
        let packed = self.0.load(Ordering::Relaxed);
        if packed & SLOW != 0 {
            return None;
        }
        let n = (packed >> COUNT_SHIFT) as usize;
        let len = stack.len();
        if len < n {
            // No keys, as `key_set` finds: the kernel reports the count. (Not `None`: the
            // two tests would then merge into a longer branch-free sequence.)
            return Some(DispatchKeySet::EMPTY);
        }
        let end = stack.as_ptr_range().end;
        // SAFETY: with `SLOW` clear, both offsets are in -n * VALUE_SIZE..=-VALUE_SIZE,
        // multiples of VALUE_SIZE (`pack`, for positions below `n`), and `len >= n`: each
        // addresses one of the last `n` values of `stack`, initialised and borrowed with it.
        let (v0, v1) = unsafe {
            let at = |field: u64| &*end.byte_offset(field as u16 as i16 as isize);
            (at(packed), at(packed >> 16))
        };
        match (v0, v1) {
            (IValue::Tensor(a), IValue::Tensor(b)) => Some(a.key_set() | b.key_set()),
            _ => None,
        }
    }

    /// The union of the key sets of the dispatch arguments among the last values of `stack`
    /// (the arguments of a boxed call), whatever the layout. Too few values give no keys: the
    /// kernel reports the count.
    pub(crate) fn key_set(&self, stack: &[IValue]) -> DispatchKeySet {
        let packed = self.0.load(Ordering::Relaxed);
        let n = (packed >> COUNT_SHIFT) as usize;
        let Some(base) = stack.len().checked_sub(n) else {
            return DispatchKeySet::EMPTY;
        };
        let args = &stack[base..];
        if packed & MASK_LAYOUT == 0 {
            // Offsets from the end, `pack`: in -n * VALUE_SIZE..=-VALUE_SIZE.
            let at = |field: u64| &args[n - (-(field as u16 as i16) as usize) / VALUE_SIZE];
            return at(packed).key_set() | at(packed >> 16).key_set();
        }
        if packed & SCAN_ALL != 0 {
            return args
                .iter()
                .fold(DispatchKeySet::EMPTY, |ks, v| ks | v.key_set());
        }
        let mut mask = packed & ((1 << MASK_BITS) - 1);
        let mut ks = DispatchKeySet::EMPTY;
        while mask != 0 {
            let i = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            // Set bits are below the count (`pack`), the length of `args`.
            ks = ks | args[i].key_set();
        }
        ks
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_keys::DispatchKey as K;
    use switchboard_tensor::{ScalarType, Tensor};

    fn tensor(keys: &[K]) -> IValue {
        let t = Tensor::ones(&[1], ScalarType::Float).unwrap();
        IValue::Tensor(t.with_key_set(DispatchKeySet::from_keys(keys)))
    }

    fn args(count: usize, tensor_like: &[usize]) -> DispatchArgs {
        let a = DispatchArgs::new(false);
        a.set(count, (0..count).map(|i| tensor_like.contains(&i)));
        a
    }

    /// What a boxed call finds: the fast path when it applies (checked against the general
    /// extraction), else the general extraction.
    fn keys(args: &DispatchArgs, stack: &[IValue]) -> DispatchKeySet {
        let all = args.key_set(stack);
        if let Some(fast) = args.fast_key_set(stack) {
            assert_eq!(fast, all);
        }
        all
    }

    #[test]
    fn one_or_two_dispatch_arguments_pack_as_offsets() {
        let packed = pack(4, [true, false, false, true].into_iter());
        assert_eq!(packed >> COUNT_SHIFT, 4);
        assert_eq!(packed & MASK_LAYOUT, 0);
        assert_eq!(packed as u16 as i16, -64);
        assert_eq!((packed >> 16) as u16 as i16, -16);
        let single = pack(3, [false, true, false].into_iter());
        assert_eq!(single as u16 as i16, -32);
        assert_eq!((single >> 16) as u16 as i16, -32);
    }

    #[test]
    fn a_new_entry_has_no_arguments() {
        assert_eq!(
            DispatchArgs::new(false).0.load(Ordering::Relaxed),
            pack(0, std::iter::empty())
        );
        let observed = DispatchArgs::new(true).0.load(Ordering::Relaxed);
        assert_eq!(observed, pack(0, std::iter::empty()) | OBSERVED);
    }

    #[test]
    fn other_counts_pack_as_a_mask() {
        let packed = pack(4, [true, true, false, true].into_iter());
        assert_ne!(packed & MASK_LAYOUT, 0);
        assert_eq!(packed & ((1 << MASK_BITS) - 1), 0b1011);
        assert_eq!(
            pack(2, [false, false].into_iter()) & !(3 << COUNT_SHIFT),
            MASK_LAYOUT | SLOW
        );
        let far = pack(60, (0..60).map(|i| i == 50 || i == 51 || i == 52));
        assert_eq!(far >> COUNT_SHIFT, 60);
        assert_ne!(far & SCAN_ALL, 0);
        // Two arguments, one too far from the end for a 16-bit offset.
        let long = pack(3000, (0..3000).map(|i| i == 0 || i == 2999));
        assert_ne!(long & MASK_LAYOUT, 0);
        assert_ne!(long & SCAN_ALL, 0);
    }

    #[test]
    fn both_layouts_find_the_same_keys() {
        let cpu = tensor(&[K::CPU]);
        let meta = tensor(&[K::Meta]);
        let stack = vec![
            IValue::Int(7),
            cpu.clone(),
            IValue::Double(1.0),
            meta.clone(),
        ];
        let want = DispatchKeySet::from_keys(&[K::CPU, K::Meta]);
        // Two offsets, and the same positions through the general layout (a third, non-tensor
        // dispatch argument forces it).
        assert_eq!(keys(&args(4, &[1, 3]), &stack), want);
        assert_eq!(keys(&args(4, &[0, 1, 3]), &stack), want);
        assert_eq!(
            keys(&args(4, &[3]), &stack),
            DispatchKeySet::from_keys(&[K::Meta])
        );
        // Only the last `count` values are arguments.
        assert_eq!(keys(&args(2, &[0]), &stack), DispatchKeySet::EMPTY);
        assert_eq!(
            keys(&args(2, &[1]), &stack),
            DispatchKeySet::from_keys(&[K::Meta])
        );
        // Too few values: no keys.
        assert_eq!(keys(&args(5, &[1, 3]), &stack), DispatchKeySet::EMPTY);
        assert_eq!(keys(&args(0, &[]), &stack), DispatchKeySet::EMPTY);
    }

    #[test]
    fn the_fast_path_takes_one_or_two_tensors_unless_observed() {
        let cpu = tensor(&[K::CPU]);
        let stack = vec![cpu.clone(), IValue::Int(1), cpu];
        let want = DispatchKeySet::from_keys(&[K::CPU]);
        let a = args(3, &[0, 2]);
        assert_eq!(a.fast_key_set(&stack), Some(want));
        a.set_observed(true);
        assert_eq!(a.fast_key_set(&stack), None);
        assert_eq!(a.key_set(&stack), want);
        // A new schema keeps the observing state; turning it off restores the fast path.
        a.set(3, [false, false, true].into_iter());
        assert_eq!(a.fast_key_set(&stack), None);
        a.set_observed(false);
        assert_eq!(a.fast_key_set(&stack), Some(want));
        // The mask layout stays slow when observing stops.
        let mask = args(3, &[0, 1, 2]);
        mask.set_observed(true);
        mask.set_observed(false);
        assert_eq!(mask.fast_key_set(&stack), None);
        assert_eq!(mask.key_set(&stack), want);
        assert!(DispatchArgs::new(true).fast_key_set(&[]).is_none());
    }

    #[test]
    fn optional_and_list_arguments_take_the_slow_path() {
        let cpu = tensor(&[K::CPU]);
        let IValue::Tensor(meta) = tensor(&[K::Meta]) else {
            unreachable!()
        };
        let list = IValue::TensorList(vec![meta].into());
        let want = DispatchKeySet::from_keys(&[K::CPU, K::Meta]);
        assert_eq!(keys(&args(2, &[0, 1]), &[cpu.clone(), list.clone()]), want);
        assert_eq!(keys(&args(2, &[0, 1]), &[list, cpu.clone()]), want);
        let cpu_only = DispatchKeySet::from_keys(&[K::CPU]);
        assert_eq!(keys(&args(2, &[0, 1]), &[IValue::None, cpu]), cpu_only);
        // A value of a wrong type (the kernel reports it) gives no keys rather than a bad read.
        assert_eq!(
            keys(&args(1, &[0]), &[IValue::Int(3)]),
            DispatchKeySet::EMPTY
        );
    }
}
