//! A traced graph re-runs through the dispatcher on new inputs with eager's results: joint
//! graphs (forward and backward), views and in-place writes, factories and constants, a
//! training step with its optimizer; composite operators reaching the tracer; tensors made
//! without an operator; errors; the mode stack.

use std::rc::Rc;

use switchboard_autograd::AutogradTensor;
use switchboard_cpu as _;
use switchboard_dispatcher::{AutoDispatchBelowADInplaceOrView, Result};
use switchboard_modes::{mode_stack_len, push_mode, LoggingMode};
use switchboard_nn::{mlp, Module, Optimizer, Sgd};
use switchboard_ops::{self as ops, TensorOps};
use switchboard_tensor::Tensor;
use switchboard_trace::{trace, Traced, Tracer};

fn values(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

fn assert_same(a: &[Tensor], b: &[Tensor]) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert_eq!(x.sizes(), y.sizes(), "output {i}");
        assert_eq!(values(x), values(y), "output {i}");
    }
}

/// Deep copies, as new leaves that require grad when `grad`.
fn copies(ts: &[Tensor], grad: bool) -> Vec<Tensor> {
    ts.iter()
        .map(|t| {
            let c = t.deep_clone().unwrap();
            if grad && t.dtype().is_floating_point() {
                c.requires_grad_(true).unwrap()
            } else {
                c
            }
        })
        .collect()
}

/// linear -> relu -> linear -> cross_entropy, backward; the loss and the gradients.
fn mlp_step(t: &[Tensor]) -> Result<Vec<Tensor>> {
    let h = ops::linear_with(&t[0], &t[2], ops::LinearOptions::default().bias(&t[3]))?.relu()?;
    let logits = ops::linear_with(&h, &t[4], ops::LinearOptions::default().bias(&t[5]))?;
    let loss = ops::cross_entropy_loss(&logits, &t[1])?;
    loss.backward()?;
    let mut out = vec![loss];
    out.extend(t[2..].iter().map(|p| p.grad().unwrap()));
    Ok(out)
}

fn mlp_inputs() -> Result<Vec<Tensor>> {
    Ok(vec![
        ops::randn(&[8, 16])?,
        ops::randint(5, &[8])?,
        ops::randn(&[32, 16])?,
        ops::randn(&[32])?,
        ops::randn(&[5, 32])?,
        ops::randn(&[5])?,
    ])
}

#[test]
fn joint_graph_replays_forward_and_backward_on_new_inputs() -> Result<()> {
    let traced = trace(&copies(&mlp_inputs()?, true), mlp_step)?;
    for _ in 0..2 {
        let new = mlp_inputs()?;
        let eager = mlp_step(&copies(&new, true))?;
        // The graph holds the backward calls: its inputs need not require grad.
        let replayed = traced.run(&new)?;
        assert_same(&replayed, &eager);
        assert!(!replayed[0].requires_grad());
    }
    Ok(())
}

fn views_and_in_place(t: &[Tensor]) -> Result<Vec<Tensor>> {
    let x = &t[0];
    let y = ops::transpose(x, 0, 1)?;
    let z = ops::reshape(&y, &[-1])?; // a copy: y is not viewable as 1-d
    let row = ops::select(&y, 0, 1)?; // a view of x
    x.mul_(&Tensor::wrapped_scalar(2.0))?;
    row.add_(&t[1])?; // writes x through a view of a view
    let flat = x.view(&[-1])?;
    let s = ops::sum_dim_int_list(&ops::mul(&z, &flat)?, Some(&[0]))?;
    let m = ops::cat(&[x.clone(), ops::t(&y)?])?.mean()?;
    let (mx, idx) = ops::max_dim(&y, 1)?;
    Ok(vec![s, m, y, mx, idx])
}

