//! Second derivatives: gradgradcheck of every differentiable operator whose backward goes
//! through a backward helper operator (Note [gradgradcheck], Note [Convolution double
//! backward]), and known Hessians.
#![allow(clippy::cloned_ref_to_slice_refs)] // literal input lists read best

use switchboard_autograd::{grad, gradgradcheck, AutogradTensor, Result};
use switchboard_cpu as _;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

mod common;
use common::*;

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_vec_as::<f64>().unwrap()
}

fn check(name: &str, f: impl Fn(&[Tensor]) -> Result<Tensor>, inputs: &[Tensor]) {
    match gradgradcheck(f, inputs, 17, 1e-6, 1e-5, 1e-3) {
        Ok(true) => {}
        Ok(false) => panic!("{name}: gradgradcheck false"),
        Err(e) => panic!("{name}: {e}"),
    }
}

/// The diagonal of the Hessian of `sum(f(x))` for an elementwise `f`: f''(x).
fn second(f: impl Fn(&Tensor) -> Result<Tensor>, x: &Tensor) -> Tensor {
    let y = ops::sum(&f(x).unwrap()).unwrap();
    let g = grad(&[y], &[x.clone()], &[None], false, true).unwrap()[0]
        .clone()
        .unwrap();
    assert!(g.grad_fn().is_some(), "first gradient has history");
    let s = ops::sum(&g).unwrap();
    grad(&[s], &[x.clone()], &[None], false, false).unwrap()[0]
        .clone()
        .unwrap()
}

fn close(got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 1e-9, "got {got:?}, want {want:?}");
    }
}

#[test]
fn known_second_derivatives() {
    let xs = [-1.3, -0.2, 0.4, 2.1];
    let t = Tensor::from_vec(xs.to_vec(), &[4])
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    let want: Vec<f64> = xs
        .iter()
        .map(|&v: &f64| -2.0 * v.tanh() * (1.0 - v.tanh().powi(2)))
        .collect();
    close(&vals(&second(ops::tanh, &t)), &want);
    let sg = |v: f64| 1.0 / (1.0 + (-v).exp());
    let want: Vec<f64> = xs
        .iter()
        .map(|&v| sg(v) * (1.0 - sg(v)) * (1.0 - 2.0 * sg(v)))
        .collect();
    close(&vals(&second(ops::sigmoid, &t)), &want);
    // gelu''(x) = φ(x)(2 - x²).
    let phi = |v: f64| (-0.5 * v * v).exp() / (2.0 * std::f64::consts::PI).sqrt();
    let want: Vec<f64> = xs.iter().map(|&v| phi(v) * (2.0 - v * v)).collect();
    close(&vals(&second(ops::gelu, &t)), &want);
    // silu''(x) = σ(1-σ)(2 + x(1-2σ)).
    let want: Vec<f64> = xs
        .iter()
        .map(|&v| sg(v) * (1.0 - sg(v)) * (2.0 + v * (1.0 - 2.0 * sg(v))))
        .collect();
    close(&vals(&second(ops::silu, &t)), &want);
    // relu'' = 0 (with history: the gradient is threshold_backward of the incoming one).
    close(&vals(&second(ops::relu, &t)), &[0.0; 4]);
    // Hessian of log(sum(exp(x))) = -log_softmax(x)[0] + x[0]... use log_softmax of 2
    // elements: d²/dx0² of log_softmax(x)[0] = -p0 p1.
    let v = Tensor::from_vec(vec![0.3f64, -0.5], &[2])
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    let y = ops::select(&ops::_log_softmax(&v, 0, false).unwrap(), 0, 0).unwrap();
    let g = grad(&[y], &[v.clone()], &[None], false, true).unwrap()[0]
        .clone()
        .unwrap();
    assert_eq!(
        g.grad_fn().unwrap().name(),
        "LogSoftmaxBackwardDataBackward0"
    );
    let g0 = ops::select(&g, 0, 0).unwrap();
    let h = grad(&[g0], &[v.clone()], &[None], false, false).unwrap()[0]
        .clone()
        .unwrap();
    let p0 = 1.0 / (1.0 + (-0.8f64).exp());
    close(&vals(&h), &[-p0 * (1.0 - p0), p0 * (1.0 - p0)]);
}

