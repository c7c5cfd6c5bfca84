//! `switchboard call --device DEVICE` as a process: every case gives on `lazy` what it gives on
//! the CPU (outputs, gradients, JSON returns, error lines), and bad input is still one `error:`
//! line with exit status 2.

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
        "switchboard-call-device-{}-{test}",
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

fn run(d: &Dir, device: Option<&str>, case: &[&str]) -> Result<Written, String> {
    let input = d.0.join("in.safetensors").display().to_string();
    let out_name = format!("out-{}.safetensors", device.unwrap_or("none"));
    let output = d.0.join(out_name).display().to_string();
    let mut argv = vec![case[0], "--in", &input, "--out", &output];
    if let Some(dev) = device {
        argv.extend(["--device", dev]);
    }
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

#[test]
fn every_case_gives_on_lazy_what_it_gives_on_cpu() {
    let d = dir("cases");
    let mut failed = Vec::new();
    for case in CASES {
        let cpu = run(&d, None, case);
        let lazy = run(&d, Some("lazy"), case);
        assert_eq!(cpu, lazy, "{case:?}");
        if let Err(e) = &cpu {
            failed.push(format!("{case:?}: {e}"));
        }
        // `--device cpu` is the plain call.
        assert_eq!(run(&d, Some("cpu"), case), cpu, "{case:?}");
    }
    // The table is not a list of errors.
    assert!(failed.is_empty(), "{failed:#?}");
}

#[test]
fn backward_on_lazy_gives_the_cpu_gradients() {
    let d = dir("backward");
    let mut passed = 0;
    for case in CASES {
        let mut case = case.to_vec();
        case.push("--backward");
        let cpu = run(&d, None, &case);
        let lazy = run(&d, Some("lazy"), &case);
        assert_eq!(cpu, lazy, "{case:?}");
        if let Ok((_, _, tensors)) = &cpu {
            passed += usize::from(tensors.iter().any(|t| t.0.starts_with("grad.")));
        }
    }
    assert!(passed >= 25, "{passed} cases with gradients");
}

#[test]
fn errors_on_lazy_are_the_cpu_errors_in_one_line() {
    let d = dir("errors");
    for case in [
        // Shape and dtype errors appear when the call is captured, with eager's message.
        &["mm", "self=@a", "mat2=@a"][..],
        &["add.Tensor", "self=@a", "other=@m"],
        &["index_select", "self=@a", "dim=0", "index=@v"],
        &["cat", "tensors=[@a, @v]"],
        &["view", "self=@a", "size=[4]"],
        // Errors before the call.
        &["no_such_op_xyz", "self=@a"],
        &["add.Tensor", "self=@a"],
        &["add.Tensor", "self=@nope", "other=@a"],
        &["mm", "self=@a", "mat2=@m", "extra=1"],
        // Autograd's in-place check on a leaf.
        &["add_.Tensor", "self=@a", "other=@b", "--backward"],
    ] {
        let cpu = run(&d, None, case).expect_err(&format!("{case:?} fails on cpu"));
        let lazy = run(&d, Some("lazy"), case).expect_err(&format!("{case:?} fails on lazy"));
        assert_eq!(cpu, lazy, "{case:?}");
    }
}

#[test]
fn bad_devices_are_one_error_line() {
    let d = dir("devices");
    let case = &["relu", "self=@a"][..];
    let e = run(&d, Some("gpu"), case).unwrap_err();
    assert!(e.starts_with("error: --device \"gpu\": "), "{e}");
    assert!(e.contains("Expected one of"), "{e}");
    let e = run(&d, Some("lazy:1"), case).unwrap_err();
    assert!(e.contains("the lazy backend has one device, lazy:0"), "{e}");
    // A device without a backend in this build fails at the first move.
    let e = run(&d, Some("cuda"), case).unwrap_err();
    assert!(
        e.starts_with("error: aten::relu: moving the inputs to cuda"),
        "{e}"
    );
    // On meta the call runs (shapes only) and reading the outputs back fails.
    let e = run(&d, Some("meta"), case).unwrap_err();
    assert!(
        e.starts_with("error: aten::relu: moving the outputs from meta to cpu"),
        "{e}"
    );
}

#[test]
fn cpu_and_meta_with_an_index_are_the_cpu_and_meta() {
    // `torch.device("cpu:0")` is the CPU: a tensor created there is on `cpu` and mixes with
    // every other CPU tensor (PyTorch's CPU and meta allocators give index-less devices).
    let d = dir("indexed");
    for case in CASES {
        let cpu = run(&d, None, case);
        assert_eq!(run(&d, Some("cpu:0"), case), cpu, "{case:?}");
        let mut backward = case.to_vec();
        backward.push("--backward");
        assert_eq!(
            run(&d, Some("cpu:0"), &backward),
            run(&d, None, &backward),
            "{backward:?}"
        );
    }
    // On meta:0 the call runs (shapes only, no device mismatch) and reading the outputs back
    // is the meta backend's error, as on meta.
    for case in [
        &["mm", "self=@a", "mat2=@m"][..],
        &["add.Tensor", "self=@a", "other=@b"],
    ] {
        let e = run(&d, Some("meta:0"), case).unwrap_err();
        assert!(
            e.contains("moving the outputs from meta:0 to cpu: Cannot copy out of meta tensor"),
            "{case:?}: {e}"
        );
    }
}

#[test]
fn backward_moves_the_gradient_weights_to_the_device() {
    // `grad_outI` is read by --backward besides the arguments: it goes to the device too.
    let dir = std::env::temp_dir().join(format!(
        "switchboard-call-device-{}-grad-out",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let d = Dir(dir);
    let a = f32s(&[1.0, -2.0, 3.0, -4.0, 5.0, 6.0], &[2, 3]);
    let m = f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]);
    let g = f32s(&[1.0, 0.0, 2.0, -1.0], &[2, 2]);
    let g64 = Tensor::from_vec(vec![0.5f64, 1.0, -1.0, 2.0], &[2, 2]).unwrap();
    for grad in [&g, &g64] {
        let tensors = [("a", &a), ("m", &m), ("grad_out0", grad)];
        save_safetensors_file(d.0.join("in.safetensors"), &tensors, None).unwrap();
        let case = &["mm", "self=@a", "mat2=@m", "--backward"][..];
        let cpu = run(&d, None, case).unwrap();
        assert!(cpu.2.iter().any(|t| t.0 == "grad.self"), "{cpu:?}");
        assert_eq!(run(&d, Some("lazy"), case).unwrap(), cpu);
        // On meta, only reading the results back fails (no device mismatch before).
        let e = run(&d, Some("meta"), case).unwrap_err();
        assert!(e.contains("moving the outputs from meta to cpu"), "{e}");
    }
}
