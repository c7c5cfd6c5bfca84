//! Traces of functionalized functions (`make_fx(functionalize(f))`): no in-place or out=
//! operator but the `copy_` of each written input at the end; views as `*_copy` operators
//! when views are removed; gradients through a functionalized function equal eager's.

use switchboard_autograd::AutogradTensor;
use switchboard_cpu as _;
use switchboard_dispatcher::{Dispatcher, SchemaKind};
use switchboard_functionalize::{functionalize, Remove};
use switchboard_ops::{self as ops, TensorOps};
use switchboard_tensor::Tensor;
use switchboard_trace::trace;

/// Whether `name` (`aten::add_`) is an operator that writes an argument.
fn writes(name: &str) -> bool {
    let op = Dispatcher::global().find_schema(name).unwrap();
    op.semantics().unwrap().kind != SchemaKind::Functional
}

fn program(xs: &[Tensor]) -> switchboard_dispatcher::Result<Vec<Tensor>> {
    let y = xs[0].mul_scalar(2.0)?;
    y.add_(&xs[1])?; // in place on an intermediate
    xs[0].mul_(&y)?; // in place on an input
    let row = xs[1].select(0, 0)?;
    row.zero_()?; // through a view of an input
    Ok(vec![y.relu()?])
}

#[test]
fn traced_functionalized_programs_write_only_their_inputs_at_the_end() {
    let inputs = [ops::ones(&[2, 3]).unwrap(), ops::ones(&[2, 3]).unwrap()];
    let traced = trace(&inputs, |xs| functionalize(program, Remove::Mutations)(xs)).unwrap();
    let names = traced.op_names();
    let first_copy = names.iter().position(|n| n == "aten::copy_").unwrap();
    let (body, tail) = names.split_at(first_copy);
    let in_body: Vec<&String> = body.iter().filter(|n| writes(n)).collect();
    assert!(
        in_body.is_empty(),
        "writes in the body: {in_body:?} of {names:?}"
    );
    assert_eq!(tail, ["aten::copy_", "aten::copy_"], "{names:?}");
    // Eager traces the writes themselves.
    let eager = trace(&inputs, program).unwrap().op_names();
    assert!(eager.iter().any(|n| n == "aten::add_.Tensor"), "{eager:?}");
}

#[test]
fn views_become_copies_when_views_are_removed() {
    let x = ops::ones(&[2, 3]).unwrap();
    let f = |xs: &[Tensor]| Ok(vec![xs[0].t()?.select(0, 1)?]);
    let kept = trace(std::slice::from_ref(&x), |xs| {
        functionalize(f, Remove::Mutations)(xs)
    })
    .unwrap();
    assert_eq!(kept.op_names(), ["aten::t", "aten::select.int"]);
    let removed = trace(&[x], |xs| functionalize(f, Remove::MutationsAndViews)(xs)).unwrap();
    assert_eq!(
        removed.op_names(),
        ["aten::t_copy", "aten::select_copy.int"]
    );
}

#[test]
fn gradients_through_a_functionalized_function_equal_eagers() {
    let f = |xs: &[Tensor]| {
        let y = xs[0].mul(&xs[1])?;
        y.t()?.add_(&xs[0].t()?)?; // written through a view
        y.select(0, 1)?.mul_(&xs[1].select(0, 0)?)?;
        y.add_(&xs[1])?;
        Ok(vec![y.mul(&xs[1])?.sum()?])
    };
    let grads = |functional: bool| {
        let a = Tensor::from_vec(vec![0.0f32, 1., 2., 3., 4., 5.], &[2, 3])
            .unwrap()
            .requires_grad_(true)
            .unwrap();
        let b = ops::ones(&[2, 3])
            .unwrap()
            .mul_scalar(3.0)
            .unwrap()
            .requires_grad_(true)
            .unwrap();
        let out = if functional {
            functionalize(f, Remove::MutationsAndViews)(&[a.clone(), b.clone()]).unwrap()
        } else {
            f(&[a.clone(), b.clone()]).unwrap()
        };
        out[0].backward().unwrap();
        (
            out[0].item().unwrap().to_f64(),
            a.grad().unwrap().to_vec::<f32>().unwrap(),
            b.grad().unwrap().to_vec::<f32>().unwrap(),
        )
    };
    let eager = grads(false);
    assert_eq!(grads(true), eager);
}

/// One SGD step of a two-layer MLP, its parameters captured (not arguments), as a training
/// loop writes it: under a lifting functionalization when `functional`.
fn mlp_step(x: &Tensor, w1: &Tensor, w2: &Tensor, functional: bool) -> Tensor {
    use switchboard_functionalize::{from_functional, FunctionalizeGuard};
    let guard = functional.then(|| FunctionalizeGuard::lifting(Remove::MutationsAndViews));
    let h = ops::linear(x, w1).unwrap().relu().unwrap();
    let loss = ops::linear(&h, w2)
        .unwrap()
        .pow_tensor_scalar(2.0)
        .unwrap()
        .mean()
        .unwrap();
    let loss = from_functional(&loss).unwrap();
    {
        // Backward runs on the values (Note [Functionalization above autograd]).
        let _plain = switchboard_dispatcher::ExcludeDispatchKeyGuard::new(
            switchboard_dispatcher::DispatchKey::Functionalize,
        );
        loss.backward().unwrap();
    }
    let _no_grad = switchboard_autograd::no_grad();
    for p in [w1, w2] {
        let g = p.grad().unwrap();
        p.sub_(&g.mul_scalar(0.1).unwrap()).unwrap();
    }
    if let Some(guard) = guard {
        guard.finish().unwrap();
    }
    loss
}

