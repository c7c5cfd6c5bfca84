//! Fuzzing the safetensors loader (issue #22): arbitrary bytes, headers built from hostile
//! pieces (huge and zero dimensions, overlapping or reversed offsets, unknown dtypes, lying
//! header lengths) and mutations of valid files give `Ok` or an error, never a panic, an abort
//! or a hang; whatever loads is printable and stays within its own storage. Bounded to run in
//! seconds.

use proptest::prelude::*;
use switchboard_tensor::{load_safetensors, save_safetensors, RawOps, ScalarType, Tensor};

const DTYPES: &[&str] = &[
    "BOOL", "U8", "I8", "I16", "I32", "I64", "F16", "BF16", "F32", "F64", "U16", "U32", "U64",
    "F8_E4M3", "C64", "X", "",
];

const DIMS: &[u64] = &[
    0,
    1,
    2,
    3,
    7,
    1 << 20,
    1 << 31,
    1 << 32,
    1 << 40,
    1 << 62,
    (1 << 63) - 1,
    1 << 63,
    u64::MAX,
];

fn dim() -> impl Strategy<Value = u64> {
    prop_oneof![3 => 0u64..4, 1 => prop::sample::select(DIMS)]
}

/// One header entry: dtype, shape, offsets.
fn entry() -> impl Strategy<Value = (String, Vec<u64>, (u64, u64))> {
    (
        prop::sample::select(DTYPES).prop_map(str::to_owned),
        prop::collection::vec(dim(), 0..5),
        (
            prop_oneof![0u64..64, Just(u64::MAX)],
            prop_oneof![0u64..64, Just(u64::MAX)],
        ),
    )
}

/// A file: 8-byte header length (possibly lying), the JSON header, the data.
fn file() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::collection::vec(entry(), 0..4),
        prop::option::of("[a-z\"{}]{0,8}"),
        prop::collection::vec(any::<u8>(), 0..64),
        prop_oneof![4 => Just(0i64), 1 => -8i64..8],
    )
        .prop_map(|(entries, meta, data, lie)| {
            let mut parts: Vec<String> = entries
                .iter()
                .enumerate()
                .map(|(i, (dtype, shape, (a, b)))| {
                    format!(
                        "\"t{i}\":{{\"dtype\":\"{dtype}\",\"shape\":{shape:?},\"data_offsets\":[{a},{b}]}}"
                    )
                })
                .collect();
            if let Some(m) = meta {
                parts.push(format!("\"__metadata__\":{{\"k\":\"{m}\"}}"));
            }
            let header = format!("{{{}}}", parts.join(","));
            let len = (header.len() as i64 + lie).max(0) as u64;
            let mut bytes = len.to_le_bytes().to_vec();
            bytes.extend_from_slice(header.as_bytes());
            bytes.extend_from_slice(&data);
            bytes
        })
}

/// Element sizes of the dtypes the loader reads.
const SIZED: &[(&str, u64)] = &[
    ("BOOL", 1),
    ("U8", 1),
    ("I8", 1),
    ("I16", 2),
    ("I32", 4),
    ("I64", 8),
    ("F16", 2),
    ("BF16", 2),
    ("F32", 4),
    ("F64", 8),
];

