//! The `out=` overloads generated from `autogen:` lines (Note [Generated out= kernels]),
//! `squeeze.dims` and the `bernoulli` family, checked against what PyTorch 2.15 gives.

use switchboard::autograd::AutogradTensor;
use switchboard::ops::{self, TensorOps};
use switchboard::prelude::*;

mod common;
use common::*;

fn empty(dtype: ScalarType) -> Tensor {
    Tensor::zeros(&[0], dtype).unwrap()
}

fn message(r: Result<impl std::fmt::Debug, DispatchError>) -> String {
    r.unwrap_err().to_string()
}

#[test]
fn out_forms_equal_their_functional_forms() {
    let a = r(&[2, 3], 1, -1.0, 1.0);
    let w = r(&[4, 3], 2, -1.0, 1.0);
    let out = ops::linear_out(&a, &w, &empty(ScalarType::Double)).unwrap();
    assert_close(&out, &ops::linear(&a, &w).unwrap(), "linear.out");
    let m = r(&[3, 5], 3, -1.0, 1.0);
    let out = ops::matmul_out(&a, &m, &empty(ScalarType::Double)).unwrap();
    assert_close(&out, &ops::matmul(&a, &m).unwrap(), "matmul.out");

    let img = r(&[1, 2, 5, 5], 4, -1.0, 1.0);
    let k = r(&[3, 2, 3, 3], 5, -1.0, 1.0);
    let (s, p, d, op) = (
        &[1i64, 1][..],
        &[1i64, 1][..],
        &[1i64, 1][..],
        &[0i64, 0][..],
    );
    let out = ops::convolution_out(
        &img,
        &k,
        None,
        s,
        p,
        d,
        false,
        op,
        1,
        &empty(ScalarType::Double),
    )
    .unwrap();
    let want = ops::convolution(&img, &k, None, s, p, d, false, op, 1).unwrap();
    assert_close(&out, &want, "convolution.out");

    // Several outputs, each resized and written.
    let (o, i) = ops::max_pool2d_with_indices_out(
        &img,
        &[2, 2],
        &empty(ScalarType::Double),
        &empty(ScalarType::Long),
    )
    .unwrap();
    let (wo, wi) = ops::max_pool2d_with_indices(&img, &[2, 2]).unwrap();
    assert_close(&o, &wo, "max_pool2d_with_indices.out values");
    assert_eq!(i.to_vec::<i64>().unwrap(), wi.to_vec::<i64>().unwrap());
    let outs = [0, 1, 2].map(|_| empty(ScalarType::Double));
    let got = ops::native_layer_norm_out(&a, &[3], None, None, 1e-5, &outs[0], &outs[1], &outs[2])
        .unwrap();
    let want = ops::native_layer_norm(&a, &[3], None, None, 1e-5).unwrap();
    assert_close(&got.0, &want.0, "native_layer_norm.out");
    assert_close(&got.2, &want.2, "native_layer_norm.out rstd");
    assert_eq!(
        got.1.sizes(),
        &[2, 1],
        "each out is resized (Note [Functional resize])"
    );

    let filled = ops::fill_scalar_out(&a, 2.5, &empty(ScalarType::Double)).unwrap();
    assert_eq!(vals(&filled), [2.5; 6]);
    let zeroed = ops::zero_out(&a, &empty(ScalarType::Double)).unwrap();
    assert_eq!(vals(&zeroed), [0.0; 6]);
}

#[test]
fn out_dtype_must_be_the_result_dtype() {
    let a = r(&[2, 3], 1, -1.0, 1.0);
    assert_eq!(
        message(ops::fill_scalar_out(&a, 1.0, &empty(ScalarType::Float))),
        "Expected out tensor to have dtype double, but got float instead"
    );
    let img = r(&[1, 1, 4, 4], 4, -1.0, 1.0);
    assert_eq!(
        message(ops::max_pool2d_with_indices_out(
            &img,
            &[2, 2],
            &empty(ScalarType::Double),
            &empty(ScalarType::Double)
        )),
        "Expected out tensor to have dtype long int, but got double instead"
    );
}

/// A factory's `out=` form makes its result in `out`'s dtype (and on its device), as
/// PyTorch's does: `zeros_like.out` into a float tensor gives float zeros.
#[test]
fn factory_out_forms_take_the_dtype_of_out() {
    let a = r(&[2, 3], 1, -1.0, 1.0);
    let z = ops::zeros_like_out(&a, &empty(ScalarType::Float)).unwrap();
    assert_eq!((z.dtype(), z.sizes()), (ScalarType::Float, &[2, 3][..]));
    let o = ops::ones_like_out(&a, &empty(ScalarType::Long)).unwrap();
    assert_eq!(o.to_vec::<i64>().unwrap(), [1; 6]);
    let c = ops::_to_copy_out(&a, &empty(ScalarType::Float)).unwrap();
    assert_eq!(c.dtype(), ScalarType::Float);
    assert_eq!(vals(&c)[0], vals(&a)[0] as f32 as f64);
    let e = ops::empty_out(&[3, 2], &empty(ScalarType::Int)).unwrap();
    assert_eq!((e.dtype(), e.sizes()), (ScalarType::Int, &[3, 2][..]));
    let u = ops::rand_out(&[1000], &empty(ScalarType::Double)).unwrap();
    assert!(vals(&u).iter().all(|v| (0.0..1.0).contains(v)));
    let i = ops::randint_low_out(3, 7, &[1000], &empty(ScalarType::Float)).unwrap();
    assert_eq!(i.dtype(), ScalarType::Float);
    assert!(vals(&i)
        .iter()
        .all(|v| (3.0..7.0).contains(v) && v.fract() == 0.0));
    let s = ops::empty_strided_out(&[2, 3], &[1, 2], &empty(ScalarType::Double)).unwrap();
    assert_eq!(s.sizes(), &[2, 3]);
}

