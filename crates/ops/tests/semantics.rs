//! `OperatorSemantics` and the functional counterpart lookup on the aten operators of
//! native_functions.yaml (torchgen's `SchemaKind` and `NativeFunctionsGroup`).

use switchboard_dispatcher::{Dispatcher, OperatorHandle, SchemaKind};
use switchboard_ops as _;

fn op(name: &str) -> OperatorHandle {
    Dispatcher::global()
        .find_schema_or_throw(name)
        .unwrap_or_else(|e| panic!("{e}"))
}

fn counterpart(name: &str) -> Option<String> {
    Dispatcher::global()
        .functional_counterpart(&op(name))
        .map(|f| f.name().to_string())
}

#[test]
fn kinds_of_aten_overloads() {
    let kind = |name: &str| op(name).semantics().unwrap().kind;
    assert_eq!(kind("aten::add.Tensor"), SchemaKind::Functional);
    assert_eq!(kind("aten::add_.Tensor"), SchemaKind::Inplace);
    assert_eq!(kind("aten::add.out"), SchemaKind::Out);
    assert_eq!(kind("aten::max.dim_max"), SchemaKind::Out);
    assert_eq!(kind("aten::relu_"), SchemaKind::Inplace);
    let view = op("aten::view").semantics().unwrap();
    assert!(view.is_view && view.returns_only_views());
    let dropout = op("aten::native_dropout").semantics().unwrap();
    assert!(dropout.is_random && !dropout.is_pure);
}

#[test]
fn functional_counterparts_by_torchgen_rules() {
    for (overload, functional) in [
        ("aten::add_.Tensor", "aten::add.Tensor"),
        ("aten::add.out", "aten::add.Tensor"),
        ("aten::mul.out", "aten::mul.Tensor"),
        ("aten::relu_", "aten::relu"),
        ("aten::max.dim_max", "aten::max.dim"),
        ("aten::sum.IntList_out", "aten::sum.dim_IntList"),
        ("aten::full.out", "aten::full"),
        ("aten::normal_", "aten::normal_functional"),
    ] {
        assert_eq!(
            counterpart(overload).as_deref(),
            Some(functional),
            "{overload}"
        );
    }
    assert_eq!(counterpart("aten::add.Tensor"), None);
    assert_eq!(counterpart("aten::view"), None);
}

#[test]
fn most_inplace_and_out_overloads_find_their_functional_form() {
    let d = Dispatcher::global();
    let (mut variants, mut found) = (0, 0);
    for name in d.list_operators() {
        let Some(op) = d.find_op(&name) else { continue };
        let Some(s) = op.semantics() else { continue };
        if matches!(s.kind, SchemaKind::Inplace | SchemaKind::Out)
            && name.name().starts_with("aten::")
        {
            variants += 1;
            found += usize::from(d.functional_counterpart(&op).is_some());
        }
    }
    assert!(variants > 100, "{variants}");
    assert!(found * 10 >= variants * 9, "{found} of {variants}");
}
