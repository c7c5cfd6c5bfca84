//! `is_random` / `is_pure` read the `nondeterministic_seeded` tag (and Generator arguments).

use switchboard_dispatcher::{Dispatcher, Library, LibraryKind, Result, Tag};
use switchboard_graph::{is_pure, is_random};
use switchboard_ops as _;

/// The operators `is_random` listed by name before tags existed: each overload of them that
/// is declared is random.
const RANDOM_BEFORE_TAGS: &[&str] = &[
    "bernoulli",
    "bernoulli_",
    "dropout",
    "native_dropout",
    "normal_",
    "normal_functional",
    "rand",
    "randint",
    "randn",
    "random_",
    "uniform",
    "uniform_",
];

#[test]
fn random_aten_operators_are_tagged_and_random() {
    let d = Dispatcher::global();
    let mut seen = 0;
    for name in d.list_operators() {
        let Some(op) = d.find_op(&name).filter(|op| op.schema().is_some()) else {
            continue;
        };
        let base = name.name().trim_start_matches("aten::").to_owned();
        if RANDOM_BEFORE_TAGS.contains(&base.as_str()) {
            seen += 1;
            assert!(op.has_tag(Tag::NondeterministicSeeded), "{name}");
            assert!(is_random(&op), "{name}");
            assert!(!is_pure(&op), "{name}");
        }
    }
    assert!(seen >= 20, "only {seen} random overloads found");
    for pure in [
        "aten::add.Tensor",
        "aten::relu",
        "aten::native_dropout_backward",
    ] {
        let op = d.find_schema_or_throw(pure).unwrap();
        assert!(!is_random(&op), "{pure}");
        assert!(is_pure(&op), "{pure}");
    }
}

#[test]
fn custom_operators_are_random_by_tag_or_generator() -> Result<()> {
    let d = Dispatcher::new();
    let mut lib = Library::new(&d, LibraryKind::Def, "myops", None)?;
    lib.def_with_tags("noise(Tensor x) -> Tensor", &[Tag::NondeterministicSeeded])?;
    lib.def("shift(Tensor x) -> Tensor")?;
    lib.def("sample(Tensor x, Generator? generator=None) -> Tensor")?;
    let op = |n: &str| d.find_schema_or_throw(n);
    assert!(is_random(&op("myops::noise")?));
    assert!(!is_pure(&op("myops::noise")?));
    assert!(!is_random(&op("myops::shift")?));
    assert!(is_pure(&op("myops::shift")?));
    // Untagged but taking a Generator: still random.
    assert!(is_random(&op("myops::sample")?));
    Ok(())
}
