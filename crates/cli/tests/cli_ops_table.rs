//! `switchboard ops` and `switchboard table` as processes: listings on stdout, bad input as one
//! `error:` line on stderr with exit status 2.

use std::process::{Command, Output};

use switchboard::dispatcher::{runtime_keys, Dispatcher};
use switchboard::keys::DispatchKey;
// The binary links switchboard-distributed (`train --distributed`): its operators are listed
// too, so this process links it as well.
use switchboard_distributed as _;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(args)
        .output()
        .expect("the switchboard binary runs")
}

fn stdout_of(args: &[&str]) -> String {
    let out = run(args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stderr.is_empty(), "{args:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// Checks exit status 2, nothing on stdout and one `error: ` line on stderr; returns it.
fn error_line(args: &[&str]) -> String {
    let out = run(args);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(out.stdout.is_empty(), "{args:?}");
    assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    stderr.trim_end().to_owned()
}

#[test]
fn ops_lists_every_operator_with_its_schema() {
    let listing = stdout_of(&["ops"]);
    let lines: Vec<&str> = listing.lines().collect();
    assert!(
        lines.contains(&"aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor")
    );
    let mut sorted = lines.clone();
    sorted.sort();
    assert_eq!(lines, sorted, "sorted by name");
    let d = Dispatcher::global();
    assert_eq!(lines.len(), d.registrations_for_dispatch_key(None).len());
    // Every line is a schema that parses back to itself.
    for line in &lines {
        let schema: switchboard::schema::FunctionSchema = line.parse().unwrap();
        assert_eq!(schema.to_string(), *line);
    }
}

#[test]
fn ops_key_keeps_the_operators_with_a_kernel_there() {
    let all = stdout_of(&["ops"]);
    let d = Dispatcher::global();
    for key in [
        "CPU",
        "Meta",
        "CompositeImplicitAutograd",
        "Autograd",
        "CUDA",
    ] {
        let listing = stdout_of(&["ops", "--key", key]);
        let k = DispatchKey::parse(key).unwrap();
        let expected = d.registrations_for_dispatch_key(Some(k)).len();
        assert_eq!(listing.lines().count(), expected, "{key}");
        for line in listing.lines() {
            assert!(all.lines().any(|l| l == line), "{key}: {line}");
            let name = line.split('(').next().unwrap();
            assert!(
                d.has_kernel_for_dispatch_key(name, k).unwrap(),
                "{key}: {name}"
            );
        }
    }
    assert!(stdout_of(&["ops", "--key", "CPU"]).contains("aten::add.Tensor("));
    assert_eq!(stdout_of(&["ops", "--key", "CUDA"]), "");
}

#[test]
fn ops_bad_keys_exit_2() {
    assert_eq!(
        error_line(&["ops", "--key", "NotAKey"]),
        "error: could not parse dispatch key: NotAKey"
    );
    // PyTorch's parser refuses these names too.
    for key in ["AutogradHIP", "QuantizedUndefined", "cpu", ""] {
        let e = error_line(&["ops", "--key", key]);
        assert!(e.starts_with("error: could not parse dispatch key"), "{e}");
    }
}

#[test]
fn table_prints_pytorchs_dump_table_format() {
    let printed = stdout_of(&["table", "aten::add.Tensor"]);
    assert_eq!(printed, Dispatcher::global().dump_table("aten::add.Tensor"));
    assert_eq!(
        printed,
        stdout_of(&["table", "add.Tensor"]),
        "namespace aten by default"
    );
    let kinds = [
        "kernel",
        "default backend kernel",
        "math kernel",
        "nested kernel",
        "autograd kernel",
        "batched kernel",
        "ambiguous autogradother",
        "backend fallback",
    ];
    let order: Vec<String> = runtime_keys().map(|k| k.to_string()).collect();
    let mut last = 0;
    for line in printed.lines() {
        // `KEY: [fallthrough ]DEBUG [KIND]`
        let (key, rest) = line.split_once(": ").unwrap();
        let kind = rest
            .strip_suffix(']')
            .and_then(|r| r.rsplit_once(" ["))
            .map(|(_, kind)| kind)
            .unwrap_or_else(|| panic!("{line}"));
        assert!(kinds.contains(&kind), "{line}");
        let pos = order.iter().position(|k| k == key).unwrap();
        assert!(pos >= last, "{line} out of order");
        last = pos;
    }
    assert!(printed
        .lines()
        .any(|l| l.starts_with("CPU: ") && l.ends_with(" [kernel]")));
    assert!(printed.lines().any(|l| l.starts_with("AutogradCPU: ")));
    assert!(
        printed
            .lines()
            .any(|l| l.starts_with("BackendSelect: fallthrough ")
                && l.ends_with("[backend fallback]"))
    );
}

#[test]
fn table_bad_operators_exit_2() {
    let e = error_line(&["table", "aten::no_such_operator"]);
    assert!(
        e.starts_with("error: unknown operator 'aten::no_such_operator'"),
        "{e}"
    );
    let e = error_line(&["table", "addd.Tensor"]);
    assert!(e.contains("Did you mean 'aten::add.Tensor'"), "{e}");
    let e = error_line(&["table", "add"]);
    assert!(e.contains("its overloads are: aten::add.Tensor"), "{e}");
    for name in ["a::b::c", "", "add(Tensor x) -> Tensor"] {
        let e = error_line(&["table", name]);
        assert!(
            e.starts_with("error: invalid operator name"),
            "{name:?}: {e}"
        );
    }
}

/// Factories on a grandfathered Caffe2 device type fail as PyTorch's `computeDispatchKey` does;
/// device types PyTorch does not know are not devices.
#[test]
fn factories_refuse_grandfathered_and_unknown_devices() {
    for device in ["mkldnn", "opengl", "opencl", "ideep"] {
        let out = run(&[
            "call",
            "empty.memory_format",
            "size=[2]",
            &format!("device={device}"),
        ]);
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(&format!(
                "This is a grandfathered Caffe2 device type {device}, it shouldn't ever convert \
                 to a DispatchKey."
            )),
            "{stderr}"
        );
    }
    let out = run(&["call", "zeros", "size=[2]", "device=metal"]);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("mtia, privateuseone device type at start of device string: metal"),
        "{stderr}"
    );
}
