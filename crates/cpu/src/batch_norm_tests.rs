//! Batch norm's kernels against values recorded from PyTorch 2.15 (`torch.ops.aten` on the
//! same float64 inputs), and its argument errors.

use switchboard_tensor::{Device, ScalarType, Tensor};

use super::*;
use crate::nn_testutil::{assert_close, dot, numeric_grad, ramp};

fn f64s(v: &[f64], shape: &[i64]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}

/// The running statistics after `training_normalizes_and_updates_running_statistics`'s
/// update (the ones the evaluation values were recorded with).
fn updated_running() -> (Tensor, Tensor) {
    (
        f64s(&[0.6000000000000001, 0.33333333333333337], &[2]),
        f64s(&[2.4000000000000004, 2.866666666666667], &[2]),
    )
}

/// `(x [3, 2, 1], weight, bias, running_mean, running_var)`.
fn inputs() -> (Tensor, Tensor, Tensor, Tensor, Tensor) {
    (
        f64s(&[1.0, 2.0, 3.0, 5.0, -1.0, 4.0], &[3, 2, 1]),
        f64s(&[2.0, 0.5], &[2]),
        f64s(&[0.1, -0.2], &[2]),
        f64s(&[0.5, -0.5], &[2]),
        f64s(&[2.0, 3.0], &[2]),
    )
}

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_vec_as::<f64>().unwrap()
}

#[test]
fn training_normalizes_and_updates_running_statistics() {
    let (x, w, b, rm, rv) = inputs();
    let (y, mean, invstd) =
        _native_batch_norm_legit(&x, Some(&w), Some(&b), &rm, &rv, true, 0.2, 1e-5).unwrap();
    assert_close(
        &vals(&y),
        &[
            0.10000000000000009,
            -0.8681509571564359,
            2.5494851500028277,
            0.33452076572514877,
            -2.3494851500028275,
            -0.06636980856871277,
        ],
        1e-12,
    );
    assert_close(&vals(&mean), &[1.0, 3.6666666666666665], 1e-12);
    assert_close(
        &vals(&invstd),
        &[0.6123712875007069, 0.8017811485877231],
        1e-12,
    );
    // The running variance moves toward the unbiased batch variance.
    assert_close(&vals(&rm), &[0.6, 0.33333333333333337], 1e-12);
    assert_close(&vals(&rv), &[2.4000000000000004, 2.866666666666667], 1e-12);
}

#[test]
fn evaluation_uses_running_statistics() {
    let (x, w, b, _, _) = inputs();
    let (rm, rv) = updated_running();
    let (y, mean, invstd) =
        _native_batch_norm_legit_no_training(&x, Some(&w), Some(&b), &rm, &rv, 0.2, 1e-5).unwrap();
    assert_close(
        &vals(&y),
        &[
            0.6163967036689768,
            0.2921861608853631,
            3.1983802220138613,
            1.1781212504790166,
            -1.9655868146759077,
            0.8828095539477988,
        ],
        1e-12,
    );
    assert_eq!((mean.sizes(), invstd.sizes()), (&[0i64][..], &[0i64][..]));
    // Untouched in evaluation.
    assert_eq!(vals(&rm), [0.6000000000000001, 0.33333333333333337]);
}

#[test]
fn backward_in_training_and_evaluation() {
    let (x, w, b, rm, rv) = inputs();
    let (_, mean, invstd) =
        native_batch_norm(&x, Some(&w), Some(&b), None, None, true, 0.2, 1e-5).unwrap();
    let g = f64s(&[0.3, -1.0, 2.0, 0.5, 1.0, 0.25], &[3, 2, 1]);
    let mask = [true, true, true];
    let (gi, gw, gb) = native_batch_norm_backward(
        &g,
        &x,
        Some(&w),
        Some(&rm),
        Some(&rv),
        Some(&mean),
        Some(&invstd),
        true,
        1e-5,
        &mask,
    )
    .unwrap();
    assert_close(
        &vals(&gi),
        &[
            -0.9797940600011308,
            -0.021478505080522826,
            0.4898993263842823,
            -0.04295078207966103,
            0.48989473361684904,
            0.06442928716018376,
        ],
        1e-9,
    );
    assert_close(&vals(&gw), &[1.2247425750014138, 1.937637775753664], 1e-9);
    assert_close(&vals(&gb), &[3.3, -0.25], 1e-12);
    let (rm, rv) = updated_running();
    let (gi, gw, _) = native_batch_norm_backward(
        &g,
        &x,
        Some(&w),
        Some(&rm),
        Some(&rv),
        None,
        None,
        false,
        1e-5,
        &mask,
    )
    .unwrap();
    assert_close(
        &vals(&gi),
        &[
            0.38729752775173265,
            -0.29531169653121786,
            2.5819835183448845,
            0.14765584826560893,
            1.2909917591724422,
            0.07382792413280446,
        ],
        1e-9,
    );
    assert_close(&vals(&gw), &[2.143046320226254, 0.93515370568219], 1e-9);
}

