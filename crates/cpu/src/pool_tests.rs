//! Tests of max pooling against a direct reference and finite differences.

use super::*;
use crate::copy::cast;
use crate::nn_testutil::{assert_close, dot, numeric_grad, ramp};
use switchboard_tensor::{Device, MemoryFormat};

/// Distinct values (no ties, so the gradient is well defined): a permutation of `0..n`.
fn distinct(shape: &[i64]) -> Tensor {
    let n: i64 = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|i| ((i * 37) % n) as f64 * 0.1 - 1.0).collect();
    Tensor::from_vec(v, shape).unwrap()
}

/// A direct max pool of a 4-d f64 tensor: values and flat indices.
#[allow(clippy::too_many_arguments)]
fn reference(
    x: &Tensor,
    k: [i64; 2],
    s: [i64; 2],
    p: [i64; 2],
    d: [i64; 2],
    oh: i64,
    ow: i64,
) -> (Vec<f64>, Vec<i64>) {
    let sz = x.sizes();
    let (planes, h, w) = (sz[0] * sz[1], sz[2], sz[3]);
    let xv = x.to_vec_as::<f64>().unwrap();
    let (mut vals, mut idx) = (vec![], vec![]);
    for pl in 0..planes {
        for oy in 0..oh {
            for ox in 0..ow {
                let mut best = (f64::NEG_INFINITY, -1i64);
                for i in 0..k[0] {
                    for j in 0..k[1] {
                        let (y, xx) = (oy * s[0] - p[0] + i * d[0], ox * s[1] - p[1] + j * d[1]);
                        if y < 0 || xx < 0 || y >= h || xx >= w {
                            continue;
                        }
                        let v = xv[(pl * h * w + y * w + xx) as usize];
                        if v > best.0 || v.is_nan() {
                            best = (v, y * w + xx);
                        }
                    }
                }
                vals.push(best.0);
                idx.push(best.1);
            }
        }
    }
    (vals, idx)
}

#[test]
fn forward_matches_reference() {
    let x = ramp(&[2, 3, 9, 8], ScalarType::Float);
    for (k, s, p, d, ceil) in [
        ([2, 2], [2, 2], [0, 0], [1, 1], false),
        ([3, 2], [2, 1], [1, 1], [1, 1], true),
        ([3, 3], [2, 3], [1, 0], [2, 1], false),
        ([3, 3], [2, 2], [1, 1], [1, 2], true),
    ] {
        let (y, i) = max_pool2d_with_indices(&x, &k, &s, &p, &d, ceil).unwrap();
        let (oh, ow) = (y.sizes()[2], y.sizes()[3]);
        let (want, wi) = reference(&x, k, s, p, d, oh, ow);
        assert_close(&y.to_vec_as::<f64>().unwrap(), &want, 0.0);
        assert_eq!(i.to_vec::<i64>().unwrap(), wi);
    }
    // Output sizes: floor vs ceil mode.
    let x = ramp(&[1, 1, 5, 5], ScalarType::Float);
    let (y, _) = max_pool2d_with_indices(&x, &[2], &[2], &[0], &[1], false).unwrap();
    assert_eq!(y.sizes(), &[1, 1, 2, 2]);
    let (y, _) = max_pool2d_with_indices(&x, &[2], &[2], &[0], &[1], true).unwrap();
    assert_eq!(y.sizes(), &[1, 1, 3, 3]);
    // Empty stride = kernel size, 3-d input, transposed input, integer dtype.
    let x3 = ramp(&[3, 6, 4], ScalarType::Long).transpose(1, 2).unwrap();
    let (y, i) = max_pool2d_with_indices(&x3, &[2, 3], &[], &[0], &[1], false).unwrap();
    assert_eq!(y.sizes(), &[3, 2, 2]);
    let (want, wi) = reference(
        &x3.unsqueeze(0).unwrap(),
        [2, 3],
        [2, 3],
        [0, 0],
        [1, 1],
        2,
        2,
    );
    assert_eq!(y.to_vec_as::<f64>().unwrap(), want);
    assert_eq!(i.to_vec::<i64>().unwrap(), wi);
    // NaN propagates; Half.
    let v = Tensor::from_vec(vec![1.0f32, f32::NAN, 3.0, 2.0], &[1, 2, 2]).unwrap();
    let (y, i) = max_pool2d_with_indices(
        &cast(&v, ScalarType::Half).unwrap(),
        &[2],
        &[],
        &[0],
        &[1],
        false,
    )
    .unwrap();
    assert!(y.to_vec_as::<f64>().unwrap()[0].is_nan());
    assert_eq!(i.to_vec::<i64>().unwrap(), [1]);
    // Meta.
    let m = Tensor::empty_on(&[2, 3, 8, 8], ScalarType::Float, Device::META).unwrap();
    // Meta tensors take the meta function (the Meta backend's kernel), not this one.
    let meta = switchboard_ops::structured::max_pool2d_with_indices;
    let [y, i] = meta(&m, &[3], &[2], &[1], &[1], false, None)
        .unwrap()
        .0
        .map(|m| m.allocate().unwrap());
    assert!(y.is_meta() && i.is_meta());
    assert_eq!(i.sizes(), &[2, 3, 4, 4]);
    assert_eq!(i.dtype(), ScalarType::Long);
}

