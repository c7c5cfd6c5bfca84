//! PyTorch 2.15's Core ATen IR (the overloads tagged `core`, recorded in
//! data/pytorch_core_aten_2.15.txt): the set a backend implements to run any exported model.
//! Every one is declared here except those of [`NOT_YET`]; the test fails when a core overload
//! goes missing, and when one of the list arrives (so the list shrinks with the work).

use std::collections::BTreeSet;

use switchboard_ops::SCHEMAS;

const CORE: &str = include_str!("data/pytorch_core_aten_2.15.txt");

/// Core overloads not declared yet, and why.
const NOT_YET: &[&str] = &[
    // Complex results: the runtime has no complex dtypes.
    "aten::_fft_c2r",
    "aten::_fft_r2c",
];

#[test]
fn every_core_aten_overload_is_declared() {
    let declared: BTreeSet<&str> = SCHEMAS
        .iter()
        .map(|s| s.split('(').next().unwrap())
        .collect();
    let core: Vec<&str> = CORE
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .collect();
    assert_eq!(core.len(), 189, "PyTorch 2.15 tags 189 overloads core");
    let missing: Vec<&str> = core
        .iter()
        .copied()
        .filter(|op| !declared.contains(op))
        .collect();
    assert_eq!(
        missing, NOT_YET,
        "the core overloads not declared (left) differ from the NOT_YET list (right)"
    );
}
