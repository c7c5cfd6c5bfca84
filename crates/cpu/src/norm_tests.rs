//! Tests of layer normalization against a direct f64 reference and finite differences.

use super::*;
use crate::nn_testutil::{assert_close, dot, numeric_grad, ramp};

/// Reference layer norm over the last `n` elements of each row.
fn reference(
    x: &[f64],
    n: usize,
    w: &[f64],
    b: &[f64],
    eps: f64,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (mut y, mut means, mut rstds) = (vec![], vec![], vec![]);
    for row in x.chunks(n) {
        let mean = row.iter().sum::<f64>() / n as f64;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
        let rstd = 1.0 / (var + eps).sqrt();
        y.extend(
            row.iter()
                .enumerate()
                .map(|(j, v)| (v - mean) * rstd * w[j] + b[j]),
        );
        means.push(mean);
        rstds.push(rstd);
    }
    (y, means, rstds)
}

#[test]
fn forward_values_shapes_dtypes() {
    let x = ramp(&[2, 3, 4, 5], ScalarType::Double);
    let w = ramp(&[4, 5], ScalarType::Double);
    let b = ramp(&[4, 5], ScalarType::Double);
    let (y, mean, rstd) = native_layer_norm(&x, &[4, 5], Some(&w), Some(&b), 1e-5).unwrap();
    assert_eq!(mean.sizes(), &[2, 3, 1, 1]);
    assert_eq!(rstd.sizes(), &[2, 3, 1, 1]);
    let (wy, wm, wr) = reference(
        &x.to_vec::<f64>().unwrap(),
        20,
        &w.to_vec::<f64>().unwrap(),
        &b.to_vec::<f64>().unwrap(),
        1e-5,
    );
    assert_close(&y.to_vec::<f64>().unwrap(), &wy, 1e-12);
    assert_close(&mean.to_vec::<f64>().unwrap(), &wm, 1e-12);
    assert_close(&rstd.to_vec::<f64>().unwrap(), &wr, 1e-12);
    // No affine parameters; transposed input; Float.
    let xt = ramp(&[6, 7], ScalarType::Float).t().unwrap();
    let (y, _, _) = native_layer_norm(&xt, &[6], None, None, 1e-5).unwrap();
    let xv = xt.contiguous().unwrap().to_vec_as::<f64>().unwrap();
    let (wy, _, _) = reference(&xv, 6, &[1.0; 6], &[0.0; 6], 1e-5);
    assert_close(&y.to_vec_as::<f64>().unwrap(), &wy, 1e-5);
    // Half input with Float parameters: statistics in Float.
    let xh = cast(&x, ScalarType::Half).unwrap();
    let wf = cast(&w, ScalarType::Float).unwrap();
    let (y, mean, _) =
        native_layer_norm(&xh, &[5], Some(&wf.select(0, 0).unwrap()), None, 1e-5).unwrap();
    assert_eq!(y.dtype(), ScalarType::Half);
    assert_eq!(mean.dtype(), ScalarType::Float);
    assert_eq!(mean.sizes(), &[2, 3, 4, 1]);
    // Large rows run in parallel.
    let big = ramp(&[64, 1024], ScalarType::Float);
    let (y, _, _) = native_layer_norm(&big, &[1024], None, None, 1e-5).unwrap();
    let (wy, _, _) = reference(
        &big.to_vec_as::<f64>().unwrap(),
        1024,
        &[1.0; 1024],
        &[0.0; 1024],
        1e-5,
    );
    assert_close(&y.to_vec_as::<f64>().unwrap(), &wy, 1e-4);
}

#[test]
fn errors_and_meta() {
    let x = ramp(&[2, 3], ScalarType::Float);
    let e = |ns: &[i64], w: Option<&Tensor>| {
        native_layer_norm(&x, ns, w, None, 1e-5)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        e(&[4], None),
        "Given normalized_shape=[4], expected input with shape [*, 4], but got input of size[2, 3]"
    );
    assert_eq!(
        e(&[], None),
        "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one \
         element, but got normalized_shape = []"
    );
    assert_eq!(
        e(&[3], Some(&ramp(&[2], ScalarType::Float))),
        "Expected weight to be of same shape as normalized_shape, but got weight of shape [2] \
         and normalized_shape = [3]"
    );
    assert_eq!(
        native_layer_norm(&cast(&x, ScalarType::Long).unwrap(), &[3], None, None, 1e-5)
            .unwrap_err()
            .to_string(),
        "\"LayerNormKernelImpl\" not implemented for 'Long'"
    );
    let m = Tensor::empty_on(&[4, 2, 3], ScalarType::BFloat16, Device::META).unwrap();
    let (y, mean, rstd) = native_layer_norm(&m, &[2, 3], None, None, 1e-5).unwrap();
    assert!(y.is_meta() && mean.is_meta() && rstd.is_meta());
    assert_eq!(mean.sizes(), &[4, 1, 1]);
    let (dx, dw, db) = native_layer_norm_backward(
        &y,
        &m,
        &[2, 3],
        &mean,
        &rstd,
        None,
        None,
        &[true, true, false],
    )
    .unwrap();
    assert!(dx.is_meta() && dw.is_meta());
    assert_eq!(dw.sizes(), &[2, 3]);
    assert_eq!(db.numel(), 0);
}

