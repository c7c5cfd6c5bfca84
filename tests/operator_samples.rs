//! Coverage of the operator-sample registry (Note [Operator samples] in switchboard-opinfo):
//! every registered aten operator is an entry or a variant of one, and every entry's flags
//! agree with what the dispatcher has registered.

use std::collections::BTreeMap;

use switchboard::autograd::{operator_autograd, AutogradKind};
use switchboard::dispatcher::Dispatcher;
use switchboard::keys::DispatchKey;
use switchboard::tensor::Device;
use switchboard_opinfo::{
    aten_operators, registry, short_name, special, variants_of, Grad, OpInfo, Prepared,
};

/// The sample of `info` gradcheck would run first, if any.
fn has_grad_sample(info: &OpInfo, differentiable: Option<&[&str]>) -> bool {
    info.grad_samples().any(|s| {
        Prepared::new(info.name, s, Device::META, None)
            .map(|p| !p.grad_inputs(differentiable).is_empty())
            .unwrap_or(false)
    })
}

#[test]
fn every_registered_aten_operator_has_an_entry_whose_flags_hold() {
    let d = Dispatcher::global();
    let all = aten_operators();
    let mut covered: BTreeMap<String, String> = BTreeMap::new();
    let mut problems = Vec::new();
    let entries = registry();
    for info in &entries {
        let name = info.name;
        let Some((_, schema)) = all.iter().find(|(_, s)| short_name(s) == name) else {
            problems.push(format!("{name}: an entry, but no such registered operator"));
            continue;
        };
        if covered.insert(name.to_owned(), name.to_owned()).is_some() {
            problems.push(format!("{name}: two entries"));
        }
        let (inplace, out) = variants_of(schema, &all);
        let mut flag = |claimed: bool, actual: bool, what: &str| {
            if claimed != actual {
                problems.push(format!(
                    "{name}: flagged {}{what}, registrations say {}",
                    if claimed { "" } else { "no " },
                    if actual { "yes" } else { "no" }
                ));
            }
        };
        flag(info.inplace, inplace.is_some(), "in-place variant");
        flag(info.out, out.is_some(), "out= variant");
        let q = info.qualified();
        flag(
            info.meta,
            d.has_kernel_for_dispatch_key(&q, DispatchKey::Meta)
                .unwrap(),
            "Meta kernel",
        );
        for (_, v) in inplace.iter().chain(out.iter()) {
            if let Some(prev) = covered.insert(short_name(v), name.to_owned()) {
                problems.push(format!(
                    "{}: a variant of {name} and of {prev}",
                    short_name(v)
                ));
            }
        }
        if info.samples.is_empty() {
            problems.push(format!("{name}: no sample"));
        }
        // Autograd: the generated table (derivatives.yaml) against the entry's claim.
        let autograd = operator_autograd(name).expect("in the generated table");
        let has_autograd_kernel = d
            .has_kernel_for_dispatch_key(&q, DispatchKey::Autograd)
            .unwrap();
        match (autograd.kind, info.grad) {
            (AutogradKind::Formula | AutogradKind::Inplace, g) => {
                if !g.checks() {
                    problems.push(format!(
                        "{name}: an Autograd kernel from derivatives.yaml ({}), but no gradcheck",
                        autograd.node.unwrap_or("?")
                    ));
                } else if !has_grad_sample(info, Some(autograd.differentiable_inputs)) {
                    problems.push(format!("{name}: differentiable, but no gradcheck sample"));
                }
            }
            (AutogradKind::Composite, g) if g.checks() => {
                if !has_grad_sample(info, None) {
                    problems.push(format!("{name}: differentiable, but no gradcheck sample"));
                }
            }
            (AutogradKind::NotImplemented, Grad::NotImplemented(_)) => {}
            (AutogradKind::NotImplemented, g) => problems.push(format!(
                "{name}: its Autograd kernel is not-implemented; the entry says {g:?}"
            )),
            (_, Grad::NotImplemented(_)) => problems.push(format!(
                "{name}: declared not-implemented, but its autograd kind is {:?}",
                autograd.kind
            )),
            (AutogradKind::Composite, _) => {}
            (kind, g) => {
                if g.checks() {
                    problems.push(format!(
                        "{name}: gradcheck declared, but autograd kind {kind:?}"
                    ));
                }
            }
        }
        if matches!(autograd.kind, AutogradKind::Formula | AutogradKind::Inplace)
            && !has_autograd_kernel
        {
            problems.push(format!("{name}: a formula but no Autograd kernel"));
        }
        // The in-place form of a differentiable operator is differentiable too.
        if let Some((_, v)) = inplace {
            let vk = operator_autograd(&short_name(v))
                .expect("in the table")
                .kind;
            if autograd.is_differentiable() && vk != AutogradKind::Inplace {
                problems.push(format!(
                    "{}: the in-place form of differentiable {name} is {vk:?}",
                    short_name(v)
                ));
            }
        }
    }
    for (op, _) in &all {
        let n = short_name(&op.schema().unwrap().schema);
        if !covered.contains_key(&n) {
            problems.push(format!(
                "{n}: registered, but neither an entry nor a variant of one"
            ));
        }
    }
    for (n, _) in special::UNSAMPLED {
        if !entries.iter().any(|e| e.name == *n) {
            problems.push(format!("{n}: listed as unsampled, but not an entry"));
        }
    }
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
    // The registry describes every registered aten operator.
    assert_eq!(covered.len(), all.len());
    eprintln!(
        "{} entries cover {} registered aten operators",
        entries.len(),
        all.len()
    );
}