#[test]
fn views_and_in_place_writes_replay_with_eager_aliasing() -> Result<()> {
    let inputs = vec![ops::randn(&[3, 4])?, ops::randn(&[3])?];
    let traced = trace(&copies(&inputs, false), views_and_in_place)?;
    let new = vec![ops::randn(&[3, 4])?, ops::randn(&[3])?];
    let (a, b) = (copies(&new, false), copies(&new, false));
    let eager = views_and_in_place(&a)?;
    let replayed = traced.run(&b)?;
    assert_same(&eager[..3], &replayed[..3]);
    assert_eq!(values(&eager[3]), values(&replayed[3]));
    assert_eq!(eager[4].to_vec::<i64>()?, replayed[4].to_vec::<i64>()?);
    // The input was written in place, by the replay as by eager code.
    assert_eq!(values(&a[0]), values(&b[0]));
    assert_ne!(values(&b[0]), values(&new[0]));
    // The returned view is a view of the input, as eager's.
    assert!(switchboard_tensor::Storage::ptr_eq(
        replayed[2].storage(),
        b[0].storage()
    ));
    Ok(())
}

#[test]
fn factories_are_nodes_and_outside_tensors_are_constants() -> Result<()> {
    let outside = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3])?;
    let x = ops::randn(&[3])?;
    let traced = trace(std::slice::from_ref(&x), |t| {
        let ones = ops::ones(&[3])?;
        let y = ops::add(&ops::mul(&t[0], &outside)?, &ones)?;
        Ok(vec![y])
    })?;
    assert_eq!(
        traced.op_names(),
        ["aten::ones", "aten::mul.Tensor", "aten::add.Tensor"]
    );
    let constants: Vec<(usize, Tensor)> = traced.constants().map(|(i, c)| (i, c.clone())).collect();
    assert_eq!(constants.len(), 1);
    assert_eq!(constants[0].0, 1); // after the declared input
    assert_eq!(traced.num_inputs(), 1);
    assert!(traced.to_string().contains("# constants"));
    // The constant is the value the trace read: later writes to the original do not count.
    outside.mul_(&Tensor::wrapped_scalar(10.0))?;
    let x2 = Tensor::from_vec(vec![1.0f32, 1.0, 2.0], &[3])?;
    assert_eq!(values(&traced.run(&[x2])?[0]), [2.0, 3.0, 7.0]);
    Ok(())
}

#[test]
fn a_constant_the_graph_writes_starts_from_its_traced_value_in_every_run() -> Result<()> {
    let acc = ops::zeros(&[2])?;
    let traced = trace(&[ops::ones(&[2])?], |t| {
        acc.add_(&t[0])?;
        Ok(vec![ops::mul(&acc, &Tensor::wrapped_scalar(2.0))?])
    })?;
    let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2])?;
    assert_eq!(
        values(&traced.run(std::slice::from_ref(&x))?[0]),
        [2.0, 4.0]
    );
    assert_eq!(values(&traced.run(&[x])?[0]), [2.0, 4.0]);
    assert_eq!(values(&acc), [1.0, 1.0]); // the trace ran the program once, eagerly
    Ok(())
}

/// One step: forward, cross-entropy, zero_grad, backward, SGD with momentum.
fn train_step(model: &dyn Module, opt: &mut Sgd, x: &Tensor, y: &Tensor) -> Result<Tensor> {
    let loss = ops::cross_entropy_loss(&model.forward(x)?, y)?;
    opt.zero_grad();
    loss.backward()?;
    opt.step()?;
    Ok(loss)
}

