//! The `switchboard call` harness the layer tests share: the input tensors every case reads,
//! the operator cases of every kind, and a call run as a process with extra flags, its
//! outputs read back.
use std::process::{Command, Output};

use switchboard::tensor::{load_safetensors_file, save_safetensors_file, ScalarType, Tensor};

pub fn call(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .arg("call")
        .args(args)
        .output()
        .expect("the switchboard binary runs")
}

/// A temp dir holding `in.safetensors`; removed on drop.
pub struct Dir(pub std::path::PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn f32s(v: &[f32], sizes: &[i64]) -> Tensor {
    Tensor::from_vec(v.to_vec(), sizes).unwrap()
}

pub fn dir(test: &str) -> Dir {
    let dir = std::env::temp_dir().join(format!(
        "switchboard-call-cases-{}-{test}",
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
pub type Written = (
    String,
    String,
    Vec<(String, ScalarType, Vec<i64>, Vec<f64>)>,
);

pub fn run(d: &Dir, flags: &[&str], case: &[&str]) -> Result<Written, String> {
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

pub trait F64s {
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
pub const CASES: &[&[&str]] = &[
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
