//! Forward-mode AD: dual levels, `make_dual` / `unpack_dual` and their errors, the forward
//! formulas in the generated kernels, views and in-place writes, and reverse over forward.
//! Expected values were recorded from PyTorch 2.15 (`torch.autograd.forward_ad`).

use switchboard_autograd::{
    dual_level, enter_dual_level, exit_dual_level, forward_grad, grad, make_dual, no_grad,
    unpack_dual, AutogradTensor, DualLevel,
};
use switchboard_cpu as _;
use switchboard_ops as ops;
use switchboard_tensor::{ScalarType, Tensor};

fn t(v: &[f32], s: &[i64]) -> Tensor {
    Tensor::from_vec(v.to_vec(), s).unwrap()
}
fn v(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}
fn close(a: &[f32], b: &[f32]) {
    assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() <= 1e-5 * (1.0 + y.abs()), "{a:?} vs {b:?}");
    }
}
fn tangent(t: &Tensor) -> Vec<f32> {
    v(&unpack_dual(t, 0).unwrap().1.expect("a tangent"))
}
fn message<T>(r: switchboard_autograd::Result<T>) -> String {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn formulas_propagate_tangents() {
    let _level = dual_level().unwrap();
    let x = make_dual(&t(&[1., 2., 3.], &[3]), &t(&[0.5, -1., 2.], &[3]), 0).unwrap();
    let y = make_dual(&t(&[4., 5., 6.], &[3]), &t(&[1., 1., -1.], &[3]), 0).unwrap();
    let z = ops::sum(&ops::sin(&ops::mul(&x, &y).unwrap()).unwrap()).unwrap();
    close(&tangent(&z), &[6.499_134]);
    let lsm = ops::log_softmax(&ops::view(&x, &[1, 3]).unwrap(), 1).unwrap();
    close(&tangent(&lsm), &[-0.630_768_8, -2.130_768_8, 0.869_231_2]);
    // The primal of a dual tensor is its value, without the tangent.
    let (primal, _) = unpack_dual(&z, 0).unwrap();
    assert!(forward_grad(&primal).is_none());
    // Tensors without a tangent stay without one.
    let plain = ops::exp(&t(&[1.], &[1])).unwrap();
    assert!(unpack_dual(&plain, 0).unwrap().1.is_none());
}

#[test]
fn views_and_inplace_follow_pytorch() {
    let _level = dual_level().unwrap();
    let x = make_dual(&t(&[1., 2., 3.], &[3]), &t(&[0.5, -1., 2.], &[3]), 0).unwrap();
    let y = make_dual(&t(&[4., 5., 6.], &[3]), &t(&[1., 1., -1.], &[3]), 0).unwrap();
    // A view's tangent is the view of the tangent.
    let row = ops::t(&ops::view(&x, &[3, 1]).unwrap()).unwrap();
    assert_eq!(unpack_dual(&row, 0).unwrap().1.unwrap().sizes(), &[1, 3]);
    close(&tangent(&row), &[0.5, -1., 2.]);
    // Writing a dual value through a view of a plain tensor gives the base a tangent.
    let base = ops::zeros(&[2, 3]).unwrap();
    let first = ops::select(&base, 0, 0).unwrap();
    ops::copy_(&first, &x).unwrap();
    close(&tangent(&base), &[0.5, -1., 2., 0., 0., 0.]);
    // In place: the tangent follows the write.
    let w = ops::clone(&t(&[1., 2., 3.], &[3])).unwrap();
    ops::mul_(&w, &y).unwrap();
    close(&tangent(&w), &[1., 2., -3.]);
    // And a write into a dual tensor updates its existing tangent in place.
    let d = make_dual(&t(&[1., 2.], &[2]), &t(&[1., 1.], &[2]), 0).unwrap();
    let before = unpack_dual(&d, 0).unwrap().1.unwrap();
    ops::mul_scalar_(&d, 3.0).unwrap();
    close(&v(&before), &[3., 3.]);
}

#[test]
fn forward_ad_runs_under_no_grad() {
    let _level = dual_level().unwrap();
    let x = make_dual(&t(&[1., 2., 3.], &[3]), &t(&[0.5, -1., 2.], &[3]), 0).unwrap();
    let _guard = no_grad();
    close(
        &tangent(&ops::exp(&x).unwrap()),
        &[1.359_141, -7.389_056, 40.171_07],
    );
}

#[test]
fn leaving_the_level_drops_tangents() {
    let x = {
        let _level = dual_level().unwrap();
        let x = make_dual(&t(&[1.], &[1]), &t(&[2.], &[1]), 0).unwrap();
        assert!(forward_grad(&x).is_some());
        x
    };
    assert!(forward_grad(&x).is_none());
    let _level = dual_level().unwrap();
    assert!(
        forward_grad(&x).is_none(),
        "a new level sees no stale tangent"
    );
    assert!(forward_grad(&ops::exp(&x).unwrap()).is_none());
}

#[test]
fn pytorch_errors() {
    let x = t(&[1., 2., 3.], &[3]);
    assert_eq!(
        message(make_dual(&x, &x, 0)),
        "Trying to create a dual Tensor for forward AD but no level exists, make sure to \
         enter_dual_level() first."
    );
    let level = enter_dual_level().unwrap();
    assert_eq!(
        message(enter_dual_level()),
        "Nested forward mode AD is not supported at the moment"
    );
    assert_eq!(
        message(make_dual(&x, &t(&[1., 2., 3., 4.], &[4]), 0)),
        "Trying to set a forward gradient that has a different size than that of the original \
         Tensor, this is not supported. Tensor is of size [3] while the given forward gradient \
         is of size [4]."
    );
    let ints = Tensor::from_vec(vec![1i32, 2, 3], &[3]).unwrap();
    assert_eq!(
        message(make_dual(&x, &ints, 0)),
        "Expected tangent to be floating point or complex, but got: torch.int32"
    );
    assert_eq!(
        message(make_dual(&ints, &x, 0)),
        "Expected primal to be floating point or complex, but got: torch.int32"
    );
    let d = make_dual(&x, &x, 0).unwrap();
    assert_eq!(
        message(make_dual(&d, &x, 0)),
        "Making a dual Tensor based on a Tensor that already has a forward gradient at the same \
         level 0 is not supported."
    );
    // A tangent of another dtype is kept, as PyTorch keeps it.
    let wide =
        ops::_to_copy_with(&x, ops::ToCopyOptions::default().dtype(ScalarType::Double)).unwrap();
    let mixed = make_dual(&x, &wide, 0).unwrap();
    assert_eq!(forward_grad(&mixed).unwrap().dtype(), ScalarType::Double);
    // An operator without a forward formula.
    let m = ops::view(&d, &[1, 3]).unwrap();
    assert_eq!(
        message(ops::_cdist_forward(&m, &m, 2.0, None)),
        "Trying to use forward AD with _cdist_forward that does not support it because it has \
         not been implemented yet.\nPlease file an issue to PyTorch at \
         https://github.com/pytorch/pytorch/issues/new?template=feature-request.yml so that we \
         can prioritize its implementation or submit a PR adding the implementation to \
         derivatives.yaml"
    );
    // out= overloads.
    let out = ops::empty(&[3]).unwrap();
    assert_eq!(
        message(ops::mul_out(&d, &d, &out)),
        "Trying to use forward AD with mul_out that does not support it because it is an out= \
         function"
    );
    exit_dual_level(level).unwrap();
}

#[test]
fn reverse_over_forward() {
    // d/dx of the tangent of sum(x^3) along v: 6 x v.
    let x = t(&[1., 2.], &[2]).requires_grad_(true).unwrap();
    let _level = dual_level().unwrap();
    let d = make_dual(&x, &t(&[1., -1.], &[2]), 0).unwrap();
    let y = ops::sum(&ops::mul(&ops::mul(&d, &d).unwrap(), &d).unwrap()).unwrap();
    let (_, ty) = unpack_dual(&y, 0).unwrap();
    let ty = ty.unwrap();
    close(&v(&ty), &[-9.]);
    let g = grad(&[ty], &[x], &[None], false, false).unwrap();
    close(&v(g[0].as_ref().unwrap()), &[6., -12.]);
}

#[test]
fn saved_outputs_carry_their_tangent() {
    // exp's backward reads its saved output: the gradient exp(x) gets the tangent exp(x) v.
    let x = t(&[0., 1.], &[2]).requires_grad_(true).unwrap();
    let _level = dual_level().unwrap();
    let d = make_dual(&x, &t(&[1., -1.], &[2]), 0).unwrap();
    let y = ops::sum(&ops::exp(&d).unwrap()).unwrap();
    let g = grad(&[y], &[x], &[None], false, false).unwrap();
    let g = g[0].as_ref().unwrap();
    close(&v(g), &[1., std::f32::consts::E]);
    close(&tangent(g), &[1., -std::f32::consts::E]);
}

#[test]
fn nested_levels_keep_their_own_tangents() {
    // The transforms' levels nest (`DualLevel::nested`): at the inner level, x^2 has the
    // tangent 2 x v_in, itself a dual of the outer level (tangent 2 v_out v_in), and its
    // primal keeps the outer tangent 2 x v_out but not the inner one.
    let outer = DualLevel::nested();
    let x = outer
        .make_dual(&t(&[1., 2.], &[2]), &t(&[1., 1.], &[2]))
        .unwrap();
    let inner = DualLevel::nested();
    let y = inner.make_dual(&x, &t(&[0.5, -1.], &[2])).unwrap();
    let z = ops::mul(&y, &y).unwrap();
    let (primal, inner_tangent) = inner.unpack_dual(&z).unwrap();
    let inner_tangent = inner_tangent.unwrap();
    close(&v(&inner_tangent), &[1., -4.]);
    close(
        &v(&outer.unpack_dual(&inner_tangent).unwrap().1.unwrap()),
        &[1., -2.],
    );
    close(
        &v(&outer.unpack_dual(&primal).unwrap().1.unwrap()),
        &[2., 4.],
    );
    assert!(inner.unpack_dual(&primal).unwrap().1.is_none());
    assert!(forward_grad(&ops::exp(&primal).unwrap()).is_none());
    // The raw API refuses to nest in them, and to leave them.
    assert_eq!(
        message(enter_dual_level()),
        "Nested forward mode AD is not supported at the moment"
    );
    assert_eq!(
        message(exit_dual_level(0)),
        "Trying to exit a forward AD level that was not the last one that was created. This is \
         not supported."
    );
    // Leaving the inner level leaves the outer tangents.
    drop(inner);
    close(&tangent(&z), &[2., 4.]);
    drop(outer);
    assert!(forward_grad(&z).is_none());
}

#[test]
fn clamp_by_tensors_takes_the_tangent_of_the_bound_it_took() {
    // Below min, inside, above max, and crossed bounds (max wins), as PyTorch 2.15.
    let _level = dual_level().unwrap();
    let x = make_dual(
        &t(&[-2., -0.5, 0.3, 1.5, 3.0], &[5]),
        &t(&[1., 2., 3., 4., 5.], &[5]),
        0,
    )
    .unwrap();
    let lo = make_dual(
        &t(&[-1., -1., 0.5, 0., 0.], &[5]),
        &t(&[10., 20., 30., 40., 50.], &[5]),
        0,
    )
    .unwrap();
    let hi = make_dual(
        &t(&[1., 1., 1., 1., -1.], &[5]),
        &t(&[100., 200., 300., 400., 500.], &[5]),
        0,
    )
    .unwrap();
    let y = ops::clamp_tensor_with(
        &x,
        ops::ClampTensorOptions {
            min: Some(&lo),
            max: Some(&hi),
        },
    )
    .unwrap();
    close(&tangent(&y), &[10., 2., 30., 400., 500.]);
}
