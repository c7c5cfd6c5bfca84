//! `nll_loss_nd`, `nll_loss2d` and `cross_entropy_loss` on spatial inputs `(N, C, d1, ...)`:
//! values against a per-pixel reference, every reduction, class weights, `ignore_index`,
//! label smoothing, gradients, the `nll_loss2d_forward` / `nll_loss2d_backward` kernels, Meta
//! shapes and PyTorch's errors.

use switchboard::ops::{self, CrossEntropyLossOptions, NllLossNdOptions};
use switchboard::prelude::*;

mod common;
use common::*;

/// The per-pixel losses `-w[t] * x[n, t, pixel]` (0 where `t == ignore`) and the weights
/// that count, computed by hand from `(N, C, P)` values.
fn reference_nll(
    x: &Tensor,
    target: &[i64],
    weight: Option<&[f64]>,
    ignore: i64,
) -> (Vec<f64>, Vec<f64>) {
    let s = x.sizes();
    let (n, c) = (s[0] as usize, s[1] as usize);
    let p: usize = s[2..].iter().product::<i64>() as usize;
    let v = vals(x);
    let (mut loss, mut w) = (vec![0.0; n * p], vec![0.0; n * p]);
    for b in 0..n {
        for i in 0..p {
            let t = target[b * p + i];
            if t == ignore {
                continue;
            }
            let wt = weight.map_or(1.0, |w| w[t as usize]);
            loss[b * p + i] = -wt * v[(b * c + t as usize) * p + i];
            w[b * p + i] = wt;
        }
    }
    (loss, w)
}

fn reduce(loss: &[f64], w: &[f64], reduction: i64) -> f64 {
    let s: f64 = loss.iter().sum();
    if reduction == 1 {
        s / w.iter().sum::<f64>()
    } else {
        s
    }
}

#[test]
fn nll_loss_nd_matches_per_pixel_reference() {
    let weight = [0.5, 2.0, 1.0];
    for shape in [vec![2i64, 3, 4], vec![2, 3, 2, 3], vec![1, 3, 2, 2, 2]] {
        let x = r(&shape, 1, -3.0, 0.0);
        let mut tshape = vec![shape[0]];
        tshape.extend_from_slice(&shape[2..]);
        let n: i64 = tshape.iter().product();
        let t: Vec<i64> = (0..n)
            .map(|i| [0, 2, 1, -100, 1][(i % 5) as usize])
            .collect();
        let target = long(&t, &tshape);
        for (w, wt) in [
            (None, None),
            (
                Some(&weight[..]),
                Some(Tensor::from_vec(weight.to_vec(), &[3]).unwrap()),
            ),
        ] {
            let (loss, counted) = reference_nll(&x, &t, w, -100);
            for reduction in [0, 1, 2] {
                let got = ops::nll_loss_nd_with(
                    &x,
                    &target,
                    NllLossNdOptions {
                        weight: wt.as_ref(),
                        reduction,
                        ignore_index: -100,
                    },
                )
                .unwrap();
                let what = format!("{shape:?} weight={} reduction={reduction}", w.is_some());
                if reduction == 0 {
                    assert_eq!(got.sizes(), &tshape[..], "{what}");
                    assert_close(
                        &got,
                        &Tensor::from_vec(loss.clone(), &tshape).unwrap(),
                        &what,
                    );
                } else {
                    assert_eq!(got.dim(), 0, "{what}");
                    let want = reduce(&loss, &counted, reduction);
                    assert!(
                        (vals(&got)[0] - want).abs() < 1e-9,
                        "{what}: {got} vs {want}"
                    );
                }
            }
        }
    }
}

