//! The forward-mode transforms: `jvp` and `jacfwd` against values recorded from PyTorch 2.15's
//! `torch.func`, `jacfwd(f) == jacrev(f)`, and the compositions `jvp(grad(f))`,
//! `grad(jvp(f))`, `vmap(jvp(f))` and `hessian` (`jacfwd(jacrev(f))`).
#![allow(clippy::cloned_ref_to_slice_refs)] // literal input lists read best, as in the README

use switchboard_cpu as _;
use switchboard_dispatcher::Result;
use switchboard_functorch::{grad, hessian, jacfwd, jacrev, jvp, vmap};
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

fn floats(values: &[f32], sizes: &[i64]) -> Tensor {
    Tensor::from_vec(values.to_vec(), sizes).unwrap()
}

fn close(a: &Tensor, expected: &[f32], what: &str) {
    let x = a.to_vec::<f32>().unwrap();
    assert_eq!(x.len(), expected.len(), "{what}: {x:?}");
    for (i, (p, q)) in x.iter().zip(expected).enumerate() {
        assert!(
            (p - q).abs() <= 1e-4 + 1e-4 * q.abs(),
            "{what}: element {i} is {p}, expected {q}"
        );
    }
}

fn same(a: &Tensor, b: &Tensor, what: &str) {
    assert_eq!(a.sizes(), b.sizes(), "{what}: sizes");
    close(a, &b.to_vec::<f32>().unwrap(), what);
}

fn x() -> Tensor {
    floats(&[0.5, -1., 2.], &[3])
}
fn v() -> Tensor {
    floats(&[1., -2., 0.5], &[3])
}
fn w() -> Tensor {
    floats(
        &[
            0.1, -0.2, 0.3, 0.4, 0.5, 0.6, -0.7, 0.8, -0.9, 1.0, 1.1, -1.2,
        ],
        &[3, 4],
    )
}
fn b() -> Tensor {
    floats(&[0.01, -0.02, 0.03, 0.04], &[4])
}
fn data() -> Tensor {
    floats(&[1., 2., 3., -1., 0.5, 0.25], &[2, 3])
}

/// `log_softmax(tanh(X @ w + b), 1)`.
fn layer(a: &[Tensor]) -> Result<Tensor> {
    let h = ops::add(&ops::matmul(&data(), &a[0])?, &a[1])?;
    ops::log_softmax(&ops::tanh(&h)?, 1)
}

/// `cross_entropy(relu(X @ w + b), [1, 3])`.
fn loss(a: &[Tensor]) -> Result<Tensor> {
    let h = ops::relu(&ops::add(&ops::matmul(&data(), &a[0])?, &a[1])?)?;
    let target = Tensor::from_vec(vec![1i64, 3], &[2])?;
    ops::cross_entropy_loss(&h, &target)
}

#[test]
fn jvp_matches_pytorch() {
    let y = floats(&[1.5, 0.25, -0.5], &[3]);
    let u = floats(&[0., 1., 1.], &[3]);
    let f = |a: &[Tensor]| -> Result<Vec<Tensor>> {
        let s = ops::sum(&ops::sin(&ops::mul(&a[0], &a[1])?)?)?;
        let e = ops::sum(&ops::mul(&ops::exp(&a[0])?, &a[1])?)?;
        Ok(vec![ops::add(&s, &e)?])
    };
    let (out, tangent) = jvp(f, &[x(), y], &[v(), u]).unwrap();
    close(&out[0], &[-1.536_712_4], "jvp output");
    close(&tangent[0], &[8.788_507], "jvp tangent");
    // Outside the transform nothing is dual any more.
    assert!(switchboard_autograd::forward_grad(&tangent[0]).is_none());
}

#[test]
fn jacfwd_matches_pytorch_and_jacrev() {
    let fwd = jacfwd(layer, &[w(), b()], &[0, 1]).unwrap();
    assert_eq!(fwd[0].sizes(), &[2, 4, 3, 4]);
    assert_eq!(fwd[1].sizes(), &[2, 4, 4]);
    let first: Vec<f32> = fwd[0].to_vec::<f32>().unwrap()[..8].to_vec();
    close(
        &floats(&first, &[8]),
        &[
            0.143_426_72,
            -0.000_614_260_03,
            -0.019_456_247,
            -0.010_508_452,
            0.286_853_43,
            -0.001_228_520_1,
            -0.038_912_494,
            -0.021_016_903,
        ],
        "jacfwd w",
    );
    let rev = jacrev(layer, &[w(), b()], &[0, 1]).unwrap();
    same(&fwd[0], &rev[0], "jacfwd == jacrev (w)");
    same(&fwd[1], &rev[1], "jacfwd == jacrev (b)");
    // More functions: pointwise, reductions, views, losses.
    type F = fn(&[Tensor]) -> Result<Tensor>;
    let functions: [(&str, F); 4] = [
        ("sin(x) * x", |a| ops::mul(&ops::sin(&a[0])?, &a[0])),
        ("sigmoid(x)^2 / (1 + x^2)", |a| {
            let s = ops::sigmoid(&a[0])?;
            ops::div(
                &ops::mul(&s, &s)?,
                &ops::add_scalar(&ops::mul(&a[0], &a[0])?, 1.0)?,
            )
        }),
        ("mse(relu(x)[view], t)", |a| {
            let r = ops::view(&ops::relu(&a[0])?, &[3, 1])?;
            ops::mse_loss(&ops::t(&r)?, &floats(&[1., 0., 1.], &[1, 3]))
        }),
        ("mean(exp(x) - log(x^2 + 1))", |a| {
            let l = ops::log(&ops::add_scalar(&ops::mul(&a[0], &a[0])?, 1.0)?)?;
            ops::mean(&ops::sub(&ops::exp(&a[0])?, &l)?)
        }),
    ];
    for (name, f) in functions {
        let fwd = jacfwd(f, &[x()], &[0]).unwrap();
        let rev = jacrev(f, &[x()], &[0]).unwrap();
        same(&fwd[0], &rev[0], name);
    }
}

