//! Tests of softmax / log-softmax against a direct f64 reference and finite differences.

use super::*;
use crate::copy::cast;
use crate::nn_testutil::{assert_close, dot, numeric_grad, ramp};
use switchboard_tensor::Device;

/// The reference softmax of an f64 tensor along `dim` (via strided index arithmetic).
fn reference(x: &Tensor, dim: usize, log: bool) -> Vec<f64> {
    let v = x.contiguous().unwrap().to_vec_as::<f64>().unwrap();
    let (outer, d, inner) = split(x.sizes(), dim);
    let mut out = vec![0.0; v.len()];
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * d + k) * inner + i;
            let m = (0..d).map(|k| v[at(k)]).fold(f64::NEG_INFINITY, f64::max);
            let s: f64 = (0..d).map(|k| (v[at(k)] - m).exp()).sum();
            for k in 0..d {
                out[at(k)] = if log {
                    v[at(k)] - m - s.ln()
                } else {
                    (v[at(k)] - m).exp() / s
                };
            }
        }
    }
    out
}

#[test]
fn forward_every_dim_and_layout() {
    let x = ramp(&[3, 4, 5], ScalarType::Double);
    for dim in -3..3i64 {
        let d = wrap_dim(dim, 3).unwrap();
        for log in [false, true] {
            let f = if log { _log_softmax } else { _softmax };
            let y = f(&x, dim, false).unwrap();
            assert!(y.is_contiguous());
            assert_close(&y.to_vec::<f64>().unwrap(), &reference(&x, d, log), 1e-12);
            // A permuted (non-contiguous) input.
            let xp = x.permute(&[2, 0, 1]).unwrap();
            let yp = f(&xp, dim, false).unwrap();
            assert_close(&yp.to_vec::<f64>().unwrap(), &reference(&xp, d, log), 1e-12);
        }
    }
    // Wide inner dimension (several column blocks) in f32, large values (stability).
    let big = crate::mul_scalar(
        &ramp(&[2, 7, 150], ScalarType::Float),
        switchboard_tensor::Scalar::Float(500.0),
    )
    .unwrap();
    let y = _softmax(&big, 1, false).unwrap();
    let want = reference(&cast(&big, ScalarType::Double).unwrap(), 1, false);
    assert_close(&y.to_vec_as::<f64>().unwrap(), &want, 1e-5);
    let y = _log_softmax(&big, -1, false).unwrap();
    let want = reference(&cast(&big, ScalarType::Double).unwrap(), 2, true);
    assert_close(&y.to_vec_as::<f64>().unwrap(), &want, 1e-5);
    // Half / BFloat16, 0-dim, empty.
    for dt in [ScalarType::Half, ScalarType::BFloat16] {
        let xh = cast(&x, dt).unwrap();
        let y = _softmax(&xh, 1, false).unwrap();
        assert_eq!(y.dtype(), dt);
        let want = reference(&cast(&xh, ScalarType::Double).unwrap(), 1, false);
        assert_close(&y.to_vec_as::<f64>().unwrap(), &want, 1e-2);
    }
    let s = Tensor::scalar_tensor(3.0, ScalarType::Float);
    assert_eq!(
        _softmax(&s, 0, false).unwrap().to_vec::<f32>().unwrap(),
        [1.0]
    );
    assert_eq!(
        _log_softmax(&s, -1, false)
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        [0.0]
    );
    let e = Tensor::zeros(&[0, 3], ScalarType::Float).unwrap();
    assert_eq!(_softmax(&e, 1, false).unwrap().sizes(), &[0, 3]);
}

#[test]
fn forward_errors_and_meta() {
    let x = ramp(&[2, 3], ScalarType::Float);
    assert_eq!(
        _softmax(&x, 2, false).unwrap_err().to_string(),
        "Dimension out of range (expected to be in range of [-2, 1], but got 2)"
    );
    assert_eq!(
        _softmax(&cast(&x, ScalarType::Long).unwrap(), 1, false)
            .unwrap_err()
            .to_string(),
        "\"softmax_lastdim_kernel_impl\" not implemented for 'Long'"
    );
    assert_eq!(
        _log_softmax(&cast(&x, ScalarType::Int).unwrap(), 0, false)
            .unwrap_err()
            .to_string(),
        "\"log_softmax_kernel_impl\" not implemented for 'Int'"
    );
    let h = cast(&x, ScalarType::Half).unwrap();
    assert_eq!(
        _softmax(&h, 1, true).unwrap_err().to_string(),
        "softmax with half to float conversion is not supported on CPU"
    );
    let m = Tensor::empty_on(&[2, 3], ScalarType::Half, Device::META).unwrap();
    // Meta tensors take the meta function (the Meta backend's kernel), not this one.
    let meta = switchboard_ops::structured::_softmax;
    let y = meta(&m, 1, true, None).unwrap().allocate().unwrap();
    assert!(y.is_meta());
    assert_eq!(y.dtype(), ScalarType::Float);
    let meta = switchboard_ops::structured::_softmax_backward_data;
    let g = meta(&y, &y, 0, ScalarType::Half, None)
        .unwrap()
        .allocate()
        .unwrap();
    assert!(g.is_meta());
    assert_eq!(g.dtype(), ScalarType::Half);
}

