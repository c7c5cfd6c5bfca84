//! Gradient layouts: matrix-product gradients in their operand's layout, and AccumulateGrad's
//! layout contract (a leaf's `.grad` has the leaf's strides). Values are checked against the
//! products written out.

use switchboard_autograd::AutogradTensor;
use switchboard_cpu as _;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

fn t(v: &[f32], s: &[i64]) -> Tensor {
    Tensor::from_vec(v.to_vec(), s).unwrap()
}
fn seq(n: usize, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|i| (i as f32 - n as f32 / 3.0) * scale)
        .collect()
}
/// The values in logical (row-major) order, whatever the strides.
fn v(t: &Tensor) -> Vec<f32> {
    ops::contiguous(t).unwrap().to_vec::<f32>().unwrap()
}

#[test]
fn linear_weight_grad_is_contiguous_and_exact() {
    let x = t(&seq(8, 0.5), &[2, 4]);
    let w = t(&seq(12, 0.25), &[3, 4]).requires_grad_(true).unwrap();
    let b = t(&[0.5, -1.0, 2.0], &[3]).requires_grad_(true).unwrap();
    let c = t(&seq(6, 1.5), &[2, 3]);
    let y = ops::linear_with(&x, &w, ops::LinearOptions::default().bias(&b)).unwrap();
    let loss = ops::sum(&ops::mul(&y, &c).unwrap()).unwrap();
    loss.backward().unwrap();
    let gw = w.grad().unwrap();
    // The weight's gradient arrives in the weight's layout (Note [Matrix product gradients in
    // the operand's layout]).
    assert_eq!(gw.strides(), w.strides());
    assert_eq!(v(&gw), v(&ops::mm(&ops::t(&c).unwrap(), &x).unwrap()));
    assert_eq!(
        v(&b.grad().unwrap()),
        v(&ops::sum_dim_int_list(&c, Some(&[0])).unwrap())
    );
}

#[test]
fn mm_grads_of_column_major_operands() {
    // mat1 = a.t() and mat2 = bm.t(): both column-major.
    let a = t(&seq(12, 0.5), &[4, 3]).requires_grad_(true).unwrap();
    let bm = t(&seq(8, 0.25), &[2, 4]).requires_grad_(true).unwrap();
    let (m1, m2) = (ops::t(&a).unwrap(), ops::t(&bm).unwrap());
    let g = t(&seq(6, 1.0), &[3, 2]);
    let y = ops::mm(&m1, &m2).unwrap();
    ops::sum(&ops::mul(&y, &g).unwrap())
        .unwrap()
        .backward()
        .unwrap();
    // d(mat1) = g @ mat2^T, d(a) = its transpose; d(mat2) = mat1^T @ g, d(bm) its transpose.
    let want_m1 = ops::mm(&g, &ops::t(&m2).unwrap()).unwrap();
    let want_m2 = ops::mm(&ops::t(&m1).unwrap(), &g).unwrap();
    let (ga, gb) = (a.grad().unwrap(), bm.grad().unwrap());
    assert!(ga.is_contiguous() && gb.is_contiguous());
    assert_eq!(v(&ga), v(&ops::t(&want_m1).unwrap()));
    assert_eq!(v(&gb), v(&ops::t(&want_m2).unwrap()));
}

#[test]
fn addmm_grads_with_alpha_match_the_products() {
    let c = t(&seq(3, 1.0), &[3]).requires_grad_(true).unwrap();
    let a = t(&seq(8, 0.5), &[4, 2]).requires_grad_(true).unwrap();
    let w = t(&seq(12, 0.125), &[3, 4]).requires_grad_(true).unwrap();
    // m1 = a.t(): [2, 4], m2 = w.t(): [4, 3], both column-major.
    let (m1, m2) = (ops::t(&a).unwrap(), ops::t(&w).unwrap());
    let y = ops::addmm_with(
        &c,
        &m1,
        &m2,
        ops::AddmmOptions::default().beta(0.5).alpha(2.0),
    )
    .unwrap();
    let g = t(&seq(6, 1.0), &[2, 3]);
    ops::sum(&ops::mul(&y, &g).unwrap())
        .unwrap()
        .backward()
        .unwrap();
    let want_m1 = ops::mul_scalar(&ops::mm(&g, &ops::t(&m2).unwrap()).unwrap(), 2.0).unwrap();
    let want_m2 = ops::mul_scalar(&ops::mm(&ops::t(&m1).unwrap(), &g).unwrap(), 2.0).unwrap();
    assert_eq!(v(&a.grad().unwrap()), v(&ops::t(&want_m1).unwrap()));
    assert_eq!(v(&w.grad().unwrap()), v(&ops::t(&want_m2).unwrap()));
    let want_c = ops::mul_scalar(&ops::sum_dim_int_list(&g, Some(&[0])).unwrap(), 0.5).unwrap();
    assert_eq!(v(&c.grad().unwrap()), v(&want_c));
}

#[test]
fn accumulated_grad_takes_the_leafs_strides() {
    // A transposed leaf: dense, not contiguous. The gradient of `x * c` is contiguous; the
    // stored `.grad` has the leaf's strides (PyTorch's AccumulateGrad layout contract).
    let x = ops::t(&t(&seq(6, 1.0), &[3, 2]))
        .unwrap()
        .detach()
        .requires_grad_(true)
        .unwrap();
    assert!(!x.is_contiguous());
    let c = t(&seq(6, 0.5), &[2, 3]);
    ops::sum(&ops::mul(&x, &c).unwrap())
        .unwrap()
        .backward()
        .unwrap();
    let g = x.grad().unwrap();
    assert_eq!(g.strides(), x.strides());
    assert_eq!(v(&g), v(&c));
}
