//! `DispatchKeySet` iteration and printing against a model of PyTorch's iterator: the state
//! machine of `DispatchKeySet::iterator` (next functionality bit, current functionality, next
//! backend bit, current backend), stopped, as a range-for loop is, when its state equals the end
//! iterator's. Sets with backend bits and no functionality, per-backend functionalities without a
//! backend, and the out-of-range bits 62 and 63 are where a simpler model goes wrong.

use switchboard_keys::{BackendComponent, DispatchKey, DispatchKeySet, NUM_BACKENDS};

const END_FUNCTIONALITY_BIT: u32 = 63; // num_backends + num_functionality_keys
const END_KEY: u32 = 47; // num_functionality_keys

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct State {
    next_functionality: u32,
    current_key: u32,
    next_backend: u32,
    current_backend: u32,
}

/// Bits of `raw` at or above `from`.
fn at_or_above(raw: u64, from: u32) -> u64 {
    if from >= 64 {
        0
    } else {
        raw & (u64::MAX << from)
    }
}

fn lowest_bit(x: u64) -> Option<u32> {
    (x != 0).then(|| x.trailing_zeros())
}

/// One step of the model; `Err` where PyTorch's internal assert fails.
fn step(raw: u64, s: &mut State) -> Result<(), ()> {
    if s.next_functionality > END_FUNCTIONALITY_BIT {
        return Err(());
    }
    loop {
        let functionality = lowest_bit(at_or_above(raw, s.next_functionality));
        let backend = lowest_bit(at_or_above(raw & 0xffff, s.next_backend));
        let Some(bit) = functionality.filter(|_| s.next_functionality != END_FUNCTIONALITY_BIT)
        else {
            *s = State {
                next_functionality: END_FUNCTIONALITY_BIT,
                current_key: END_KEY,
                next_backend: 0,
                current_backend: END_KEY,
            };
            return Ok(());
        };
        let key = bit + 1 - NUM_BACKENDS as u32;
        let per_backend = DispatchKey::from_u8(key as u8)
            .unwrap()
            .is_per_backend_functionality();
        if !per_backend {
            s.current_key = key;
            s.next_functionality = bit + 1;
            return Ok(());
        }
        let Some(b) = backend else {
            s.next_functionality = bit + 1;
            continue;
        };
        s.current_key = key;
        s.current_backend = b + 1;
        if at_or_above(raw & 0xffff, b + 1) == 0 {
            s.next_functionality = bit + 1;
            s.next_backend = 0;
        } else {
            s.next_backend = b + 1;
        }
        return Ok(());
    }
}

fn key_of(s: State) -> DispatchKey {
    let f = DispatchKey::from_u8(s.current_key as u8).unwrap();
    if f.is_per_backend_functionality() {
        let b = BackendComponent::from_index(s.current_backend as u8).unwrap();
        DispatchKey::to_runtime_per_backend_functionality_key(f, b)
    } else {
        f
    }
}

/// The keys PyTorch's `for (auto k : ks)` visits, and whether it ends in an internal assert.
fn model(raw: u64) -> (Vec<DispatchKey>, bool) {
    let mut end = State {
        next_functionality: END_FUNCTIONALITY_BIT,
        current_key: END_KEY,
        next_backend: 0,
        current_backend: END_KEY,
    };
    step(raw, &mut end).unwrap();
    let mut it = State {
        next_functionality: NUM_BACKENDS as u32,
        current_key: END_KEY,
        next_backend: 0,
        current_backend: END_KEY,
    };
    step(raw, &mut it).unwrap();
    let mut keys = Vec::new();
    while it != end {
        keys.push(key_of(it));
        if step(raw, &mut it).is_err() {
            return (keys, true);
        }
    }
    (keys, false)
}

fn printed(keys: &[DispatchKey]) -> String {
    let names: Vec<&str> = keys.iter().map(|k| k.name()).collect();
    format!("DispatchKeySet({})", names.join(", "))
}

