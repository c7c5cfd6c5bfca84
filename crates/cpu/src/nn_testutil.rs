//! Test helpers shared by the nn kernels' tests: deterministic inputs, tolerant comparisons and
//! finite-difference gradients (in f64) for checking backward kernels.

use switchboard_tensor::{ScalarType, Tensor};

use crate::copy::cast;

/// A deterministic pseudo-random tensor of `shape` and `dtype`: values in about `[-2, 2]`
/// for floats, small integers (some large enough to wrap in 8 bits once multiplied and
/// summed) otherwise.
pub fn ramp(shape: &[usize], dtype: ScalarType) -> Tensor {
    let n: usize = shape.iter().product();
    let mut state = 0x2545_f491_4f6c_dd1du64 ^ (n as u64).wrapping_mul(0x9e37_79b9);
    let vals: Vec<f64> = (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % 4001) as f64 / 1000.0 - 2.0
        })
        .collect();
    let dims: Vec<i64> = shape.iter().map(|&s| s as i64).collect();
    let vals: Vec<f64> = if dtype.is_floating_point() {
        vals
    } else if dtype == ScalarType::Byte {
        vals.iter().map(|v| ((v + 2.0) * 10.0).floor()).collect()
    } else {
        vals.iter().map(|v| (v * 10.0).trunc()).collect()
    };
    let t = Tensor::from_vec(vals, &dims).unwrap();
    cast(&t, dtype).unwrap()
}

/// Asserts `|a - b| <= tol * (1 + |b|)` elementwise (NaNs must match).
pub fn assert_close(a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len(), "lengths differ");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        if x.is_nan() || y.is_nan() {
            assert!(x.is_nan() && y.is_nan(), "element {i}: {x} vs {y}");
            continue;
        }
        assert!(
            (x - y).abs() <= tol * (1.0 + y.abs()),
            "element {i}: {x} vs {y} (tol {tol})"
        );
    }
}

/// The central-difference gradient of the scalar function `f` at the f64 tensor `x`
/// (contiguous copies with one element moved by `±h`).
pub fn numeric_grad(x: &Tensor, f: impl Fn(&Tensor) -> f64) -> Vec<f64> {
    let base = x.to_vec_as::<f64>().unwrap();
    let h = 1e-6;
    (0..base.len())
        .map(|i| {
            let mut v = base.clone();
            v[i] = base[i] + h;
            let up = f(&Tensor::from_vec(v.clone(), x.sizes()).unwrap());
            v[i] = base[i] - h;
            let down = f(&Tensor::from_vec(v, x.sizes()).unwrap());
            (up - down) / (2.0 * h)
        })
        .collect()
}

/// `sum(a * b)` over two tensors of equal numel, in f64 (a scalar loss `<out, g>` whose
/// gradient with respect to `out` is `g`).
pub fn dot(a: &Tensor, b: &Tensor) -> f64 {
    let (a, b) = (a.to_vec_as::<f64>().unwrap(), b.to_vec_as::<f64>().unwrap());
    assert_eq!(a.len(), b.len());
    a.iter().zip(&b).map(|(x, y)| x * y).sum()
}
