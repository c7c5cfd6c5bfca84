//! Functional tensors below autograd (Note [Functional tensors below autograd]), used as a
//! user of XLA tensors uses them: persistent functional parameters trained by a loop of
//! forward, loss, backward and SGD. Autograd records on the functional tensors (leaf
//! parameters, `.grad`, saved tensors and their versions, views and `_base`); the calls that
//! reach the values, recorded by a trace, are all functional, for the forward, the backward and
//! the optimizer alike.

use switchboard_autograd::{no_grad, AutogradTensor};
use switchboard_cpu as _;
use switchboard_dispatcher::{Dispatcher, Result, SchemaKind};
use switchboard_functionalize::{
    from_functional, functionalize, is_functional_tensor, to_functional_below_autograd, Remove,
};
use switchboard_ops::{self as ops, TensorOps};
use switchboard_tensor::{ScalarType, Tensor};
use switchboard_trace::Tracer;

/// Whether operator `name` (`aten::add_.Tensor`) writes an argument or returns an alias of one.
fn writes_or_views(name: &str) -> bool {
    let op = Dispatcher::global().find_schema(name).unwrap();
    let sem = op.semantics().unwrap();
    sem.kind != SchemaKind::Functional || sem.is_view
}

/// The operators `f` calls on the values (the calls below the layer), in order.
fn calls_on_values(f: impl FnOnce() -> Result<Vec<Tensor>>) -> Vec<String> {
    let tracer = Tracer::start();
    let outputs = f().unwrap();
    tracer.finish(&outputs).unwrap().op_names()
}

fn no_writes_or_views(phase: &str, names: &[String]) {
    let bad: Vec<&String> = names.iter().filter(|n| writes_or_views(n)).collect();
    assert!(
        bad.is_empty(),
        "{phase}: {bad:?} reach the values in {names:?}"
    );
    assert!(!names.is_empty(), "{phase}: no call reached the values");
}

fn values(t: &Tensor) -> Vec<f32> {
    from_functional(t).unwrap().to_vec::<f32>().unwrap()
}

fn grad_values(t: &Tensor) -> Vec<f32> {
    values(&t.grad().expect("a gradient"))
}

fn ramp(n: i64, scale: f32, shift: f32, sizes: &[i64]) -> Tensor {
    Tensor::from_vec((0..n).map(|v| (v as f32 - shift) * scale).collect(), sizes).unwrap()
}

/// A two-layer MLP's data and parameters: `x`, the class targets, `[w1, b1, w2, b2]`.
fn mlp_data() -> (Tensor, Tensor, Vec<Tensor>) {
    let x = ramp(12, 0.1, 0.0, &[4, 3]);
    let target = Tensor::from_vec(vec![0i64, 1, 1, 0], &[4]).unwrap();
    let params = vec![
        ramp(15, 0.1, 7.0, &[5, 3]),
        ramp(5, 0.05, 2.0, &[5]),
        ramp(10, 0.1, 4.0, &[2, 5]),
        ramp(2, 0.1, 0.5, &[2]),
    ];
    (x, target, params)
}

fn forward(x: &Tensor, target: &Tensor, p: &[Tensor]) -> Result<Tensor> {
    let h = ops::linear_with(x, &p[0], ops::LinearOptions::default().bias(&p[1]))?.relu()?;
    let logits = ops::linear_with(&h, &p[2], ops::LinearOptions::default().bias(&p[3]))?;
    ops::cross_entropy_loss(&logits, target)
}

/// SGD with `p -= lr * p.grad` in place under no_grad, then `zero_grad()` (set to none).
fn sgd_step(params: &[Tensor], lr: f64) -> Result<()> {
    let _no_grad = no_grad();
    for p in params {
        let g = p.grad().expect("a gradient");
        p.sub_(&g.mul_scalar(lr)?)?;
    }
    for p in params {
        p.set_grad(None);
    }
    Ok(())
}

/// What each step of training gives: the loss, the gradients, the parameters after the update.
type Step = (f32, Vec<Vec<f32>>, Vec<Vec<f32>>);