fn check(raw: u64) {
    let ks = DispatchKeySet::from_raw(raw);
    let (expected, asserts) = model(raw);
    let got: Vec<DispatchKey> = ks.iter().collect();
    assert_eq!(got, expected, "iteration of {raw:#x}");
    // Where PyTorch asserts (bit 63), it has already printed the keys before it.
    if !asserts {
        assert_eq!(ks.to_string(), printed(&expected), "{raw:#x}");
    }
}

struct XorShift(u64);
impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn backend_bits_without_functionality_print_nothing() {
    for raw in [1u64, 4, 0x8000, 0xffff, 0x1234] {
        assert_eq!(
            DispatchKeySet::from_raw(raw).to_string(),
            "DispatchKeySet()"
        );
        check(raw);
    }
}

#[test]
fn per_backend_functionality_without_backend_prints_nothing() {
    let dense = DispatchKeySet::from_key(DispatchKey::Dense);
    assert_eq!(dense.to_string(), "DispatchKeySet()");
    let autograd = DispatchKeySet::from_key(DispatchKey::AutogradFunctionality)
        | DispatchKeySet::from_key(DispatchKey::Negative);
    assert_eq!(autograd.to_string(), "DispatchKeySet(Negative)");
}

#[test]
fn key_47_prints_only_after_a_per_backend_key() {
    let k47 = DispatchKey::from_u8(47).unwrap();
    assert_eq!(
        DispatchKeySet::from_key(k47).to_string(),
        "DispatchKeySet()"
    );
    let negative = DispatchKeySet::from_key(DispatchKey::Negative).add(k47);
    assert_eq!(negative.to_string(), "DispatchKeySet(Negative)");
    assert_eq!(negative.iter().count(), 1);
    // Backend bits alone do not count: no per-backend key was yielded.
    let backends = DispatchKeySet::from_raw(0xffff | negative.raw());
    assert_eq!(backends.to_string(), "DispatchKeySet(Negative)");
    let cpu = DispatchKeySet::from_keys(&[DispatchKey::CPU, DispatchKey::Negative]).add(k47);
    assert_eq!(
        cpu.to_string(),
        "DispatchKeySet(CPU, Negative, UnknownUnknown)"
    );
    // Bit 63 (value 48) is visited only when bit 62 is clear.
    assert_eq!(
        DispatchKeySet::from_raw(3 << 62).to_string(),
        "DispatchKeySet()"
    );
    assert_eq!(
        DispatchKeySet::from_raw(1 << 63).to_string(),
        "DispatchKeySet(Undefined)"
    );
}

#[test]
fn every_single_bit_and_pair() {
    for a in 0..64 {
        check(1 << a);
        for b in 0..64 {
            check((1 << a) | (1 << b));
            check((1 << a) | (1 << b) | 0xffff);
            check((1 << a) | (1 << b) | 0x8001);
        }
    }
}

#[test]
fn random_sets_match_pytorchs_iterator() {
    let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
    for _ in 0..10_000 {
        let x = rng.next();
        let y = rng.next();
        // Dense, sparse and mixed patterns, backend bits with few or no functionality bits.
        for raw in [
            x,
            x & y,
            x & y & rng.next(),
            x & 0xffff,
            (x & 0xffff) | (y & (1 << 62)),
        ] {
            check(raw);
            check(raw | (1 << 62));
            check(raw & !(1 << 63));
        }
    }
}

#[test]
fn sets_of_real_keys_print_every_key() {
    // Without the out-of-range bits, printing is the set's keys, each once, in priority order.
    let keys: Vec<DispatchKey> = DispatchKey::ALL
        .iter()
        .copied()
        .filter(|k| !k.is_alias() && !matches!(*k as u8, 47 | 48))
        .collect();
    let mut rng = XorShift(7);
    for _ in 0..10_000 {
        let picked: Vec<DispatchKey> = (0..(rng.next() % 6))
            .map(|_| keys[(rng.next() % keys.len() as u64) as usize])
            .collect();
        let ks = DispatchKeySet::from_keys(&picked);
        check(ks.raw());
        for k in ks.iter() {
            assert!(ks.has(k), "{ks:?} yields {k} it does not have");
        }
    }
}
