//! PyTorch 2.15's Core ATen IR (the overloads tagged `core`, recorded in
//! data/pytorch_core_aten_2.15.txt): the set a backend implements to run any exported model.
//! Every one is declared here; the test fails when a core overload goes missing.

use std::collections::BTreeSet;

use switchboard_ops::SCHEMAS;

const CORE: &str = include_str!("data/pytorch_core_aten_2.15.txt");

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
    assert!(
        missing.is_empty(),
        "core overloads not declared: {missing:?}"
    );
}
