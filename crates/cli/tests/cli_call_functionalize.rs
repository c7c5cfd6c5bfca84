//! `switchboard call --functionalize[=REMOVE]` as a process: every case gives functionalized
//! (views kept, views removed; with `--backward`, with `--device`) what it gives eagerly
//! (outputs, gradients, JSON returns, error lines), and a bad REMOVE is one `error:` line.

use std::process::{Command, Output};

use switchboard::tensor::{load_safetensors_file, save_safetensors_file, ScalarType, Tensor};

fn call(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .arg("call")
        .args(args)
        .output()
        .expect("the switchboard binary runs")
}

/// A temp dir holding `in.safetensors`; removed on drop.
struct Dir(std::path::PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn f32s(v: &[f32], sizes: &[i64]) -> Tensor {
    Tensor::from_vec(v.to_vec(), sizes).unwrap()
}

fn dir(test: &str) -> Dir {
    let dir = std::env::temp_dir().join(format!(
        "switchboard-call-functionalize-{}-{test}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let a = f32s(&[1.0, -2.0, 3.0, -4.0, 5.0, 6.0], &[2, 3]);
    let b = f32s(&[0.5, 1.5, -2.5, 3.5, 4.5, -5.5], &[2, 3]);
    let m = f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]);
    let v = f32s(&[1.0, 2.0, 3.0], &[3]);
    let i = Tensor::from_vec(vec![1i64, 0, 1], &[3]).unwrap();
    let t = Tensor::from_vec(vec![2i64, 0], &[2]).unwrap();
    let gi = Tensor::from_vec(vec![0i64, 2, 1, 0], &[2, 2]).unwrap();
    let mask = Tensor::from_vec(vec![true, false, true, false, false, true], &[2, 3]).unwrap();
    let img = Tensor::from_vec(
        (0..32).map(|x| x as f32 / 8.0).collect::<Vec<_>>(),
        &[1, 2, 4, 4],
    )
    .unwrap();
    let w = Tensor::from_vec(
        (0..36).map(|x| (x as f32 - 18.0) / 9.0).collect::<Vec<_>>(),
        &[2, 2, 3, 3],
    )
    .unwrap();
    let all: Vec<(&str, &Tensor)> = vec![
        ("a", &a),
        ("b", &b),
        ("m", &m),
        ("v", &v),
        ("i", &i),
        ("t", &t),
        ("gi", &gi),
        ("mask", &mask),
        ("img", &img),
        ("w", &w),
    ];
    save_safetensors_file(dir.join("in.safetensors"), &all, None).unwrap();
    Dir(dir)
}

/// What a successful call wrote: stdout, stderr, and the output file's tensors as
/// `(name, dtype, sizes, values as f64)`.
type Written = (
    String,
    String,
    Vec<(String, ScalarType, Vec<i64>, Vec<f64>)>,
);

fn run(d: &Dir, flags: &[&str], case: &[&str]) -> Result<Written, String> {
    let input = d.0.join("in.safetensors").display().to_string();
    let out_name = format!("out-{}.safetensors", flags.join("").replace(['-', '='], ""));
    let output = d.0.join(out_name).display().to_string();
    let mut argv = vec![case[0], "--in", &input, "--out", &output];
    argv.extend_from_slice(flags);
    argv.extend_from_slice(&case[1..]);
    let out = call(&argv);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    if out.status.code() != Some(0) {
        assert_eq!(out.status.code(), Some(2), "{argv:?}: {stderr}");
        assert!(stdout.is_empty(), "{argv:?}: {stdout}");
        assert_eq!(stderr.lines().count(), 1, "{argv:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{argv:?}: {stderr}");
        return Err(stderr);
    }
    let tensors = load_safetensors_file(&output)
        .unwrap()
        .into_iter()
        .map(|(k, t)| {
            assert!(t.is_cpu(), "{argv:?}: {k} is written from the CPU");
            let vals = t.to_dtype_vec_f64();
            (k, t.dtype(), t.sizes().to_vec(), vals)
        })
        .collect();
    Ok((stdout, stderr, tensors))
}

trait F64s {
    fn to_dtype_vec_f64(&self) -> Vec<f64>;
}

impl F64s for Tensor {
    fn to_dtype_vec_f64(&self) -> Vec<f64> {
        match self.dtype() {
            ScalarType::Bool => self
                .to_vec::<bool>()
                .unwrap()
                .into_iter()
                .map(f64::from)
                .collect(),
            ScalarType::Long => self
                .to_vec::<i64>()
                .unwrap()
                .into_iter()
                .map(|x| x as f64)
                .collect(),
            _ => switchboard::ops::to(self, ScalarType::Double)
                .unwrap()
                .to_vec::<f64>()
                .unwrap(),
        }
    }
}

/// Operator cases of every kind: pointwise, broadcasting, reductions with integer outputs,
/// matrix products, shape operators and views, in-place and `out=` calls, indexing, masks,
/// convolution, normalisation, losses, factories, several and list returns.
#[rustfmt::skip]
const CASES: &[&[&str]] = &[
    &["add.Tensor", "self=@a", "other=@b", "alpha=2"],
    &["add.Tensor", "self=@a", "other=@v"],
    &["mul.Scalar", "self=@a", "other=3"],
    &["div.Tensor_mode", "self=@a", "other=@b", "rounding_mode=floor"],
    &["pow.Tensor_Scalar", "self=@a", "exponent=2"],
    &["pow.Tensor_Scalar_out", "self=@a", "exponent=2", "out=@b"],
    &["where.self_out", "condition=@mask", "self=@a", "other=@b", "out=@b"],
    &["relu", "self=@a"],
    &["sigmoid", "self=@b"],
    &["tanh", "self=@a"],
    &["exp", "self=@b"],
    &["clamp", "self=@a", "min=-1", "max=2"],
    &["where.self", "condition=@mask", "self=@a", "other=@b"],
    &["gt.Tensor", "self=@a", "other=@b"],
    &["mm", "self=@a", "mat2=@m"],
    &["matmul", "self=@a", "other=@v"],
    &["addmm", "self=@v", "mat1=@m", "mat2=@a", "beta=0.5"],
    &["linear", "input=@a", "weight=@b"],
    &["sum.dim_IntList", "self=@a", "dim=[1]", "keepdim=true"],
    &["mean.dim", "self=@a", "dim=[0]"],
    &["var.correction", "self=@a", "dim=[1]"],
    &["max.dim", "self=@a", "dim=1"],
    &["argmax", "self=@b", "dim=0"],
    &["softmax.int", "self=@a", "dim=1"],
    &["log_softmax.int", "self=@b", "dim=0"],
    &["t", "self=@a"],
    &["transpose.int", "self=@a", "dim0=0", "dim1=1"],
    &["permute", "self=@img", "dims=[0, 2, 3, 1]"],
    &["reshape", "self=@a", "shape=[3, 2]"],
    &["view", "self=@a", "size=[6]"],
    &["flatten.using_ints", "self=@img", "start_dim=1"],
    &["select.int", "self=@a", "dim=1", "index=2"],
    &["slice.Tensor", "self=@a", "dim=1", "start=1", "end=3"],
    &["narrow", "self=@a", "dim=1", "start=1", "length=2"],
    &["unsqueeze", "self=@v", "dim=0"],
    &["expand", "self=@v", "size=[2, 3]"],
    &["cat", "tensors=[@a, @b]", "dim=0"],
    &["stack", "tensors=[@a, @b]"],
    &["add_.Tensor", "self=@a", "other=@b"],
    &["mul_.Scalar", "self=@a", "other=-1"],
    &["index_select", "self=@a", "dim=1", "index=@i"],
    &["gather", "self=@a", "dim=1", "index=@gi"],
    &["scatter_add", "self=@a", "dim=1", "index=@gi", "src=@b"],
    &["embedding", "weight=@m", "indices=@i"],
    &["masked_fill.Scalar", "self=@a", "mask=@mask", "value=7"],
    &["nll_loss_forward", "self=@a", "target=@t", "weight=None", "reduction=1", "ignore_index=-100"],
    &["cross_entropy_loss", "self=@a", "target=@t"],
    &["convolution", "input=@img", "weight=@w", "bias=None", "stride=[1, 1]", "padding=[1, 1]",
      "dilation=[1, 1]", "transposed=false", "output_padding=[0, 0]", "groups=1"],
    &["conv2d", "input=@img", "weight=@w", "stride=2"],
    &["max_pool2d", "self=@img", "kernel_size=2"],
    &["max_pool2d_with_indices", "self=@img", "kernel_size=2"],
    &["native_layer_norm", "input=@a", "normalized_shape=[3]", "weight=@v", "bias=None", "eps=1e-5"],
    &["dropout", "input=@a", "p=0.5", "train=false"],
    &["zeros_like", "self=@a"],
    &["to.dtype", "self=@a", "dtype=int64"],
];

/// Runs every case with `base` flags and with each functionalization added; all alike.
fn every_case_runs_alike(test: &str, base: &[&str]) {
    let d = dir(test);
    let mut failures = Vec::new();
    for case in CASES {
        let eager = run(&d, base, case);
        for f in ["--functionalize", "--functionalize=mutations_and_views"] {
            let mut flags = base.to_vec();
            flags.push(f);
            let got = run(&d, &flags, case);
            // With --backward an out= call whose `out` requires grad fails either way: eagerly
            // at autograd's out= check, functionalized where the written `out` (a leaf that
            // requires grad) is written back, as torch.func.functionalize's `copy_` fails.
            let out_with_grad = base.contains(&"--backward") && case[0].contains("out");
            if out_with_grad && eager.is_err() && got.is_err() {
                continue;
            }
            if got != eager {
                failures.push(format!("{case:?} {flags:?}: {got:?}, eagerly {eager:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_case_gives_functionalized_what_it_gives_eagerly() {
    every_case_runs_alike("plain", &[]);
}

#[test]
fn gradients_through_functionalized_calls_are_eagers() {
    every_case_runs_alike("backward", &["--backward"]);
}

#[test]
fn functionalized_calls_run_on_other_devices() {
    every_case_runs_alike("lazy", &["--device", "lazy"]);
}

#[test]
fn an_in_place_call_on_aliased_inputs_returns_the_written_value() {
    // `a.add_(a)`: each argument is wrapped on its own, as torch.func.functionalize does.
    let d = dir("write-back");
    for f in ["--functionalize", "--functionalize=mutations_and_views"] {
        let (_, _, tensors) = run(&d, &[f], &["add_.Tensor", "self=@a", "other=@a"]).unwrap();
        let doubled: Vec<f64> = [1.0, -2.0, 3.0, -4.0, 5.0, 6.0]
            .iter()
            .map(|x| 2.0 * x)
            .collect();
        assert_eq!(tensors[0].3, doubled, "{f}");
    }
}

#[test]
fn an_unknown_remove_is_one_error_line() {
    let d = dir("bad-remove");
    let err = run(&d, &["--functionalize=views"], &["relu", "self=@a"]).unwrap_err();
    assert!(
        err.contains("--functionalize: functionalize(f, remove='mutations'): received invalid argument for remove=views."),
        "{err}"
    );
}

#[test]
fn a_functionalized_out_call_writes_its_out_back_at_the_end() {
    // Eagerly autograd refuses the out= call; functionalized it runs as `pow` and fails only
    // where `out`, a leaf that requires grad, is written back (`copy_`), as in PyTorch.
    let d = dir("out-write-back");
    let case = ["pow.Tensor_Scalar_out", "self=@a", "exponent=2", "out=@b"];
    let eager = run(&d, &["--backward"], &case).unwrap_err();
    assert!(
        eager.contains("functions with out=... arguments don't support automatic differentiation"),
        "{eager}"
    );
    let functional = run(&d, &["--backward", "--functionalize"], &case).unwrap_err();
    assert!(
        functional
            .contains("a leaf Variable that requires grad is being used in an in-place operation"),
        "{functional}"
    );
}