#[test]
fn errors_and_meta() {
    let (x, w, _, rm, rv) = inputs();
    let err = |r: Result<(Tensor, Tensor, Tensor)>| r.unwrap_err().to_string();
    assert_eq!(
        err(native_batch_norm(
            &x, None, None, None, None, false, 0.1, 1e-5
        )),
        "running_mean must be defined in evaluation mode"
    );
    assert_eq!(
        err(native_batch_norm(
            &x,
            None,
            None,
            Some(&rm),
            None,
            true,
            0.1,
            1e-5
        )),
        "running_mean and running_var must either both be None or neither be None"
    );
    assert_eq!(
        err(native_batch_norm(
            &x,
            Some(&rv.reshape(&[2, 1]).unwrap().expand(&[2, 2]).unwrap()),
            None,
            None,
            None,
            true,
            0.1,
            1e-5
        )),
        "weight should contain 2 elements not 4"
    );
    let one = f64s(&[1.0, 2.0], &[2]);
    assert_eq!(
        err(native_batch_norm(
            &one, None, None, None, None, true, 0.1, 1e-5
        )),
        "Dimension out of range (expected to be in range of [-1, 0], but got 1)"
    );
    let empty = Tensor::zeros(&[0, 2], ScalarType::Double).unwrap();
    assert_eq!(
        err(native_batch_norm(
            &empty, None, None, None, None, true, 0.1, 1e-5
        )),
        "input tensor must have at least one element, but got input_sizes = [0, 2]"
    );
    let ints = Tensor::zeros(&[2, 2], ScalarType::Int).unwrap();
    assert_eq!(
        err(native_batch_norm(
            &ints, None, None, None, None, true, 0.1, 1e-5
        )),
        "\"batch_norm\" not implemented for 'Int'"
    );
    let w32 = crate::copy::cast(&w, ScalarType::Float).unwrap();
    assert_eq!(
        err(native_batch_norm(
            &x,
            Some(&w32),
            None,
            None,
            None,
            true,
            0.1,
            1e-5
        )),
        "mixed dtype (CPU): all inputs must share same datatype."
    );
    // Without statistics, the backward names what it needs (PyTorch crashes).
    let g = x.clone();
    assert_eq!(
        err(native_batch_norm_backward(
            &g,
            &x,
            None,
            None,
            None,
            None,
            None,
            false,
            1e-5,
            &[true, true, true]
        )),
        "native_batch_norm_backward: running_mean must be defined in evaluation mode"
    );
    let short = f64s(&[1.0, 2.0], &[1, 2, 1]);
    assert_eq!(
        err(native_batch_norm_backward(
            &short,
            &x,
            None,
            Some(&rm),
            Some(&rv),
            None,
            None,
            false,
            1e-5,
            &[true, true, true]
        )),
        "native_batch_norm_backward: expected grad_out of shape [3, 2, 1], but got [1, 2, 1]"
    );
    let m = Tensor::zeros_on(&[4, 2, 3, 3], ScalarType::Float, Device::META).unwrap();
    let (y, mean, invstd) = native_batch_norm(&m, None, None, None, None, true, 0.1, 1e-5).unwrap();
    assert_eq!(
        (y.sizes(), mean.sizes(), invstd.sizes()),
        (&[4i64, 2, 3, 3][..], &[2i64][..], &[2i64][..])
    );
    assert!(y.device().is_meta());
}