fn train(functional: bool, steps: usize) -> Vec<Step> {
    let (x, target, init) = mlp_data();
    let wrap = |t: &Tensor| {
        if functional {
            to_functional_below_autograd(t).unwrap()
        } else {
            t.clone()
        }
    };
    let (x, target) = (wrap(&x), wrap(&target));
    let params: Vec<Tensor> = init
        .iter()
        .map(|t| wrap(t).requires_grad_(true).unwrap())
        .collect();
    let mut out = Vec::new();
    for _ in 0..steps {
        let loss = forward(&x, &target, &params).unwrap();
        loss.backward().unwrap();
        let grads = params.iter().map(grad_values).collect();
        sgd_step(&params, 0.5).unwrap();
        let loss = from_functional(&loss).unwrap().item().unwrap().to_f64() as f32;
        out.push((loss, grads, params.iter().map(values).collect()));
    }
    out
}

#[test]
fn a_training_loop_on_functional_parameters_matches_eager() {
    let eager = train(false, 3);
    let functional = train(true, 3);
    assert!(eager[2].0 < eager[0].0, "the loss goes down: {eager:?}");
    for (step, (f, e)) in functional.iter().zip(&eager).enumerate() {
        // The losses are eager's to the bit. The gradients and updates differ in the last bits
        // at most: a `t` view given to `mm` is a strided operand eagerly, a contiguous
        // `t_copy` here, and the two layouts take different GEMM paths (summation orders).
        assert_eq!(f.0, e.0, "the loss of step {step}");
        for (what, fs, es) in [("gradient", &f.1, &e.1), ("parameter", &f.2, &e.2)] {
            for (i, (a, b)) in fs.iter().zip(es).enumerate() {
                let close = a.len() == b.len()
                    && a.iter()
                        .zip(b)
                        .all(|(x, y)| (x - y).abs() <= 1e-6 * (1.0 + y.abs()));
                assert!(close, "{what} {i} of step {step}: {a:?} vs eager {b:?}");
            }
        }
    }
}

#[test]
fn parameters_stay_the_same_leaves_across_updates() {
    let p = to_functional_below_autograd(&ramp(3, 1.0, 0.0, &[3]))
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    let handle = p.clone();
    p.mul(&p).unwrap().sum().unwrap().backward().unwrap();
    let g = p.grad().unwrap();
    assert!(
        is_functional_tensor(&g),
        "the gradient is a functional tensor"
    );
    assert_eq!(values(&g), [0.0, 2.0, 4.0]);
    {
        let _no_grad = no_grad();
        let version = p.version();
        p.sub_(&g).unwrap();
        assert_eq!(
            p.version(),
            version + 1,
            "ADInplaceOrView bumps the wrapper"
        );
        // `.grad` accumulates in place: the same gradient tensor, a new value.
        g.add_(&g).unwrap();
        assert!(Tensor::ptr_eq(&p.grad().unwrap(), &g));
        assert_eq!(grad_values(&p), [0.0, 4.0, 8.0]);
    }
    assert!(Tensor::ptr_eq(&p, &handle));
    assert!(p.requires_grad() && p.is_leaf() && p.grad_fn().is_none());
    assert_eq!(values(&p), [0.0, -1.0, -2.0]);
    // The value under it never requires grad: autograd lives on the functional tensor.
    assert!(!from_functional(&p).unwrap().requires_grad());
    // A second backward accumulates into the same `.grad`.
    p.sum().unwrap().backward().unwrap();
    assert!(Tensor::ptr_eq(&p.grad().unwrap(), &g));
    assert_eq!(grad_values(&p), [1.0, 5.0, 9.0]);
    // A leaf that requires grad cannot be written with grad mode on, as in eager.
    let err = p.add_(&g).unwrap_err().to_string();
    assert!(
        err.contains("a leaf Variable that requires grad is being used in an in-place operation"),
        "{err}"
    );
}