#[test]
fn a_training_step_replays_on_another_model_with_the_same_state() -> Result<()> {
    let x = ops::randn(&[6, 8])?;
    let y = Tensor::from_vec(vec![0i64, 1, 2, 0, 1, 2], &[6])?;
    let (traced_model, eager_model, replay_model) = (
        mlp(&[8, 12, 3], 7)?,
        mlp(&[8, 12, 3], 7)?,
        mlp(&[8, 12, 3], 7)?,
    );
    let mut traced_opt = Sgd::new(traced_model.parameters(), 0.1).momentum(0.9);
    let mut eager_opt = Sgd::new(eager_model.parameters(), 0.1).momentum(0.9);
    let mut replay_opt = Sgd::new(replay_model.parameters(), 0.1).momentum(0.9);
    // Step 1 eagerly on all three: the momentum buffers exist from then on.
    for (m, o) in [
        (&traced_model, &mut traced_opt),
        (&eager_model, &mut eager_opt),
        (&replay_model, &mut replay_opt),
    ] {
        train_step(m, o, &x, &y)?;
    }
    // Step 2: traced on one model (it runs eagerly too), eager on another.
    let tracer = Tracer::start();
    for p in traced_model.parameters() {
        tracer.input(&p)?;
    }
    tracer.input(&x)?;
    tracer.input(&y)?;
    let loss = train_step(&traced_model, &mut traced_opt, &x, &y)?;
    let traced = tracer.finish(std::slice::from_ref(&loss))?;
    let eager_loss = train_step(&eager_model, &mut eager_opt, &x, &y)?;
    // The momentum buffers were made before the trace: they are its constants. The
    // momentum each `buf.mul_(momentum)` reads is a wrapped number: a literal, as in
    // make_fx's `mul_.Tensor(buf, 0.9)`.
    assert_eq!(traced.constants().count(), 4);
    assert!(traced.to_string().contains(", 0.9)"), "{traced}");
    let ops = traced.op_names();
    assert!(ops.contains(&"aten::threshold_backward".to_string()));
    // PyTorch's SGD from the second step on, per parameter: `buf.mul_(momentum).add_(grad)`,
    // then `p.add_(buf, alpha=-lr)`.
    let per_parameter = [
        "aten::mul_.Tensor",
        "aten::add_.Tensor",
        "aten::add_.Tensor",
    ];
    assert_eq!(ops[ops.len() - 12..], per_parameter.repeat(4));
    // The graph on the third model's parameters: the same step.
    let mut inputs = replay_model.parameters();
    inputs.extend([x.clone(), y.clone()]);
    let replayed = traced.run(&inputs)?;
    assert_eq!(values(&replayed[0]), values(&eager_loss));
    assert_eq!(values(&loss), values(&eager_loss));
    for ((a, b), c) in replay_model
        .parameters()
        .iter()
        .zip(eager_model.parameters())
        .zip(traced_model.parameters())
    {
        assert_eq!(values(a), values(&b));
        assert_eq!(values(&c), values(&b));
    }
    Ok(())
}

#[test]
fn a_composite_operator_below_autograd_is_decomposed() -> Result<()> {
    let (x, w, b) = (
        ops::randn(&[2, 3])?,
        ops::randn(&[4, 3])?,
        ops::randn(&[4])?,
    );
    let traced = trace(&[x.clone(), w.clone(), b.clone()], |t| {
        // With the Autograd keys excluded, `linear` (CompositeImplicitAutograd) reaches the
        // tracer itself, which runs its decomposition with the tracer on, as make_fx's
        // `func.decompose()`.
        let _below = AutoDispatchBelowADInplaceOrView::new();
        let y = ops::linear_with(&t[0], &t[1], ops::LinearOptions::default().bias(&t[2]))?;
        Ok(vec![ops::log_softmax(&y, 1)?])
    })?;
    assert_eq!(
        traced.op_names(),
        ["aten::t", "aten::addmm", "aten::_log_softmax"]
    );
    let eager = ops::log_softmax(
        &ops::linear_with(&x, &w, ops::LinearOptions::default().bias(&b))?,
        1,
    )?;
    assert_same(&traced.run(&[x, w, b])?, &[eager]);
    Ok(())
}

