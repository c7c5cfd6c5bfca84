//! Inputs shared by the gradient-check test targets.
#![allow(dead_code)] // each target uses its own subset

use switchboard_autograd::AutogradTensor;
use switchboard_tensor::Tensor;

/// Deterministic values in [lo, hi).
pub fn r(shape: &[i64], seed: u64, lo: f64, hi: f64) -> Tensor {
    let n: i64 = shape.iter().product();
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let v = (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            lo + (hi - lo) * ((s >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect();
    Tensor::from_vec(v, shape).unwrap()
}

/// A leaf requiring grad with values in [-1, 1).
pub fn x(shape: &[i64], seed: u64) -> Tensor {
    r(shape, seed, -1.0, 1.0).requires_grad_(true).unwrap()
}

/// A leaf requiring grad with values in [0.5, 2).
pub fn pos(shape: &[i64], seed: u64) -> Tensor {
    r(shape, seed, 0.5, 2.0).requires_grad_(true).unwrap()
}

/// An i64 tensor.
pub fn long(v: &[i64], shape: &[i64]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}

/// A bool tensor.
pub fn mask(v: &[bool], shape: &[i64]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}