#[test]
fn a_traced_training_step_is_functional_but_for_writing_back_its_parameters() {
    let make = || {
        let x = Tensor::from_vec((0..12).map(|v| v as f32 / 10.0).collect(), &[4, 3]).unwrap();
        let w1 =
            Tensor::from_vec((0..15).map(|v| (v as f32 - 7.0) / 10.0).collect(), &[5, 3]).unwrap();
        let w2 =
            Tensor::from_vec((0..10).map(|v| (v as f32 - 4.0) / 10.0).collect(), &[2, 5]).unwrap();
        (
            x,
            w1.requires_grad_(true).unwrap(),
            w2.requires_grad_(true).unwrap(),
        )
    };
    let (x, w1, w2) = make();
    let traced = trace(&[w1.clone(), w2.clone(), x.clone()], |xs| {
        let loss = mlp_step(&xs[2], &xs[0], &xs[1], true);
        Ok(vec![loss])
    })
    .unwrap();
    let names = traced.op_names();
    let first_copy = names.iter().position(|n| n == "aten::copy_").unwrap();
    let (body, tail) = names.split_at(first_copy);
    let in_body: Vec<&String> = body.iter().filter(|n| writes(n)).collect();
    assert!(
        in_body.is_empty(),
        "writes in the body: {in_body:?} of {names:?}"
    );
    assert_eq!(tail, ["aten::copy_", "aten::copy_"], "{names:?}");
    // The same step eagerly: the same loss and parameters.
    let (ex, e1, e2) = make();
    let eager_loss = mlp_step(&ex, &e1, &e2, false);
    assert!(names.len() > 10, "{names:?}");
    let (fx, f1, f2) = make();
    let loss = mlp_step(&fx, &f1, &f2, true);
    assert_eq!(
        loss.item().unwrap().to_f64(),
        eager_loss.item().unwrap().to_f64()
    );
    assert_eq!(f1.to_vec::<f32>().unwrap(), e1.to_vec::<f32>().unwrap());
    assert_eq!(f2.to_vec::<f32>().unwrap(), e2.to_vec::<f32>().unwrap());
}

#[test]
fn autocast_casts_the_values_of_a_functionalized_function() {
    use switchboard_tensor::{Device, ScalarType};
    let a = ops::ones(&[2, 3]).unwrap();
    let b = ops::ones(&[3, 2]).unwrap();
    let f = |xs: &[Tensor]| {
        let y = ops::mm(&xs[0], &xs[1])?; // lower precision in the region
        y.add_(&ops::ones(&[2, 2])?)?;
        Ok(vec![y])
    };
    let run = |functional: bool| {
        switchboard_autocast::autocast(Device::CPU, ScalarType::BFloat16, || {
            let inputs = [a.clone(), b.clone()];
            if functional {
                functionalize(f, Remove::Mutations)(&inputs)
            } else {
                f(&inputs)
            }
        })
        .unwrap()
    };
    let (eager, functional) = (run(false), run(true));
    assert_eq!(functional[0].dtype(), ScalarType::BFloat16);
    assert_eq!(functional[0].dtype(), eager[0].dtype());
    assert_eq!(
        ops::to(&functional[0], ScalarType::Float)
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        ops::to(&eager[0], ScalarType::Float)
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
    );
}

/// Writes through `select`, `slice` and `as_strided` views: their bases are rebuilt by the
/// `*_scatter` operators (PyTorch's `FunctionalInverses`), not by `copy_` into a clone.
fn writes_through_views(xs: &[Tensor]) -> switchboard_dispatcher::Result<Vec<Tensor>> {
    let base = xs[0].mul_scalar(1.0)?;
    let slice = |t: &Tensor, end, step| {
        let (dim, start, end) = (1, Some(0), Some(end));
        ops::slice_with(
            t,
            ops::SliceOptions {
                dim,
                start,
                end,
                step,
            },
        )
    };
    base.select(0, 1)?.zero_()?;
    slice(&base, 3, 2)?.mul_(&slice(&xs[1], 2, 1)?)?;
    let offset = ops::AsStridedOptions {
        storage_offset: Some(3),
    };
    ops::as_strided_with(&base, &[2], &[4], offset)?.zero_()?;
    Ok(vec![base])
}

#[test]
fn writes_through_views_use_the_scatter_operators() {
    let arange = |n: i64| {
        Tensor::from_vec((0..n).map(|v| v as f32 + 1.0).collect(), &[n])
            .unwrap()
            .view(&[3, 3])
            .unwrap()
    };
    let inputs = [arange(9), arange(9)];
    let traced = trace(&inputs, |xs| {
        functionalize(writes_through_views, Remove::Mutations)(xs)
    })
    .unwrap();
    let names = traced.op_names();
    for op in [
        "aten::select_scatter",
        "aten::slice_scatter",
        "aten::as_strided_scatter",
    ] {
        assert!(names.iter().any(|n| n == op), "{op} not in {names:?}");
    }
    assert!(!names.iter().any(|n| writes(n)), "{names:?}");
    let got = functionalize(writes_through_views, Remove::Mutations)(&inputs).unwrap();
    let eager = writes_through_views(&inputs).unwrap();
    assert_eq!(
        got[0].to_vec::<f32>().unwrap(),
        eager[0].to_vec::<f32>().unwrap()
    );
    assert_eq!(
        eager[0].to_vec::<f32>().unwrap(),
        [1., 2., 6., 0., 0., 0., 49., 0., 72.]
    );
}