#[test]
fn jvp_of_grad_is_forward_over_reverse() {
    // grad of sum(x^3) + sum(sin x) is 3x^2 + cos x; its jvp along v is (6x - sin x) v.
    let h = |a: &[Tensor]| -> Result<Tensor> {
        let cube = ops::mul(&ops::mul(&a[0], &a[0])?, &a[0])?;
        ops::add(&ops::sum(&cube)?, &ops::sum(&ops::sin(&a[0])?)?)
    };
    let (_, tangent) = jvp(|a| grad(h, a, &[0]), &[x()], &[v()]).unwrap();
    close(
        &tangent[0],
        &[2.520_574_6, 10.317_059, 5.545_351_5],
        "jvp(grad)",
    );
}

#[test]
fn grad_of_jvp_is_reverse_over_forward() {
    let g = grad(
        |a| {
            let (_, t) = jvp(
                |z| Ok(vec![ops::sum(&ops::mul(&ops::mul(&z[0], &z[0])?, &z[0])?)?]),
                a,
                &[v()],
            )?;
            Ok(t[0].clone())
        },
        &[x()],
        &[0],
    )
    .unwrap();
    close(&g[0], &[3., 12., 6.], "grad(jvp)");
}

#[test]
fn vmap_of_jvp_batches_tangents() {
    let tangents = ops::stack(&[v(), floats(&[0., 1., 1.], &[3])]).unwrap();
    let out = vmap(
        |t| {
            let (_, tangent) = jvp(
                |a| Ok(vec![ops::mul(&ops::sigmoid(&a[0])?, &a[0])?]),
                &[x()],
                &[t[0].clone()],
            )?;
            Ok(tangent[0].clone())
        },
        &[Some(0)],
        &[tangents],
    )
    .unwrap();
    assert_eq!(out.sizes(), &[2, 3]);
    close(
        &out,
        &[
            0.739_961_2,
            -0.144_658_98,
            0.545_392_16,
            0.,
            0.072_329_49,
            1.090_784_3,
        ],
        "vmap(jvp)",
    );
}

#[test]
fn hessian_is_jacfwd_of_jacrev() {
    let h = hessian(loss, &[w(), b()], 0).unwrap();
    assert_eq!(h.sizes(), &[3, 4, 3, 4]);
    let total: f32 = h.to_vec::<f32>().unwrap().iter().sum();
    assert!((total - 0.545_824_3).abs() < 1e-4, "sum {total}");
    // The same as reverse over reverse.
    let inner = |xs: &[Tensor]| -> Result<Tensor> { Ok(jacrev(loss, xs, &[0])?.remove(0)) };
    let rev_rev = jacrev(inner, &[w(), b()], &[0]).unwrap().remove(0);
    same(&h, &rev_rev, "hessian == jacrev(jacrev)");
}

#[test]
fn pytorch_errors() {
    let err = jvp(|a| Ok(vec![ops::sin(&a[0])?]), &[x()], &[v(), v()])
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.starts_with(
            "jvp(f, primals, tangents): Expected primals and tangents to have the same python \
             structure."
        ),
        "{err}"
    );
    let err = jvp(
        |a| Ok(vec![ops::sin(&a[0])?]),
        &[x()],
        &[floats(&[1., 2., 3., 4.], &[4])],
    )
    .err()
    .unwrap()
    .to_string();
    assert_eq!(
        err,
        "Trying to set a forward gradient that has a different size than that of the original \
         Tensor, this is not supported. Tensor is of size [3] while the given forward gradient \
         is of size [4]."
    );
    let err = jacfwd(|a| ops::sin(&a[0]), &[x()], &[1])
        .err()
        .unwrap()
        .to_string();
    assert_eq!(err, "Got argnum=1, but only 1 positional inputs");
}

#[test]
fn readme_example() {
    // The README's example (Function transforms), with the crates' names.
    let x = floats(&[1., 2.], &[2]);
    let v = floats(&[1., -1.], &[2]);
    let square = |a: &[Tensor]| ops::mul(&a[0], &a[0]);
    let (_, tangents) = jvp(|a| Ok(vec![square(a)?]), &[x.clone()], &[v]).unwrap();
    assert_eq!(tangents[0].to_vec::<f32>().unwrap(), [2., -4.]);
    let j = jacfwd(square, &[x.clone()], &[0]).unwrap();
    assert_eq!(j[0].to_vec::<f32>().unwrap(), [2., 0., 0., 4.]);
    let h = hessian(
        |a| ops::sum(&ops::mul(&ops::mul(&a[0], &a[0])?, &a[0])?),
        &[x],
        0,
    )
    .unwrap();
    assert_eq!(h.to_vec::<f32>().unwrap(), [6., 0., 0., 12.]);
}
