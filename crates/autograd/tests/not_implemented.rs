//! Operators without a derivative formula are never silently non-differentiable: an aten
//! operator with a kernel and no derivatives.yaml entry
//! records PyTorch's `NotImplemented` node ("derivative for aten::X is not implemented"); an
//! operator of another crate reaches the Autograd fallback, which warns once per operator and
//! makes backward through its outputs fail naming it (mode `Warn`, the default), or passes the
//! call through (mode `Nothing`).

use std::sync::{Arc, Mutex};

use switchboard_autograd::{
    autograd_fallback_mode, operator_autograd, set_autograd_fallback_mode, AutogradFallbackMode,
    AutogradKind, AutogradTensor,
};
use switchboard_cpu as _;
use switchboard_dispatcher::{
    set_warning_handler, DispatchError, Dispatcher, KernelFunction, Library, LibraryKind,
};
use switchboard_keys::DispatchKey;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

fn leaf(v: &[f32]) -> Tensor {
    Tensor::from_vec(v.to_vec(), &[v.len() as i64])
        .unwrap()
        .requires_grad_(true)
        .unwrap()
}

#[test]
fn aten_operator_without_formula_fails_in_backward_naming_it() {
    let entry = operator_autograd("silu_backward").unwrap();
    assert_eq!(entry.kind, AutogradKind::NotImplemented);
    assert!(!entry.is_differentiable());
    let g = leaf(&[1.0, 1.0]);
    let x = leaf(&[0.5, -1.0]);
    let y = ops::silu_backward(&g, &x).unwrap();
    // The forward runs; the output is part of the graph.
    assert!(y.requires_grad());
    assert_eq!(y.grad_fn().unwrap().name(), "NotImplemented");
    let e = ops::sum(&y).unwrap().backward().unwrap_err();
    assert_eq!(
        e.to_string(),
        "derivative for aten::silu_backward is not implemented"
    );
    assert!(g.grad().is_none() && x.grad().is_none());
    // With no input requiring grad, nothing is recorded.
    let z = ops::silu_backward(&g.detach(), &x.detach()).unwrap();
    assert!(!z.requires_grad() && z.grad_fn().is_none());
}

fn triple_cpu(x: &Tensor) -> Result<Tensor, DispatchError> {
    let v: Vec<f32> = x.to_vec::<f32>()?.iter().map(|v| 3.0 * v).collect();
    Ok(Tensor::from_vec(v, x.sizes())?)
}

#[test]
fn operator_of_another_crate_warns_once_and_fails_in_backward() {
    let d = Dispatcher::global();
    let mut lib = Library::new(d, LibraryKind::Def, "no_formula_test", None).unwrap();
    lib.def("triple(Tensor x) -> Tensor").unwrap();
    lib.impl_(
        "triple",
        Some(DispatchKey::CPU),
        KernelFunction::from_fn(triple_cpu),
    )
    .unwrap();
    let triple = d
        .find_schema_or_throw("no_formula_test::triple")
        .unwrap()
        .typed::<(Tensor,), Tensor>()
        .unwrap();
    let warnings = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = warnings.clone();
    let _handler = set_warning_handler(move |m: &str| sink.lock().unwrap().push(m.to_owned()));

    assert_eq!(autograd_fallback_mode(), AutogradFallbackMode::Warn);
    let x = leaf(&[1.0, 2.0]);
    let y = triple.call((&x,)).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), [3.0, 6.0]);
    assert!(y.requires_grad());
    assert_eq!(y.grad_fn().unwrap().name(), "NotImplemented");
    // A second call does not warn again.
    triple.call((&x,)).unwrap();
    let seen = warnings.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(
        seen[0].starts_with(
            "no_formula_test::triple: an autograd kernel was not registered to the Autograd \
             key(s) but we are trying to backprop through it."
        ),
        "{}",
        seen[0]
    );
    let e = ops::sum(&y).unwrap().backward().unwrap_err();
    assert_eq!(e.to_string(), seen[0]);
    assert!(x.grad().is_none());
    // Inputs that do not require grad: a plain call, no warning, no history.
    let z = triple.call((&x.detach(),)).unwrap();
    assert!(!z.requires_grad());

    // Mode Nothing: the call passes through and its output takes no part in autograd.
    set_autograd_fallback_mode(AutogradFallbackMode::Nothing);
    let w = triple.call((&x,)).unwrap();
    set_autograd_fallback_mode(AutogradFallbackMode::Warn);
    assert!(!w.requires_grad() && w.grad_fn().is_none());
    assert_eq!(warnings.lock().unwrap().len(), 1);
}
