//! Tests of `switchboard call --backward` (and plain calls) on the real aten operators of the
//! global dispatcher.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use clap::Parser;
use switchboard::autograd::AutogradTensor;
use switchboard::dispatcher::IValue;
use switchboard::tensor::{save_safetensors_file, ScalarType, Tensor};

use super::*;

#[derive(Parser)]
struct Cmd {
    #[command(flatten)]
    args: CallArgs,
}

/// A temp dir whose `in.safetensors` holds the given tensors.
struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn f32s(v: &[f32], sizes: &[i64]) -> Tensor {
    Tensor::from_vec(v.to_vec(), sizes).unwrap()
}

/// `a`, `b` (2x2 float32), `i` (2 int64) and the extra tensors.
fn dir_with(extra: &[(&str, Tensor)]) -> Dir {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "switchboard-call-backward-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
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
    /// Runs `switchboard call ARGV... --in IN` on the global dispatcher (`OUT` stands for the
    /// dir's `out.safetensors`); returns stdout and stderr.
    fn run(&self, argv: &[&str]) -> Result<(String, String), CallError> {
        let input = self.0.join("in.safetensors").display().to_string();
        let output = self.0.join("out.safetensors").display().to_string();
        let argv = argv.iter().map(|a| if *a == "OUT" { &output } else { *a });
        let argv = std::iter::once("call")
            .chain(argv)
            .chain(["--in", input.as_str()]);
        let cmd = Cmd::try_parse_from(argv).unwrap();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        run(Dispatcher::global(), &cmd.args, &mut out, &mut err)?;
        Ok((
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        ))
    }

    fn err(&self, argv: &[&str]) -> String {
        let e = self.run(argv).expect_err("should fail").to_string();
        assert!(!e.contains('\n'), "not one line: {e}");
        e
    }

    fn output(&self) -> BTreeMap<String, Tensor> {
        load_safetensors_file(self.0.join("out.safetensors")).unwrap()
    }
}