/// Planes of 13 elements (one full chunk of the f64 lanes and a tail, Note [Batch norm
/// statistics in f64 lanes]) in 2 batches of 3 channels: the batch statistics and the output
/// against a direct f64 reference, the gradients against finite differences.
#[test]
fn statistics_and_gradients_over_planes_longer_than_the_lanes() {
    let (n, c, inner) = (2, 3, 13);
    let x = ramp(&[n, c, inner], ScalarType::Double);
    let w = ramp(&[c], ScalarType::Double);
    let b = f64s(&[0.1, -0.2, 0.3], &[3]);
    let xv = vals(&x);
    let (mut means, mut invstds) = (vec![], vec![]);
    for ch in 0..c {
        let channel: Vec<f64> = (0..n)
            .flat_map(|i| xv[(i * c + ch) * inner..][..inner].to_vec())
            .collect();
        let mean = channel.iter().sum::<f64>() / channel.len() as f64;
        let var =
            channel.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / channel.len() as f64;
        means.push(mean);
        invstds.push(1.0 / (var + 1e-5).sqrt());
    }
    let (wv, bv) = (vals(&w), vals(&b));
    let want: Vec<f64> = xv
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let ch = i / inner % c;
            (v - means[ch]) * invstds[ch] * wv[ch] + bv[ch]
        })
        .collect();
    let f = |x: &Tensor, w: &Tensor, b: &Tensor| {
        native_batch_norm(x, Some(w), Some(b), None, None, true, 0.1, 1e-5).unwrap()
    };
    let (y, mean, invstd) = f(&x, &w, &b);
    assert_close(&vals(&y), &want, 1e-12);
    assert_close(&vals(&mean), &means, 1e-12);
    assert_close(&vals(&invstd), &invstds, 1e-12);
    let len = (n * c * inner) as i64;
    let g = Tensor::from_vec(
        (0..len).map(|i| (i * 7 % 11) as f64 / 5.0 - 1.0).collect(),
        &[n as i64, c as i64, inner as i64],
    )
    .unwrap();
    let (gi, gw, gb) = native_batch_norm_backward(
        &g,
        &x,
        Some(&w),
        None,
        None,
        Some(&mean),
        Some(&invstd),
        true,
        1e-5,
        &[true, true, true],
    )
    .unwrap();
    let nx = numeric_grad(&x, |x| dot(&f(x, &w, &b).0, &g));
    let nw = numeric_grad(&w, |w| dot(&f(&x, w, &b).0, &g));
    let nb = numeric_grad(&b, |b| dot(&f(&x, &w, b).0, &g));
    assert_close(&vals(&gi), &nx, 1e-6);
    assert_close(&vals(&gw), &nw, 1e-6);
    assert_close(&vals(&gb), &nb, 1e-6);
}

/// Planes of 37 elements (two full chunks of the gradient sums' lanes and a tail, Note [Batch
/// norm gradient sums per plane]) in 3 batches of 2 channels, in float32 (sums in f32 lanes
/// per plane) and float64: the weight and bias gradients against direct f64 sums.
#[test]
fn gradient_sums_over_planes_longer_than_the_lanes() {
    let (n, c, inner) = (3, 2, 37);
    for (dtype, tol) in [(ScalarType::Double, 1e-12), (ScalarType::Float, 1e-5)] {
        let x = ramp(&[n, c, inner], dtype);
        let g = ramp(&[n, c, inner + 1], dtype)
            .narrow(2, 1, inner as i64)
            .unwrap()
            .contiguous()
            .unwrap();
        let (_, mean, invstd) =
            native_batch_norm(&x, None, None, None, None, true, 0.1, 1e-5).unwrap();
        let (xv, gv, mv, iv) = (vals(&x), vals(&g), vals(&mean), vals(&invstd));
        let (mut sum, mut dotp) = (vec![0.0; c], vec![0.0; c]);
        for (i, (d, v)) in gv.iter().zip(&xv).enumerate() {
            let ch = i / inner % c;
            sum[ch] += d;
            dotp[ch] += d * (v - mv[ch]);
        }
        let (_, gw, gb) = native_batch_norm_backward(
            &g,
            &x,
            None,
            None,
            None,
            Some(&mean),
            Some(&invstd),
            true,
            1e-5,
            &[false, true, true],
        )
        .unwrap();
        let want_w: Vec<f64> = dotp.iter().zip(&iv).map(|(d, i)| d * i).collect();
        assert_close(&vals(&gw), &want_w, tol);
        assert_close(&vals(&gb), &sum, tol);
    }
}
