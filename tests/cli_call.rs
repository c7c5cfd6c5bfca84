//! `switchboard call` as a process: bad input ends with one `error:` line on stderr and exit
//! status 2, never a panic.

use std::process::{Command, Output};

fn call(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .arg("call")
        .args(args)
        .output()
        .expect("the switchboard binary runs")
}

/// Checks exit status 2, nothing on stdout and one `error: ` line on stderr; returns it.
fn error_line(args: &[&str]) -> String {
    let out = call(args);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(out.stdout.is_empty(), "{args:?}: stdout {:?}", out.stdout);
    assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
    assert!(stderr.ends_with('\n'), "{args:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    stderr.trim_end().to_owned()
}

#[test]
fn unknown_operators_exit_2_with_one_line() {
    let e = error_line(&["switchboard_test::no_such_op", "self=@a"]);
    assert!(
        e.starts_with("error: unknown operator 'switchboard_test::no_such_op'"),
        "{e}"
    );
    // The namespace defaults to aten.
    let e = error_line(&["no_such_op_xyz.Tensor", "--in", "missing.safetensors"]);
    assert!(
        e.starts_with("error: unknown operator 'aten::no_such_op_xyz.Tensor'"),
        "{e}"
    );
}

#[test]
fn invalid_operator_names_exit_2_with_one_line() {
    for name in ["foo bar", "", "add(", "add(Tensor x) -> Tensor", "a::b::c"] {
        let e = error_line(&[name]);
        assert!(
            e.starts_with("error: invalid operator name"),
            "{name:?}: {e}"
        );
    }
}

#[test]
fn help_describes_the_values() {
    let out = call(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8(out.stdout).unwrap();
    for word in [
        "NAME=VALUE",
        "--in",
        "--out",
        "@KEY",
        "channels_last",
        "outI.0",
    ] {
        assert!(help.contains(word), "{word}: {help}");
    }
}
