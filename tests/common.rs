//! Inputs shared by the facade's integration tests.
#![allow(dead_code)] // each target uses its own subset

use switchboard::autograd::{gradcheck, AutogradTensor, Result};
use switchboard::tensor::Tensor;

/// Deterministic f64 values in [lo, hi).
pub fn r(shape: &[i64], seed: u64, lo: f64, hi: f64) -> Tensor {
    let n: i64 = shape.iter().product();
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
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

/// An i64 tensor.
pub fn long(v: &[i64], shape: &[i64]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}

/// Values as f64.
pub fn vals(t: &Tensor) -> Vec<f64> {
    t.to_vec_as::<f64>().unwrap()
}

/// Asserts two tensors have the same shape and close values.
pub fn assert_close(a: &Tensor, b: &Tensor, what: &str) {
    assert_eq!(a.sizes(), b.sizes(), "{what}: shapes");
    for (i, (x, y)) in vals(a).iter().zip(vals(b)).enumerate() {
        let ok = (x - y).abs() <= 1e-9 + 1e-6 * y.abs() || (x.is_nan() && y.is_nan());
        assert!(ok, "{what}: element {i}: {x} vs {y}");
    }
}

/// gradcheck in f64, panicking with the operator's name.
pub fn check_grad(name: &str, f: impl Fn(&[Tensor]) -> Result<Tensor>, inputs: &[Tensor]) {
    match gradcheck(f, inputs, 1e-6, 1e-5, 1e-3) {
        Ok(true) => {}
        Ok(false) => panic!("{name}: gradcheck false"),
        Err(e) => panic!("{name}: {e}"),
    }
}
