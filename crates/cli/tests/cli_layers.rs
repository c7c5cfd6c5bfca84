//! The layer options of the `switchboard` binary: `call --autocast` against values recorded
//! from PyTorch 2.15 (`torch.autocast("cpu", dtype=...)`, then backward outside the region).

// The expected values are PyTorch's, printed in full (exact in bfloat16 and float16).
#![allow(clippy::excessive_precision)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use switchboard::ops;
use switchboard::tensor::{load_safetensors_file, save_safetensors_file, ScalarType, Tensor};

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `a = arange(6).view(2, 3) / 7 - 0.3`, `b = arange(12).view(3, 4) / 5 - 1.1`.
fn inputs(name: &str) -> Dir {
    let dir = std::env::temp_dir().join(format!(
        "switchboard-cli-layers-{}-{name}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let f = |n: i64, rows: i64, div: f32, sub: f32| {
        let v: Vec<f32> = (0..n).map(|i| i as f32 / div - sub).collect();
        Tensor::from_vec(v, &[rows, n / rows]).unwrap()
    };
    let (a, b) = (f(6, 2, 7.0, 0.3), f(12, 3, 5.0, 1.1));
    save_safetensors_file(dir.join("in.safetensors"), &[("a", &a), ("b", &b)], None).unwrap();
    Dir(dir)
}

fn call(dir: &Dir, args: &[&str]) -> BTreeMap<String, Tensor> {
    let input = dir.0.join("in.safetensors").display().to_string();
    let output = dir.0.join("out.safetensors").display().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["call", "--in", &input, "--out", &output])
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
    load_safetensors_file(&output).unwrap()
}

fn f32s(t: &Tensor) -> Vec<f32> {
    ops::_to_copy_with(t, ops::ToCopyOptions::default().dtype(ScalarType::Float))
        .unwrap()
        .to_vec::<f32>()
        .unwrap()
}

#[test]
fn call_autocast_matches_pytorch() {
    let dir = inputs("mm");
    #[rustfmt::skip]
    let cases = [
        ("bfloat16", ScalarType::BFloat16,
         [0.37109375, 0.275390625, 0.181640625, 0.08740234375, -0.0166015625, 0.146484375, 0.30859375, 0.47265625],
         [-3.203125, 0.0, 3.203125, -3.203125, 0.0, 3.203125],
         [-0.171875, 0.1142578125, 0.400390625]),
        ("float16", ScalarType::Half,
         [0.369873046875, 0.275634765625, 0.1815185546875, 0.087158203125, -0.015655517578125, 0.1473388671875, 0.31005859375, 0.47265625],
         [-3.19921875, 0.0, 3.19921875, -3.19921875, 0.0, 3.19921875],
         [-0.1715087890625, 0.1143798828125, 0.39990234375]),
    ];
    for (name, dtype, out, grad_a, grad_b_rows) in cases {
        let plain = call(&dir, &["mm", "self=@a", "mat2=@b", "--autocast", name]);
        assert_eq!(plain["out0"].dtype(), dtype);
        assert_eq!(f32s(&plain["out0"]), out);

        let back = call(
            &dir,
            &["mm", "self=@a", "mat2=@b", "--autocast", name, "--backward"],
        );
        assert_eq!(back["out0"].dtype(), dtype);
        assert_eq!(f32s(&back["out0"]), out);
        // The gradients reach the float32 inputs through the casts, in float32.
        assert_eq!(back["grad.self"].dtype(), ScalarType::Float);
        assert_eq!(f32s(&back["grad.self"]), grad_a);
        let expected_b: Vec<f32> = grad_b_rows.iter().flat_map(|&v| [v; 4]).collect();
        assert_eq!(f32s(&back["grad.mat2"]), expected_b);
    }
    // Without the flag, float32.
    assert_eq!(
        call(&dir, &["mm", "self=@a", "mat2=@b"])["out0"].dtype(),
        ScalarType::Float
    );
}

