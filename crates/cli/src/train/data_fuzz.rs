//! Fuzzing the CSV loader: arbitrary bytes, CSV built from hostile cells (NaN,
//! infinities, huge and negative numbers, quotes, comments, ragged rows), gzip streams of them,
//! truncated or not, give a data set or an error, never a panic, an abort or a hang; what loads
//! holds what `Dataset` promises. Bounded to run in seconds.

use std::io::Write;

use proptest::prelude::*;

use super::*;

const CELLS: &[&str] = &[
    "0",
    "1",
    "2",
    "-1",
    "3.5",
    "1e3",
    "1e39",
    "-0",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "infinity",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551616",
    "1e300",
    "0x10",
    "",
    " ",
    "\"1\"",
    "\"a,b\"",
    "\"",
    "a",
    "label",
    "#",
    "16777217",
    "4.0",
];

/// CSV text: rows of cells, separators and line ends drawn from hostile pieces.
fn csv_text() -> impl Strategy<Value = Vec<u8>> {
    let row = prop::collection::vec(prop::sample::select(CELLS), 0..6);
    (
        prop::collection::vec(row, 0..12),
        prop::sample::select(&["\n", "\r\n", "\r", "\n\n", "\n#c\n"][..]),
    )
        .prop_map(|(rows, end)| {
            rows.iter()
                .map(|r| r.join(","))
                .collect::<Vec<_>>()
                .join(end)
                .into_bytes()
        })
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

/// Loads `bytes` with a small limit; whatever loads must be consistent.
fn check(bytes: &[u8], limit: u64) -> Result<(), TestCaseError> {
    let Ok(d) = Dataset::from_reader(bytes, "fuzz", limit) else {
        return Ok(());
    };
    prop_assert!(d.n_features >= 1);
    prop_assert_eq!(d.features.len(), d.len() * d.n_features);
    prop_assert!(d.features.iter().all(|v| v.is_finite()));
    prop_assert!(d.labels.iter().all(|&l| l >= 0));
    let max = d.labels.iter().max().copied().unwrap_or(0);
    prop_assert_eq!(d.n_classes as u64, max as u64 + 1);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        check(&bytes, 1 << 10)?;
    }

    #[test]
    fn hostile_csv(text in csv_text(), limit in prop_oneof![Just(1u64 << 20), 1u64..64]) {
        check(&text, limit)?;
    }

    #[test]
    fn gzip_streams(text in csv_text(), cut in any::<prop::sample::Index>(), whole in any::<bool>()) {
        let gz = gzip(&text);
        let end = if whole { gz.len() } else { cut.index(gz.len() + 1) };
        check(&gz[..end], 1 << 20)?;
        // Several members, as a gzip bomb is made.
        check(&gz.repeat(3), 1 << 20)?;
    }
}
