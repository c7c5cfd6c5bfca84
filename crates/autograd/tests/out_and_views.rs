//! out= overloads under autograd, clamp.Tensor bounds, in-place operations on views.

use switchboard_autograd::{no_grad, AutogradTensor};
use switchboard_cpu as _;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

fn t(v: &[f64], s: &[i64]) -> Tensor {
    Tensor::from_vec(v.to_vec(), s).unwrap()
}
fn leaf(v: &[f64], s: &[i64]) -> Tensor {
    t(v, s).requires_grad_(true).unwrap()
}
fn vals(t: &Tensor) -> Vec<f64> {
    t.to_vec_as::<f64>().unwrap()
}
fn msg(name: &str) -> String {
    format!(
        "{name}(): functions with out=... arguments don't support automatic differentiation, \
         but one of the arguments requires grad."
    )
}

#[test]
fn out_overloads_refuse_inputs_that_require_grad() {
    let a = leaf(&[1., 2.], &[2]);
    let b = t(&[3., 4.], &[2]);
    let out = t(&[0., 0.], &[2]);
    let e = ops::add_out(&a, &b, &out).unwrap_err();
    assert_eq!(e.to_string(), msg("add"));
    assert_eq!(vals(&out), [0., 0.], "nothing written");
    assert_eq!(out.version(), 0);
    // The other operand, a non-leaf, a list argument, overloads with modes and dims.
    let e = ops::mul_out(&b, &ops::mul_scalar(&a, 2.).unwrap(), &out).unwrap_err();
    assert_eq!(e.to_string(), msg("mul"));
    let e = ops::div_out_mode(&a, &b, Some("floor"), &out).unwrap_err();
    assert_eq!(e.to_string(), msg("div"));
    let e = ops::pow_tensor_scalar_out(&a, 2, &out).unwrap_err();
    assert_eq!(e.to_string(), msg("pow"));
    let cat_out = t(&[0.; 4], &[4]);
    let e = ops::cat_out(&[b.clone(), a.clone()], &cat_out).unwrap_err();
    assert_eq!(e.to_string(), msg("cat"));
    let s = t(&[0.], &[]);
    let e = ops::sum_int_list_out(&a, None, &s).unwrap_err();
    assert_eq!(e.to_string(), msg("sum"));
    let e = ops::where_self_out(&t(&[1., 0.], &[2]).ne_zero(), &b, &a, &out).unwrap_err();
    assert_eq!(e.to_string(), msg("where"));
}

trait NeZero {
    fn ne_zero(&self) -> Tensor;
}
impl NeZero for Tensor {
    fn ne_zero(&self) -> Tensor {
        ops::ne_scalar(self, 0).unwrap()
    }
}

#[test]
fn out_overloads_refuse_an_out_that_requires_grad() {
    let b = t(&[3., 4.], &[2]);
    let out = leaf(&[0., 0.], &[2]);
    let e = ops::add_out(&b, &b, &out).unwrap_err();
    assert_eq!(e.to_string(), msg("add"));
    let e = ops::arange_start_out(0, 2, &out).unwrap_err();
    assert_eq!(e.to_string(), msg("arange"));
    // A non-leaf out.
    let nl = ops::mul_scalar(&out, 1.).unwrap();
    let e = ops::neg_out(&b, &nl).unwrap_err();
    assert_eq!(e.to_string(), msg("neg"));
}

#[test]
fn out_overloads_run_without_grad_mode_or_grad() {
    let a = leaf(&[1., 2.], &[2]);
    let b = t(&[3., 4.], &[2]);
    let out = t(&[0., 0.], &[2]);
    {
        let _g = no_grad();
        ops::add_out_with(&a, &b, &out, ops::AddOutOptions::default().alpha(2)).unwrap();
    }
    assert_eq!(vals(&out), [7., 10.]);
    assert_eq!(out.version(), 1);
    assert!(!out.requires_grad());
    // Nothing requires grad: runs as before.
    ops::mul_out(&b, &b, &out).unwrap();
    assert_eq!(vals(&out), [9., 16.]);
    assert_eq!(out.version(), 2);
    let o = leaf(&[0., 0.], &[2]);
    {
        let _g = no_grad();
        ops::exp_out(&t(&[0., 0.], &[2]), &o).unwrap();
    }
    assert_eq!(vals(&o), [1., 1.]);
}

fn backward_sum(y: &Tensor) {
    ops::sum(y).unwrap().backward().unwrap();
}

#[test]
fn inplace_on_a_view_rebases_the_base() {
    // b = x.clone(); b.narrow(0, 0, 2).mul_(2): b = [2x0, 2x1, x2, x3].
    let x = leaf(&[1., 2., 3., 4.], &[4]);
    let b = ops::clone(&x).unwrap();
    let v = ops::narrow(&b, 0, 0, 2).unwrap();
    ops::mul_scalar_(&v, 2).unwrap();
    assert_eq!(vals(&b), [2., 4., 3., 4.]);
    assert_eq!(b.grad_fn().unwrap().name(), "CopySlices");
    assert_eq!(v.grad_fn().unwrap().name(), "AsStridedBackward0");
    let w = t(&[1., 10., 100., 1000.], &[4]);
    backward_sum(&ops::mul(&b, &w).unwrap());
    assert_eq!(vals(&x.grad().unwrap()), [2., 20., 100., 1000.]);
    // Through the view itself: d(sum v)/dx = [2, 2, 0, 0].
    x.set_grad(None);
    let b = ops::clone(&x).unwrap();
    let v = ops::narrow(&b, 0, 1, 2).unwrap();
    ops::mul_scalar_(&v, 3).unwrap();
    backward_sum(&ops::mul(&v, &v).unwrap()); // 9 x1² + 9 x2²
    assert_eq!(vals(&x.grad().unwrap()), [0., 36., 54., 0.]);
}