#[test]
fn rows_wider_than_a_block_ties_and_nans_match_reference() {
    // Rows of more than ROW_BLOCK outputs (blocked), values with many ties (the first
    // maximum wins), NaNs, and windows hanging into the padding on both sides.
    let (h, w) = (5i64, 2 * ROW_BLOCK as i64 + 23);
    let n = (2 * h * w) as usize;
    let v: Vec<f32> = (0..n)
        .map(|i| match i % 97 {
            13 => f32::NAN,
            k => (k % 5) as f32,
        })
        .collect();
    let x = Tensor::from_vec(v, &[1, 2, h, w]).unwrap();
    for (k, s, p, d, ceil) in [
        ([2, 2], [2, 2], [0, 0], [1, 1], false),
        ([3, 3], [1, 1], [1, 1], [1, 1], false),
        ([2, 3], [1, 3], [1, 1], [1, 1], true),
        ([3, 3], [2, 2], [1, 1], [2, 2], true),
    ] {
        let (y, i) = max_pool2d_with_indices(&x, &k, &s, &p, &d, ceil).unwrap();
        let (oh, ow) = (y.sizes()[2], y.sizes()[3]);
        let (want, wi) = reference(&x, k, s, p, d, oh, ow);
        let got = y.to_vec_as::<f64>().unwrap();
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(&want) {
            assert!(
                g == w || (g.is_nan() && w.is_nan()),
                "{g} vs {w} for {k:?} {s:?}"
            );
        }
        assert_eq!(i.to_vec::<i64>().unwrap(), wi, "{k:?} {s:?} {p:?} {d:?}");
    }
}

#[test]
fn rows_with_spans_computed_per_row_match_reference() {
    // More block spans than are planned up front (`blocks * kw > MAX_PLANNED_SPANS`): each
    // row computes its own.
    let (h, w) = (3i64, 5000i64);
    let v: Vec<f32> = (0..(h * w) as usize)
        .map(|i| ((i * 7919) % 101) as f32)
        .collect();
    let x = Tensor::from_vec(v, &[1, 1, h, w]).unwrap();
    let (k, s, p, d) = ([2, 70], [1, 1], [1, 3], [1, 1]);
    let (y, i) = max_pool2d_with_indices(&x, &k, &s, &p, &d, false).unwrap();
    let (oh, ow) = (y.sizes()[2], y.sizes()[3]);
    assert!((ow as usize).div_ceil(ROW_BLOCK) as i64 * 70 > MAX_PLANNED_SPANS);
    let (want, wi) = reference(&x, k, s, p, d, oh, ow);
    assert_eq!(y.to_vec_as::<f64>().unwrap(), want);
    assert_eq!(i.to_vec::<i64>().unwrap(), wi);
}