/// A file whose offsets agree with its shapes and data (so that the loader's own checks pass
/// and the tensors are built): small shapes, or shapes with a zero and huge dimensions; data
/// starting at arbitrary (possibly misaligned) offsets.
fn consistent_file() -> impl Strategy<Value = Vec<u8>> {
    let shape = prop_oneof![
        3 => prop::collection::vec(0u64..4, 0..4),
        1 => (prop::collection::vec(prop::sample::select(DIMS), 0..3), any::<prop::sample::Index>())
            .prop_map(|(mut v, at)| {
                let i = at.index(v.len() + 1);
                v.insert(i, 0);
                v
            }),
    ];
    (prop::collection::vec((prop::sample::select(SIZED), shape), 1..4), 0u64..3).prop_map(
        |(entries, skew)| {
            let mut parts = Vec::new();
            let mut data = vec![0u8; skew as usize];
            let mut at = skew;
            for (i, ((dtype, size), shape)) in entries.iter().enumerate() {
                let numel = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
                let n = numel.and_then(|n| n.checked_mul(*size)).unwrap_or(0).min(256);
                parts.push(format!(
                    "\"t{i}\":{{\"dtype\":\"{dtype}\",\"shape\":{shape:?},\"data_offsets\":[{at},{}]}}",
                    at + n
                ));
                // Bools must be 0 or 1; other bytes anything.
                data.extend((0..n).map(|k| (k % 2) as u8));
                at += n;
            }
            if skew > 0 {
                parts.push(format!(
                    "\"pad\":{{\"dtype\":\"U8\",\"shape\":[{skew}],\"data_offsets\":[0,{skew}]}}"
                ));
            }
            let header = format!("{{{}}}", parts.join(","));
            let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
            bytes.extend_from_slice(header.as_bytes());
            bytes.extend_from_slice(&data);
            bytes
        },
    )
}

/// A valid file of a few small tensors.
fn valid_file() -> Vec<u8> {
    let a = Tensor::from_vec(vec![1.0f32, -2.0, 3.5], &[3]).unwrap();
    let b = Tensor::from_vec(vec![true, false], &[2, 1]).unwrap();
    let c = Tensor::from_vec(vec![7i64, 8, 9, 10], &[2, 2]).unwrap();
    let d = Tensor::zeros(&[0, 3], ScalarType::Half).unwrap();
    save_safetensors(&[("a", &a), ("b", &b), ("c", &c), ("d", &d)], None).unwrap()
}

/// Loads `bytes`; whatever loads must print and respect its own storage bounds.
fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
    let Ok(tensors) = load_safetensors(bytes) else {
        return Ok(());
    };
    for (name, t) in &tensors {
        let s = t.to_string();
        prop_assert!(s.starts_with("tensor("), "{name}: {s}");
        let bytes = t.numel() as usize * t.element_size();
        prop_assert_eq!(t.storage().nbytes(), bytes, "{}", name);
        // One element past the end is refused, not read.
        if t.numel() > 0 {
            prop_assert!(t.as_strided(&[t.numel() + 1], &[1], 0).is_err());
        }
        let _ = t.contiguous().map(|c| c.to_string());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        check(&bytes)?;
    }

    #[test]
    fn hostile_headers(bytes in file()) {
        check(&bytes)?;
    }

    #[test]
    fn consistent_headers(bytes in consistent_file()) {
        check(&bytes)?;
    }

    #[test]
    fn mutated_valid_files(
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..6)
    ) {
        let mut bytes = valid_file();
        for (at, value, kind) in edits {
            if bytes.is_empty() {
                break;
            }
            let i = at.index(bytes.len());
            match kind {
                0 => bytes[i] = value,
                1 => bytes.insert(i, value),
                _ => {
                    bytes.remove(i);
                }
            }
        }
        check(&bytes)?;
    }
}

#[test]
fn interesting_cases() {
    // Zero-element tensors with dimensions whose product overflows are refused, in either
    // order (Note [Sizes whose every product fits]).
    for shape in [
        "[0, 1099511627776, 1099511627776]",
        "[1099511627776, 1099511627776, 0]",
    ] {
        let header =
            format!("{{\"x\":{{\"dtype\":\"F32\",\"shape\":{shape},\"data_offsets\":[0,0]}}}}");
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header.as_bytes());
        assert!(load_safetensors(&bytes).is_err(), "{shape}");
    }
    check(&valid_file()).unwrap();
}

#[test]
fn consistent_files_mostly_load() {
    // The generator is worth its name: most of its files load, so `check` exercises the
    // tensors, not only the header parser.
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = consistent_file();
    let loaded = (0..200)
        .filter(|_| {
            let bytes = strategy.new_tree(&mut runner).unwrap().current();
            load_safetensors(&bytes).is_ok()
        })
        .count();
    assert!(loaded > 100, "{loaded} of 200");
}
