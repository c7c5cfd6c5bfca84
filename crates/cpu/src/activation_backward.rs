//! Backward kernels of the activations in `unary.rs`: `threshold_backward` (relu's),
//! `sigmoid_backward`, `tanh_backward`, `gelu_backward` (exact and tanh) and `silu_backward`.
//! Each is a binary elementwise op on the shared iterator (broadcasting, type promotion
//! without integer-to-float promotion, any strides, meta shapes); Half and BFloat16 compute in
//! f32.

use switchboard_tensor::{Scalar, Tensor};

use crate::binary::{acc_loop2, acc_loop2_fused, binary_op};
use crate::dispatch_dtype::{scalar_in_opmath, Float, Num};
use crate::error::Result;
use crate::iter::BinaryLoop;
use crate::unary::{GeluApproximate, FRAC_1_SQRT_2, SQRT_2_OVER_PI};
use crate::{dispatch_all_types, dispatch_floating_types};

/// `threshold_backward(Tensor grad_output, Tensor self, Scalar threshold) -> Tensor`
///
/// `0` where `self <= threshold`, else `grad_output` (NaN in `self` passes the gradient).
/// With `threshold = 0` this is relu's backward.
///
/// ```
/// use switchboard_cpu::threshold_backward;
/// use switchboard_tensor::{Scalar, Tensor};
/// let g = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
/// let x = Tensor::from_vec(vec![-1.0f32, 0.0, 0.5], &[3]).unwrap();
/// let r = threshold_backward(&g, &x, Scalar::Int(0)).unwrap();
/// assert_eq!(r.to_vec::<f32>().unwrap(), [0.0, 0.0, 3.0]);
/// ```
pub fn threshold_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    threshold: Scalar,
) -> Result<Tensor> {
    binary_op!(
        "threshold_backward",
        self_,
        grad_output,
        None,
        false,
        |it| {
            dispatch_all_types!(it.common_dtype(), "threshold_cpu", T => {
                let thr = scalar_in_opmath::<T>(threshold)?;
                acc_loop2::<T>(it, move |x, g| threshold_grad(thr, x, g))
            })
        },
    )
}

#[inline]
fn threshold_grad<N: Num>(threshold: N, x: N, g: N) -> N {
    if x <= threshold {
        N::ZERO
    } else {
        g
    }
}

#[inline]
fn sigmoid_grad<F: Float>(g: F, y: F) -> F {
    g.mul(F::ONE.sub(y)).mul(y)
}

#[inline]
fn tanh_grad<F: Float>(g: F, y: F) -> F {
    g.mul(F::ONE.sub(y.mul(y)))
}

#[inline]
fn silu_grad<F: Float>(g: F, x: F) -> F {
    let s = F::ONE.div(F::ONE.add(x.neg().exp()));
    g.mul(s).mul(F::ONE.add(x.mul(F::ONE.sub(s))))
}

/// `sigmoid_backward(Tensor grad_output, Tensor output) -> Tensor`
///
/// `grad_output * (1 - output) * output`, given sigmoid's output.
pub fn sigmoid_backward(grad_output: &Tensor, output: &Tensor) -> Result<Tensor> {
    binary_op!("sigmoid_backward", grad_output, output, None, false, |it| {
        dispatch_floating_types!(it.common_dtype(), "sigmoid_backward_cpu", T => {
            acc_loop2::<T>(it, sigmoid_grad)
        })
    })
}

/// `tanh_backward(Tensor grad_output, Tensor output) -> Tensor`
///
/// `grad_output * (1 - output^2)`, given tanh's output.
pub fn tanh_backward(grad_output: &Tensor, output: &Tensor) -> Result<Tensor> {
    binary_op!("tanh_backward", grad_output, output, None, false, |it| {
        dispatch_floating_types!(it.common_dtype(), "tanh_backward_cpu", T => {
            acc_loop2::<T>(it, tanh_grad)
        })
    })
}

