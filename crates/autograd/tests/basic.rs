//! Engine, metadata, grad modes, hooks, custom functions and PyTorch's error messages.
#![allow(clippy::cloned_ref_to_slice_refs)] // literal input lists read best

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use switchboard_autograd::{
    apply, enable_grad, grad, is_grad_enabled, no_grad, AutogradTensor, BackwardOptions, Function,
    FunctionCtx, InferenceMode, Result,
};
use switchboard_cpu as _;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

fn t(v: &[f32], s: &[i64]) -> Tensor {
    Tensor::from_vec(v.to_vec(), s).unwrap()
}
fn leaf(v: &[f32], s: &[i64]) -> Tensor {
    t(v, s).requires_grad_(true).unwrap()
}
fn v(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

#[test]
fn mul_add_backward() {
    let x = leaf(&[1., 2., 3.], &[3]);
    let y = leaf(&[4., 5., 6.], &[3]);
    let z = ops::sum(
        &ops::add_with(
            &ops::mul(&x, &y).unwrap(),
            &x,
            ops::AddOptions::default().alpha(2),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(z.grad_fn().unwrap().name(), "SumBackward0");
    assert!(!z.is_leaf() && x.is_leaf());
    z.backward().unwrap();
    assert_eq!(v(&x.grad().unwrap()), vec![6., 7., 8.]);
    assert_eq!(v(&y.grad().unwrap()), vec![1., 2., 3.]);
}

#[test]
fn broadcasting_reduces_to_input_shapes() {
    let a = leaf(&[1., 2., 3., 4., 5., 6.], &[2, 3]);
    let b = leaf(&[1., 1., 1.], &[3]);
    let c = leaf(&[2.], &[]);
    let y = ops::mul(&ops::add(&a, &b).unwrap(), &c).unwrap();
    ops::sum(&y).unwrap().backward().unwrap();
    assert_eq!(b.grad().unwrap().sizes(), &[3]);
    assert_eq!(v(&b.grad().unwrap()), vec![4., 4., 4.]);
    assert_eq!(c.grad().unwrap().sizes(), &[] as &[i64]);
    assert_eq!(v(&c.grad().unwrap()), vec![27.]);
}

#[test]
fn implicit_grad_only_for_scalars() {
    let x = leaf(&[1., 2.], &[2]);
    let y = ops::mul_scalar(&x, 2).unwrap();
    let e = y.backward().unwrap_err();
    assert_eq!(
        e.to_string(),
        "grad can be implicitly created only for scalar outputs"
    );
    y.backward_with(BackwardOptions::default().gradient(&t(&[1., 10.], &[2])))
        .unwrap();
    assert_eq!(v(&x.grad().unwrap()), vec![2., 20.]);
    let e = t(&[1.], &[1]).backward().unwrap_err();
    assert_eq!(
        e.to_string(),
        "element 0 of tensors does not require grad and does not have a grad_fn"
    );
}

#[test]
fn second_backward_needs_retain_graph() {
    let x = leaf(&[3.], &[]);
    let y = ops::exp(&ops::mul(&x, &x).unwrap()).unwrap();
    y.backward_with(BackwardOptions::default().retain_graph(true))
        .unwrap();
    y.backward().unwrap(); // retained: works, and accumulates
    let g = v(&x.grad().unwrap())[0];
    assert!((g - 2.0 * 6.0 * (9f32).exp()).abs() / g < 1e-5);
    let e = y.backward().unwrap_err();
    assert!(e
        .to_string()
        .starts_with("Trying to backward through the graph a second time (or directly access saved tensors after they have already been freed)."));
}

#[test]
fn second_derivative_with_create_graph() {
    let x = leaf(&[2.], &[]);
    let y = ops::pow_tensor_scalar(&x, 3).unwrap();
    let g = grad(&[y], &[x.clone()], &[None], false, true).unwrap()[0]
        .clone()
        .unwrap();
    assert_eq!(v(&g), vec![12.]); // 3x^2
    assert!(g.requires_grad());
    let g2 = grad(&[g], &[x.clone()], &[None], false, false).unwrap()[0]
        .clone()
        .unwrap();
    assert_eq!(v(&g2), vec![12.]); // 6x
    assert!(x.grad().is_none(), "grad() leaves .grad alone");

    // Through saved outputs (exp saves its result) and backward(create_graph).
    let z = leaf(&[0.5], &[]);
    let e = ops::exp(&ops::mul(&z, &z).unwrap()).unwrap(); // d/dz = 2z e^{z^2}
    e.backward_with(BackwardOptions::default().create_graph(true))
        .unwrap();
    let dz = z.grad().unwrap();
    z.set_grad(None);
    dz.backward().unwrap(); // d2 = (2 + 4z^2) e^{z^2}
    let want = (2.0 + 4.0 * 0.25) * (0.25f32).exp();
    assert!((v(&z.grad().unwrap())[0] - want).abs() < 1e-5);

    // Double backward of relu / sigmoid / tanh through their *_backward kernels.
    let w = leaf(&[0.3, -0.2], &[2]);
    let s = ops::sum(&ops::tanh(&ops::sigmoid(&w).unwrap()).unwrap()).unwrap();
    let gw = grad(&[s], &[w.clone()], &[None], false, true).unwrap()[0]
        .clone()
        .unwrap();
    let h = grad(
        &[ops::sum(&gw).unwrap()],
        &[w.clone()],
        &[None],
        false,
        false,
    )
    .unwrap();
    assert!(h[0].is_some());
}

#[test]
fn grad_function_and_unused_inputs() {
    let a = leaf(&[1., 2.], &[2]);
    let b = leaf(&[3., 4.], &[2]);
    let c = leaf(&[5.], &[1]);
    let y = ops::sum(&ops::mul(&a, &b).unwrap()).unwrap();
    let g = grad(&[y], &[a.clone(), c.clone()], &[None], false, false).unwrap();
    assert_eq!(v(g[0].as_ref().unwrap()), vec![3., 4.]);
    assert!(g[1].is_none());
    assert!(a.grad().is_none() && b.grad().is_none());
}

#[test]
fn modes_and_detach() {
    let x = leaf(&[1., 2.], &[2]);
    {
        let _g = no_grad();
        assert!(!is_grad_enabled());
        let y = ops::mul(&x, &x).unwrap();
        assert!(!y.requires_grad() && y.grad_fn().is_none());
        let _e = enable_grad();
        assert!(ops::mul(&x, &x).unwrap().requires_grad());
    }
    assert!(is_grad_enabled());
    {
        let _i = InferenceMode::new();
        let y = ops::mul(&x, &x).unwrap();
        assert!(!y.requires_grad());
    }
    let d = ops::mul(&x, &x).unwrap().detach();
    assert!(!d.requires_grad() && d.is_leaf());
    let y = ops::mul(&x, &x).unwrap();
    assert_eq!(
        y.requires_grad_(false).unwrap_err().to_string(),
        "you can only change requires_grad flags of leaf variables. If you want to use a \
         computed variable in a subgraph that doesn't require differentiation use var_no_grad = \
         var.detach()."
    );
    let i = Tensor::from_vec(vec![1i64], &[1]).unwrap();
    assert_eq!(
        i.requires_grad_(true).unwrap_err().to_string(),
        "only Tensors of floating point and complex dtype can require gradients"
    );
    x.requires_grad_(false).unwrap();
    assert!(!ops::mul(&x, &x).unwrap().requires_grad());
}

#[test]
fn inplace_errors_and_versions() {
    let x = leaf(&[1., 2., 3., 4.], &[2, 2]);
    let e = ops::add_(&x, &t(&[1.; 4], &[2, 2])).unwrap_err();
    assert_eq!(
        e.to_string(),
        "a leaf Variable that requires grad is being used in an in-place operation."
    );
    {
        let _g = no_grad();
        let v0 = x.version();
        ops::mul_scalar_(&x, 1).unwrap(); // allowed without grad mode
        assert_eq!(x.version(), v0 + 1);
    }
    let y = ops::exp(&x).unwrap();
    let z = ops::sum(&y).unwrap();
    ops::mul_scalar_(&y, 2).unwrap();
    assert_eq!(y.grad_fn().unwrap().name(), "MulBackward1");
    let e = z.backward().unwrap_err();
    assert_eq!(
        e.to_string(),
        "one of the variables needed for gradient computation has been modified by an inplace \
         operation: [torch.FloatTensor [2, 2]], which is output 0 of ExpBackward0, is at version \
         1; expected version 0 instead. Hint: enable anomaly detection to find the operation \
         that failed to compute its gradient, with torch.autograd.set_detect_anomaly(True)."
    );
    // out= bumps the version of out.
    let out = t(&[0.; 4], &[2, 2]);
    ops::add_out(&t(&[1.; 4], &[2, 2]), &t(&[1.; 4], &[2, 2]), &out).unwrap();
    assert_eq!(out.version(), 1);
}

#[test]
fn inplace_on_non_leaf_is_differentiated() {
    let x = leaf(&[1., 2.], &[2]);
    let y = ops::mul_scalar(&x, 3).unwrap();
    ops::mul_(&y, &x).unwrap(); // y = 3x^2
    ops::sum(&y).unwrap().backward().unwrap();
    assert_eq!(v(&x.grad().unwrap()), vec![6., 12.]);
}

#[test]
fn views_record_base() {
    let x = leaf(&[1., 2., 3., 4.], &[2, 2]);
    let tv = ops::t(&x).unwrap();
    assert!(tv.base().unwrap().is_same(&x));
    let s = ops::select(&tv, 0, 1).unwrap();
    assert!(s.base().unwrap().is_same(&x));
    let e = ops::mul_scalar_(&s, 2).unwrap_err();
    assert_eq!(
        e.to_string(),
        "a view of a leaf Variable that requires grad is being used in an in-place operation."
    );
    ops::sum(&ops::mul(&s, &s).unwrap())
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(v(&x.grad().unwrap()), vec![0., 4., 0., 8.]);
}

#[test]
fn hooks_and_retain_grad() {
    let x = leaf(&[1., 2.], &[2]);
    let seen = Arc::new(AtomicUsize::new(0));
    let s2 = seen.clone();
    x.register_hook(move |g| {
        s2.fetch_add(1, Ordering::SeqCst);
        Some(ops::mul_scalar(g, 10).unwrap())
    })
    .unwrap();
    let y = ops::mul_scalar(&x, 2).unwrap();
    y.retain_grad().unwrap();
    assert!(y.retains_grad());
    y.register_hook(|g| Some(ops::add_scalar(g, 1).unwrap()))
        .unwrap();
    ops::sum(&y).unwrap().backward().unwrap();
    assert_eq!(seen.load(Ordering::SeqCst), 1);
    assert_eq!(v(&y.grad().unwrap()), vec![2., 2.]); // after y's hook
    assert_eq!(v(&x.grad().unwrap()), vec![40., 40.]); // (1+1)*2*10
}

struct Cube;
impl Function for Cube {
    fn forward(&self, ctx: &mut FunctionCtx, x: &[Tensor]) -> Result<Vec<Tensor>> {
        ctx.save_for_backward(&[x[0].clone()]);
        Ok(vec![ops::pow_tensor_scalar(&x[0], 3)?])
    }
    fn backward(&self, ctx: &FunctionCtx, g: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let x = &ctx.saved_tensors()?[0];
        let d = ops::mul_scalar(&ops::mul(x, x)?, 3)?;
        Ok(vec![Some(ops::mul(&g[0], &d)?)])
    }
}

#[test]
fn custom_function() {
    let x = leaf(&[1., 2.], &[2]);
    let y = apply(Cube, &[x.clone()]).unwrap().remove(0);
    assert_eq!(y.grad_fn().unwrap().name(), "CubeBackward");
    assert_eq!(v(&y), vec![1., 8.]);
    let g = grad(&[ops::sum(&y).unwrap()], &[x.clone()], &[None], false, true).unwrap();
    assert_eq!(v(g[0].as_ref().unwrap()), vec![3., 12.]);
    // Its backward is made of recorded ops: second derivative 6x.
    let h = grad(
        &[ops::sum(g[0].as_ref().unwrap()).unwrap()],
        &[x],
        &[None],
        false,
        false,
    )
    .unwrap();
    assert_eq!(v(h[0].as_ref().unwrap()), vec![6., 12.]);
}

#[test]
fn composite_training_step() {
    // linear -> relu -> cross entropy, a few SGD steps lower the loss.
    let w = Tensor::from_vec(vec![0.1f32, -0.2, 0.3, 0.05, 0.2, -0.1], &[2, 3])
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    let xs = t(&[1., 2., 3., -1., 0.5, 2.], &[2, 3]);
    let target = Tensor::from_vec(vec![1i64, 0], &[2]).unwrap();
    let mut losses = vec![];
    for _ in 0..5 {
        let logits = ops::relu(&ops::linear(&xs, &w).unwrap()).unwrap();
        let loss = ops::cross_entropy_loss(&logits, &target).unwrap();
        losses.push(v(&loss)[0]);
        loss.backward().unwrap();
        let _g = no_grad();
        ops::sub_with_(
            &w,
            &w.grad().unwrap(),
            ops::SubInplaceOptions::default().alpha(0.5),
        )
        .unwrap();
        w.set_grad(None);
    }
    assert!(losses[4] < losses[0], "{losses:?}");
}

#[test]
fn clamp_tensor_bounds_get_gradients() {
    let f = |v: &[f64]| {
        Tensor::from_vec(v.to_vec(), &[v.len() as i64])
            .unwrap()
            .requires_grad_(true)
            .unwrap()
    };
    // The last element has min > max: the result is max, which gets the gradient.
    let a = f(&[0.5, -2.0, 3.0, 1.0]);
    let lo = f(&[0.0, 0.0, 0.0, 2.0]);
    let hi = f(&[1.0, 1.0, 2.0, 1.5]);
    let y = switchboard_ops::clamp_tensor_with(
        &a,
        switchboard_ops::ClampTensorOptions::default()
            .min(&lo)
            .max(&hi),
    )
    .unwrap();
    assert_eq!(y.to_vec::<f64>().unwrap(), [0.5, 0.0, 2.0, 1.5]);
    assert_eq!(y.grad_fn().unwrap().name(), "ClampBackward0");
    let w = Tensor::from_vec(vec![1.0f64, 2.0, 3.0, 4.0], &[4]).unwrap();
    switchboard_ops::sum(&switchboard_ops::mul(&y, &w).unwrap())
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(
        a.grad().unwrap().to_vec::<f64>().unwrap(),
        [1.0, 0.0, 0.0, 0.0]
    );
    assert_eq!(
        lo.grad().unwrap().to_vec::<f64>().unwrap(),
        [0.0, 2.0, 0.0, 0.0]
    );
    assert_eq!(
        hi.grad().unwrap().to_vec::<f64>().unwrap(),
        [0.0, 0.0, 3.0, 4.0]
    );
    // Only a (broadcast) min: summed back to its shape; ties go to self.
    let a = f(&[0.5, -2.0, 0.0]);
    let lo = Tensor::from_vec(vec![0.0f64], &[1])
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    let y = switchboard_ops::clamp_tensor_with(
        &a,
        switchboard_ops::ClampTensorOptions::default().min(&lo),
    )
    .unwrap();
    switchboard_ops::sum(&y).unwrap().backward().unwrap();
    assert_eq!(a.grad().unwrap().to_vec::<f64>().unwrap(), [1.0, 0.0, 1.0]);
    assert_eq!(lo.grad().unwrap().to_vec::<f64>().unwrap(), [1.0]);
}

#[test]
fn fill_and_zero_cut_the_old_history() {
    let x = Tensor::from_vec(vec![1.0f64, 2.0], &[2])
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    let y = ops::mul_scalar(&x, 3.0).unwrap();
    ops::zero_(&y).unwrap();
    let z = ops::add(&y, &x).unwrap(); // z = 0 + x
    ops::sum(&z).unwrap().backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec::<f64>().unwrap(), [1.0, 1.0]);
    assert_eq!(y.to_vec::<f64>().unwrap(), [0.0, 0.0]);

    let x = Tensor::from_vec(vec![1.0f64, f64::INFINITY], &[2])
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    let y = ops::mul_scalar(&x, 2.0).unwrap();
    ops::fill_(&y, 5.0).unwrap();
    assert_eq!(y.to_vec::<f64>().unwrap(), [5.0, 5.0]);
    ops::sum(&y).unwrap().backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec::<f64>().unwrap(), [0.0, 0.0]);
    // A leaf that requires grad cannot be filled in place.
    assert!(ops::zero_(&x)
        .unwrap_err()
        .to_string()
        .contains("leaf Variable"));
}

/// PyTorch 2.15: with number bounds, an element equal to a bound gets no gradient (`clamp`'s
/// mask is `(self > min) & (self < max)`, as `clamp_min`'s and `clamp_max`'s).
#[test]
fn clamp_with_number_bounds_passes_no_gradient_at_the_bounds() {
    let grad_of = |options: switchboard_ops::ClampOptions| {
        let x = Tensor::from_vec(vec![-0.5f32, 0.0, 0.5, 0.7], &[4])
            .unwrap()
            .requires_grad_(true)
            .unwrap();
        let y = switchboard_ops::clamp_with(&x, options).unwrap();
        switchboard_ops::sum(&y).unwrap().backward().unwrap();
        x.grad().unwrap().to_vec::<f32>().unwrap()
    };
    let o = switchboard_ops::ClampOptions::default;
    assert_eq!(grad_of(o().min(-0.5).max(0.5)), [0.0, 1.0, 0.0, 0.0]);
    assert_eq!(grad_of(o().min(-0.5)), [0.0, 1.0, 1.0, 1.0]);
    assert_eq!(grad_of(o().max(0.5)), [1.0, 1.0, 0.0, 0.0]);
}
