//! Nested forward mode: each `jvp` has its own dual level, so `jvp(jvp(f))`,
//! `jacfwd(jacfwd(f))`, `jacrev(jacfwd(f))` and `jacfwd(jacrev(f))` (`hessian`) compose, with
//! values recorded from PyTorch 2.15's `torch.func`; the raw `forward_ad` API still refuses to
//! nest, as PyTorch's does.
#![allow(clippy::cloned_ref_to_slice_refs)] // literal input lists read best

use switchboard_autograd::{dual_level, forward_grad};
use switchboard_cpu as _;
use switchboard_dispatcher::Result;
use switchboard_functorch::{grad, hessian, jacfwd, jacrev, jvp};
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
            "{what}: element {i} is {p}, expected {q} (all: {x:?})"
        );
    }
}

fn x() -> Tensor {
    floats(&[0.5, -1., 2.], &[3])
}
fn v() -> Tensor {
    floats(&[1., -2., 0.5], &[3])
}
fn u() -> Tensor {
    floats(&[0., 1., 1.], &[3])
}

type F = fn(&[Tensor]) -> Result<Tensor>;

/// Scalar functions and their Hessians at `x()` (PyTorch 2.15, `jacfwd(jacfwd(f))(x)`).
fn scalar_functions() -> Vec<(&'static str, F, [f32; 9])> {
    vec![
        (
            "sum(sin(x) * x)",
            |a| ops::sum(&ops::mul(&ops::sin(&a[0])?, &a[0])?),
            [
                1.515_452_4,
                0.,
                0.,
                0.,
                0.239_133_72,
                0.,
                0.,
                0.,
                -2.650_888_4,
            ],
        ),
        (
            "sum(exp(x) x^2) / (1 + sum(x^2))",
            |a| {
                let sq = ops::mul(&a[0], &a[0])?;
                let num = ops::sum(&ops::mul(&ops::exp(&a[0])?, &sq)?)?;
                ops::div(&num, &ops::add_scalar(&ops::sum(&sq)?, 1.0)?)
            },
            [
                -0.289_090_66,
                -0.382_093_8,
                -0.730_255_66,
                -0.382_093_8,
                -0.655_69,
                1.076_109_5,
                -0.730_255_66,
                1.076_109_5,
                6.868_275,
            ],
        ),
        (
            "log(sum(exp(3 tanh(x))))",
            |a| {
                let e = ops::exp(&ops::mul_scalar(&ops::tanh(&a[0])?, 3.0)?)?;
                ops::log(&ops::sum(&e)?)
            },
            [
                0.430_125_5,
                -0.002_471_023_5,
                -0.073_630_09,
                -0.002_471_023_5,
                0.016_093_988,
                -0.001_000_587_2,
                -0.073_630_08,
                -0.001_000_587_2,
                -0.326_134_23,
            ],
        ),
        (
            "mse(sigmoid(x).view(3, 1).t(), t)",
            |a| {
                let r = ops::view(&ops::sigmoid(&a[0])?, &[3, 1])?;
                ops::mse_loss(&ops::t(&r)?, &floats(&[1., 0., 1.], &[1, 3]))
            },
            [
                0.051_304_52,
                0.,
                0.,
                0.,
                0.042_061_11,
                0.,
                0.,
                0.,
                0.013_703_622,
            ],
        ),
    ]
}

#[test]
fn jacfwd_of_jacfwd_is_the_hessian() {
    for (name, f, expected) in scalar_functions() {
        let inner = |xs: &[Tensor]| -> Result<Tensor> { Ok(jacfwd(f, xs, &[0])?.remove(0)) };
        let fwd_fwd = jacfwd(inner, &[x()], &[0]).unwrap().remove(0);
        assert_eq!(fwd_fwd.sizes(), &[3, 3], "{name}");
        close(&fwd_fwd, &expected, &format!("{name}: jacfwd(jacfwd)"));
        close(
            &hessian(f, &[x()], 0).unwrap(),
            &expected,
            &format!("{name}: hessian"),
        );
        let inner_rev = |xs: &[Tensor]| -> Result<Tensor> { Ok(jacrev(f, xs, &[0])?.remove(0)) };
        let rev_rev = jacrev(inner_rev, &[x()], &[0]).unwrap().remove(0);
        close(&rev_rev, &expected, &format!("{name}: jacrev(jacrev)"));
        let rev_fwd = jacrev(inner, &[x()], &[0]).unwrap().remove(0);
        close(&rev_fwd, &expected, &format!("{name}: jacrev(jacfwd)"));
        // Nothing is dual once the transforms returned.
        assert!(forward_grad(&fwd_fwd).is_none());
    }
}

