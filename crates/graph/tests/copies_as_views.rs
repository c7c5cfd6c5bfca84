//! Plans run a `*_copy` call as its view when no one can tell the difference (Note [Copies
//! that run as views]): a probe operator reports the strides its argument has when it runs.

use std::sync::OnceLock;

use switchboard_dispatcher::{
    Dispatcher, IValue, KernelFunction, Library, LibraryKind, OperatorHandle, Result,
};
use switchboard_graph::{Arg, Graph, Output, Plan, RunOptions, TensorMeta, Value};
use switchboard_keys::{DispatchKey, DispatchKeySet};
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

use switchboard_cpu as _;

fn op(name: &str) -> OperatorHandle {
    Dispatcher::global().find_schema_or_throw(name).unwrap()
}

/// `cav::strides(x)`: a fresh int64 tensor of `x`'s strides when the call runs.
fn strides_probe() -> OperatorHandle {
    static PROBE: OnceLock<OperatorHandle> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            let mut lib =
                Library::new(Dispatcher::global(), LibraryKind::Def, "cav", None).unwrap();
            lib.def("strides(Tensor x) -> Tensor").unwrap();
            let kernel = |x: &Tensor| -> Result<Tensor> {
                let s = x.strides().to_vec();
                let n = s.len() as i64;
                Ok(Tensor::from_vec(s, &[n])?)
            };
            lib.impl_(
                "strides",
                Some(DispatchKey::CPU),
                KernelFunction::from_fn(kernel),
            )
            .unwrap();
            lib.leak();
            op("cav::strides")
        })
        .clone()
}

fn checked() -> RunOptions {
    RunOptions {
        keys: Some(DispatchKeySet::from_key(DispatchKey::CPU)),
        check_metadata: true,
        ..RunOptions::default()
    }
}

fn x23() -> Tensor {
    Tensor::from_vec((0..6).map(|v| v as f32).collect(), &[2, 3]).unwrap()
}

/// Adds `t_copy(v)` to `g`, recorded as PyTorch's Meta kernel has it (contiguous).
fn t_copy(g: &mut Graph, v: Value, of: &Tensor) -> (Value, Tensor) {
    let copied = ops::t_copy(of).unwrap();
    let n = g
        .add_call(
            op("aten::t_copy"),
            vec![Arg::Value(v)],
            vec![Output::ret(0, TensorMeta::of(&copied))],
        )
        .unwrap();
    (g.value(n, 0), copied)
}

/// Adds the probe of `v` to `g`.
fn probe(g: &mut Graph, v: Value, rank: i64) -> Value {
    let meta = TensorMeta::of(&Tensor::from_vec(vec![0i64; rank as usize], &[rank]).unwrap());
    let n = g
        .add_call(
            strides_probe(),
            vec![Arg::Value(v)],
            vec![Output::ret(0, meta)],
        )
        .unwrap();
    g.value(n, 0)
}

fn strides_seen(t: &Tensor) -> Vec<i64> {
    t.to_vec::<i64>().unwrap()
}

#[test]
fn a_copy_only_pure_calls_read_runs_as_the_view() {
    let x = x23();
    let mut g = Graph::new();
    let a = g.add_input(TensorMeta::of(&x));
    let (c, copied) = t_copy(&mut g, a, &x);
    let p = probe(&mut g, c, 2);
    let w = Tensor::from_vec((0..6).map(|v| v as f32 * 0.5).collect(), &[2, 3]).unwrap();
    let wv = g.add_input(TensorMeta::of(&w));
    let prod = ops::mm(&copied, &w).unwrap();
    let m = g
        .add_call(
            op("aten::mm"),
            vec![Arg::Value(c), Arg::Value(wv)],
            vec![Output::ret(0, TensorMeta::of(&prod))],
        )
        .unwrap();
    g.set_outputs(vec![p, g.value(m, 0)]).unwrap();
    let plan = Plan::new(g.clone());
    let r = plan.run(vec![x.clone(), w.clone()], &checked()).unwrap();
    // The probe saw `t(x)`, transposed strides; `mm` got eager's operand.
    assert_eq!(strides_seen(&r[0]), [1, 3]);
    let eager = ops::mm(&ops::t(&x).unwrap(), &w).unwrap();
    assert_eq!(
        r[1].to_vec::<f32>().unwrap(),
        eager.to_vec::<f32>().unwrap()
    );
    assert!(r[1].is_contiguous());

    // Without the metadata check, or replayed call by call, the copy runs as recorded.
    let r = plan
        .run(
            vec![x.clone(), w.clone()],
            &RunOptions {
                check_metadata: false,
                ..checked()
            },
        )
        .unwrap();
    assert_eq!(strides_seen(&r[0]), [2, 1]);
    let r = Plan::every_call(g).run(vec![x, w], &checked()).unwrap();
    assert_eq!(strides_seen(&r[0]), [2, 1]);
}

