//! Gradients through the FFT core and the complex views, against the gradients PyTorch 2.15
//! computes for the same losses (float64; `torch.fft.*` and `torch.view_as_real`).

use switchboard_autograd::AutogradTensor;
use switchboard_cpu as _;
use switchboard_ops::{self as ops, TensorOps};
use switchboard_tensor::{Complex64, ScalarType, Tensor};

fn x() -> Tensor {
    let v = vec![0.5, -1.0, 2.0, 3.0, 0.25, 1.0, 0.0, -2.0, 4.0, 1.5f64];
    Tensor::from_vec(v, &[2, 5])
        .unwrap()
        .requires_grad_(true)
        .unwrap()
}

fn z() -> Tensor {
    let parts = [
        (1.0, 0.5),
        (2.0, -1.0),
        (0.5, 0.25),
        (-1.0, 2.0),
        (0.0, 1.0),
        (3.0, 0.0),
    ];
    let v: Vec<Complex64> = parts
        .iter()
        .map(|&(re, im)| Complex64::new(re, im))
        .collect();
    Tensor::from_vec(v, &[2, 3])
        .unwrap()
        .requires_grad_(true)
        .unwrap()
}

/// `torch.arange(n).reshape(sizes) / div - sub`, float64.
fn weights(sizes: &[i64], div: f64, sub: f64) -> Tensor {
    let n: i64 = sizes.iter().product();
    let v = (0..n).map(|i| i as f64 / div - sub).collect();
    Tensor::from_vec(v, sizes).unwrap()
}

fn close(got: &[f64], expected: &[f64]) {
    assert_eq!(got.len(), expected.len());
    for (g, e) in got.iter().zip(expected) {
        assert!((g - e).abs() < 1e-12, "{got:?} vs {expected:?}");
    }
}

fn complex_grad(t: &Tensor) -> Vec<f64> {
    let g = t.grad().expect("a gradient");
    assert_eq!(g.dtype(), ScalarType::ComplexDouble);
    ops::view_as_real(&g).unwrap().to_vec::<f64>().unwrap()
}

#[test]
fn rfft_and_ifft_of_real_inputs() {
    let x = x();
    let spectrum = ops::fft_rfft_with(&x, ops::FftRfftOptions::default().norm("ortho")).unwrap();
    let loss = ops::mul(
        &ops::view_as_real(&spectrum).unwrap(),
        &weights(&[2, 3, 2], 7.0, 0.5),
    )
    .unwrap()
    .sum()
    .unwrap();
    loss.backward().unwrap();
    close(
        &x.grad().unwrap().to_vec::<f64>().unwrap(),
        &[
            -0.287494454249973,
            -0.30501140248231473,
            -0.026289043011578528,
            -0.2461235813812395,
            -0.25311550762478896,
            0.8624833627499188,
            -0.7032263988985502,
            0.3046252248739346,
            -0.19371191026678886,
            0.52842542779141,
        ],
    );
    let x = self::x();
    let inverse = ops::fft_ifft_with(&x, ops::FftIfftOptions::default().dim(0)).unwrap();
    let loss = ops::mul(
        &ops::view_as_real(&inverse).unwrap(),
        &weights(&[2, 5, 2], 5.0, 1.0),
    )
    .unwrap()
    .sum()
    .unwrap();
    loss.backward().unwrap();
    close(
        &x.grad().unwrap().to_vec::<f64>().unwrap(),
        &[0.0, 0.4, 0.8, 1.2, 1.6, -1.0, -1.0, -1.0, -1.0, -1.0],
    );
}

#[test]
fn irfft_of_even_and_odd_lengths() {
    let z = z();
    let signal = ops::fft_irfft_with(&z, ops::FftIrfftOptions::default().n(4)).unwrap();
    let loss = ops::mul(&signal, &weights(&[2, 4], 3.0, 1.0))
        .unwrap()
        .sum()
        .unwrap();
    loss.backward().unwrap();
    let third = 1.0 / 3.0;
    close(
        &complex_grad(&z),
        &[
            -0.5,
            0.0,
            -third,
            third,
            -third / 2.0,
            0.0,
            2.5 * third,
            0.0,
            -third,
            third,
            -third / 2.0,
            0.0,
        ],
    );
    let z = self::z();
    let signal = ops::fft_irfft_with(&z, ops::FftIrfftOptions::default().n(5)).unwrap();
    let loss = ops::mul(&signal, &weights(&[2, 5], 3.0, 1.0))
        .unwrap()
        .sum()
        .unwrap();
    loss.backward().unwrap();
    close(
        &complex_grad(&z),
        &[
            -0.3333333333333334,
            0.0,
            -0.33333333333333337,
            0.4587939734903912,
            -0.33333333333333337,
            0.10830656541096882,
            1.3333333333333335,
            0.0,
            -0.33333333333333315,
            0.4587939734903911,
            -0.33333333333333315,
            0.10830656541096895,
        ],
    );
}

#[test]
fn fft_of_a_complex_input() {
    let z = z();
    let spectrum = ops::fft_fft_with(&z, ops::FftFftOptions::default().norm("forward")).unwrap();
    let loss = ops::mul(
        &ops::view_as_real(&spectrum).unwrap(),
        &weights(&[2, 3, 2], 4.0, 1.0),
    )
    .unwrap()
    .sum()
    .unwrap();
    loss.backward().unwrap();
    close(
        &complex_grad(&z),
        &[
            -0.5,
            -0.25,
            -0.10566243270259357,
            -0.3943375672974064,
            -0.3943375672974064,
            -0.10566243270259357,
            1.0,
            1.25,
            -0.10566243270259357,
            -0.3943375672974064,
            -0.3943375672974064,
            -0.10566243270259357,
        ],
    );
}
