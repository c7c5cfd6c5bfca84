//! `switchboard call --vmap` (and `--vmap --backward`) as a process: the call under vmap with
//! `in_dims=0` for every tensor argument, the outputs batch first, per-sample gradients; bad
//! input is one `error:` line with exit status 2. Expected values and messages checked against
//! PyTorch 2.15's `torch.func.vmap`.

use std::collections::BTreeMap;
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

/// x, y: [3, 4] (three samples of 4), m: [3, 2, 2], v: [3, 2], s: 0-dim, z: [2, 4], and
/// `extra`.
fn dir_with(name: &str, extra: &[(&str, Tensor)]) -> Dir {
    let dir = std::env::temp_dir().join(format!(
        "switchboard-cli-vmap-{}-{name}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let x = f32s(
        &[1., 2., 3., 4., 5., 6., 7., 8., 9., 10., 11., 12.],
        &[3, 4],
    );
    let y = f32s(&[1., 0., 0., 0., 0., 2., 0., 0., 1., 1., 1., 1.], &[3, 4]);
    let m = f32s(
        &[1., 2., 3., 4., 0., 1., 1., 0., 2., 0., 0., 2.],
        &[3, 2, 2],
    );
    let s = f32s(&[5.], &[]);
    let z = f32s(&[0.; 8], &[2, 4]);
    let v = f32s(&[1., 2., 0., 1., 1., 1.], &[3, 2]);
    let mut all: Vec<(&str, &Tensor)> = vec![
        ("x", &x),
        ("y", &y),
        ("m", &m),
        ("s", &s),
        ("z", &z),
        ("v", &v),
    ];
    all.extend(extra.iter().map(|(n, t)| (*n, t)));
    save_safetensors_file(dir.join("in.safetensors"), &all, None).unwrap();
    Dir(dir)
}

impl Dir {
    fn path(&self, file: &str) -> String {
        self.0.join(file).display().to_string()
    }

    fn run(&self, op: &str, args: &[&str]) -> Output {
        let (input, output) = (self.path("in.safetensors"), self.path("out.safetensors"));
        let mut argv = vec![op, "--in", &input, "--out", &output, "--vmap"];
        argv.extend_from_slice(args);
        call(&argv)
    }

    fn call_out(&self, op: &str, args: &[&str]) -> BTreeMap<String, Tensor> {
        let out = self.run(op, args);
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(0), "{op} {args:?}: {stderr}");
        load_safetensors_file(self.path("out.safetensors")).unwrap()
    }

    fn error_line(&self, op: &str, args: &[&str]) -> String {
        let out = self.run(op, args);
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{op} {args:?}: {stderr}");
        assert!(out.stdout.is_empty());
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        stderr.trim_end().to_owned()
    }
}

fn vals(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

#[test]
fn vmap_maps_every_tensor_argument_over_its_first_dimension() {
    let d = dir_with("plain", &[]);
    // Per-sample dot products: x[b] . y[b].
    let o = d.call_out("matmul", &["self=@x", "other=@y"]);
    assert_eq!(vals(&o["out0"]), [1., 12., 42.]);
    // A full reduction per sample, and dimension arguments of the sample.
    let o = d.call_out("sum", &["self=@x"]);
    assert_eq!(vals(&o["out0"]), [10., 26., 42.]);
    let o = d.call_out("sum.dim_IntList", &["self=@m", "dim=[0]"]);
    assert_eq!(o["out0"].sizes(), &[3, 2]);
    assert_eq!(vals(&o["out0"]), [4., 6., 1., 1., 2., 2.]);
    // Per-sample matrix-vector products; other arguments are shared.
    let o = d.call_out("matmul", &["self=@m", "other=@v"]);
    assert_eq!(o["out0"].sizes(), &[3, 2]);
    assert_eq!(vals(&o["out0"]), [5., 11., 1., 0., 2., 2.]);
    let o = d.call_out("add.Tensor", &["self=@x", "other=@y", "alpha=2"]);
    assert_eq!(vals(&o["out0"])[..4], [3., 2., 3., 4.]);
    // Tensor[]: each element batched.
    let o = d.call_out("stack", &["tensors=[@x, @y]", "dim=1"]);
    assert_eq!(o["out0"].sizes(), &[3, 4, 2]);
}

#[test]
fn vmap_backward_gives_per_sample_gradients() {
    let g = f32s(&[1., 2., 3.], &[3]);
    let d = dir_with("backward", &[("grad_out0", g)]);
    let o = d.call_out("matmul", &["self=@x", "other=@y", "--backward"]);
    assert_eq!(
        o.keys().collect::<Vec<_>>(),
        ["grad.other", "grad.self", "out0"]
    );
    // d(g_b * x_b . y_b)/dx_b = g_b * y_b.
    assert_eq!(
        vals(&o["grad.self"]),
        [1., 0., 0., 0., 0., 4., 0., 0., 3., 3., 3., 3.]
    );
    assert_eq!(
        vals(&o["grad.other"]),
        [1., 2., 3., 4., 10., 12., 14., 16., 27., 30., 33., 36.]
    );
    // Per-sample mean: each sample's gradient is 1/4, not 1/12.
    let d = dir_with("mean", &[]);
    let o = d.call_out("mean", &["self=@x", "--backward"]);
    assert_eq!(vals(&o["grad.self"]), [0.25; 12]);
}

#[test]
fn vmap_errors_exit_2_with_one_line() {
    let d = dir_with("errors", &[]);
    assert_eq!(
        d.error_line("add.Tensor", &["self=@x", "other=@z"]),
        "error: aten::add.Tensor: vmap: Expected all tensors to have the same size in the \
         mapped dimension, got sizes [3, 2] for the mapped dimension"
    );
    assert_eq!(
        d.error_line("neg", &["self=@s"]),
        "error: aten::neg: vmap(aten::neg, in_dims=0, ...)(<inputs>): Got in_dim=0 for \
         some input, but that input is a Tensor of dimensionality 0 so expected in_dim to \
         satisfy -0 <= in_dim < 0."
    );
    assert_eq!(
        d.error_line("nonzero", &["self=@x"]),
        "error: aten::nonzero: vmap: We do not support batching operators that can \
         output dynamic shape. Attempted to vmap over aten::nonzero. Please file an issue at \
         https://github.com/pytorch/pytorch/issues if you need this feature."
    );
    let e = d.error_line("numel", &["self=@x"]);
    assert!(e.contains("`aten::numel` must only return Tensors"), "{e}");
}