#[test]
fn nll_loss2d_kernels_agree_with_the_composite() {
    let x = r(&[2, 3, 2, 3], 2, -3.0, 0.0);
    let target = long(&[0, 1, 2, 2, 1, 0, 1, 1, -1, 0, 2, 2], &[2, 2, 3]);
    let weight = Tensor::from_vec(vec![1.0, 0.25, 3.0], &[3]).unwrap();
    for reduction in [0, 1, 2] {
        let (out, total) =
            ops::nll_loss2d_forward(&x, &target, Some(&weight), reduction, -1).unwrap();
        let composite = ops::nll_loss2d_with(
            &x,
            &target,
            ops::NllLoss2dOptions {
                weight: Some(&weight),
                reduction,
                ignore_index: -1,
            },
        )
        .unwrap();
        assert_close(&out, &composite, &format!("forward reduction={reduction}"));
        if reduction == 0 {
            assert_eq!(vals(&total), [0.0]);
        } else {
            assert_eq!(
                vals(&total),
                [1.0 + 0.25 + 3.0 + 3.0 + 0.25 + 1.0 + 0.25 + 0.25 + 1.0 + 3.0 + 3.0]
            );
        }
        // The backward kernel against autograd through the composite.
        let grad_out = if reduction == 0 {
            r(&[2, 2, 3], 3, -1.0, 1.0)
        } else {
            Tensor::scalar_tensor(1.5, ScalarType::Double)
        };
        let grad =
            ops::nll_loss2d_backward(&grad_out, &x, &target, Some(&weight), reduction, -1, &total)
                .unwrap();
        let leaf = x.detach().requires_grad_(true).unwrap();
        let loss = ops::nll_loss2d_with(
            &leaf,
            &target,
            ops::NllLoss2dOptions {
                weight: Some(&weight),
                reduction,
                ignore_index: -1,
            },
        )
        .unwrap();
        ops::mul(&loss, &grad_out)
            .unwrap()
            .sum()
            .unwrap()
            .backward()
            .unwrap();
        assert_close(
            &grad,
            &leaf.grad().unwrap(),
            &format!("backward reduction={reduction}"),
        );
        assert!(grad.is_contiguous());
    }
}

#[test]
fn cross_entropy_spatial_matches_the_2d_form() {
    // (N, C, H, W) against the same pixels as rows of a 2-d (N*H*W, C) problem.
    let x = r(&[2, 4, 3, 2], 4, -2.0, 2.0);
    let rows = x.permute(&[0, 2, 3, 1]).unwrap().reshape(&[-1, 4]).unwrap();
    let t: Vec<i64> = (0..12).map(|i| [3, 0, -100, 1, 2][i % 5]).collect();
    let target = long(&t, &[2, 3, 2]);
    let flat = long(&t, &[12]);
    let weight = Tensor::from_vec(vec![0.5, 1.5, 1.0, 2.0], &[4]).unwrap();
    for w in [None, Some(&weight)] {
        for smoothing in [0.0, 0.3] {
            for reduction in [0, 1, 2] {
                let opts = CrossEntropyLossOptions {
                    weight: w,
                    reduction,
                    ignore_index: -100,
                    label_smoothing: smoothing,
                };
                let got = ops::cross_entropy_loss_with(&x, &target, opts).unwrap();
                let want = ops::cross_entropy_loss_with(&rows, &flat, opts).unwrap();
                let want = if reduction == 0 {
                    want.reshape(&[2, 3, 2]).unwrap()
                } else {
                    want
                };
                assert_close(
                    &got,
                    &want,
                    &format!("w={} ls={smoothing} r={reduction}", w.is_some()),
                );
            }
        }
    }
}

#[test]
fn cross_entropy_hand_computed() {
    // One pixel per sample of a (2, 2, 1) input: -log softmax at the target, averaged.
    let x = Tensor::from_vec(vec![0.0f64, 0.0, 1.0, 0.0], &[2, 2, 1]).unwrap();
    let target = long(&[1, 0], &[2, 1]);
    let got = ops::cross_entropy_loss(&x, &target).unwrap();
    let want = (2f64.ln() + (1.0 + (-1f64).exp()).ln()) / 2.0;
    assert!((vals(&got)[0] - want).abs() < 1e-12, "{got} vs {want}");
    // Class probabilities of the input's shape, spatial too.
    let probs = Tensor::from_vec(vec![0.25f64, 0.75, 1.0, 0.0], &[2, 2, 1]).unwrap();
    let got = ops::cross_entropy_loss(&x, &probs).unwrap();
    let l0 = 2f64.ln();
    let l1 = (1.0 + (-1f64).exp()).ln(); // -log p(class 0) of sample 1
    assert!((vals(&got)[0] - (l0 + l1) / 2.0).abs() < 1e-12, "{got}");
}

#[test]
fn spatial_losses_have_gradients() {
    let target = long(&[0, 2, 1, -100, 1, 0, 2, 2], &[2, 2, 2]);
    let weight = Tensor::from_vec(vec![0.5, 2.0, 1.0], &[3]).unwrap();
    for reduction in [0, 1, 2] {
        check_grad(
            "nll_loss_nd 4-d",
            |t| {
                ops::nll_loss_nd_with(
                    &t[0],
                    &target,
                    NllLossNdOptions {
                        weight: Some(&weight),
                        reduction,
                        ignore_index: -100,
                    },
                )
            },
            &[x(&[2, 3, 2, 2], 5)],
        );
        check_grad(
            "cross_entropy 3-d smoothing",
            |t| {
                ops::cross_entropy_loss_with(
                    &t[0],
                    &target.reshape(&[2, 4]).unwrap(),
                    CrossEntropyLossOptions {
                        weight: Some(&weight),
                        reduction,
                        ignore_index: -100,
                        label_smoothing: 0.2,
                    },
                )
            },
            &[x(&[2, 3, 4], 6)],
        );
    }
}