#[test]
fn forward_backward_and_optimizer_reach_the_values_as_functional_calls() {
    let (x, target, init) = mlp_data();
    let x = to_functional_below_autograd(&x).unwrap();
    let target = to_functional_below_autograd(&target).unwrap();
    let params: Vec<Tensor> = init
        .iter()
        .map(|t| {
            to_functional_below_autograd(t)
                .unwrap()
                .requires_grad_(true)
                .unwrap()
        })
        .collect();
    let mut loss = None;
    let fwd = calls_on_values(|| {
        let l = forward(&x, &target, &params)?;
        loss = Some(l.clone());
        Ok(vec![from_functional(&l)?])
    });
    no_writes_or_views("forward", &fwd);
    assert!(fwd.iter().any(|n| n == "aten::addmm"), "{fwd:?}");
    assert!(fwd.iter().any(|n| n == "aten::t_copy"), "{fwd:?}");
    let loss = loss.unwrap();
    let bwd = calls_on_values(|| {
        loss.backward()?;
        params
            .iter()
            .map(|p| from_functional(&p.grad().unwrap()))
            .collect()
    });
    no_writes_or_views("backward", &bwd);
    assert!(bwd.iter().any(|n| n == "aten::mm"), "{bwd:?}");
    // A second backward accumulates the gradients: `add_` on `.grad` becomes `add`.
    forward(&x, &target, &params).unwrap().backward().unwrap();
    let opt = calls_on_values(|| {
        sgd_step(&params, 0.1)?;
        params.iter().map(from_functional).collect()
    });
    no_writes_or_views("optimizer", &opt);
    assert!(opt.iter().any(|n| n == "aten::sub.Tensor"), "{opt:?}");
    // Eagerly the same step writes the parameters in place.
    let eager: Vec<Tensor> = init
        .iter()
        .map(|t| t.deep_clone().unwrap().requires_grad_(true).unwrap())
        .collect();
    let (x, target, _) = mlp_data();
    forward(&x, &target, &eager).unwrap().backward().unwrap();
    let eager_opt = calls_on_values(|| {
        sgd_step(&eager, 0.1)?;
        Ok(eager.iter().map(|p| p.detach()).collect())
    });
    assert!(
        eager_opt.iter().any(|n| n == "aten::sub_.Tensor"),
        "{eager_opt:?}"
    );
}

/// `y = w * 1; y[1] *= 2` (through a view of a tensor requiring grad), then a loss of `y`:
/// the base's value, its history (CopySlices) and the gradient of `w`.
fn write_through_a_view(w: &Tensor) -> Result<(Tensor, Tensor)> {
    let y = w.mul_scalar(1.0)?;
    let row = y.select(0, 1)?;
    assert!(Tensor::ptr_eq(&row.base().expect("a view"), &y), "_base");
    row.mul_scalar_(2.0)?;
    let col = y.t()?.select(0, 2)?; // read through another view, after the write
    let loss = y.mul(&y)?.sum()?.add(&col.sum()?)?;
    Ok((y, loss))
}

/// Writes through views that the `*_copy` inverses undo (`view`, `unsqueeze`, `permute`), and a
/// loss of the base.
fn write_through_reshaping_views(w: &Tensor) -> Result<(Tensor, Tensor)> {
    let y = w.mul_scalar(1.0)?;
    y.view(&[3, 2])?.unsqueeze(0)?.mul_scalar_(3.0)?;
    y.permute(&[1, 0])?.select(0, 0)?.add_scalar_(1.0)?;
    let loss = y.mul(&y)?.sum()?;
    Ok((y, loss))
}

#[test]
fn a_view_written_in_place_backpropagates_as_in_eager() {
    check_writes_through_views(write_through_a_view, "aten::select_scatter");
    check_writes_through_views(write_through_reshaping_views, "aten::view_copy");
}

fn check_writes_through_views(program: fn(&Tensor) -> Result<(Tensor, Tensor)>, expected: &str) {
    let init = ramp(6, 1.0, 0.0, &[2, 3]);
    let eager_w = init.deep_clone().unwrap().requires_grad_(true).unwrap();
    let (eager_y, eager_loss) = program(&eager_w).unwrap();
    eager_loss.backward().unwrap();
    let w = to_functional_below_autograd(&init)
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    let mut y_loss = None;
    let calls = calls_on_values(|| {
        let (y, loss) = program(&w)?;
        assert_eq!(y.grad_fn().unwrap().name(), "CopySlices");
        loss.backward()?;
        y_loss = Some((y, loss));
        Ok(vec![from_functional(&w.grad().unwrap())?])
    });
    let (y, loss) = y_loss.unwrap();
    assert_eq!(values(&y), eager_y.to_vec::<f32>().unwrap());
    assert_eq!(
        values(&loss),
        eager_loss.to_vec::<f32>().unwrap(),
        "the loss"
    );
    assert_eq!(
        grad_values(&w),
        eager_w.grad().unwrap().to_vec::<f32>().unwrap()
    );
    no_writes_or_views("writes through views and their backward", &calls);
    assert!(calls.iter().any(|n| n == expected), "{calls:?}");
}

