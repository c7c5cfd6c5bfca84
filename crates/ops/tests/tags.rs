//! Every operator of native_functions.yaml carries the tags PyTorch 2.15 gives it
//! (`torch.ops.aten.NAME.OVERLOAD.tags`, recorded in data/pytorch_tags_2.15.txt; Note [Tags
//! torchgen adds] in switchboard-codegen).

use std::collections::BTreeMap;

use switchboard_dispatcher::{Dispatcher, Tag};
use switchboard_ops::{SCHEMAS, SCHEMA_TAGS};

const RECORDED: &str = include_str!("data/pytorch_tags_2.15.txt");

fn recorded() -> BTreeMap<&'static str, Vec<Tag>> {
    RECORDED
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut words = l.split_whitespace();
            let op = words.next().unwrap();
            let tags = words
                .map(|t| Tag::parse_for(op, t).unwrap_or_else(|e| panic!("{e}")))
                .collect();
            (op, tags)
        })
        .collect()
}

fn tags_of(op: &str) -> Vec<Tag> {
    Dispatcher::global()
        .find_schema_or_throw(op)
        .unwrap_or_else(|e| panic!("{e}"))
        .tags()
}

#[test]
fn every_operator_has_pytorchs_tags() {
    let recorded = recorded();
    assert_eq!(SCHEMAS.len(), SCHEMA_TAGS.len());
    let mut wrong = Vec::new();
    for schema in SCHEMAS {
        let op = schema.split('(').next().unwrap();
        let Some(expected) = recorded.get(op) else {
            panic!("{op}: not in data/pytorch_tags_2.15.txt (record it from PyTorch)");
        };
        let got = tags_of(op);
        if &got != expected {
            wrong.push(format!("{op}: ours {got:?}, PyTorch's {expected:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert_eq!(
        recorded.len(),
        SCHEMAS.len(),
        "every recorded operator is declared"
    );
}

#[test]
fn a_handful_as_pytorch_reports_them() {
    use Tag::*;
    // >>> torch.ops.aten.nonzero.default.tags
    // [<Tag.core: 0>, <Tag.dynamic_output_shape: 3>, <Tag.pt2_compliant_tag: 17>]
    assert_eq!(
        tags_of("aten::nonzero"),
        [Core, DynamicOutputShape, Pt2CompliantTag]
    );
    assert_eq!(
        tags_of("aten::nonzero.out"),
        [DynamicOutputShape, Out, Pt2CompliantTag]
    );
    assert_eq!(tags_of("aten::nonzero_static"), [Pt2CompliantTag]);
    assert_eq!(
        tags_of("aten::add.Tensor"),
        [Core, Pointwise, Pt2CompliantTag]
    );
    assert_eq!(
        tags_of("aten::add_.Tensor"),
        [Inplace, Pointwise, Pt2CompliantTag]
    );
    assert_eq!(
        tags_of("aten::sum.dim_IntList"),
        [Core, Pt2CompliantTag, Reduction]
    );
    assert_eq!(
        tags_of("aten::_local_scalar_dense"),
        [Core, DataDependentOutput, Pt2CompliantTag]
    );
    assert_eq!(
        tags_of("aten::equal"),
        [DataDependentOutput, Pointwise, Pt2CompliantTag]
    );
    assert_eq!(
        tags_of("aten::randn"),
        [Core, NondeterministicSeeded, Pt2CompliantTag]
    );
    assert_eq!(
        tags_of("aten::dropout"),
        [
            MaybeAliasingOrMutating,
            NondeterministicSeeded,
            Pt2CompliantTag
        ]
    );
    // Written by torchgen from bernoulli_.Tensor's `autogen:` (declared in our YAML).
    assert_eq!(
        tags_of("aten::bernoulli.Tensor"),
        [Generated, NondeterministicSeeded, Pt2CompliantTag]
    );
    assert_eq!(tags_of("aten::view"), [Core, Pt2CompliantTag]);
    assert!(Dispatcher::global()
        .find_schema_or_throw("aten::relu")
        .unwrap()
        .has_tag(Pointwise));
}