#[test]
fn activations() {
    // Away from relu's kink.
    let a = Tensor::from_vec(vec![-0.7f64, -0.3, 0.2, 0.6, 0.9, -1.1], &[2, 3])
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    check("relu", |t| ops::relu(&t[0]), &[a.clone()]);
    check("sigmoid", |t| ops::sigmoid(&t[0]), &[a.clone()]);
    check("tanh", |t| ops::tanh(&t[0]), &[a.clone()]);
    check("gelu", |t| ops::gelu(&t[0]), &[a.clone()]);
    check(
        "gelu_tanh",
        |t| ops::gelu_with(&t[0], ops::GeluOptions::default().approximate("tanh")),
        &[a.clone()],
    );
    check("silu", |t| ops::silu(&t[0]), &[a.clone()]);
    check("softmax", |t| ops::softmax(&t[0], 1), &[x(&[2, 3], 1)]);
    check(
        "softmax dim 0",
        |t| ops::_softmax(&t[0], 0, false),
        &[x(&[3, 2], 2)],
    );
    check(
        "log_softmax",
        |t| ops::log_softmax(&t[0], -1),
        &[x(&[2, 3], 3)],
    );
    // Composition: the backward of tanh feeds gelu_backward's self.
    check(
        "gelu(tanh(x) * y)",
        |t| {
            ops::gelu_with(
                &ops::mul(&ops::tanh(&t[0])?, &t[1])?,
                ops::GeluOptions::default().approximate("tanh"),
            )
        },
        &[x(&[4], 4), x(&[4], 5)],
    );
}

#[test]
fn losses() {
    for red in 0..3 {
        check(
            "mse_loss",
            |t| ops::mse_loss_with(&t[0], &t[1], ops::MseLossOptions::default().reduction(red)),
            &[x(&[2, 3], 11), x(&[2, 3], 12)],
        );
    }
    let target = long(&[0, 2, 1, 2], &[4]);
    let w = r(&[3], 13, 0.5, 2.0);
    for red in 0..3 {
        let (tg, w) = (target.clone(), w.clone());
        check(
            "nll_loss(log_softmax)",
            move |t| {
                ops::nll_loss_with(
                    &ops::log_softmax(&t[0], 1)?,
                    &tg,
                    ops::NllLossOptions::default()
                        .weight(&w)
                        .reduction(red)
                        .ignore_index(1),
                )
            },
            &[x(&[4, 3], 14)],
        );
    }
    let tg = target.clone();
    check(
        "cross_entropy",
        move |t| ops::cross_entropy_loss(&t[0], &tg),
        &[x(&[4, 3], 15)],
    );
    // nll_loss alone is linear: its gradient of gradient w.r.t. grad_output only.
    let tg = target.clone();
    check(
        "nll_loss",
        move |t| ops::nll_loss(&t[0], &tg),
        &[x(&[4, 3], 16)],
    );
}