#[test]
fn backward_matches_finite_differences() {
    let x = ramp(&[3, 2, 5], ScalarType::Double);
    let w = ramp(&[2, 5], ScalarType::Double);
    let b = ramp(&[2, 5], ScalarType::Double);
    let g = ramp(&[3, 2, 5], ScalarType::Double);
    let f = |x: &Tensor, w: &Tensor, b: &Tensor| {
        native_layer_norm(x, &[2, 5], Some(w), Some(b), 1e-5).unwrap()
    };
    let (_, mean, rstd) = f(&x, &w, &b);
    let (dx, dw, db) = native_layer_norm_backward(
        &g,
        &x,
        &[2, 5],
        &mean,
        &rstd,
        Some(&w),
        Some(&b),
        &[true, true, true],
    )
    .unwrap();
    assert_eq!((dw.sizes(), db.sizes()), (&[2i64, 5][..], &[2i64, 5][..]));
    let nx = numeric_grad(&x, |x| dot(&f(x, &w, &b).0, &g));
    let nw = numeric_grad(&w, |w| dot(&f(&x, w, &b).0, &g));
    let nb = numeric_grad(&b, |b| dot(&f(&x, &w, b).0, &g));
    assert_close(&dx.to_vec::<f64>().unwrap(), &nx, 1e-6);
    assert_close(&dw.to_vec::<f64>().unwrap(), &nw, 1e-6);
    assert_close(&db.to_vec::<f64>().unwrap(), &nb, 1e-6);
    // Without weight, only dx; the parallel column sums on a large input.
    let (_, mean, rstd) = native_layer_norm(&x, &[5], None, None, 1e-5).unwrap();
    let (dx, dw, _) = native_layer_norm_backward(
        &g,
        &x,
        &[5],
        &mean,
        &rstd,
        None,
        None,
        &[true, false, false],
    )
    .unwrap();
    let nx = numeric_grad(&x, |x| {
        dot(&native_layer_norm(x, &[5], None, None, 1e-5).unwrap().0, &g)
    });
    assert_close(&dx.to_vec::<f64>().unwrap(), &nx, 1e-6);
    assert_eq!(dw.numel(), 0);
    let big = ramp(&[300, 200], ScalarType::Double);
    let gb = ramp(&[300, 200], ScalarType::Double);
    let (_, mean, rstd) = native_layer_norm(&big, &[200], None, None, 1e-5).unwrap();
    let (_, _, db) = native_layer_norm_backward(
        &gb,
        &big,
        &[200],
        &mean,
        &rstd,
        None,
        None,
        &[false, false, true],
    )
    .unwrap();
    let gv = gb.to_vec::<f64>().unwrap();
    let want: Vec<f64> = (0..200)
        .map(|j| (0..300).map(|i| gv[i * 200 + j]).sum())
        .collect();
    assert_close(&db.to_vec::<f64>().unwrap(), &want, 1e-12);
}

#[test]
fn row_chunks_on_threads_match_one_thread() {
    // Float rows with weights, every output asked: row chunks (with their `dx` rows and
    // column sums) on the global pool's threads (two on a two-core machine) against one
    // thread (a worker of a one-thread pool runs them serially).
    let x = ramp(&[300, 256], ScalarType::Float);
    let w = ramp(&[256], ScalarType::Float);
    let b = ramp(&[256], ScalarType::Float);
    let g = crate::mul_scalar(
        &crate::flip(&x, &[0]).unwrap(),
        switchboard_tensor::Scalar::Float(0.5),
    )
    .unwrap()
    .contiguous()
    .unwrap();
    let run = || {
        let (y, mean, rstd) = native_layer_norm(&x, &[256], Some(&w), Some(&b), 1e-5).unwrap();
        let (dx, dw, db) = native_layer_norm_backward(
            &g,
            &x,
            &[256],
            &mean,
            &rstd,
            Some(&w),
            Some(&b),
            &[true, true, true],
        )
        .unwrap();
        [y, mean, rstd, dx, dw, db].map(|t| t.to_vec_as::<f64>().unwrap())
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let (one, two) = (pool.install(run), run());
    // Rows do not depend on the chunking; the column sums only by rounding.
    for k in 0..4 {
        assert!(one[k] == two[k], "output {k} depends on the threads");
    }
    for k in 4..6 {
        assert_close(&one[k], &two[k], 1e-3);
    }
    // The column sums against f64 ones.
    let (gv, xv) = (g.to_vec_as::<f64>().unwrap(), x.to_vec_as::<f64>().unwrap());
    let (mv, rv) = (&one[1], &one[2]);
    let want_db: Vec<f64> = (0..256)
        .map(|j| (0..300).map(|i| gv[i * 256 + j]).sum())
        .collect();
    let want_dw: Vec<f64> = (0..256)
        .map(|j| {
            (0..300)
                .map(|i| gv[i * 256 + j] * (xv[i * 256 + j] - mv[i]) * rv[i])
                .sum()
        })
        .collect();
    assert_close(&one[5], &want_db, 1e-3);
    assert_close(&one[4], &want_dw, 1e-3);
}

#[test]
fn rows_of_no_element() {
    // PyTorch's moments of an empty row: mean 0, rstd NaN.
    let x = Tensor::zeros(&[3, 0], ScalarType::Float).unwrap();
    let (y, mean, rstd) = native_layer_norm(&x, &[0], None, None, 1e-5).unwrap();
    assert_eq!((y.sizes(), mean.sizes()), (&[3i64, 0][..], &[3i64, 1][..]));
    assert_eq!(mean.to_vec::<f32>().unwrap(), [0.0; 3]);
    assert!(rstd.to_vec::<f32>().unwrap().iter().all(|v| v.is_nan()));
}
