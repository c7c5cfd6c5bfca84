//! The tags an operator of the YAML file is defined with, and the tag rules torchgen enforces.

use switchboard_schema::{Tag, Type};

use crate::model::NativeFunction;

// Note [Tags torchgen adds]
// torchgen gives an operator the tags its entry lists plus three it derives from the schema
// (torchgen/model.py, `NativeFunction.from_yaml`): `pt2_compliant_tag` for every `aten`
// operator, `out` for an out= overload (one with a mutable keyword-only argument) and `inplace`
// for an in-place one (`add_`, `__iand__`), and registers them sorted by name (RegisterSchema:
// `m.def(schema, {at::Tag::core, at::Tag::pointwise, ...})`), which is also `torch.Tag`'s order.
// We do the same, so an operator's `tags()` equals `torch.ops.aten.NAME.OVERLOAD.tags` for
// the same schema. The YAML entry therefore lists only the other tags, as PyTorch's does,
// including `generated` (and what a generated function inherits from its source,
// `nondeterministic_seeded`) on the entries PyTorch's torchgen writes from an `autogen:` line
// (Note [Generated out= kernels]: our `autogen:` generates kernels, and also names out=
// overloads that PyTorch declares by hand, like `amax.out`, which are not `generated` there).

/// The augmented assignments whose dunder form (`__iand__`) is in place (torchgen's
/// `AUGMENTED_ASSIGNMENT_NAMES`).
const AUGMENTED_ASSIGNMENTS: &[&str] = &[
    "add", "sub", "mul", "div", "mod", "pow", "lshift", "rshift", "and", "xor", "or",
];

/// Whether the operator named `name` (without namespace or overload) is in place, as torchgen
/// reads names: `add_`, or a dunder augmented assignment (`__iadd__`).
fn is_inplace_name(name: &str) -> bool {
    match name.strip_prefix("__").and_then(|n| n.strip_suffix("__")) {
        Some(inner) => inner
            .strip_prefix('i')
            .is_some_and(|op| AUGMENTED_ASSIGNMENTS.contains(&op)),
        None => name.ends_with('_'),
    }
}

/// The tags `f` is registered with: its YAML tags and the ones torchgen adds, sorted and
/// without repeats (Note [Tags torchgen adds]).
pub(crate) fn registered_tags(f: &NativeFunction) -> Vec<Tag> {
    let mut tags = f.tags.clone();
    if f.schema.namespace() == Some("aten") {
        tags.push(Tag::Pt2CompliantTag);
    }
    if !f.schema.out_arguments().is_empty() {
        tags.push(Tag::Out);
    }
    if is_inplace_name(&f.name) {
        tags.push(Tag::Inplace);
    }
    tags.sort_unstable();
    tags.dedup();
    tags
}

fn is_generator(t: &Type) -> bool {
    match t {
        Type::Generator => true,
        Type::Optional(inner) => is_generator(inner),
        _ => false,
    }
}

/// torchgen's check that a random operator is tagged `nondeterministic_seeded`: one whose
/// name mentions `rand` (but not `_philox_`, whose results its key input decides), a dropout
/// that is not a backward (the name or an argument mentions `dropout`), or one that takes a
/// `Generator`. Forgetting the tag would let graph passes fold or share random calls.
pub(crate) fn check_nondeterministic_seeded(f: &NativeFunction) -> Result<(), String> {
    let full = f.qualified();
    let args = f.schema.arguments();
    let random_name = full.contains("rand") && !full.contains("_philox_");
    let dropout = (full.contains("dropout") || args.iter().any(|a| a.name().contains("dropout")))
        && !full.contains("backward")
        && f.name != "_cudnn_init_dropout_state";
    let generator = args.iter().any(|a| is_generator(a.ty()));
    if (random_name || dropout || generator) && !f.tags.contains(&Tag::NondeterministicSeeded) {
        return Err(format!(
            "{}: nondeterministic_seeded tag missing (the operator is random: add `tags: \
             nondeterministic_seeded`)",
            f.schema_text
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::parse_yaml;

    fn one(yaml: &str) -> Result<NativeFunction, String> {
        parse_yaml(yaml).map(|mut v| v.remove(0))
    }

    #[test]
    fn torchgen_adds_pt2_out_and_inplace_and_sorts() {
        let f = one(
            "- func: add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> \
             Tensor(a!)\n  tags: [pointwise, core]\n",
        )
        .unwrap();
        assert_eq!(f.tags, [Tag::Pointwise, Tag::Core]);
        assert_eq!(
            registered_tags(&f),
            [Tag::Core, Tag::Out, Tag::Pointwise, Tag::Pt2CompliantTag]
        );
        let f = one("- func: relu_(Tensor(a!) self) -> Tensor(a!)\n  tags: pointwise\n").unwrap();
        assert_eq!(
            registered_tags(&f),
            [Tag::Inplace, Tag::Pointwise, Tag::Pt2CompliantTag]
        );
        let f = one("- func: myops::f(Tensor self) -> Tensor\n").unwrap();
        assert!(registered_tags(&f).is_empty());
    }

    #[test]
    fn inplace_names_as_torchgen_reads_them() {
        assert!(is_inplace_name("add_"));
        assert!(is_inplace_name("__iand__"));
        assert!(!is_inplace_name("__and__"));
        assert!(!is_inplace_name("__init__"));
        assert!(!is_inplace_name("add"));
    }

    #[test]
    fn unknown_tags_name_the_tag_and_the_operator() {
        let e = one("- func: relu(Tensor self) -> Tensor\n  tags: [pointwise, elementwise]\n")
            .unwrap_err();
        assert!(
            e.starts_with(
                "relu(Tensor self) -> Tensor: unknown tag `elementwise` for operator aten::relu"
            ),
            "{e}"
        );
    }

    #[test]
    fn random_operators_must_be_tagged() {
        for func in [
            "randn_like(Tensor self) -> Tensor",
            "bernoulli(Tensor self, *, Generator? generator=None) -> Tensor",
            "dropout(Tensor input, float p, bool train) -> Tensor",
            "lstm_cell(Tensor input, float dropout) -> Tensor",
        ] {
            let e = one(&format!("- func: {func}\n")).unwrap_err();
            assert!(e.contains("nondeterministic_seeded tag missing"), "{e}");
            one(&format!(
                "- func: {func}\n  tags: nondeterministic_seeded\n"
            ))
            .unwrap();
        }
        for func in [
            "native_dropout_backward(Tensor grad_output, Tensor mask, float scale) -> Tensor",
            "_philox_randint(Tensor key, int high) -> Tensor",
            "relu(Tensor self) -> Tensor",
        ] {
            one(&format!("- func: {func}\n")).unwrap();
        }
    }
}