#[test]
fn pooling_embedding_dropout() {
    check(
        "max_pool2d",
        |t| {
            ops::max_pool2d_with(
                &t[0],
                &[2, 2],
                ops::MaxPool2dOptions::default()
                    .stride(&[1, 2])
                    .padding(&[0, 1]),
            )
        },
        &[x(&[1, 2, 4, 4], 21)],
    );
    let idx = long(&[1, 3, 1, 0, 2, 3], &[2, 3]);
    for pad in [-1, 1] {
        let i = idx.clone();
        check(
            "embedding * embedding",
            move |t| {
                let e = ops::embedding_with(
                    &t[0],
                    &i,
                    ops::EmbeddingOptions::default().padding_idx(pad),
                )?;
                ops::mul(&e, &e)
            },
            &[x(&[4, 3], 22)],
        );
    }
    // scale_grad_by_freq makes the first "gradient" a scaled one (not the derivative of the
    // forward), so only the linear case is consistent: the double backward is the exact
    // transpose of the scaled scatter.
    for pad in [-1, 3] {
        let i = idx.clone();
        check(
            "embedding scale_grad_by_freq",
            move |t| {
                ops::embedding_with(
                    &t[0],
                    &i,
                    ops::EmbeddingOptions::default()
                        .padding_idx(pad)
                        .scale_grad_by_freq(true),
                )
            },
            &[x(&[4, 3], 25)],
        );
    }
    check(
        "dropout (fixed mask)",
        |t| {
            switchboard_tensor::manual_seed(5);
            let d = ops::dropout(&t[0], 0.4, true)?;
            ops::mul(&d, &t[0])
        },
        &[x(&[3, 4], 23)],
    );
    // native_dropout_backward called directly, its gradient is recorded.
    let g = x(&[4], 24);
    let mask = Tensor::from_vec(vec![true, false, true, true], &[4]).unwrap();
    let m2 = mask.clone();
    check(
        "native_dropout_backward",
        move |t| ops::native_dropout_backward(&t[0], &m2, 2.0),
        &[g],
    );
}

#[test]
fn convolutions() {
    check(
        "conv1d",
        |t| {
            ops::conv1d_with(
                &t[0],
                &t[1],
                ops::Conv1dOptions::default()
                    .bias(&t[2])
                    .stride(&[2])
                    .padding(&[1]),
            )
        },
        &[x(&[2, 2, 5], 31), x(&[3, 2, 2], 32), x(&[3], 33)],
    );
    check(
        "conv2d groups+dilation",
        |t| {
            ops::conv2d_with(
                &t[0],
                &t[1],
                ops::Conv2dOptions::default()
                    .bias(&t[2])
                    .padding(&[1, 0])
                    .dilation(&[2, 1])
                    .groups(2),
            )
        },
        &[x(&[1, 4, 4, 3], 34), x(&[2, 2, 2, 2], 35), x(&[2], 36)],
    );
    check(
        "conv2d no bias",
        |t| {
            ops::conv2d_with(
                &t[0],
                &t[1],
                ops::Conv2dOptions::default()
                    .stride(&[2, 1])
                    .padding(&[0, 1]),
            )
        },
        &[x(&[2, 1, 4, 3], 37), x(&[2, 1, 2, 2], 38)],
    );
    check(
        "conv1d unbatched",
        |t| ops::conv1d_with(&t[0], &t[1], ops::Conv1dOptions::default().bias(&t[2])),
        &[x(&[2, 4], 45), x(&[3, 2, 2], 46), x(&[3], 47)],
    );
    // (Transposed convolutions: the CPU kernels do not implement them yet.)
    // Weight-only and input-only second derivatives.
    let w = r(&[2, 2, 3], 42, -1.0, 1.0);
    check(
        "conv1d input only",
        move |t| {
            ops::mul(
                &ops::conv1d_with(&t[0], &w, ops::Conv1dOptions::default().padding(&[1]))?,
                &t[1],
            )
        },
        &[x(&[1, 2, 4], 43), x(&[1, 2, 4], 44)],
    );
}

