//! Tests of `switchboard call` against a fresh dispatcher with test operators.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use clap::Parser;
use switchboard::dispatcher::{
    DispatchErrorKind, IValue, KernelFunction, Library, LibraryKind, Result as DResult,
};
use switchboard::keys::{DispatchKey, DispatchKeySet};
use switchboard::tensor::{
    safetensors_metadata, save_safetensors_file, Device, Scalar, ScalarType, Tensor,
};

use super::output::json_object;
use super::*;

mod errors;
mod fuzz;

/// A kernel's tensor error as a dispatcher error.
fn k<T>(r: switchboard::tensor::Result<T>) -> DResult<T> {
    r.map_err(|e| DispatchErrorKind::Kernel(e.to_string()).into())
}

fn add(a: &Tensor, b: &Tensor, alpha: Scalar) -> DResult<Tensor> {
    k(switchboard_cpu::add_tensor(a, b, alpha))
}

fn mul(a: &Tensor, b: &Tensor) -> DResult<Tensor> {
    k(switchboard_cpu::mul_tensor(a, b))
}

fn neg(a: &Tensor) -> DResult<Tensor> {
    k(switchboard_cpu::neg(a))
}

fn sum(
    t: &Tensor,
    dim: Option<&[i64]>,
    keepdim: bool,
    dtype: Option<ScalarType>,
) -> DResult<Tensor> {
    k(switchboard_cpu::sum_dim_int_list(t, dim, keepdim, dtype))
}

fn max_dim(t: &Tensor, dim: i64, keepdim: bool) -> DResult<(Tensor, Tensor)> {
    k(switchboard_cpu::max_dim(t, dim, keepdim))
}

fn boom(_: &Tensor) -> DResult<Tensor> {
    panic!("kernel bug")
}

/// A boxed kernel returning its arguments after the first `skip` (and then `extra`).
fn echo(skip: usize) -> KernelFunction {
    KernelFunction::from_boxed(move |op, _ks: DispatchKeySet, stack: &mut Stack| {
        let n = op.schema().map_or(0, |r| r.schema.arguments().len());
        let args: Vec<IValue> = stack.drain(stack.len() - n..).collect();
        stack.extend(args.into_iter().skip(skip));
        Ok(())
    })
}

const ECHO: &str = "echo(Tensor self, int[2] pad=1, float eps=1e-05, Scalar s=2, \
    ScalarType? dtype=None, MemoryFormat memory_format=contiguous_format, Layout? layout=None, \
    Device? device=None, str mode=\"mean\", bool flag=False, float[] weights=[0.5, 1], \
    Tensor? opt=None, Generator? generator=None) -> (int[], float, Scalar, ScalarType?, \
    MemoryFormat, Layout?, Device?, str, bool, float[], Tensor?, Generator?)";