#[test]
fn a_copy_someone_could_tell_from_a_view_runs_as_a_copy() {
    let x = x23();
    // Its result is an output of the graph: the caller gets fresh contiguous memory.
    let mut g = Graph::new();
    let a = g.add_input(TensorMeta::of(&x));
    let (c, _) = t_copy(&mut g, a, &x);
    let p = probe(&mut g, c, 2);
    g.set_outputs(vec![p, c]).unwrap();
    let r = Plan::new(g).run(vec![x.clone()], &checked()).unwrap();
    assert_eq!(strides_seen(&r[0]), [2, 1]);
    assert_eq!(r[1].strides(), &[2, 1]);

    // Its result is written: the input must not change.
    let mut g = Graph::new();
    let a = g.add_input(TensorMeta::of(&x));
    let (c, copied) = t_copy(&mut g, a, &x);
    let plus_one = vec![IValue::Double(1.0), IValue::Int(1)];
    let v = call(&mut g, "aten::add_.Scalar", c, plus_one.clone(), &copied);
    let p = probe(&mut g, v, 2);
    g.set_outputs(vec![p]).unwrap();
    let before = x.to_vec::<f32>().unwrap();
    let r = Plan::new(g).run(vec![x.clone()], &checked()).unwrap();
    assert_eq!(strides_seen(&r[0]), [2, 1]);
    assert_eq!(x.to_vec::<f32>().unwrap(), before);

    // Its input is written later: the copy must hold the old values.
    let mut g = Graph::new();
    let a = g.add_input(TensorMeta::of(&x));
    let (c, copied) = t_copy(&mut g, a, &x);
    call(&mut g, "aten::add_.Scalar", a, plus_one, &x);
    let m = call(
        &mut g,
        "aten::mul.Scalar",
        c,
        vec![IValue::Double(1.0)],
        &copied,
    );
    g.set_outputs(vec![m]).unwrap();
    let r = Plan::new(g)
        .run(vec![x.deep_clone().unwrap()], &checked())
        .unwrap();
    assert_eq!(
        r[0].to_vec::<f32>().unwrap(),
        copied.to_vec::<f32>().unwrap()
    );

    // A view reads its result: the view would escape the call.
    let mut g = Graph::new();
    let a = g.add_input(TensorMeta::of(&x));
    let (c, copied) = t_copy(&mut g, a, &x);
    let n = g
        .add_call(
            op("aten::t"),
            vec![Arg::Value(c)],
            vec![Output::ret(0, TensorMeta::of(&ops::t(&copied).unwrap()))],
        )
        .unwrap();
    let v = g.value(n, 0);
    let p = probe(&mut g, v, 2);
    g.set_outputs(vec![p]).unwrap();
    let r = Plan::new(g).run(vec![x], &checked()).unwrap();
    assert_eq!(strides_seen(&r[0]), [1, 2]);
}

/// Adds a call of `name` on `v` with constants `consts`, recorded as `like`.
fn call(g: &mut Graph, name: &str, v: Value, consts: Vec<IValue>, like: &Tensor) -> Value {
    let mut args = vec![Arg::Value(v)];
    args.extend(consts.into_iter().map(Arg::Const));
    let n = g
        .add_call(op(name), args, vec![Output::ret(0, TensorMeta::of(like))])
        .unwrap();
    g.value(n, 0)
}

#[test]
fn copies_of_views_run_as_views_of_views_where_the_layout_allows() {
    let x = x23();
    let xt = ops::contiguous(&ops::t(&x).unwrap()).unwrap();
    let xt_values = xt.to_vec::<f32>().unwrap();
    let mut g = Graph::new();
    let a = g.add_input(TensorMeta::of(&x));
    let (c, copied) = t_copy(&mut g, a, &x);
    // `unsqueeze_copy(t_copy(x), 0)` runs as `unsqueeze(t(x), 0)`: eager's view of a view.
    let u = call(
        &mut g,
        "aten::unsqueeze_copy",
        c,
        vec![IValue::Int(0)],
        &ops::unsqueeze_copy(&copied, 0).unwrap(),
    );
    let pu = probe(&mut g, u, 3);
    // `view` refuses the transposed layout: the copy runs.
    let flat = call(
        &mut g,
        "aten::view_copy",
        c,
        vec![IValue::IntList([6].into_iter().collect())],
        &ops::view_copy(&copied, &[6]).unwrap(),
    );
    let doubled = |g: &mut Graph, v: Value, like: &Tensor| {
        call(g, "aten::mul.Scalar", v, vec![IValue::Double(2.0)], like)
    };
    let flat2 = doubled(&mut g, flat, &ops::view_copy(&copied, &[6]).unwrap());
    g.set_outputs(vec![pu, flat2]).unwrap();
    let r = Plan::new(g).run(vec![x.clone()], &checked()).unwrap();
    assert_eq!(strides_seen(&r[0]), [3, 1, 3]);
    let twice: Vec<f32> = xt_values.iter().map(|v| v * 2.0).collect();
    assert_eq!(r[1].to_vec::<f32>().unwrap(), twice);

    // `as_strided_copy` reads its argument's storage, where the view would find `x`'s: the
    // copy it reads runs as a copy.
    let mut g = Graph::new();
    let a = g.add_input(TensorMeta::of(&x));
    let (c, copied) = t_copy(&mut g, a, &x);
    let pc = probe(&mut g, c, 2);
    let strided = call(
        &mut g,
        "aten::as_strided_copy",
        c,
        vec![
            IValue::IntList([3, 2].into_iter().collect()),
            IValue::IntList([2, 1].into_iter().collect()),
            IValue::None,
        ],
        &copied,
    );
    let strided2 = call(
        &mut g,
        "aten::mul.Scalar",
        strided,
        vec![IValue::Double(2.0)],
        &copied,
    );
    g.set_outputs(vec![pc, strided2]).unwrap();
    let r = Plan::new(g).run(vec![x], &checked()).unwrap();
    assert_eq!(strides_seen(&r[0]), [2, 1]);
    assert_eq!(r[1].to_vec::<f32>().unwrap(), twice);
}