fn vals(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

#[test]
fn mul_gradients_are_the_other_factor() {
    let d = dir_with(&[]);
    let (out, err) = d
        .run(&[
            "aten::mul.Tensor",
            "--out",
            "OUT",
            "self=@a",
            "other=@b",
            "--backward",
        ])
        .unwrap();
    assert_eq!((out.as_str(), err.as_str()), ("{}\n", ""));
    let o = d.output();
    assert_eq!(
        o.keys().collect::<Vec<_>>(),
        ["grad.other", "grad.self", "out0"]
    );
    assert_eq!(vals(&o["out0"]), [10.0, 40.0, 90.0, 160.0]);
    assert_eq!(vals(&o["grad.self"]), [10.0, 20.0, 30.0, 40.0]);
    assert_eq!(vals(&o["grad.other"]), [1.0, 2.0, 3.0, 4.0]);
    // Without --out, the gradients are printed after the outputs.
    let (out, _) = d
        .run(&["mul.Tensor", "self=@a", "other=@b", "--backward"])
        .unwrap();
    assert_eq!(
        out,
        "out0 = tensor([[ 10.,  40.],\n        [ 90., 160.]])\n\
         grad.self = tensor([[10., 20.],\n        [30., 40.]])\n\
         grad.other = tensor([[1., 2.],\n        [3., 4.]])\n"
    );
}

#[test]
fn one_leaf_per_argument() {
    // mul(a, a): each argument has its own gradient (a), not their sum (2a).
    let d = dir_with(&[]);
    d.run(&[
        "mul.Tensor",
        "--out",
        "OUT",
        "self=@a",
        "other=@a",
        "--backward",
    ])
    .unwrap();
    let o = d.output();
    assert_eq!(vals(&o["grad.self"]), [1.0, 2.0, 3.0, 4.0]);
    assert_eq!(vals(&o["grad.other"]), [1.0, 2.0, 3.0, 4.0]);
}

#[test]
fn grad_out_weights_the_outputs() {
    let g = f32s(&[1.0, 0.0, 2.0, 0.5], &[2, 2]);
    let d = dir_with(&[("grad_out0", g)]);
    d.run(&[
        "mul.Tensor",
        "--out",
        "OUT",
        "self=@a",
        "other=@b",
        "--backward",
    ])
    .unwrap();
    let o = d.output();
    assert_eq!(vals(&o["grad.self"]), [10.0, 0.0, 60.0, 20.0]);
    assert_eq!(vals(&o["grad.other"]), [1.0, 0.0, 6.0, 2.0]);
    // A float64 grad_out is cast to the output's dtype: the gradients stay float32.
    let g64 = Tensor::from_vec(vec![2.0f64, 2.0, 2.0, 2.0], &[2, 2]).unwrap();
    let d = dir_with(&[("grad_out0", g64)]);
    d.run(&[
        "add.Tensor",
        "--out",
        "OUT",
        "self=@a",
        "other=@b",
        "--backward",
    ])
    .unwrap();
    let o = d.output();
    assert_eq!(o["grad.self"].dtype(), ScalarType::Float);
    assert_eq!(vals(&o["grad.self"]), [2.0; 4]);
    assert_eq!(vals(&o["grad.other"]), [2.0; 4]);
}

#[test]
fn integer_outputs_are_skipped() {
    // max.dim returns (values, indices): only the values are differentiated.
    let d = dir_with(&[("grad_out0", f32s(&[3.0, 5.0], &[2]))]);
    let (_, err) = d
        .run(&["max.dim", "--out", "OUT", "self=@a", "dim=0", "--backward"])
        .unwrap();
    assert_eq!(err, "");
    let o = d.output();
    assert_eq!(o.keys().collect::<Vec<_>>(), ["grad.self", "out0", "out1"]);
    assert_eq!(o["out1"].to_vec::<i64>().unwrap(), [1, 1]);
    assert_eq!(vals(&o["grad.self"]), [0.0, 0.0, 3.0, 5.0]);
    // A grad_out for the integer output is not used, with a note.
    let d = dir_with(&[("grad_out1", f32s(&[3.0, 5.0], &[2]))]);
    let (_, err) = d
        .run(&["max.dim", "self=@a", "dim=1", "--backward"])
        .unwrap();
    assert_eq!(
        err,
        "note: grad_out1 of the input file is not used: out1 is not a floating-point tensor \
         output of aten::max.dim\n"
    );
}

#[test]
fn integer_inputs_stay_as_they_are() {
    let d = dir_with(&[]);
    d.run(&[
        "index_select",
        "--out",
        "OUT",
        "self=@a",
        "dim=0",
        "index=@i",
        "--backward",
    ])
    .unwrap();
    let o = d.output();
    assert_eq!(vals(&o["out0"]), [3.0, 4.0, 1.0, 2.0]);
    assert_eq!(vals(&o["grad.self"]), [1.0; 4]);
    assert!(!o.contains_key("grad.index"));
}

#[test]
fn tensor_list_inputs_have_one_gradient_per_item() {
    let d = dir_with(&[]);
    d.run(&[
        "cat",
        "--out",
        "OUT",
        "tensors=[@a, @b]",
        "dim=1",
        "--backward",
    ])
    .unwrap();
    let o = d.output();
    assert_eq!(o["out0"].sizes(), &[2, 4]);
    assert_eq!(vals(&o["grad.tensors.0"]), [1.0; 4]);
    assert_eq!(vals(&o["grad.tensors.1"]), [1.0; 4]);
}

#[test]
fn inputs_without_gradient_are_left_out_with_a_note() {
    // nll_loss_forward: `weight` is not differentiated, `total_weight` is not differentiable.
    let logp = f32s(&[0.2f32.ln(), 0.3f32.ln(), 0.5f32.ln()], &[1, 3]);
    let d = dir_with(&[
        ("x", logp),
        ("t", Tensor::from_vec(vec![2i64], &[1]).unwrap()),
        ("w", f32s(&[1.0, 2.0, 4.0], &[3])),
    ]);
    let (_, err) = d
        .run(&[
            "nll_loss_forward",
            "--out",
            "OUT",
            "self=@x",
            "target=@t",
            "weight=@w",
            "reduction=2",
            "ignore_index=-100",
            "--backward",
        ])
        .unwrap();
    assert_eq!(
        err,
        "note: out1 does not require grad (it is not differentiable); it adds no gradient\n\
         note: 'weight' received no gradient (the outputs do not depend on it differentiably); \
         grad.weight is omitted\n"
    );
    let o = d.output();
    assert_eq!(o.keys().collect::<Vec<_>>(), ["grad.self", "out0", "out1"]);
    assert_eq!(vals(&o["grad.self"]), [0.0, 0.0, -4.0]);
}

#[test]
fn backward_errors() {
    let d = dir_with(&[("grad_out0", f32s(&[1.0, 2.0], &[2]))]);
    assert_eq!(
        d.err(&["max.dim", "self=@i", "dim=0", "--backward"]),
        "--backward: aten::max.dim has no floating-point tensor input to differentiate with \
         respect to"
    );
    assert_eq!(
        d.err(&["argmax", "self=@a", "--backward"]),
        "--backward: aten::argmax has no floating-point tensor output to differentiate"
    );
    // The file's grad_out0 would not match zeros_like's output.
    let plain = dir_with(&[]);
    assert!(plain
        .err(&["zeros_like", "self=@a", "--backward"])
        .starts_with(
            "--backward: element 0 of tensors does not require grad and does not have a grad_fn"
        ));
    assert_eq!(
        d.err(&["mul.Tensor", "self=@a", "other=@b", "--backward"]),
        "--backward: Mismatch in shape: grad_output[0] has a shape of torch.Size([2]) and \
         output[0] has a shape of torch.Size([2, 2]) (grad_out0 and out0 of aten::mul.Tensor)"
    );
    // In-place on a leaf that requires grad is autograd's error, as in PyTorch.
    let e = d.err(&["add_.Tensor", "self=@a", "other=@b", "--backward"]);
    assert!(
        e.starts_with("aten::add_.Tensor: a leaf Variable that requires grad"),
        "{e}"
    );
}

#[test]
fn the_leaves_are_fresh() {
    let d = Dispatcher::global();
    let (_, record) = resolve(d, "aten::index_select").unwrap();
    let a = f32s(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let i = Tensor::from_vec(vec![1i64], &[1]).unwrap();
    let mut stack = vec![
        IValue::Tensor(a.clone()),
        IValue::Int(0),
        IValue::Tensor(i.clone()),
    ];
    let leaves = backward::make_leaves(&record.schema, "aten::index_select", &mut stack).unwrap();
    assert_eq!(leaves.len(), 1);
    assert_eq!(leaves[0].0, "self");
    let leaf = &leaves[0].1;
    assert!(leaf.requires_grad() && leaf.is_leaf());
    assert!(!a.requires_grad(), "the loaded tensor is not changed");
    match (&stack[0], &stack[2]) {
        (IValue::Tensor(s), IValue::Tensor(idx)) => {
            assert!(s.requires_grad());
            assert!(!idx.requires_grad() && idx.is_same(&i));
        }
        _ => panic!("the stack keeps its shape"),
    }
}

#[test]
fn without_backward_autograd_is_off() {
    let d = dir_with(&[("grad_out0", f32s(&[1.0; 4], &[2, 2]))]);
    let (out, err) = d
        .run(&[
            "add.Tensor",
            "--out",
            "OUT",
            "self=@a",
            "other=@b",
            "alpha=2",
        ])
        .unwrap();
    assert_eq!((out.as_str(), err.as_str()), ("{}\n", ""));
    let o = d.output();
    assert_eq!(o.keys().collect::<Vec<_>>(), ["out0"]);
    assert_eq!(vals(&o["out0"]), [21.0, 42.0, 63.0, 84.0]);
    // The call runs below autograd: even an input that requires grad gives no history.
    let (op, record) = resolve(Dispatcher::global(), "aten::mul.Tensor").unwrap();
    let a = f32s(&[1.0, 2.0], &[2]).requires_grad_(true).unwrap();
    let stack = vec![IValue::Tensor(a.clone()), IValue::Tensor(a)];
    let r = call(&op, &record.schema, "aten::mul.Tensor", stack, false).unwrap();
    match &r[0] {
        IValue::Tensor(t) => assert!(!t.requires_grad() && t.grad_fn().is_none()),
        _ => panic!("a tensor return"),
    }
}

#[test]
fn real_aten_operators() {
    let d = dir_with(&[]);
    let (out, _) = d.run(&["mm", "self=@a", "mat2=@b"]).unwrap();
    assert_eq!(
        out,
        "out0 = tensor([[ 70., 100.],\n        [150., 220.]])\n"
    );
    d.run(&[
        "sum.dim_IntList",
        "--out",
        "OUT",
        "self=@a",
        "dim=[1]",
        "keepdim=true",
    ])
    .unwrap();
    let s = d.output().remove("out0").unwrap();
    assert_eq!((s.sizes(), vals(&s)), (&[2i64, 1][..], vec![3.0, 7.0]));
    // mm's gradients: grad.self = ones @ b^T, grad.mat2 = a^T @ ones.
    d.run(&["mm", "--out", "OUT", "self=@a", "mat2=@b", "--backward"])
        .unwrap();
    let o = d.output();
    assert_eq!(vals(&o["grad.self"]), [30.0, 70.0, 30.0, 70.0]);
    assert_eq!(vals(&o["grad.mat2"]), [4.0, 4.0, 6.0, 6.0]);
}