#[test]
fn views_of_functional_tensors_have_eagers_geometry_and_share_its_version() {
    let w = to_functional_below_autograd(&ramp(6, 1.0, 0.0, &[2, 3])).unwrap();
    let row = w.select(0, 1).unwrap();
    let col = w.t().unwrap().select(0, 2).unwrap();
    assert_eq!((row.strides(), row.storage_offset()), (&[1][..], 3));
    assert_eq!((col.strides(), col.storage_offset()), (&[3][..], 2));
    assert!(row.is_alias_of(&w) && col.is_alias_of(&w));
    row.add_(&ops::ones(&[3]).unwrap()).unwrap();
    assert_eq!((w.version(), col.version()), (1, 1));
    assert_eq!(values(&col), [2.0, 6.0]);
    assert_eq!(values(&w), [0.0, 1.0, 2.0, 4.0, 5.0, 6.0]);
}

#[test]
fn a_saved_tensor_written_after_the_forward_fails_backward_as_in_eager() {
    let message = |functional: bool, through_view: bool| {
        let init = ramp(3, 1.0, 0.0, &[3]);
        let w = if functional {
            to_functional_below_autograd(&init).unwrap()
        } else {
            init
        };
        let w = w.requires_grad_(true).unwrap();
        let y = w.mul_scalar(2.0).unwrap();
        let z = y.mul(&y).unwrap(); // saves `y`
        if through_view {
            y.select(0, 0).unwrap().add_scalar_(1.0).unwrap();
        } else {
            y.add_scalar_(1.0).unwrap();
        }
        z.sum().unwrap().backward().unwrap_err().to_string()
    };
    for through_view in [false, true] {
        let eager = message(false, through_view);
        assert!(
            eager.contains("modified by an inplace operation"),
            "{eager}"
        );
        assert_eq!(message(true, through_view), eager, "view: {through_view}");
    }
}

#[test]
fn a_view_of_a_leaf_requiring_grad_cannot_be_written_as_in_eager() {
    let w = to_functional_below_autograd(&ramp(6, 1.0, 0.0, &[2, 3]))
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    let err = w.select(0, 0).unwrap().mul_scalar_(2.0).unwrap_err();
    assert!(
        err.to_string()
            .contains("a view of a leaf Variable that requires grad"),
        "{err}"
    );
}

#[test]
fn the_two_kinds_nest_and_the_transform_is_unchanged() {
    // Note [Functionalization over functional tensors]: a captured persistent functional
    // tensor is a constant of `f`; the call on it reaches its own layer.
    let persistent = to_functional_below_autograd(&ops::ones(&[2]).unwrap()).unwrap();
    let out = functionalize(
        |xs: &[Tensor]| Ok(vec![xs[0].add(&persistent)?]),
        Remove::Mutations,
    )(&[ops::ones(&[2]).unwrap()])
    .unwrap();
    assert!(
        is_functional_tensor(&out[0]),
        "a persistent tensor's result is one"
    );
    assert_eq!(
        from_functional(&out[0]).unwrap().to_vec::<f32>().unwrap(),
        [2.0, 2.0]
    );
    // The transform's tensors still carry no autograd key: autograd records on the values.
    let x = ops::ones(&[2]).unwrap().requires_grad_(true).unwrap();
    let out = functionalize(
        |xs: &[Tensor]| {
            let keys = xs[0].key_set();
            assert!(!keys.has(switchboard_dispatcher::DispatchKey::AutogradFunctionality));
            Ok(vec![xs[0].mul_scalar(3.0)?])
        },
        Remove::Mutations,
    )(std::slice::from_ref(&x))
    .unwrap();
    assert!(out[0].requires_grad() && !is_functional_tensor(&out[0]));
    assert_eq!(ScalarType::Float, out[0].dtype());
}