/// `switchboard train --count-flops`: the FLOPs of one step (forward, backward, SGD) per
/// operator, equal to PyTorch 2.15's `FlopCounterMode` over the same step of the same MLP
/// (64 -> 128 -> 10, batch 32): addmm 606208, mm 688128.
#[test]
fn train_counts_the_flops_of_one_step() {
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args([
            "train",
            "--count-flops",
            "--epochs",
            "1",
            "--no-progress",
            "--no-summary",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let row = |name: &str| -> Vec<String> {
        let line = stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} row: {stdout}"));
        line.split_whitespace().map(str::to_owned).collect()
    };
    assert_eq!(row("Global")[1], "1294336");
    assert_eq!(row("aten::addmm")[1], "606208");
    assert_eq!(row("aten::mm")[1], "688128");
    assert_eq!(stdout.matches("FLOPs of one training step").count(), 1);
}

/// `switchboard train --trace-graph step.json|step.dot`: the graph of the first training step
/// (forward, loss, backward, SGD update), every operator call in execution order.
#[test]
fn train_writes_the_traced_graph_of_one_step() {
    let dir = inputs("trace-graph");
    let run = |file: &str| {
        let path = dir.0.join(file);
        let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .args(["train", "--epochs", "1", "--no-progress", "--no-summary"])
            .arg("--trace-graph")
            .arg(&path)
            .output()
            .unwrap();
        let stdout = String::from_utf8(out.stdout).unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        (out.status.code(), stdout, stderr, path)
    };
    let (code, stdout, stderr, path) = run("step.json");
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        stdout.matches("graph of one training step").count(),
        1,
        "{stdout}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let nodes = json["nodes"].as_array().unwrap();
    let ops: Vec<&str> = nodes.iter().map(|n| n["op"].as_str().unwrap()).collect();
    // Forward and loss, as PyTorch's make_fx traces `linear, relu, linear, cross_entropy`.
    assert_eq!(
        ops[..7],
        [
            "aten::t",
            "aten::addmm",
            "aten::relu",
            "aten::t",
            "aten::addmm",
            "aten::_log_softmax",
            "aten::nll_loss_forward"
        ]
    );
    // Backward, in the engine's order.
    let backward = [
        "aten::ones_like",
        "aten::nll_loss_backward",
        "aten::_log_softmax_backward_data",
        "aten::t",
        "aten::mm",
        "aten::t",
        "aten::mm",
        "aten::t",
        "aten::sum.dim_IntList",
        "aten::view",
        "aten::t",
        "aten::threshold_backward",
        "aten::t",
        "aten::mm",
        "aten::t",
        "aten::sum.dim_IntList",
        "aten::view",
        "aten::t",
    ];
    assert_eq!(ops[7..7 + backward.len()], backward);
    // SGD with weight decay and momentum (its buffers made at this first step), per
    // parameter: g + wd * p, the buffer, p -= lr * buf.
    assert_eq!(
        ops[7 + backward.len()..],
        ["aten::add.Tensor", "aten::clone", "aten::add_.Tensor"].repeat(4)
    );
    // Each node: its inputs (values or constants) and its outputs' shapes and dtypes.
    let addmm = &nodes[1];
    assert_eq!(addmm["inputs"][0]["name"], "self");
    assert_eq!(addmm["inputs"][0]["value"], "arg1"); // the first layer's bias
    assert_eq!(addmm["inputs"][1]["value"], "arg4"); // the batch, after the 4 parameters
    assert_eq!(addmm["outputs"][0]["shape"], serde_json::json!([32, 128]));
    assert_eq!(addmm["outputs"][0]["dtype"], "float32");
    assert_eq!(json["inputs"].as_array().unwrap().len(), 6);
    assert_eq!(json["outputs"].as_array().unwrap().len(), 5); // the loss, the parameters

    let (code, _, stderr, path) = run("step.dot");
    assert_eq!(code, Some(0), "{stderr}");
    let dot = std::fs::read_to_string(path).unwrap();
    assert!(dot.starts_with("digraph graph {"), "{dot}");
    assert!(dot.contains("aten::threshold_backward"));

    let (code, _, stderr, _) = run("step.txt");
    assert_eq!(code, Some(2));
    assert!(stderr.contains("--trace-graph"), "{stderr}");
    assert!(stderr.contains("must end in .json or .dot"), "{stderr}");
}

/// Runs the binary; (exit status, stdout, stderr).
fn run_binary(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(args)
        .output()
        .unwrap();
    let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
    (out.status.code(), text(out.stdout), text(out.stderr))
}

#[test]
fn autocast_is_the_region_of_the_device() {
    let dir = inputs("device");
    // `--device cpu:0` is the CPU: its region casts.
    let out = call(
        &dir,
        &[
            "mm",
            "self=@a",
            "mat2=@b",
            "--device",
            "cpu:0",
            "--autocast",
            "float16",
        ],
    );
    assert_eq!(out["out0"].dtype(), ScalarType::Half);
    // PyTorch has no autocast key for lazy or meta: `torch.autocast("lazy")` is an error, and
    // so is the combination, before anything runs (it was ignored: float32 results).
    let input = dir.0.join("in.safetensors").display().to_string();
    for (device, shown) in [("lazy", "lazy:0"), ("meta", "meta")] {
        for dtype in ["float16", "bfloat16"] {
            let (code, stdout, stderr) = run_binary(&[
                "call",
                "mm",
                "--in",
                &input,
                "self=@a",
                "mat2=@b",
                "--device",
                device,
                "--autocast",
                dtype,
            ]);
            assert_eq!(code, Some(2), "{device} {dtype}: {stderr}");
            assert!(stdout.is_empty());
            assert_eq!(
                stderr.trim_end(),
                format!(
                    "error: --autocast {dtype} --device {shown}: User specified an unsupported \
                     autocast device_type '{device}' (autocast runs on cpu, cuda in this build)"
                )
            );
        }
    }
    let (code, stdout, stderr) = run_binary(&[
        "train",
        "--epochs",
        "1",
        "--no-progress",
        "--no-summary",
        "--device",
        "lazy",
        "--autocast",
        "float16",
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stdout.is_empty(), "refused before training: {stdout}");
    assert!(
        stderr.contains(
            "--autocast float16 --device lazy:0: User specified an unsupported \
                         autocast device_type 'lazy'"
        ),
        "{stderr}"
    );
}