#[test]
fn tensors_made_without_an_operator_are_the_values_they_alias() -> Result<()> {
    let x = ops::randn(&[3, 2])?;
    let traced = trace(std::slice::from_ref(&x), |t| {
        let e = t[0].exp()?;
        let d = e.detach(); // a shallow alias, no call: the value of `e`
        let tr = switchboard_tensor::RawOps::transpose(&e, 0, 1)?; // a view made by hand: `as_strided` of `e`
        Ok(vec![
            ops::add(&d, &Tensor::wrapped_scalar(1.0))?,
            ops::mm(&tr, &d)?,
        ])
    })?;
    assert_eq!(
        traced.op_names(),
        [
            "aten::exp",
            "aten::add.Tensor",
            "aten::as_strided",
            "aten::mm"
        ]
    );
    // The wrapped number is a literal of the graph, as in make_fx's (`add.Tensor(exp, 1.0)`).
    assert_eq!(traced.constants().count(), 0);
    assert!(
        traced
            .to_string()
            .contains("aten.add.Tensor(exp, 1.0, alpha=1)"),
        "{traced}"
    );
    let x2 = ops::randn(&[3, 2])?;
    let e = x2.exp()?;
    let eager = [
        ops::add(&e, &Tensor::wrapped_scalar(1.0))?,
        ops::mm(&ops::t(&e)?, &e)?,
    ];
    assert_same(&traced.run(&[x2])?, &eager);
    Ok(())
}

#[test]
fn printing_and_exports_show_every_call_in_order() -> Result<()> {
    let traced: Traced = trace(&copies(&mlp_inputs()?, true), mlp_step)?;
    let code = traced.to_string();
    assert!(code.starts_with("def graph(arg0: \"f32[8, 16]\", arg1: \"i64[8]\""));
    assert!(
        code.contains("= aten.addmm.default(arg3, arg0, t, beta=1, alpha=1)"),
        "{code}"
    );
    assert!(code.contains("aten.nll_loss_forward.default(_log_softmax, arg1, None, 1, -100)"));
    let j = traced.to_json();
    let nodes = j["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), traced.op_names().len());
    assert_eq!(nodes[1]["op"], "aten::addmm");
    assert_eq!(nodes[1]["inputs"][0]["value"], "arg3");
    assert_eq!(nodes[1]["inputs"][3]["name"], "beta");
    assert_eq!(nodes[1]["inputs"][3]["const"], 1);
    assert_eq!(nodes[1]["outputs"][0]["shape"], serde_json::json!([8, 32]));
    assert_eq!(nodes[1]["outputs"][0]["dtype"], "float32");
    assert_eq!(j["inputs"][1]["shape"], serde_json::json!([8]));
    let dot = traced.to_dot();
    assert!(dot.starts_with("digraph graph {"));
    assert!(dot.contains("aten::threshold_backward"));
    Ok(())
}

#[test]
fn bad_inputs_are_errors() -> Result<()> {
    let x = ops::randn(&[2, 3])?;
    let traced = trace(std::slice::from_ref(&x), |t| Ok(vec![t[0].relu()?]))?;
    let e = traced.run(&[]).unwrap_err().to_string();
    assert!(
        e.contains("the graph takes 1 inputs but 0 tensors were given"),
        "{e}"
    );
    let e = traced.run(&[ops::randn(&[3, 2])?]).unwrap_err().to_string();
    assert!(e.contains("traced for f32[2, 3]"), "{e}");
    // An input declared twice, or after the trace used it.
    let e = trace(&[x.clone(), x.clone()], |t| Ok(vec![t[0].clone()]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("already part of the trace"), "{e}");
    Ok(())
}

#[test]
fn the_tracer_is_a_mode_among_others() -> Result<()> {
    let x = ops::randn(&[2])?;
    let log = Rc::new(LoggingMode::new());
    {
        let _log = push_mode(log.clone());
        let traced = trace(std::slice::from_ref(&x), |t| Ok(vec![t[0].neg()?.exp()?]))?;
        assert_eq!(traced.op_names(), ["aten::neg", "aten::exp"]);
    }
    // The tracer, on top, ran each call: the logging mode below it saw them.
    assert_eq!(log.lines().len(), 2);
    {
        let tracer = Tracer::start();
        assert_eq!(mode_stack_len(), 1);
        x.exp()?;
        drop(tracer); // never finished: popped all the same
    }
    assert_eq!(mode_stack_len(), 0);
    Ok(())
}