#[test]
fn backward_matches_finite_differences() {
    let x = ramp(&[3, 4, 70], ScalarType::Double);
    let g = ramp(&[3, 4, 70], ScalarType::Double);
    for dim in [0i64, 1, 2] {
        for log in [false, true] {
            let f = |x: &Tensor| {
                if log {
                    _log_softmax(x, dim, false).unwrap()
                } else {
                    _softmax(x, dim, false).unwrap()
                }
            };
            let y = f(&x);
            // Transposed grad_output exercises the strided path.
            let gt = g
                .transpose(0, 2)
                .unwrap()
                .contiguous()
                .unwrap()
                .transpose(0, 2)
                .unwrap();
            let gi = if log {
                _log_softmax_backward_data(&gt, &y, dim, ScalarType::Double).unwrap()
            } else {
                _softmax_backward_data(&gt, &y, dim, ScalarType::Double).unwrap()
            };
            // Only a few coordinates: the full numeric gradient is 840 evaluations.
            let small = x.narrow(2, 0, 5).unwrap().contiguous().unwrap();
            let gs = g.narrow(2, 0, 5).unwrap().contiguous().unwrap();
            let ys = f(&small);
            let gis = if log {
                _log_softmax_backward_data(&gs, &ys, dim, ScalarType::Double).unwrap()
            } else {
                _softmax_backward_data(&gs, &ys, dim, ScalarType::Double).unwrap()
            };
            let num = numeric_grad(&small, |x| dot(&f(x), &gs));
            assert_close(&gis.to_vec::<f64>().unwrap(), &num, 1e-6);
            assert_eq!(gi.sizes(), x.sizes());
            // The big one agrees with the formula computed directly.
            let (gv, yv) = (g.to_vec::<f64>().unwrap(), y.to_vec::<f64>().unwrap());
            let (outer, d, inner) = split(x.sizes(), dim as usize);
            let mut want = vec![0.0; gv.len()];
            for o in 0..outer {
                for i in 0..inner {
                    let at = |k: usize| (o * d + k) * inner + i;
                    let s: f64 = (0..d)
                        .map(|k| {
                            if log {
                                gv[at(k)]
                            } else {
                                gv[at(k)] * yv[at(k)]
                            }
                        })
                        .sum();
                    for k in 0..d {
                        want[at(k)] = if log {
                            gv[at(k)] - yv[at(k)].exp() * s
                        } else {
                            yv[at(k)] * (gv[at(k)] - s)
                        };
                    }
                }
            }
            assert_close(&gi.to_vec::<f64>().unwrap(), &want, 1e-12);
        }
    }
}

#[test]
fn backward_errors() {
    let a = ramp(&[2, 3], ScalarType::Float);
    let b = ramp(&[3, 2], ScalarType::Float);
    assert_eq!(
        _softmax_backward_data(&a, &b, 1, ScalarType::Float)
            .unwrap_err()
            .to_string(),
        // PyTorch 2.15's `checkSameSize` names the first argument `grad`.
        "Expected tensor for argument #1 'grad' to have same size as tensor for argument \
         #2 'output'; but [2, 3] does not equal [3, 2] (while checking arguments for \
         softmax_backward)"
    );
    assert!(_log_softmax_backward_data(&a, &a, 2, ScalarType::Float).is_err());
    let i = cast(&a, ScalarType::Long).unwrap();
    assert_eq!(
        _softmax_backward_data(&i, &i, 1, ScalarType::Long)
            .unwrap_err()
            .to_string(),
        "\"softmax_backward_lastdim_kernel_impl\" not implemented for 'Long'"
    );
}

/// An `out=` tensor of the right size with other strides is computed through a contiguous
/// buffer (torchgen's proxy), not written as if it were contiguous.
#[test]
fn out_of_another_layout_gets_the_values() {
    let x = ramp(&[2, 3], ScalarType::Double);
    let out = Tensor::zeros(&[3, 2], ScalarType::Double)
        .unwrap()
        .t()
        .unwrap();
    let r = _softmax_out(&x, 1, false, &out).unwrap();
    assert_eq!(r.strides(), &[1, 2]);
    let want = _softmax(&x, 1, false).unwrap();
    assert_close(
        &out.contiguous().unwrap().to_vec::<f64>().unwrap(),
        &want.to_vec::<f64>().unwrap(),
        0.0,
    );
    // In place through `out=`.
    let want_log = _log_softmax(&x, 1, false).unwrap();
    let y = x.deep_clone().unwrap();
    let r = _log_softmax_out(&y, 1, false, &y).unwrap();
    assert_close(
        &r.to_vec::<f64>().unwrap(),
        &want_log.to_vec::<f64>().unwrap(),
        0.0,
    );
    assert_close(
        &y.to_vec::<f64>().unwrap(),
        &want_log.to_vec::<f64>().unwrap(),
        0.0,
    );
}

#[test]
fn float_backward_matches_double() {
    // Rows of 150 (lanes and a tail) along the last dim and along a middle one, in f32 (the
    // vector exponential) against f64.
    let g = ramp(&[2, 7, 150], ScalarType::Float);
    let x = crate::mul_scalar(
        &ramp(&[2, 7, 150], ScalarType::Float),
        switchboard_tensor::Scalar::Float(30.0),
    )
    .unwrap();
    let f64s = |t: &Tensor| cast(t, ScalarType::Double).unwrap();
    for dim in [1, 2] {
        for log in [false, true] {
            type Fwd = fn(&Tensor, i64, bool) -> Result<Tensor>;
            type Bwd = fn(&Tensor, &Tensor, i64, ScalarType) -> Result<Tensor>;
            let (fwd, bwd): (Fwd, Bwd) = if log {
                (_log_softmax, _log_softmax_backward_data)
            } else {
                (_softmax, _softmax_backward_data)
            };
            let y = fwd(&x, dim, false).unwrap();
            let gi = bwd(&g, &y, dim, ScalarType::Float).unwrap();
            let want = bwd(&f64s(&g), &f64s(&y), dim, ScalarType::Double).unwrap();
            assert_close(
                &gi.to_vec_as::<f64>().unwrap(),
                &want.to_vec::<f64>().unwrap(),
                1e-5,
            );
        }
    }
}