#[test]
fn forward_errors() {
    let x = ramp(&[1, 2, 4, 4], ScalarType::Float);
    let e = |k: &[i64], s: &[i64], p: &[i64], d: &[i64]| {
        max_pool2d_with_indices(&x, k, s, p, d, false)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        e(&[1, 2, 3], &[], &[0], &[1]),
        "max_pool2d: kernel_size must either be a single int, or a tuple of two ints"
    );
    assert_eq!(
        e(&[2], &[], &[2], &[1]),
        "pad should be at most half of effective kernel size, but got pad=2, kernel_size=2 and \
         dilation=1"
    );
    assert_eq!(e(&[2], &[0], &[0], &[1]), "stride should not be zero");
    assert_eq!(
        e(&[5], &[1], &[0], &[1]),
        "Given input size: (2x4x4). Calculated output size: (2x0x0). Output size is too small"
    );
    assert_eq!(
        max_pool2d_with_indices(
            &ramp(&[4, 4], ScalarType::Float),
            &[2],
            &[],
            &[0],
            &[1],
            false
        )
        .unwrap_err()
        .to_string(),
        "non-empty 3D or 4D (batch mode) tensor expected for input"
    );
    let b = Tensor::zeros(&[1, 2, 2], ScalarType::Bool).unwrap();
    assert_eq!(
        max_pool2d_with_indices(&b, &[2], &[], &[0], &[1], false)
            .unwrap_err()
            .to_string(),
        "\"max_pool2d\" not implemented for 'Bool'"
    );
}

#[test]
fn backward_matches_finite_differences() {
    for (k, s, p, d, ceil) in [
        ([2, 2], [2, 2], [0, 0], [1, 1], false),
        ([3, 3], [1, 2], [1, 1], [1, 1], true),
        ([2, 3], [2, 1], [1, 1], [2, 1], false),
    ] {
        let x = distinct(&[2, 2, 6, 7]);
        let pool = |x: &Tensor| max_pool2d_with_indices(x, &k, &s, &p, &d, ceil).unwrap();
        let (y, idx) = pool(&x);
        let g = ramp(
            &y.sizes().iter().map(|&v| v as usize).collect::<Vec<_>>(),
            ScalarType::Double,
        );
        let gi = max_pool2d_with_indices_backward(&g, &x, &k, &s, &p, &d, ceil, &idx).unwrap();
        let num = numeric_grad(&x, |x| dot(&pool(x).0, &g));
        assert_close(&gi.to_vec::<f64>().unwrap(), &num, 1e-6);
    }
    // 3-d, meta and errors.
    let x = distinct(&[2, 4, 4]);
    let (y, idx) = max_pool2d_with_indices(&x, &[2], &[], &[0], &[1], false).unwrap();
    let gi = max_pool2d_with_indices_backward(&y, &x, &[2], &[], &[0], &[1], false, &idx).unwrap();
    assert_eq!(gi.sizes(), &[2, 4, 4]);
    let bad = ramp(&[2, 3, 2], ScalarType::Double);
    assert_eq!(
        max_pool2d_with_indices_backward(&bad, &x, &[2], &[], &[0], &[1], false, &idx)
            .unwrap_err()
            .to_string(),
        "Expected a tensor of dimension 3 and tensor.size[1] == 2 but got: dimension 3 and \
         tensor.size[1] = 3"
    );
    let wild = Tensor::full(&[2, 2, 2], 99i64, ScalarType::Long).unwrap();
    assert!(max_pool2d_with_indices_backward(&y, &x, &[2], &[], &[0], &[1], false, &wild).is_err());
    let m = |s: &[i64], dt| Tensor::empty_on(s, dt, Device::META).unwrap();
    let gm = switchboard_ops::structured::max_pool2d_with_indices_backward(
        &m(&[2, 2, 2], ScalarType::Float),
        &m(&[2, 4, 4], ScalarType::Float),
        &[2],
        &[],
        &[0],
        &[1],
        false,
        &m(&[2, 2, 2], ScalarType::Long),
        None,
    )
    .unwrap()
    .0
    .allocate()
    .unwrap();
    assert!(gm.is_meta());
    assert_eq!(gm.sizes(), &[2, 4, 4]);
}