#[test]
fn jacfwd_of_jacfwd_of_a_vector_function() {
    // tanh(x) * sum(x): a [3] output, so a [3, 3, 3] second derivative.
    let f = |a: &[Tensor]| ops::mul(&ops::tanh(&a[0])?, &ops::sum(&a[0])?);
    let inner = |xs: &[Tensor]| -> Result<Tensor> { Ok(jacfwd(f, xs, &[0])?.remove(0)) };
    let h = jacfwd(inner, &[x()], &[0]).unwrap().remove(0);
    assert_eq!(h.sizes(), &[3, 3, 3]);
    close(
        &h,
        &[
            0.482_602_48,
            0.786_447_7,
            0.786_447_7,
            0.786_447_7,
            0.,
            0.,
            0.786_447_7,
            0.,
            0.,
            0.,
            0.419_974_3,
            0.,
            0.419_974_3,
            1.799_498_6,
            0.419_974_3,
            0.,
            0.419_974_3,
            0.,
            0.,
            0.,
            0.070_650_816,
            0.,
            0.,
            0.070_650_816,
            0.070_650_816,
            0.070_650_816,
            -0.063_026_37,
        ],
        "jacfwd(jacfwd(tanh(x) * sum(x)))",
    );
}

#[test]
fn third_derivative_through_three_levels() {
    // sum(x^3) + prod(sin(x)): jacfwd(jacfwd(jacfwd(f))) nests three dual levels.
    let f = |a: &[Tensor]| {
        let cube = ops::mul(&ops::mul(&a[0], &a[0])?, &a[0])?;
        ops::add(&ops::sum(&cube)?, &ops::prod(&ops::sin(&a[0])?)?)
    };
    let second = |xs: &[Tensor]| -> Result<Tensor> {
        let first = |ys: &[Tensor]| -> Result<Tensor> { Ok(jacfwd(f, ys, &[0])?.remove(0)) };
        Ok(jacfwd(first, xs, &[0])?.remove(0))
    };
    let third = jacfwd(second, &[x()], &[0]).unwrap().remove(0);
    assert_eq!(third.sizes(), &[3, 3, 3]);
    close(
        &third,
        &[
            6.671_48,
            -0.235_539_63,
            -0.167_883_08,
            -0.235_539_63,
            0.671_48,
            -0.197_320_15,
            -0.167_883_08,
            -0.197_320_15,
            0.671_48,
            -0.235_539_63,
            0.671_48,
            -0.197_320_15,
            0.671_48,
            5.764_460_6,
            -0.167_883_07,
            -0.197_320_15,
            -0.167_883_07,
            -0.235_539_63,
            -0.167_883_14,
            -0.197_320_15,
            0.671_48,
            -0.197_320_15,
            -0.167_883_08,
            -0.235_539_63,
            0.671_48,
            -0.235_539_63,
            5.832_117,
        ],
        "jacfwd^3",
    );
}

#[test]
fn jvp_of_jvp_is_a_second_directional_derivative() {
    // g = sin(x) exp(x); jvp(x -> jvp(g, x, v).tangent, x, u).
    let inner = |a: &[Tensor]| -> Result<Vec<Tensor>> {
        let g = |b: &[Tensor]| Ok(vec![ops::mul(&ops::sin(&b[0])?, &ops::exp(&b[0])?)?]);
        Ok(jvp(g, a, &[v()])?.1)
    };
    let (out, tangent) = jvp(inner, &[x()], &[u()]).unwrap();
    close(
        &out[0],
        &[2.237_328, 0.221_587_5, 1.821_958_7],
        "jvp(jvp) primal",
    );
    close(
        &tangent[0],
        &[0., -0.795_064_45, -3.074_932_6],
        "jvp(jvp) tangent",
    );
}

#[test]
fn levels_do_not_confuse_perturbations() {
    // d/dx [x * d/dy (x + y)] = 1: the inner jvp's tangent of x + y is 1, whatever x's outer
    // tangent (perturbation confusion would give 2).
    let outer = |a: &[Tensor]| -> Result<Vec<Tensor>> {
        let x = a[0].clone();
        let (_, dy) = jvp(
            |b| Ok(vec![ops::add(&x, &b[0])?]),
            &[floats(&[2.], &[])],
            &[floats(&[1.], &[])],
        )?;
        Ok(vec![ops::mul(&x, &dy[0])?])
    };
    let (out, tangent) = jvp(outer, &[floats(&[1.5], &[])], &[floats(&[1.], &[])]).unwrap();
    close(&out[0], &[1.5], "x * 1");
    close(&tangent[0], &[1.], "d/dx");
}

