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