#[test]
fn out_forms_do_not_differentiate() {
    let a = x(&[2, 3], 1);
    let w = r(&[4, 3], 2, -1.0, 1.0);
    assert_eq!(
        message(ops::linear_out(&a, &w, &empty(ScalarType::Double))),
        "linear(): functions with out=... arguments don't support automatic differentiation, \
         but one of the arguments requires grad."
    );
}

#[test]
fn squeeze_dims_drops_the_listed_size_one_dims() {
    let a = r(&[1, 2, 1, 3], 1, -1.0, 1.0);
    let s = ops::squeeze_dims(&a, &[0, 2]).unwrap();
    assert_eq!(s.sizes(), &[2, 3]);
    assert_eq!(vals(&s), vals(&a));
    assert_eq!(a.squeeze_dims(&[1, -1]).unwrap().sizes(), &[1, 2, 1, 3]);
    assert_eq!(a.squeeze_dims(&[]).unwrap().sizes(), &[1, 2, 1, 3]);
    // A view: writes through it reach the base.
    ops::fill_(&s, 4.0).unwrap();
    assert_eq!(vals(&a), [4.0; 6]);
    assert_eq!(
        message(ops::squeeze_dims(&a, &[0, -4])),
        "dim 0 appears multiple times in the list of dims"
    );
    assert_eq!(
        message(ops::squeeze_dims(&a, &[4])),
        "Dimension out of range (expected to be in range of [-4, 3], but got 4)"
    );
    check_grad(
        "squeeze.dims",
        |t| ops::squeeze_dims(&t[0], &[0, 2, 3]),
        &[x(&[1, 2, 1, 3], 2)],
    );
    let leaf = x(&[1, 2, 1], 3);
    let y = ops::squeeze_dims(&leaf, &[0, -1]).unwrap();
    assert_eq!(y.grad_fn().unwrap().name(), "SqueezeBackward2");
}

#[test]
fn bernoulli_draws_with_the_given_probabilities() {
    let p = Tensor::from_vec(vec![1.0f64, 0.0, 1.0, 0.0], &[2, 2]).unwrap();
    assert_eq!(
        vals(&ops::bernoulli_default(&p).unwrap()),
        [1.0, 0.0, 1.0, 0.0]
    );
    // bernoulli.Tensor: `self`'s shape and dtype, `p` broadcast to it.
    let ints = Tensor::zeros(&[3, 2], ScalarType::Long).unwrap();
    let row = Tensor::from_vec(vec![1.0f32, 0.0], &[2]).unwrap();
    let b = ops::bernoulli_tensor(&ints, &row).unwrap();
    assert_eq!(b.to_vec::<i64>().unwrap(), [1, 0, 1, 0, 1, 0]);
    assert_eq!(
        ints.to_vec::<i64>().unwrap(),
        [0; 6],
        "the functional form copies"
    );
    ints.bernoulli_tensor_(&row).unwrap();
    assert_eq!(ints.to_vec::<i64>().unwrap(), [1, 0, 1, 0, 1, 0]);
    let half = Tensor::full(&[4000], 0.25, ScalarType::Double).unwrap();
    let mean = vals(&ops::bernoulli_default(&half).unwrap())
        .iter()
        .sum::<f64>()
        / 4000.0;
    assert!((mean - 0.25).abs() < 0.03, "{mean}");
    let out = ops::bernoulli_out(&p, &empty(ScalarType::Double)).unwrap();
    assert_eq!(vals(&out), [1.0, 0.0, 1.0, 0.0]);

    let bad = Tensor::from_vec(vec![0.5f64, 1.5], &[2]).unwrap();
    assert_eq!(
        message(ops::bernoulli_default(&bad)),
        "Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error message \
         be improved?  If so, please report an enhancement request to PyTorch.)"
    );
    assert_eq!(
        message(ops::bernoulli_default(
            &Tensor::zeros(&[2], ScalarType::Long).unwrap()
        )),
        "\"bernoulli_tensor_cpu_p_\" not implemented for 'Long'"
    );
    assert!(ops::bernoulli_tensor(&Tensor::zeros(&[3], ScalarType::Float).unwrap(), &p).is_err());

    // Gradients are zero (PyTorch's formulas), and flow to `p` too.
    let probs = r(&[3], 7, 0.0, 1.0).requires_grad_(true).unwrap();
    let y = ops::bernoulli_default(&probs).unwrap();
    assert_eq!(y.grad_fn().unwrap().name(), "BernoulliBackward0");
    y.sum().unwrap().backward().unwrap();
    assert_eq!(vals(&probs.grad().unwrap()), [0.0; 3]);
    let y = ops::bernoulli_tensor(&r(&[3], 8, 0.0, 1.0), &probs).unwrap();
    assert_eq!(y.grad_fn().unwrap().name(), "BernoulliBackward1");
}