#[test]
fn raw_forward_ad_still_refuses_to_nest() {
    let nested = "Nested forward mode AD is not supported at the moment";
    // A raw level inside a jvp, and a jvp inside a raw level, are PyTorch's error.
    let err = jvp(
        |a| {
            let _level = dual_level()?;
            Ok(vec![ops::sin(&a[0])?])
        },
        &[x()],
        &[v()],
    )
    .err()
    .unwrap()
    .to_string();
    assert_eq!(err, nested);
    {
        let _level = dual_level().unwrap();
        let err = jvp(|a| Ok(vec![ops::sin(&a[0])?]), &[x()], &[v()])
            .err()
            .unwrap()
            .to_string();
        assert_eq!(err, nested);
        let err = dual_level().err().unwrap().to_string();
        assert_eq!(err, nested);
    }
    // The failed calls left no level behind.
    assert!(jvp(|a| Ok(vec![ops::sin(&a[0])?]), &[x()], &[v()]).is_ok());
    assert!(dual_level().is_ok());
}

/// `sum(sin(x) x^2)`.
fn sin_x_squared(a: &[Tensor]) -> Result<Tensor> {
    ops::sum(&ops::mul(&ops::mul(&ops::sin(&a[0])?, &a[0])?, &a[0])?)
}

#[test]
fn nested_levels_through_views_and_inplace_writes() {
    // y = x.clone(); y *= x; y[1:] += sin(x[:2]); sum(y exp(x)).
    let f = |a: &[Tensor]| -> Result<Tensor> {
        let y = ops::clone(&a[0])?;
        ops::mul_(&y, &a[0])?;
        let tail = ops::narrow(&y, 0, 1, 2)?;
        ops::add_(&tail, &ops::sin(&ops::narrow(&a[0], 0, 0, 2)?)?)?;
        ops::sum(&ops::mul(&y, &ops::exp(&a[0])?)?)
    };
    let inner = |xs: &[Tensor]| -> Result<Tensor> { Ok(jacfwd(f, xs, &[0])?.remove(0)) };
    let h = jacfwd(inner, &[x()], &[0]).unwrap().remove(0);
    close(
        &h,
        &[
            6.830_694_7,
            0.322_844_6,
            0.,
            0.322_844_6,
            6.026_167,
            3.992_324_4,
            0.,
            3.992_324_4,
            97.229_11,
        ],
        "jacfwd(jacfwd) through in-place writes",
    );
}

#[test]
fn forward_over_forward_over_reverse() {
    // jacfwd(hessian(f)): three levels, the innermost a reverse one.
    let inner = |xs: &[Tensor]| -> Result<Tensor> { hessian(sin_x_squared, xs, 0) };
    let third = jacfwd(inner, &[x()], &[0]).unwrap().remove(0);
    assert_eq!(third.sizes(), &[3, 3, 3]);
    let mut expected = [0f32; 27];
    expected[0] = 3.607_823;
    expected[13] = -2.347_314_1;
    expected[26] = -11.743_862;
    close(&third, &expected, "jacfwd(hessian)");
    // jvp(jvp(grad(f))).
    let g = |a: &[Tensor]| -> Result<Vec<Tensor>> {
        Ok(jvp(|b| grad(sin_x_squared, b, &[0]), a, &[v()])?.1)
    };
    let (_, tangent) = jvp(g, &[x()], &[u()]).unwrap();
    close(
        &tangent[0],
        &[0., 4.694_628_2, -5.871_931],
        "jvp(jvp(grad))",
    );
}

#[test]
fn per_sample_hessians_through_vmap() {
    let xs = floats(&[0.5, -1., 2., 1., 0.25, -0.5], &[2, 3]);
    let hessians = switchboard_functorch::vmap(
        |a| {
            let inner = |ys: &[Tensor]| -> Result<Tensor> {
                Ok(jacfwd(sin_x_squared, ys, &[0])?.remove(0))
            };
            Ok(jacfwd(inner, a, &[0])?.remove(0))
        },
        &[Some(0)],
        &[xs],
    )
    .unwrap();
    assert_eq!(hessians.sizes(), &[2, 3, 3]);
    let mut expected = [0f32; 18];
    for (i, d) in [
        2.594_16,
        -3.002_680_3,
        -5.147_77,
        3.002_680_3,
        1.448_257_7,
        -2.594_16,
    ]
    .into_iter()
    .enumerate()
    {
        expected[(i / 3) * 9 + (i % 3) * 4] = d;
    }
    close(&hessians, &expected, "vmap(jacfwd(jacfwd))");
}

