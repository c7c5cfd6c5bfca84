//! The generated autograd table (`OPERATORS`, from native_functions.yaml and derivatives.yaml)
//! covers every registered aten operator, and the kernels registered in the global dispatcher
//! agree with what it says of each (Note [Which kernel an operator gets] in
//! switchboard-codegen).

use std::collections::BTreeSet;

use switchboard_autograd::{AutogradKind, OPERATORS};
use switchboard_cpu as _;
use switchboard_dispatcher::Dispatcher;
use switchboard_keys::DispatchKey;

/// `add.Tensor` -> `aten::add.Tensor`.
fn qualified(op: &str) -> String {
    format!("aten::{op}")
}

#[test]
fn every_registered_aten_operator_is_in_the_table_and_back() {
    let d = Dispatcher::global();
    let registered: BTreeSet<String> = d
        .list_operators()
        .iter()
        .filter(|n| n.namespace() == Some("aten"))
        .map(|n| match n.overload_name() {
            "" => n.base_name().to_owned(),
            o => format!("{}.{o}", n.base_name()),
        })
        .collect();
    let table: BTreeSet<String> = OPERATORS.iter().map(|o| o.operator.to_owned()).collect();
    let missing: Vec<_> = registered.difference(&table).collect();
    assert!(
        missing.is_empty(),
        "registered but not in OPERATORS: {missing:?}"
    );
    let unregistered: Vec<_> = table.difference(&registered).collect();
    assert!(
        unregistered.is_empty(),
        "in OPERATORS but not registered: {unregistered:?}"
    );
}

#[test]
fn registrations_agree_with_the_table() {
    let d = Dispatcher::global();
    for o in OPERATORS {
        let name = qualified(o.operator);
        let autograd = d
            .has_kernel_for_dispatch_key(&name, DispatchKey::Autograd)
            .unwrap();
        let composite = d
            .has_kernel_for_dispatch_key(&name, DispatchKey::CompositeImplicitAutograd)
            .unwrap();
        match o.kind {
            AutogradKind::Composite => {
                assert!(
                    composite && !autograd,
                    "{name}: composite, no Autograd kernel"
                )
            }
            AutogradKind::NoTensors => assert!(!autograd, "{name}: no Autograd kernel"),
            AutogradKind::NonDifferentiable => {
                assert!(autograd, "{name}: a fallthrough at Autograd");
                assert!(
                    d.kernel_for_dispatch_key_is_fallthrough(&name, DispatchKey::Autograd)
                        .unwrap(),
                    "{name}: a fallthrough at Autograd"
                );
            }
            AutogradKind::Formula
            | AutogradKind::Inplace
            | AutogradKind::Out
            | AutogradKind::NotImplemented => {
                assert!(autograd, "{name}: an Autograd kernel");
                assert!(
                    !d.kernel_for_dispatch_key_is_fallthrough(&name, DispatchKey::Autograd)
                        .unwrap(),
                    "{name}: a real Autograd kernel"
                );
            }
        }
        if o.is_differentiable() {
            let node = o.node.unwrap_or_else(|| panic!("{name}: a node name"));
            assert!(
                node.ends_with(|c: char| c.is_ascii_digit()) || node == "CopyBackwards",
                "{name}: PyTorch's node name, got {node}"
            );
            assert!(!o.differentiable_inputs.is_empty(), "{name}: inputs");
        } else {
            assert!(o.node.is_none(), "{name}: no node");
        }
    }
}

#[test]
fn views_and_writers_have_ad_inplace_or_view_kernels() {
    let d = Dispatcher::global();
    let mut checked = 0;
    for o in OPERATORS {
        if o.kind == AutogradKind::Composite || o.kind == AutogradKind::NoTensors {
            continue;
        }
        let name = qualified(o.operator);
        let op = d.find_schema(&name).unwrap();
        let schema = &op.schema().unwrap().schema;
        let aliased = schema.arguments().iter().any(|a| a.alias_info().is_some());
        assert_eq!(
            d.has_kernel_for_dispatch_key(&name, DispatchKey::ADInplaceOrView)
                .unwrap(),
            aliased,
            "{name}: an ADInplaceOrView kernel exactly when an argument is aliased"
        );
        checked += usize::from(aliased);
    }
    assert!(checked > 50, "{checked} aliased operators");
}