#[test]
fn layer_norm() {
    check(
        "layer_norm affine",
        |t| {
            ops::layer_norm_with(
                &t[0],
                &[3],
                ops::LayerNormOptions::default()
                    .weight(&t[1])
                    .bias(&t[2])
                    .cudnn_enable(false),
            )
        },
        &[x(&[2, 3], 51), x(&[3], 52), x(&[3], 53)],
    );
    check(
        "layer_norm no affine, 2 normalized dims",
        |t| {
            ops::layer_norm_with(
                &t[0],
                &[2, 3],
                ops::LayerNormOptions::default().cudnn_enable(false),
            )
        },
        &[x(&[2, 2, 3], 54)],
    );
    check(
        "layer_norm weight only",
        |t| {
            ops::layer_norm_with(
                &t[0],
                &[4],
                ops::LayerNormOptions::default()
                    .weight(&t[1])
                    .cudnn_enable(false),
            )
        },
        &[x(&[3, 4], 55), x(&[4], 56)],
    );
    let inp = r(&[2, 3], 57, -1.0, 1.0);
    check(
        "layer_norm params only",
        move |t| {
            ops::layer_norm_with(
                &inp,
                &[3],
                ops::LayerNormOptions::default()
                    .weight(&t[0])
                    .bias(&t[1])
                    .cudnn_enable(false),
            )
        },
        &[x(&[3], 58), x(&[3], 59)],
    );
}

#[test]
fn gradients_with_create_graph_have_history() {
    let w = x(&[3, 2, 2, 2], 61);
    let i = x(&[1, 2, 3, 3], 62);
    let y =
        ops::sum(&ops::mul(&ops::conv2d(&i, &w).unwrap(), &ops::conv2d(&i, &w).unwrap()).unwrap())
            .unwrap();
    let g = grad(&[y], &[w.clone()], &[None], false, true).unwrap()[0]
        .clone()
        .unwrap();
    assert!(g.requires_grad());
    let ln = ops::layer_norm_with(
        &i,
        &[3],
        ops::LayerNormOptions::default().cudnn_enable(false),
    )
    .unwrap();
    let s = ops::sum(&ops::mul(&ln, &ln).unwrap()).unwrap();
    let g = grad(&[s], &[i.clone()], &[None], false, true).unwrap()[0]
        .clone()
        .unwrap();
    assert!(g.requires_grad());
}

#[test]
fn third_derivative_and_stat_gradients() {
    // d³/dx³ tanh = -2(1 - t²)(1 - 3t²), through tanh_backward's own backward.
    let v = Tensor::from_vec(vec![0.3f64, -0.8], &[2])
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    let d = |y: Tensor, create: bool| {
        let s = ops::sum(&y).unwrap();
        grad(&[s], &[v.clone()], &[None], false, create).unwrap()[0]
            .clone()
            .unwrap()
    };
    let g3 = d(d(d(ops::tanh(&v).unwrap(), true), true), false);
    let want: Vec<f64> = [0.3f64, -0.8]
        .iter()
        .map(|&a| {
            let t = a.tanh();
            -2.0 * (1.0 - t * t) * (1.0 - 3.0 * t * t)
        })
        .collect();
    close(&vals(&g3), &want);
    // The saved mean / rstd of layer norm take no gradient (derivatives.yaml: not
    // implemented): asking for one fails with PyTorch's message.
    let inp = x(&[2, 3], 71);
    let (_, mean, rstd) = ops::native_layer_norm(&inp.detach(), &[3], None, None, 1e-5).unwrap();
    let mean = mean.requires_grad_(true).unwrap();
    let go = r(&[2, 3], 72, -1.0, 1.0);
    let (gi, _, _) = ops::native_layer_norm_backward(
        &go,
        &inp,
        &[3],
        &mean,
        &rstd,
        None,
        None,
        &[true, false, false],
    )
    .unwrap();
    assert_eq!(
        gi.grad_fn().unwrap().name(),
        "NativeLayerNormBackwardBackward0"
    );
    let e = grad(&[ops::sum(&gi).unwrap()], &[mean], &[None], false, false).unwrap_err();
    assert_eq!(
        e.to_string(),
        // PyTorch's not_implemented("native_layer_norm_backward mean").
        "the derivative for 'native_layer_norm_backward mean' is not implemented."
    );
}
