//! The policy tables against the operators we have and PyTorch 2.15's registrations.

mod pytorch_policies;

use std::collections::BTreeSet;

use switchboard_autocast::{BackendPolicy, BUILTIN_POLICIES, CPU, CUDA};
use switchboard_cpu as _;
use switchboard_dispatcher::Dispatcher;

fn pytorch_list(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.trim_start_matches("aten::").to_owned())
        .collect()
}

fn check(policy: &BackendPolicy, recorded: &str) {
    let d = Dispatcher::global();
    let ours: BTreeSet<String> = d
        .list_operators()
        .into_iter()
        .filter(|n| n.namespace() == Some("aten"))
        .map(|n| {
            let base = n.base_name().to_owned();
            if n.overload_name().is_empty() {
                base
            } else {
                format!("{base}.{}", n.overload_name())
            }
        })
        .collect();
    let listed: BTreeSet<String> = policy.ops.iter().map(|(n, _)| n.to_string()).collect();
    assert_eq!(
        listed.len(),
        policy.ops.len(),
        "an operator is listed twice"
    );
    // Every entry is a real operator with PyTorch's autocast kernel...
    let pytorch = pytorch_list(recorded);
    for name in &listed {
        assert!(ours.contains(name), "{name} is not an operator");
        assert!(
            pytorch.contains(name),
            "{name} has no {:?} kernel in PyTorch",
            policy.key
        );
        let qualified = format!("aten::{name}");
        assert!(d
            .has_kernel_for_dispatch_key(&qualified, policy.key)
            .unwrap());
    }
    // ... and every PyTorch entry that names one of our operators is listed.
    let missing: Vec<_> = pytorch
        .intersection(&ours)
        .filter(|n| !listed.contains(*n))
        .collect();
    assert!(missing.is_empty(), "{:?} misses {missing:?}", policy.key);
}

#[test]
fn cpu_policy_covers_pytorch_list() {
    check(&CPU, include_str!("data/autocast_cpu_ops_2.15.txt"));
}

#[test]
fn cuda_policy_covers_pytorch_list() {
    check(&CUDA, include_str!("data/autocast_cuda_ops_2.15.txt"));
}

/// Each entry's kind against PyTorch's, and the same operators on both sides.
fn check_kinds(policy: &BackendPolicy, pytorch: &[(&str, switchboard_autocast::CastPolicy)]) {
    let mut wrong = Vec::new();
    for (name, kind) in policy.ops {
        match pytorch_policies::policy_in(pytorch, name) {
            Some(k) if k == *kind => {}
            k => wrong.push(format!("{name}: {kind:?}, PyTorch's {k:?}")),
        }
    }
    for (name, kind) in pytorch {
        if policy.policy_of(name).is_none() {
            wrong.push(format!("{name}: missing, PyTorch's {kind:?}"));
        }
    }
    assert!(wrong.is_empty(), "{:?}: {wrong:#?}", policy.key);
}

#[test]
fn cpu_policy_kinds_are_pytorchs() {
    check_kinds(&CPU, pytorch_policies::CPU);
}

#[test]
fn cuda_policy_kinds_are_pytorchs() {
    check_kinds(&CUDA, pytorch_policies::CUDA);
}

#[test]
fn builtin_policies_are_registered() {
    let _ = Dispatcher::global();
    for p in BUILTIN_POLICIES {
        assert!(std::ptr::eq(
            switchboard_autocast::registered_policy(p.device_type).unwrap(),
            *p
        ));
    }
}