/// The derivative of gelu at `x`, times `dy` (PyTorch's `GeluBackwardKernelImpl`), with the
/// vectorized `erf` and `exp` (Note [Vectorized erf and exp]).
#[inline(always)]
fn gelu_grad<F: Float>(approximate: GeluApproximate, dy: F, x: F) -> F {
    let half = F::from_f64(0.5);
    match approximate {
        GeluApproximate::None => {
            // 1 / sqrt(2 pi) = M_2_SQRTPI * M_SQRT1_2 * 0.5.
            let alpha = F::from_f64(std::f64::consts::FRAC_2_SQRT_PI * FRAC_1_SQRT_2 * 0.5);
            let cdf = half.mul(F::ONE.add(x.mul(F::from_f64(FRAC_1_SQRT_2)).erf_vectorized()));
            let pdf = alpha.mul(x.mul(x).mul(F::from_f64(-0.5)).exp_vectorized());
            dy.mul(cdf.add(x.mul(pdf)))
        }
        GeluApproximate::Tanh => {
            let (beta, kappa) = (F::from_f64(SQRT_2_OVER_PI), F::from_f64(0.044715));
            let x_sq = x.mul(x);
            let inner = beta.mul(x.add(kappa.mul(x_sq).mul(x)));
            let t = inner.tanh();
            let left = half.mul(x);
            let right = F::ONE.add(t);
            let left_derivative = half.mul(right);
            let tanh_derivative = F::ONE.sub(t.mul(t));
            let inner_derivative = beta.mul(F::ONE.add(F::from_f64(3.0).mul(kappa).mul(x_sq)));
            let right_derivative = left.mul(tanh_derivative).mul(inner_derivative);
            dy.mul(left_derivative.add(right_derivative))
        }
    }
}

/// `gelu_backward(Tensor grad_output, Tensor self, *, str approximate='none') -> Tensor`
///
/// `grad_output * gelu'(self)`, for the exact (`'none'`) or the `'tanh'` gelu.
pub fn gelu_backward(grad_output: &Tensor, self_: &Tensor, approximate: &str) -> Result<Tensor> {
    let approx = GeluApproximate::parse(approximate)?;
    binary_op!("gelu_backward", grad_output, self_, None, false, |it| {
        dispatch_floating_types!(it.common_dtype(), "GeluBackwardKernelImpl", T => {
            acc_loop2_fused::<T>(
                it,
                #[inline(always)]
                move |g, x| gelu_grad(approx, g, x),
            )
        })
    })
}