#[test]
fn inplace_on_a_view_with_an_operand_that_requires_grad() {
    // x (no grad) gets history through its row 1: x.select(0, 1).add_(y).
    let x = t(&[0.; 6], &[3, 2]);
    let y = leaf(&[5., 7.], &[2]);
    let row = ops::select(&x, 0, 1).unwrap();
    ops::add_(&row, &y).unwrap();
    assert!(x.requires_grad());
    assert_eq!(vals(&x), [0., 0., 5., 7., 0., 0.]);
    let w = t(&[1., 2., 3., 4., 5., 6.], &[3, 2]);
    backward_sum(&ops::mul(&x, &w).unwrap());
    assert_eq!(vals(&y.grad().unwrap()), [3., 4.]);

    // A column of a transposed view of a non-leaf, multiplied by a tensor that requires grad:
    // b = x*1 (2x3); b.t().select(0, 1).mul_(z), i.e. b[:, 1] *= z.
    let x = leaf(&[1., 2., 3., 4., 5., 6.], &[2, 3]);
    let z = leaf(&[10., 20.], &[2]);
    let b = ops::mul_scalar(&x, 1.).unwrap();
    let col = ops::select(&ops::t(&b).unwrap(), 0, 1).unwrap();
    ops::mul_(&col, &z).unwrap();
    assert_eq!(vals(&b), [1., 20., 3., 4., 100., 6.]);
    let c = t(&[1., 2., 3., 4., 5., 6.], &[2, 3]);
    backward_sum(&ops::mul(&b, &c).unwrap());
    assert_eq!(vals(&x.grad().unwrap()), [1., 20., 3., 4., 100., 6.]);
    assert_eq!(vals(&z.grad().unwrap()), [2. * 2., 5. * 5.]);
}

#[test]
fn other_views_follow_the_new_history() {
    // v1 overlaps the modified region: its grad_fn is regenerated from the base.
    let x = leaf(&[1., 2., 3.], &[3]);
    let y = ops::mul_scalar(&x, 1.).unwrap();
    let v1 = ops::narrow(&y, 0, 0, 2).unwrap();
    ops::mul_scalar_(&ops::narrow(&y, 0, 0, 1).unwrap(), 3).unwrap();
    assert_eq!(vals(&v1), [3., 2.]);
    backward_sum(&v1);
    assert_eq!(vals(&x.grad().unwrap()), [3., 1., 0.]);
    // In place on the base itself after a view was taken.
    x.set_grad(None);
    let y = ops::mul_scalar(&x, 1.).unwrap();
    let v = ops::select(&y, 0, 2).unwrap();
    ops::mul_scalar_(&y, 2).unwrap();
    backward_sum(&ops::mul(&v, &v).unwrap()); // (2 x2)²
    assert_eq!(vals(&x.grad().unwrap()), [0., 0., 24.]);
    // Two in-place ops on two views, then the base.
    x.set_grad(None);
    let y = ops::mul_scalar(&x, 1.).unwrap();
    ops::mul_scalar_(&ops::narrow(&y, 0, 0, 2).unwrap(), 2).unwrap();
    ops::mul_scalar_(&ops::narrow(&y, 0, 1, 2).unwrap(), 5).unwrap();
    assert_eq!(vals(&y), [2., 20., 15.]);
    backward_sum(&y);
    assert_eq!(vals(&x.grad().unwrap()), [2., 10., 5.]);
}

#[test]
fn inplace_on_views_gradcheck() {
    use switchboard_autograd::{gradcheck, gradgradcheck};
    let f = |a: &[Tensor]| {
        let b = ops::mul_scalar(&a[0], 1.)?;
        let v = ops::narrow(&b, 1, 1, 2)?;
        ops::mul_(&v, &a[1])?; // broadcast row
        ops::tanh_(&ops::select(&b, 0, 0)?)?;
        ops::mul(&b, &b)
    };
    let x = leaf(&[0.1, -0.4, 0.7, 0.3, -0.9, 0.5], &[2, 3]);
    let z = leaf(&[0.8, -1.2], &[2]);
    assert!(gradcheck(f, &[x.clone(), z.clone()], 1e-6, 1e-5, 1e-3).unwrap());
    assert!(gradgradcheck(f, &[x, z], 3, 1e-6, 1e-5, 1e-3).unwrap());
}

#[test]
fn inplace_on_a_view_of_a_leaf_is_refused() {
    let x = leaf(&[1., 2.], &[2]);
    let e = ops::mul_scalar_(&ops::narrow(&x, 0, 0, 1).unwrap(), 2).unwrap_err();
    assert_eq!(
        e.to_string(),
        "a view of a leaf Variable that requires grad is being used in an in-place operation."
    );
    // Allowed without grad mode.
    let _g = no_grad();
    ops::mul_scalar_(&ops::narrow(&x, 0, 0, 1).unwrap(), 2).unwrap();
    assert_eq!(vals(&x), [2., 2.]);
}
