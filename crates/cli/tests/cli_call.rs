//! `switchboard call` as a process: bad input ends with one `error:` line on stderr and exit
//! status 2, never a panic.

use std::collections::BTreeMap;
use std::process::{Command, Output};

use switchboard::tensor::{load_safetensors_file, save_safetensors_file, Tensor};

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
        "--backward",
        "grad_outI",
        "grad.NAME",
    ] {
        assert!(help.contains(word), "{word}: {help}");
    }
}

/// A temp dir holding `in.safetensors` with `a`, `b` (2x2 float32), `i` (2 int64) and `extra`.
struct Dir(std::path::PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn f32s(v: &[f32], sizes: &[i64]) -> Tensor {
    Tensor::from_vec(v.to_vec(), sizes).unwrap()
}

fn dir_with(name: &str, extra: &[(&str, Tensor)]) -> Dir {
    let dir = std::env::temp_dir().join(format!(
        "switchboard-cli-call-{}-{name}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let a = f32s(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let b = f32s(&[10.0, 20.0, 30.0, 40.0], &[2, 2]);
    let i = Tensor::from_vec(vec![1i64, 0], &[2]).unwrap();
    let mut all: Vec<(&str, &Tensor)> = vec![("a", &a), ("b", &b), ("i", &i)];
    all.extend(extra.iter().map(|(n, t)| (*n, t)));
    save_safetensors_file(dir.join("in.safetensors"), &all, None).unwrap();
    Dir(dir)
}

impl Dir {
    fn path(&self, file: &str) -> String {
        self.0.join(file).display().to_string()
    }

    /// Runs `switchboard call OP --in IN --out OUT ARGS...`, checks exit status 0 and the
    /// JSON line `{}`, and returns the output file's tensors and stderr.
    fn call_out(&self, op: &str, args: &[&str]) -> (BTreeMap<String, Tensor>, String) {
        let (input, output) = (self.path("in.safetensors"), self.path("out.safetensors"));
        let mut argv = vec![op, "--in", &input, "--out", &output];
        argv.extend_from_slice(args);
        let out = call(&argv);
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(0), "{argv:?}: {stderr}");
        assert_eq!(String::from_utf8(out.stdout).unwrap(), "{}\n");
        (load_safetensors_file(&output).unwrap(), stderr)
    }
}

fn vals(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

#[test]
fn backward_writes_the_gradients_of_the_inputs() {
    let d = dir_with("mul", &[]);
    let args = ["self=@a", "other=@b", "--backward"];
    let (o, stderr) = d.call_out("aten::mul.Tensor", &args);
    assert_eq!(stderr, "");
    assert_eq!(
        o.keys().collect::<Vec<_>>(),
        ["grad.other", "grad.self", "out0"]
    );
    assert_eq!(vals(&o["out0"]), [10.0, 40.0, 90.0, 160.0]);
    assert_eq!(vals(&o["grad.self"]), [10.0, 20.0, 30.0, 40.0]);
    assert_eq!(vals(&o["grad.other"]), [1.0, 2.0, 3.0, 4.0]);

    // Without --out, the gradients are printed after the outputs.
    let input = d.path("in.safetensors");
    let out = call(&[
        "aten::mul.Tensor",
        "--in",
        &input,
        "self=@a",
        "other=@b",
        "--backward",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        stdout
            .lines()
            .filter(|l| l.contains(" = tensor("))
            .collect::<Vec<_>>(),
        [
            "out0 = tensor([[ 10.,  40.],",
            "grad.self = tensor([[10., 20.],",
            "grad.other = tensor([[1., 2.],"
        ]
    );
}

#[test]
fn backward_weights_the_outputs_by_grad_out() {
    let g = f32s(&[1.0, 0.0, 2.0, 0.5], &[2, 2]);
    let d = dir_with("grad-out", &[("grad_out0", g)]);
    let (o, _) = d.call_out("mul.Tensor", &["self=@a", "other=@b", "--backward"]);
    assert_eq!(vals(&o["grad.self"]), [10.0, 0.0, 60.0, 20.0]);
    assert_eq!(vals(&o["grad.other"]), [1.0, 0.0, 6.0, 2.0]);
}

#[test]
fn backward_skips_integer_outputs() {
    let d = dir_with("max", &[]);
    let (o, stderr) = d.call_out("aten::max.dim", &["self=@a", "dim=1", "--backward"]);
    assert_eq!(stderr, "");
    assert_eq!(vals(&o["out0"]), [2.0, 4.0]);
    assert_eq!(o["out1"].to_vec::<i64>().unwrap(), [1, 1]);
    assert_eq!(vals(&o["grad.self"]), [0.0, 1.0, 0.0, 1.0]);
}

#[test]
fn backward_errors_exit_2_with_one_line() {
    let d = dir_with("errors", &[]);
    let input = d.path("in.safetensors");
    let e = error_line(&["max.dim", "--in", &input, "self=@i", "dim=0", "--backward"]);
    assert_eq!(
        e,
        "error: --backward: aten::max.dim has no floating-point tensor input to differentiate \
         with respect to"
    );
    let e = error_line(&["zeros_like", "--in", &input, "self=@a", "--backward"]);
    assert!(
        e.starts_with(
            "error: --backward: element 0 of tensors does not require grad and does not have a \
             grad_fn"
        ),
        "{e}"
    );
    let e = error_line(&["no_such_op_xyz", "--in", &input, "self=@a", "--backward"]);
    assert!(
        e.starts_with("error: unknown operator 'aten::no_such_op_xyz'"),
        "{e}"
    );
}

#[test]
fn plain_calls_of_aten_operators() {
    let d = dir_with("plain", &[("grad_out0", f32s(&[1.0; 4], &[2, 2]))]);
    // Without --backward nothing is differentiated, whatever the file holds.
    let (o, stderr) = d.call_out("aten::add.Tensor", &["self=@a", "other=@b", "alpha=2"]);
    assert_eq!(stderr, "");
    assert_eq!(o.keys().collect::<Vec<_>>(), ["out0"]);
    assert_eq!(vals(&o["out0"]), [21.0, 42.0, 63.0, 84.0]);
    let (o, _) = d.call_out("mm", &["self=@a", "mat2=@b"]);
    assert_eq!(vals(&o["out0"]), [70.0, 100.0, 150.0, 220.0]);
    let (o, _) = d.call_out("sum.dim_IntList", &["self=@a", "dim=[1]", "keepdim=true"]);
    assert_eq!(o["out0"].sizes(), &[2, 1]);
    assert_eq!(vals(&o["out0"]), [3.0, 7.0]);
    let input = d.path("in.safetensors");
    let out = call(&["mm", "--in", &input, "self=@a", "mat2=@b"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "out0 = tensor([[ 70., 100.],\n        [150., 220.]])\n"
    );
}

/// Runs `switchboard call OP --in IN ARGS...` without `--out` and returns stdout (exit 0).
fn printed(d: &Dir, op: &str, args: &[&str]) -> String {
    let input = d.path("in.safetensors");
    let mut argv = vec![op, "--in", &input];
    argv.extend_from_slice(args);
    let out = call(&argv);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(0), "{argv:?}: {stderr}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn non_tensor_results_print_as_json() {
    let d = dir_with(
        "json",
        &[
            ("one", f32s(&[2.5], &[1, 1])),
            ("n", Tensor::from_vec(vec![7i64], &[]).unwrap()),
        ],
    );
    assert_eq!(printed(&d, "numel", &["self=@a"]), "{\"out0\":4}\n");
    assert_eq!(
        printed(&d, "size.int", &["self=@a", "dim=-1"]),
        "{\"out0\":2}\n"
    );
    assert_eq!(printed(&d, "item", &["self=@one"]), "{\"out0\":2.5}\n");
    assert_eq!(printed(&d, "item", &["self=@n"]), "{\"out0\":7}\n");
    assert_eq!(
        printed(&d, "equal", &["self=@a", "other=@a"]),
        "{\"out0\":true}\n"
    );
    assert_eq!(
        printed(&d, "equal", &["self=@a", "other=@b"]),
        "{\"out0\":false}\n"
    );
    assert_eq!(
        printed(&d, "arange.start", &["start=2", "end=5"]),
        "out0 = tensor([2, 3, 4])\n"
    );
    let e = error_line(&["item", "--in", &d.path("in.safetensors"), "self=@a"]);
    assert!(
        e.contains("a Tensor with 4 elements cannot be converted to Scalar"),
        "{e}"
    );
    let e = error_line(&[
        "size.int",
        "--in",
        &d.path("in.safetensors"),
        "self=@a",
        "dim=2",
    ]);
    assert!(
        e.contains("Dimension out of range (expected to be in range of [-2, 1], but got 2)"),
        "{e}"
    );
}