/// A dispatcher with test operators, and a temp dir with `in.safetensors` holding `a` and `b`
/// (2x2 float32), `c` (3 float32) and `i` (2x3 int64).
struct Fixture {
    d: Dispatcher,
    _libs: Vec<Library>,
    dir: PathBuf,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn fixture() -> Fixture {
    static N: AtomicUsize = AtomicUsize::new(0);
    let d = Dispatcher::with_builtin_fallbacks();
    let cpu = Some(DispatchKey::CPU);
    let mut t = Library::new(&d, LibraryKind::Def, "test", None).unwrap();
    t.def("add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor")
        .unwrap();
    t.impl_("add", cpu, KernelFunction::from_fn(add)).unwrap();
    t.def("sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor")
        .unwrap();
    t.impl_("sum.dim_IntList", cpu, KernelFunction::from_fn(sum))
        .unwrap();
    t.def("max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)")
        .unwrap();
    t.impl_("max.dim", cpu, KernelFunction::from_fn(max_dim))
        .unwrap();
    t.def(ECHO).unwrap();
    t.impl_("echo", cpu, echo(1)).unwrap();
    t.def("lists(Tensor[] tensors, Tensor?[] maybe, int n) -> (Tensor[], Tensor?[], int)")
        .unwrap();
    t.impl_("lists", cpu, echo(0)).unwrap();
    t.def("boom(Tensor self) -> Tensor").unwrap();
    t.impl_("boom", cpu, KernelFunction::from_fn(boom)).unwrap();
    t.def("no_kernel(Tensor self) -> Tensor").unwrap();
    t.def("odd(Tensor self, complex c=1j) -> Tensor").unwrap();
    let mut aten = Library::new(&d, LibraryKind::Def, "aten", None).unwrap();
    aten.def("mul.Tensor(Tensor self, Tensor other) -> Tensor")
        .unwrap();
    aten.impl_("mul.Tensor", cpu, KernelFunction::from_fn(mul))
        .unwrap();
    aten.def("neg(Tensor self) -> Tensor").unwrap();
    aten.impl_("neg", cpu, KernelFunction::from_fn(neg))
        .unwrap();

    let dir = std::env::temp_dir().join(format!(
        "switchboard-call-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let b = Tensor::from_vec(vec![10.0f32, 20.0, 30.0, 40.0], &[2, 2]).unwrap();
    let c = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
    let i = Tensor::from_vec(vec![1i64, 5, 2, 7, 0, 3], &[2, 3]).unwrap();
    save_safetensors_file(
        dir.join("in.safetensors"),
        &[("a", &a), ("b", &b), ("c", &c), ("i", &i)],
        None,
    )
    .unwrap();
    Fixture {
        d,
        _libs: vec![t, aten],
        dir,
    }
}

#[derive(Parser)]
struct Cmd {
    #[command(flatten)]
    args: CallArgs,
}

impl Fixture {
    fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    /// Runs `switchboard call ARGV...` (`IN` and `OUT` stand for files of the temp dir) and
    /// returns stdout.
    fn run(&self, argv: &[&str]) -> Result<String, CallError> {
        let (input, output) = (self.path("in.safetensors"), self.path("out.safetensors"));
        let argv = argv.iter().map(|a| match *a {
            "IN" => input.as_str(),
            "OUT" => output.as_str(),
            a => a,
        });
        let cmd = Cmd::try_parse_from(std::iter::once("call").chain(argv)).unwrap();
        let mut out = Vec::new();
        run(&self.d, &cmd.args, &mut out, &mut Vec::new())?;
        Ok(String::from_utf8(out).unwrap())
    }

    /// The error of `run`, checked to be one line.
    fn err(&self, argv: &[&str]) -> String {
        let e = self
            .run(argv)
            .expect_err("the call should fail")
            .to_string();
        assert!(!e.contains('\n'), "not one line: {e}");
        e
    }

    fn output(&self) -> std::collections::BTreeMap<String, Tensor> {
        load_safetensors_file(self.dir.join("out.safetensors")).unwrap()
    }
}

#[test]
fn add_prints_its_tensor_output_without_out() {
    let f = fixture();
    let out = f
        .run(&["test::add", "--in", "IN", "self=@a", "other=@b"])
        .unwrap();
    assert_eq!(out, "out0 = tensor([[11., 22.],\n        [33., 44.]])\n");
}

#[test]
fn add_writes_the_output_file_and_an_empty_json_object() {
    let f = fixture();
    let out = f
        .run(&[
            "test::add",
            "--in",
            "IN",
            "--out",
            "OUT",
            "self=@a",
            "other=@b",
            "alpha=2",
        ])
        .unwrap();
    assert_eq!(out, "{}\n");
    let o = f.output();
    assert_eq!(o.keys().collect::<Vec<_>>(), ["out0"]);
    assert_eq!(o["out0"].to_vec::<f32>().unwrap(), [21.0, 42.0, 63.0, 84.0]);
    let bytes = std::fs::read(f.dir.join("out.safetensors")).unwrap();
    let meta = safetensors_metadata(&bytes).unwrap().unwrap();
    assert_eq!(meta["operator"], "test::add");
    // A float alpha and a bool-free int tensor: Scalar literals keep their kind.
    f.run(&[
        "test::add",
        "--in",
        "IN",
        "--out",
        "OUT",
        "self=@a",
        "other=@b",
        "alpha=0.5",
    ])
    .unwrap();
    assert_eq!(
        f.output()["out0"].to_vec::<f32>().unwrap(),
        [6.0, 12.0, 18.0, 24.0]
    );
}

#[test]
fn the_namespace_defaults_to_aten() {
    let f = fixture();
    for name in ["mul.Tensor", "aten::mul.Tensor", " aten::mul.Tensor "] {
        let out = f.run(&[name, "--in", "IN", "self=@a", "other=@a"]).unwrap();
        assert_eq!(
            out, "out0 = tensor([[ 1.,  4.],\n        [ 9., 16.]])\n",
            "{name}"
        );
    }
    // A bare name is the overload-less operator.
    let out = f.run(&["neg", "--in", "IN", "self=@c"]).unwrap();
    assert_eq!(out, "out0 = tensor([-1., -2., -3.])\n");
}

#[test]
fn unknown_operators_name_overloads_or_close_names() {
    let f = fixture();
    assert_eq!(
        f.err(&["mul"]),
        "unknown operator 'aten::mul'; its overloads are: aten::mul.Tensor"
    );
    assert!(f
        .err(&["test::ad", "self=@a"])
        .starts_with("unknown operator 'test::ad'. Did you mean 'test::add', "));
    // `add.Tensor` is `aten::add.Tensor`, which this dispatcher does not have.
    assert!(f
        .err(&["add.Tensor"])
        .starts_with("unknown operator 'aten::add.Tensor'"));
    let empty = Dispatcher::new();
    let args = CallArgs {
        operator: "aten::add.Tensor".into(),
        ..CallArgs::default()
    };
    let e = run(&empty, &args, &mut Vec::new(), &mut Vec::new()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "unknown operator 'aten::add.Tensor' (no operators are registered)"
    );
    assert_eq!(
        f.err(&["foo bar"]),
        "invalid operator name \"foo bar\": expected eof but found 'ident' at column 5"
    );
    assert_eq!(
        f.err(&["add(Tensor x) -> Tensor"]),
        "invalid operator name \"add(Tensor x) -> Tensor\": Tried to parse an operator name but \
         function schema was given"
    );
    for bad in ["add(", "", "a::b::c"] {
        let e = f.err(&[bad]);
        assert!(e.starts_with("invalid operator name"), "{bad:?}: {e}");
    }
}

#[test]
fn sized_int_lists_take_one_int_and_dtypes_their_names() {
    let f = fixture();
    let run = |args: &[&str]| {
        let mut argv = vec![
            "test::sum.dim_IntList",
            "--in",
            "IN",
            "--out",
            "OUT",
            "self=@i",
        ];
        argv.extend_from_slice(args);
        f.run(&argv).unwrap();
        f.output().remove("out0").unwrap()
    };
    let s = run(&["dim=1"]);
    assert_eq!((s.sizes(), s.dtype()), (&[2i64][..], ScalarType::Long));
    assert_eq!(s.to_vec::<i64>().unwrap(), [8, 10]);
    let s = run(&["dim=[0, 1]", "keepdim=true", "dtype=float64"]);
    assert_eq!((s.sizes(), s.dtype()), (&[1i64, 1][..], ScalarType::Double));
    assert_eq!(s.to_vec::<f64>().unwrap(), [18.0]);
    let s = run(&["dim=None", "dtype=torch.half"]);
    assert_eq!((s.sizes(), s.dtype()), (&[][..], ScalarType::Half));
    let s = run(&["dim=[]", "keepdim=True", "dtype=None"]);
    assert_eq!(s.sizes(), &[1, 1]);
}

#[test]
fn several_tensor_returns_are_out0_out1() {
    let f = fixture();
    let out = f
        .run(&[
            "test::max.dim",
            "--in",
            "IN",
            "--out",
            "OUT",
            "self=@i",
            "dim=-1",
        ])
        .unwrap();
    assert_eq!(out, "{}\n");
    let o = f.output();
    assert_eq!(o["out0"].to_vec::<i64>().unwrap(), [5, 7]);
    assert_eq!(o["out1"].to_vec::<i64>().unwrap(), [1, 0]);
    let printed = f
        .run(&["test::max.dim", "--in", "IN", "self=@i", "dim=0"])
        .unwrap();
    assert_eq!(
        printed,
        "out0 = tensor([7, 5, 3])\nout1 = tensor([1, 0, 1])\n"
    );
}

fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s.trim_end()).unwrap()
}

#[test]
fn defaults_of_every_kind() {
    let f = fixture();
    let out = f.run(&["test::echo", "--in", "IN", "self=@a"]).unwrap();
    assert!(
        out.starts_with("{\"out0\":[1,1],\"out1\":0.00001,"),
        "{out}"
    );
    assert_eq!(
        json(&out),
        serde_json::json!({
            "out0": [1, 1], "out1": 1e-5, "out2": 2, "out3": null, "out4": "contiguous_format",
            "out5": null, "out6": null, "out7": "mean", "out8": false, "out9": [0.5, 1.0],
            "out10": null, "out11": null,
        })
    );
    // `--out` without tensor outputs still writes the file (with its metadata).
    assert_eq!(
        f.run(&["test::echo", "--in", "IN", "--out", "OUT", "self=@a"])
            .unwrap(),
        out
    );
    assert!(f.output().is_empty());
}

#[test]
fn literals_of_every_kind() {
    let f = fixture();
    let out = f
        .run(&[
            "test::echo",
            "--in",
            "IN",
            "self=@a",
            "pad=3",
            "eps=-inf",
            "s=true",
            "dtype=bfloat16",
            "memory_format=torch.channels_last",
            "layout=strided",
            "device=meta",
            "mode=\"floor\"",
            "flag=True",
            "weights=[1, 2.5,]",
            "opt=@c",
            "generator=None",
        ])
        .unwrap();
    let (tensor, rest) = out.split_once('\n').unwrap();
    assert_eq!(tensor, "out10 = tensor([1., 2., 3.])");
    assert_eq!(
        json(rest),
        serde_json::json!({
            "out0": [3, 3], "out1": "-inf", "out2": true, "out3": "bfloat16",
            "out4": "channels_last", "out5": "strided", "out6": "meta", "out7": "floor",
            "out8": true, "out9": [1.0, 2.5], "out11": null,
        })
    );
    let out = f
        .run(&[
            "test::echo",
            "--in",
            "IN",
            "self=@a",
            "pad=[4, 5]",
            "s=-2.5",
            "eps=3",
            "dtype=long",
            "device=cpu",
            "mode=x=y",
            "generator=42",
        ])
        .unwrap();
    let v = json(&out);
    assert_eq!(v["out0"], serde_json::json!([4, 5]));
    assert_eq!(v["out1"], serde_json::json!(3.0));
    assert_eq!(v["out2"], serde_json::json!(-2.5));
    assert_eq!(v["out3"], "int64");
    assert_eq!(v["out6"], "cpu");
    assert_eq!(v["out7"], "x=y");
    assert_eq!(v["out11"], "Generator(device=cpu, initial_seed=42)");
    let v = json(
        &f.run(&["test::echo", "--in", "IN", "self=@a", "s=7", "eps=nan"])
            .unwrap(),
    );
    assert_eq!((&v["out1"], &v["out2"]), (&"nan".into(), &7.into()));
}

#[test]
fn tensor_lists_are_outi_j() {
    let f = fixture();
    let out = f
        .run(&[
            "test::lists",
            "--in",
            "IN",
            "--out",
            "OUT",
            "tensors=[@a, @c]",
            "maybe=[None,@b]",
            "n=2",
        ])
        .unwrap();
    assert_eq!(out, "{\"out2\":2}\n");
    let o = f.output();
    assert_eq!(o.keys().collect::<Vec<_>>(), ["out0.0", "out0.1", "out1.1"]);
    assert_eq!(o["out0.1"].to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0]);
    assert_eq!(
        o["out1.1"].to_vec::<f32>().unwrap(),
        [10.0, 20.0, 30.0, 40.0]
    );
    let bytes = std::fs::read(f.dir.join("out.safetensors")).unwrap();
    let meta = safetensors_metadata(&bytes).unwrap().unwrap();
    assert_eq!(
        (meta["out0"].as_str(), meta["out1"].as_str()),
        ("Tensor[2]", "Tensor?[2]")
    );
    let out = f
        .run(&[
            "test::lists",
            "--in",
            "IN",
            "tensors=[]",
            "maybe=[@c]",
            "n=0",
        ])
        .unwrap();
    assert_eq!(out, "out1.0 = tensor([1., 2., 3.])\n{\"out2\":0}\n");
}

#[test]
fn json_objects_keep_return_order() {
    let entries: Vec<(String, serde_json::Value)> = (0..12)
        .map(|i| (format!("out{i}"), serde_json::Value::from(i)))
        .collect();
    let s = json_object(&entries);
    assert!(s.starts_with("{\"out0\":0,\"out1\":1,\"out2\":2,"), "{s}");
    assert!(s.ends_with("\"out11\":11}"), "{s}");
    assert_eq!(json_object(&[]), "{}");
}