#[test]
fn hessian_through_convolution_and_activation_backwards() {
    // jacfwd(jacrev(f)) runs the forward formulas of convolution_backward, gelu_backward and
    // elu_backward; PyTorch 2.15's `hessian` of sum(gelu(y) + elu(y)), y = conv2d(x, w).
    let input = floats(
        &[0.1, -0.2, 0.3, 0.4, 0.5, -0.6, 0.7, -0.8, 0.9],
        &[1, 1, 3, 3],
    );
    let w = floats(
        &[0.5, -0.25, 0.75, 1.0, -0.5, 0.3, 0.2, -0.1],
        &[2, 1, 2, 2],
    );
    let net = |a: &[Tensor]| -> Result<Tensor> {
        let y = ops::conv2d(&input, &a[0])?;
        ops::sum(&ops::add(&ops::gelu(&y)?, &ops::elu(&y)?)?)
    };
    let h = hessian(net, &[w.clone()], 0).unwrap();
    assert_eq!(h.sizes(), &[2, 1, 2, 2, 2, 1, 2, 2]);
    let blocks: [[f32; 16]; 2] = [
        [
            0.428_587_68,
            0.088_374_79,
            0.133_119_34,
            -0.117_494_76,
            0.088_374_79,
            0.700_014_9,
            0.957_991_96,
            -1.162_974_5,
            0.133_119_4,
            0.957_992,
            1.466_144_6,
            -1.568_233,
            -0.117_494_76,
            -1.162_974_6,
            -1.568_233,
            1.960_847_1,
        ],
        [
            0.417_704,
            -0.219_597_25,
            -0.182_158_44,
            0.369_347_93,
            -0.219_597_25,
            0.683_438_7,
            0.716_517_3,
            -1.144_874_3,
            -0.182_158_5,
            0.716_517_3,
            1.466_242_3,
            -1.017_469_6,
            0.369_347_93,
            -1.144_874_3,
            -1.017_469_5,
            1.983_311_3,
        ],
    ];
    // The Hessian is block diagonal: each output channel's weights only meet each other.
    let mut expected = [0f32; 64];
    for (c, block) in blocks.iter().enumerate() {
        for i in 0..4 {
            for j in 0..4 {
                expected[(c * 4 + i) * 8 + c * 4 + j] = block[i * 4 + j];
            }
        }
    }
    close(&h, &expected, "hessian of a conv + gelu + elu net");
}

#[test]
fn per_sample_hessians_of_a_shared_parameter() {
    // vmap(hessian(f), in_dims=(None, 0)): the parameter is shared by the samples, so grad
    // lifts it to an expanded leaf (a product with it folds the batch, Note [Products with
    // shared operands]) that carries jacfwd's tangent. Against a loop of hessians, and two
    // of PyTorch 2.15's values.
    let xs = floats(&[0.5, -1., 2., 1., 0.25, -0.5], &[2, 3]);
    let w = floats(&[0.1, -0.2, 0.3, 0.4, -0.5, 0.6], &[3, 2]);
    let f = |a: &[Tensor]| -> Result<Tensor> {
        ops::sum(&ops::tanh(&ops::matmul(
            &ops::unsqueeze(&a[1], 0)?,
            &a[0],
        )?)?)
    };
    let batched = switchboard_functorch::vmap(
        |a| hessian(f, a, 0),
        &[None, Some(0)],
        &[w.clone(), xs.clone()],
    )
    .unwrap();
    assert_eq!(batched.sizes(), &[2, 3, 2, 3, 2]);
    let looped: Vec<Tensor> = (0..2)
        .map(|b| hessian(f, &[w.clone(), ops::select(&xs, 0, b).unwrap()], 0).unwrap())
        .collect();
    let looped = ops::stack(&looped).unwrap();
    close(
        &batched,
        &looped.to_vec::<f32>().unwrap(),
        "vmap(hessian) == loop",
    );
    let values = batched.to_vec::<f32>().unwrap();
    close(
        &floats(&[values[0], values[36]], &[2]),
        &[0.118_935_67, -0.673_176_6],
        "PyTorch's values",
    );
}
