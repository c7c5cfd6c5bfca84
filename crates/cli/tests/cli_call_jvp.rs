//! `switchboard call --jvp` as a process: the call in forward mode, the outputs' tangents as
//! `tangent_outI`, tangents from the input file or ones, and PyTorch's forward-AD errors as one
//! `error:` line with exit status 2. Expected values checked against PyTorch 2.15's
//! `torch.func.jvp`.

use std::path::PathBuf;
use std::process::{Command, Output};

use switchboard::tensor::{load_safetensors_file, save_safetensors_file, Tensor};

fn call(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .arg("call")
        .args(args)
        .output()
        .expect("the switchboard binary runs")
}

fn f32s(v: &[f32], sizes: &[i64]) -> Tensor {
    Tensor::from_vec(v.to_vec(), sizes).unwrap()
}

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// x, y: [2, 2], v: [4]; `tangent.self`: a [2, 2] tangent for the argument `self`.
fn inputs(name: &str) -> (Dir, String, String) {
    let dir =
        std::env::temp_dir().join(format!("switchboard-cli-jvp-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let x = f32s(&[1., 2., 3., 4.], &[2, 2]);
    let y = f32s(&[0.5, -1., 2., 0.], &[2, 2]);
    let t = f32s(&[1., 0., 0., -1.], &[2, 2]);
    let v = f32s(&[1., 2., 3., 4.], &[4]);
    let input = dir.join("in.safetensors");
    save_safetensors_file(
        &input,
        &[("x", &x), ("y", &y), ("v", &v), ("tangent.self", &t)],
        None,
    )
    .unwrap();
    let output = dir.join("out.safetensors");
    (
        Dir(dir),
        input.display().to_string(),
        output.display().to_string(),
    )
}

fn read(path: &str, key: &str) -> Vec<f32> {
    let map = load_safetensors_file(std::path::Path::new(path)).unwrap();
    map[key].to_vec::<f32>().unwrap()
}

#[test]
fn tangents_of_the_outputs() {
    let (_dir, input, output) = inputs("mul");
    // self's tangent from the file, other's ones: t * y + x * 1.
    let out = call(&[
        "mul.Tensor",
        "self=@x",
        "other=@y",
        "--jvp",
        "--in",
        &input,
        "--out",
        &output,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(read(&output, "out0"), [0.5, -2., 6., 0.]);
    assert_eq!(read(&output, "tangent_out0"), [1.5, 2., 3., 4.]);
    // Several outputs: max.dim's values get a tangent, its indices (integers) none.
    let out = call(&[
        "max.dim", "self=@x", "dim=1", "--jvp", "--in", &input, "--out", &output,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(read(&output, "out0"), [2., 4.]);
    assert_eq!(read(&output, "tangent_out0"), [0., -1.]);
    let map = load_safetensors_file(std::path::Path::new(&output)).unwrap();
    assert!(!map.contains_key("tangent_out1"));
}

#[test]
fn forward_ad_errors() {
    let (_dir, input, _output) = inputs("errors");
    let out = call(&[
        "_cdist_forward",
        "x1=@x",
        "x2=@y",
        "p=2.0",
        "compute_mode=None",
        "--jvp",
        "--in",
        &input,
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with(
            "error: aten::_cdist_forward: Trying to use forward AD with _cdist_forward that does not \
             support it because it has not been implemented yet."
        ),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    // A tangent of another shape than its argument.
    let out = call(&["sum", "self=@v", "--jvp", "--in", &input]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: aten::sum: tangent.self has shape [2, 2], but argument 'self' has shape [4]\n"
    );
    // --jvp is a mode of its own.
    let out = call(&["t", "self=@x", "--jvp", "--backward", "--in", &input]);
    assert_eq!(out.status.code(), Some(2));
}