#[test]
fn calls_on_the_values_run_with_autograd_excluded() {
    use switchboard_functionalize::replace_value;
    // Even a value that requires grad (given by `replace_value`) takes no part in autograd:
    // the layer's calls on values run below it.
    let w = to_functional_below_autograd(&ops::ones(&[2]).unwrap()).unwrap();
    let leaf = ops::ones(&[2]).unwrap().requires_grad_(true).unwrap();
    replace_value(&w, &leaf).unwrap();
    let y = w.mul_scalar(2.0).unwrap();
    assert!(!y.requires_grad());
    assert!(!from_functional(&y).unwrap().requires_grad());
}

#[test]
fn autocast_casts_the_functional_tensors_above_the_layer() {
    use switchboard_tensor::Device;
    let a = ramp(6, 0.1, 0.0, &[2, 3]);
    let b = ramp(6, 0.1, 2.0, &[3, 2]);
    let run = |functional: bool| {
        let wrap = |t: &Tensor| {
            if functional {
                to_functional_below_autograd(t).unwrap()
            } else {
                t.clone()
            }
        };
        let (a, b) = (wrap(&a).requires_grad_(true).unwrap(), wrap(&b));
        let y =
            switchboard_autocast::autocast(Device::CPU, ScalarType::BFloat16, || ops::mm(&a, &b))
                .unwrap();
        assert_eq!(y.dtype(), ScalarType::BFloat16);
        ops::to(&y, ScalarType::Float)
            .unwrap()
            .sum()
            .unwrap()
            .backward()
            .unwrap();
        (
            values(&ops::to(&y, ScalarType::Float).unwrap()),
            grad_values(&a),
        )
    };
    assert_eq!(run(true), run(false));
}

/// The program every nesting test runs: writes `xs[0]` through a view, reads it whole.
fn write_a_row_then_add(xs: &[Tensor]) -> Result<Vec<Tensor>> {
    let row = ops::select(&ops::view(&xs[0], &[2, 3])?, 0, 1)?;
    ops::mul_scalar_(&row, 10.0)?;
    Ok(vec![ops::add(&xs[0], &xs[1])?])
}

/// Note [Functionalization over functional tensors]: `functionalize(f)` over persistent
/// functional tensors (a lazy device's) wraps them as any tensor. The result and the written
/// input are eager's, the result is a persistent functional tensor, and the calls that reach
/// the values are functional.
#[test]
fn functionalize_nests_over_persistent_functional_tensors() {
    let fresh = || [ramp(6, 1.0, 0.0, &[6]), ramp(6, 0.5, 0.0, &[6])];
    let (written, result) = ([0., 1., 2., 30., 40., 50.], [0., 1.5, 3., 31.5, 42., 52.5]);
    let eager_inputs = fresh();
    let eager = write_a_row_then_add(&eager_inputs).unwrap();
    assert_eq!(eager[0].to_vec::<f32>().unwrap(), result);
    assert_eq!(eager_inputs[0].to_vec::<f32>().unwrap(), written);
    let values = |t: &Tensor| from_functional(t).unwrap().to_vec::<f32>().unwrap();
    for remove in [Remove::Mutations, Remove::MutationsAndViews] {
        let persistent = |ts: [Tensor; 2]| ts.map(|t| to_functional_below_autograd(&t).unwrap());
        let inputs = persistent(fresh());
        let out = functionalize(write_a_row_then_add, remove)(&inputs).unwrap();
        assert!(is_functional_tensor(&out[0]), "{remove:?}");
        assert_eq!(values(&out[0]), result, "{remove:?}");
        assert_eq!(
            values(&inputs[0]),
            written,
            "{remove:?}: the input is written back"
        );
        assert_eq!(values(&inputs[1]), fresh()[1].to_vec::<f32>().unwrap());
        let inputs = persistent(fresh());
        let names = calls_on_values(|| functionalize(write_a_row_then_add, remove)(&inputs));
        no_writes_or_views(&format!("{remove:?}"), &names);
    }
}