#[test]
fn huge_windows_fail_or_finish_at_once() {
    let x = Tensor::from_vec((0..9).map(|v| v as f32).collect(), &[1, 1, 3, 3]).unwrap();
    let overflow = "value cannot be converted to type int without overflow";
    // Parameters beyond a C++ int are refused, as PyTorch narrows them (this used
    // to loop for a time proportional to the padding).
    for (k, s, p, d) in [
        (vec![1i64 << 40], vec![], vec![1i64 << 39], vec![1]),
        (vec![2], vec![i64::MAX], vec![0], vec![1]),
        (vec![2], vec![], vec![0], vec![i64::MIN]),
        (vec![3, 1 << 31], vec![], vec![0], vec![1]),
    ] {
        let e = max_pool2d_with_indices(&x, &k, &s, &p, &d, false).unwrap_err();
        assert_eq!(e.to_string(), overflow, "{k:?} {s:?} {p:?} {d:?}");
        let meta = Tensor::empty_on(&[1, 1, 3, 3], ScalarType::Float, Device::META).unwrap();
        let e = max_pool2d_with_indices(&meta, &k, &s, &p, &d, true).unwrap_err();
        assert_eq!(e.to_string(), overflow);
    }
    // The largest windows a C++ int allows: the window start is found in closed form, not by
    // stepping through the padding one dilation at a time.
    let (y, i) = max_pool2d_with_indices(&x, &[1 << 30], &[], &[1 << 29], &[1], false).unwrap();
    assert_eq!(y.sizes(), &[1, 1, 1, 1]);
    assert_eq!(y.to_vec::<f32>().unwrap(), [8.0]);
    assert_eq!(i.to_vec::<i64>().unwrap(), [8]);
    let (y, _) = max_pool2d_with_indices(
        &x,
        &[i32::MAX as i64],
        &[1],
        &[(i32::MAX / 2) as i64],
        &[1],
        true,
    )
    .unwrap();
    assert_eq!(y.sizes(), &[1, 1, 3, 3]);
    // A dilation that puts every tap but the first outside the input.
    let e = max_pool2d_with_indices(&x, &[2], &[1], &[1], &[1 << 30], false).unwrap_err();
    assert!(e.to_string().contains("Output size is too small"), "{e}");
    // Only the centre tap (1, 1) of the dilated 3x3 window lands inside the input.
    let (y, i) = max_pool2d_with_indices(&x, &[3], &[1], &[1], &[2], false).unwrap();
    assert_eq!(y.sizes(), &[1, 1, 1, 1]);
    assert_eq!(i.to_vec::<i64>().unwrap(), [4]);
    // The backward pass checks the same geometry.
    let g = Tensor::zeros(&[1, 1, 1, 1], ScalarType::Float).unwrap();
    let e = max_pool2d_with_indices_backward(&g, &x, &[1 << 40], &[], &[0], &[1], false, &i)
        .unwrap_err();
    assert_eq!(e.to_string(), overflow);
}

/// A channels-last input gives channels-last outputs (PyTorch's `suggest_memory_format`),
/// with the values of the contiguous input's, forward and backward.
#[test]
fn channels_last_in_channels_last_out() {
    let x = ramp(&[2, 3, 4, 4], ScalarType::Float);
    let cl = Tensor::empty_with_format(
        &[2, 3, 4, 4],
        ScalarType::Float,
        Device::CPU,
        MemoryFormat::ChannelsLast,
    )
    .unwrap();
    crate::copy::copy_into(&cl, &x).unwrap();
    let (y, i) = max_pool2d_with_indices(&x, &[2], &[], &[0], &[1], false).unwrap();
    let (ycl, icl) = max_pool2d_with_indices(&cl, &[2], &[], &[0], &[1], false).unwrap();
    assert_eq!(
        (ycl.strides(), icl.strides()),
        (&[12i64, 1, 6, 3][..], &[12i64, 1, 6, 3][..])
    );
    let values = |t: &Tensor| t.contiguous().unwrap().to_vec_as::<f64>().unwrap();
    assert_eq!(values(&ycl), values(&y));
    assert_eq!(values(&icl), values(&i));
    let g =
        max_pool2d_with_indices_backward(&ycl, &cl, &[2], &[], &[0], &[1], false, &icl).unwrap();
    assert_eq!(g.strides(), &[48, 1, 12, 3]);
    let want = max_pool2d_with_indices_backward(&y, &x, &[2], &[], &[0], &[1], false, &i).unwrap();
    assert_eq!(values(&g), values(&want));
}

/// A window wholly in the padding (its dilation steps over the input) gives PyTorch's -inf and
/// the index of its first position past the padding.
#[test]
fn window_in_the_padding_as_pytorch() {
    let x = Tensor::from_vec(vec![0.0f32, 1.0, 2.0, 3.0], &[1, 1, 2, 2]).unwrap();
    let (y, i) = max_pool2d_with_indices(&x, &[2], &[1], &[1], &[3], false).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), [f32::NEG_INFINITY]);
    assert_eq!(i.to_vec::<i64>().unwrap(), [6]);
}