#[test]
fn meta_shapes() {
    let meta = |shape: &[i64], dtype| {
        ops::empty_with(
            shape,
            ops::EmptyOptions::default()
                .dtype(dtype)
                .device(Device::META),
        )
        .unwrap()
    };
    let x = meta(&[4, 3, 5, 6], ScalarType::Float);
    let t = meta(&[4, 5, 6], ScalarType::Long);
    let (out, total) = ops::nll_loss2d_forward(&x, &t, None, 0, -100).unwrap();
    assert_eq!((out.sizes(), total.sizes()), (&[4i64, 5, 6][..], &[][..]));
    let g = ops::nll_loss2d_backward(&out, &x, &t, None, 0, -100, &total).unwrap();
    assert_eq!(g.sizes(), &[4, 3, 5, 6]);
    let x5 = meta(&[4, 3, 5, 6, 2], ScalarType::Float);
    let t5 = meta(&[4, 5, 6, 2], ScalarType::Long);
    let none = ops::nll_loss_nd_with(
        &x5,
        &t5,
        NllLossNdOptions {
            reduction: 0,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(none.sizes(), &[4, 5, 6, 2]);
}

fn err(r: Result<Tensor, DispatchError>) -> String {
    r.expect_err("an error").to_string()
}

#[test]
fn errors_are_pytorchs() {
    let x = r(&[2, 3, 4, 5], 7, -1.0, 0.0);
    let e = err(ops::nll_loss_nd(&x, &long(&[0; 3], &[3])));
    assert!(
        e.contains("Expected input batch_size (2) to match target batch_size (3)."),
        "{e}"
    );
    let e = err(ops::nll_loss2d(&x, &long(&[0; 2], &[2])));
    assert!(e.contains("only batches of spatial targets supported (3D tensors) but got targets of dimension: 1"), "{e}");
    let e = err(ops::nll_loss2d(&x, &long(&[0; 24], &[2, 4, 3])));
    assert!(
        e.contains("size mismatch (got input: [2, 3, 4, 5] , target: [2, 4, 3]"),
        "{e}"
    );
    let e = err(ops::nll_loss_nd(
        &r(&[2, 3, 4], 7, -1.0, 0.0),
        &long(&[0; 6], &[2, 3]),
    ));
    assert!(e.contains("Expected target size [2, 4], got [2, 3]"), "{e}");
    let e = err(ops::nll_loss_nd(&x, &long(&[3; 40], &[2, 4, 5])));
    assert!(e.contains("Target 3 is out of bounds."), "{e}");
    let e = err(ops::nll_loss2d_forward(
        &x,
        &long(&[0; 40], &[2, 4, 5]),
        Some(&r(&[2], 1, 0.0, 1.0)),
        1,
        -100,
    )
    .map(|r| r.0));
    assert!(
        e.contains("weight tensor should be defined either for all or no classes"),
        "{e}"
    );
    let e = err(ops::nll_loss_nd(
        &Tensor::scalar_tensor(1.0, ScalarType::Float),
        &long(&[0], &[1]),
    ));
    assert!(e.contains("Expected 1 or more dimensions (got 0)"), "{e}");
    let e = err(ops::cross_entropy_loss_with(
        &x,
        &long(&[0; 40], &[2, 4, 5]),
        CrossEntropyLossOptions {
            label_smoothing: 1.5,
            ..Default::default()
        },
    ));
    assert!(
        e.contains("label_smoothing must be between 0.0 and 1.0. Got: 1.5"),
        "{e}"
    );
    let e = err(ops::cross_entropy_loss(&x, &long(&[0; 120], &[2, 3, 4, 5])));
    assert!(
        e.contains("Expected floating point type for target with class probabilities, got Long"),
        "{e}"
    );
    let e = err(ops::cross_entropy_loss_with(
        &x,
        &r(&[2, 3, 4, 5], 1, 0.0, 1.0),
        CrossEntropyLossOptions {
            ignore_index: 1,
            ..Default::default()
        },
    ));
    assert!(
        e.contains("ignore_index is not supported for floating point target"),
        "{e}"
    );
}