/// `silu_backward(Tensor grad_output, Tensor self) -> Tensor`
///
/// `grad_output * s * (1 + x * (1 - s))` with `s = sigmoid(x)`.
pub fn silu_backward(grad_output: &Tensor, self_: &Tensor) -> Result<Tensor> {
    binary_op!("silu_backward", grad_output, self_, None, false, |it| {
        dispatch_floating_types!(it.common_dtype(), "silu_backward_cpu", T => {
            acc_loop2::<T>(it, silu_grad)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{gelu, relu, sigmoid, silu, tanh};
    use switchboard_tensor::{bf16, Device, RawOps, ScalarType};

    fn f64s(v: &[f64]) -> Tensor {
        Tensor::from_slice(v, &[v.len() as i64]).unwrap()
    }

    const XS: [f64; 9] = [-4.0, -2.5, -1.0, -0.3, 0.1, 0.7, 1.3, 2.2, 5.0];

    /// Compares `backward(g, x)` with `g * (f(x + h) - f(x - h)) / 2h`.
    fn check_fd(f: impl Fn(&Tensor) -> Tensor, backward: impl Fn(&Tensor, &Tensor) -> Tensor) {
        let h = 1e-6;
        let x = f64s(&XS);
        let g: Vec<f64> = (0..XS.len()).map(|i| 0.5 + i as f64 * 0.25).collect();
        let plus: Vec<f64> = XS.iter().map(|v| v + h).collect();
        let minus: Vec<f64> = XS.iter().map(|v| v - h).collect();
        let fp = f(&f64s(&plus)).to_vec::<f64>().unwrap();
        let fm = f(&f64s(&minus)).to_vec::<f64>().unwrap();
        let got = backward(&f64s(&g), &x).to_vec::<f64>().unwrap();
        for i in 0..XS.len() {
            let want = g[i] * (fp[i] - fm[i]) / (2.0 * h);
            assert!(
                (got[i] - want).abs() < 1e-7,
                "x={}: {} vs {want}",
                XS[i],
                got[i]
            );
        }
    }

    #[test]
    fn finite_differences() {
        check_fd(
            |x| sigmoid(x).unwrap(),
            |g, x| sigmoid_backward(g, &sigmoid(x).unwrap()).unwrap(),
        );
        check_fd(
            |x| tanh(x).unwrap(),
            |g, x| tanh_backward(g, &tanh(x).unwrap()).unwrap(),
        );
        check_fd(|x| silu(x).unwrap(), |g, x| silu_backward(g, x).unwrap());
        for approx in ["none", "tanh"] {
            check_fd(
                |x| gelu(x, approx).unwrap(),
                |g, x| gelu_backward(g, x, approx).unwrap(),
            );
        }
        // relu away from its kink.
        check_fd(
            |x| relu(x).unwrap(),
            |g, x| threshold_backward(g, x, Scalar::Int(0)).unwrap(),
        );
    }

    #[test]
    fn dtypes_strides_broadcast_meta() {
        // A transposed f32 input with a broadcast gradient.
        let x = Tensor::from_vec(vec![-1.0f32, 2.0, 0.0, 3.0], &[2, 2])
            .unwrap()
            .t()
            .unwrap(); // [[-1, 0], [2, 3]]
        let g = Tensor::from_vec(vec![10.0f32, 20.0], &[2]).unwrap();
        let r = threshold_backward(&g, &x, Scalar::Float(0.5)).unwrap();
        assert_eq!(r.to_vec::<f32>().unwrap(), [0.0, 0.0, 10.0, 20.0]);
        // Integer relu backward, NaN passes.
        let gi = Tensor::from_vec(vec![5i64, 6], &[2]).unwrap();
        let xi = Tensor::from_vec(vec![0i64, 1], &[2]).unwrap();
        assert_eq!(
            threshold_backward(&gi, &xi, Scalar::Int(0))
                .unwrap()
                .to_vec::<i64>()
                .unwrap(),
            [0, 6]
        );
        let xn = Tensor::from_vec(vec![f32::NAN], &[1]).unwrap();
        let gn = Tensor::from_vec(vec![1.0f32], &[1]).unwrap();
        assert_eq!(
            threshold_backward(&gn, &xn, Scalar::Int(0))
                .unwrap()
                .to_vec::<f32>()
                .unwrap(),
            [1.0]
        );
        // BFloat16 computes in f32 and rounds once.
        let xb = Tensor::from_vec(vec![bf16::from_f32(0.5)], &[1]).unwrap();
        let gb = Tensor::from_vec(vec![bf16::from_f32(1.0)], &[1]).unwrap();
        let r = sigmoid_backward(&gb, &xb).unwrap();
        assert_eq!(
            (r.dtype(), r.to_vec::<bf16>().unwrap()[0].to_f32()),
            (ScalarType::BFloat16, 0.25)
        );
        // Mixed dtypes promote.
        let r = tanh_backward(&gb, &Tensor::from_vec(vec![0.5f64], &[1]).unwrap()).unwrap();
        assert_eq!(
            (r.dtype(), r.to_vec::<f64>().unwrap()[0]),
            (ScalarType::Double, 0.75)
        );
        // Meta.
        let m = Tensor::zeros_on(&[3, 1], ScalarType::Half, Device::META).unwrap();
        let m2 = Tensor::zeros_on(&[4], ScalarType::Half, Device::META).unwrap();
        for r in [
            threshold_backward(&m, &m2, Scalar::Int(0)),
            sigmoid_backward(&m, &m2),
            tanh_backward(&m, &m2),
            gelu_backward(&m, &m2, "tanh"),
            silu_backward(&m, &m2),
        ] {
            let r = r.unwrap();
            assert!(r.is_meta());
            assert_eq!((r.sizes(), r.dtype()), (&[3i64, 4][..], ScalarType::Half));
        }
    }

    #[test]
    fn errors() {
        let i = Tensor::from_vec(vec![1i64], &[1]).unwrap();
        assert_eq!(
            sigmoid_backward(&i, &i).unwrap_err().to_string(),
            "\"sigmoid_backward_cpu\" not implemented for 'Long'"
        );
        assert_eq!(
            gelu_backward(&i, &i, "none").unwrap_err().to_string(),
            "\"GeluBackwardKernelImpl\" not implemented for 'Long'"
        );
        let f = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        assert!(gelu_backward(&f, &f, "fast").is_err());
        assert!(
            silu_backward(&f, &Tensor::zeros(&[3], ScalarType::Float).unwrap())
                .unwrap_err()
                .to_string()
                .contains("must match")
        );
        let b = Tensor::from_vec(vec![true], &[1]).unwrap();
        assert_eq!(
            threshold_backward(&b, &b, Scalar::Int(0))
                .unwrap_err()
                .to_string(),
            "\"threshold_cpu\" not implemented for 'Bool'"
        );
        assert!(tanh_backward(&i, &i).is_err());
    }
}
