//! Piecewise-linear activations of PyTorch's `Activation.cpp`: `leaky_relu` and `hardtanh`,
//! with their `out=`, in-place and backward forms. Floating dtypes only for `leaky_relu`
//! ("leaky_relu_cpu" not implemented for 'Long'); `hardtanh` is `clamp` with integer bounds
//! for integer tensors, as in PyTorch.

use switchboard_ops::structured;
use switchboard_tensor::{Scalar, ScalarType, Tensor};

use crate::binary::binary_op;
use crate::dispatch_dtype::{Acc, CpuElement, Num};
use crate::dispatch_floating_types;
use crate::error::{invalid, Result};
use crate::iter::{BinaryLoop, IterConfig};

/// `negative_slope` in the compute type of `T` (PyTorch's `negval.to<opmath_t>()`).
fn in_opmath<T: CpuElement>(v: Scalar) -> Acc<T> {
    <Acc<T> as Num>::from_f64(v.to_f64())
}

fn leaky_relu_impl(self_: &Tensor, negative_slope: Scalar, out: Option<&Tensor>) -> Result<Tensor> {
    let iter = IterConfig::new("leaky_relu")
        .maybe_out(out)
        .input(self_)
        .all_same_dtype(true)
        .build()?;
    dispatch_floating_types!(iter.common_dtype(), "leaky_relu_cpu", T => {
        let slope = in_opmath::<T>(negative_slope);
        iter.for_each1(move |a: T| {
            let a = a.to_acc();
            T::from_acc(if a > Acc::<T>::ZERO { a } else { a.mul(slope) })
        })
    })?;
    iter.finish()
}

/// `leaky_relu(Tensor self, Scalar negative_slope=0.01)`: `x` where positive, else
/// `x * negative_slope`.
///
/// ```
/// use switchboard_cpu::leaky_relu;
/// use switchboard_tensor::{Scalar, Tensor};
/// let t = Tensor::from_vec(vec![-2.0f32, 3.0], &[2]).unwrap();
/// let r = leaky_relu(&t, Scalar::Float(0.5)).unwrap();
/// assert_eq!(r.to_vec::<f32>().unwrap(), [-1.0, 3.0]);
/// ```
pub fn leaky_relu(self_: &Tensor, negative_slope: Scalar) -> Result<Tensor> {
    leaky_relu_impl(self_, negative_slope, None)
}

/// `leaky_relu.out(Tensor self, Scalar negative_slope=0.01, *, Tensor(a!) out)`.
pub fn leaky_relu_out(self_: &Tensor, negative_slope: Scalar, out: &Tensor) -> Result<Tensor> {
    leaky_relu_impl(self_, negative_slope, Some(out))
}

/// `leaky_relu_(Tensor(a!) self, Scalar negative_slope=0.01)`.
pub fn leaky_relu_(self_: &Tensor, negative_slope: Scalar) -> Result<Tensor> {
    leaky_relu_impl(self_, negative_slope, Some(self_))
}

fn leaky_relu_backward_kernel(iter: &impl BinaryLoop, negative_slope: Scalar) -> Result<()> {
    dispatch_floating_types!(iter.common_dtype(), "leaky_relu_backward_cpu", T => {
        let slope = in_opmath::<T>(negative_slope);
        iter.for_each2(move |x: T, g: T| {
            let (x, g) = (x.to_acc(), g.to_acc());
            T::from_acc(if x > Acc::<T>::ZERO { g } else { g.mul(slope) })
        })
    })
}

fn leaky_relu_backward_impl(
    grad_output: &Tensor,
    self_: &Tensor,
    negative_slope: Scalar,
    self_is_result: bool,
    grad_input: Option<&Tensor>,
) -> Result<Tensor> {
    structured::check_leaky_relu_backward(negative_slope, self_is_result)?;
    // Over `self` and `grad_output`, in that order (the output's layout follows `self`).
    binary_op!(
        "leaky_relu_backward",
        self_,
        grad_output,
        grad_input,
        false,
        |it| { leaky_relu_backward_kernel(it, negative_slope) }
    )
}

/// `leaky_relu_backward(Tensor grad_output, Tensor self, Scalar negative_slope, bool
/// self_is_result)`: `grad_output` where `self > 0`, else `grad_output * negative_slope`.
pub fn leaky_relu_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    negative_slope: Scalar,
    self_is_result: bool,
) -> Result<Tensor> {
    leaky_relu_backward_impl(grad_output, self_, negative_slope, self_is_result, None)
}

/// `leaky_relu_backward.grad_input(..., *, Tensor(a!) grad_input)`.
pub fn leaky_relu_backward_out(
    grad_output: &Tensor,
    self_: &Tensor,
    negative_slope: Scalar,
    self_is_result: bool,
    grad_input: &Tensor,
) -> Result<Tensor> {
    leaky_relu_backward_impl(
        grad_output,
        self_,
        negative_slope,
        self_is_result,
        Some(grad_input),
    )
}

/// PyTorch's `hardtanh_out`: no bool; an integer tensor clamps to the bounds truncated to
/// integers ("legacy behavior of boundaries not causing type promotion").
fn hardtanh_bounds(self_: &Tensor, min_val: Scalar, max_val: Scalar) -> Result<(Scalar, Scalar)> {
    let dtype = self_.dtype();
    if dtype == ScalarType::Bool {
        return Err(invalid("Bool inputs not supported for hardtanh"));
    }
    if !dtype.is_integral(false) {
        return Ok((min_val, max_val));
    }
    Ok((Scalar::Int(min_val.to_i64()), Scalar::Int(max_val.to_i64())))
}

/// `hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1)`: `clamp(self, min_val,
/// max_val)`.
pub fn hardtanh(self_: &Tensor, min_val: Scalar, max_val: Scalar) -> Result<Tensor> {
    let (lo, hi) = hardtanh_bounds(self_, min_val, max_val)?;
    crate::clamp(self_, Some(lo), Some(hi))
}

/// `hardtanh.out(Tensor self, Scalar min_val=-1, Scalar max_val=1, *, Tensor(a!) out)`.
pub fn hardtanh_out(
    self_: &Tensor,
    min_val: Scalar,
    max_val: Scalar,
    out: &Tensor,
) -> Result<Tensor> {
    let (lo, hi) = hardtanh_bounds(self_, min_val, max_val)?;
    crate::clamp_out(self_, Some(lo), Some(hi), out)
}

/// `hardtanh_(Tensor(a!) self, Scalar min_val=-1, Scalar max_val=1)`.
pub fn hardtanh_(self_: &Tensor, min_val: Scalar, max_val: Scalar) -> Result<Tensor> {
    hardtanh_out(self_, min_val, max_val, self_)
}

fn hardtanh_backward_impl(
    grad_output: &Tensor,
    self_: &Tensor,
    min_val: Scalar,
    max_val: Scalar,
    grad_input: Option<&Tensor>,
) -> Result<Tensor> {
    binary_op!(
        "hardtanh_backward",
        grad_output,
        self_,
        grad_input,
        false,
        |it| {
            dispatch_floating_types!(it.common_dtype(), "hardtanh_backward_cpu", T => {
                let (lo, hi) = (in_opmath::<T>(min_val), in_opmath::<T>(max_val));
                it.for_each2(move |g: T, x: T| {
                    let x = x.to_acc();
                    if x <= lo || x >= hi {
                        T::from_acc(Acc::<T>::ZERO)
                    } else {
                        g
                    }
                })
            })
        }
    )
}

/// `hardtanh_backward(Tensor grad_output, Tensor self, Scalar min_val, Scalar max_val)`:
/// `grad_output` strictly inside the bounds, else 0.
pub fn hardtanh_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    min_val: Scalar,
    max_val: Scalar,
) -> Result<Tensor> {
    hardtanh_backward_impl(grad_output, self_, min_val, max_val, None)
}

/// `hardtanh_backward.grad_input(..., *, Tensor(a!) grad_input)`.
pub fn hardtanh_backward_out(
    grad_output: &Tensor,
    self_: &Tensor,
    min_val: Scalar,
    max_val: Scalar,
    grad_input: &Tensor,
) -> Result<Tensor> {
    hardtanh_backward_impl(grad_output, self_, min_val, max_val, Some(grad_input))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaky_relu_and_its_backward() {
        let x = Tensor::from_vec(vec![-2.0f64, 0.0, 3.0], &[3]).unwrap();
        let y = leaky_relu(&x, Scalar::Float(0.1)).unwrap();
        assert_eq!(y.to_vec::<f64>().unwrap(), [-0.2, 0.0, 3.0]);
        let g = Tensor::from_vec(vec![1.0f64, 1.0, 1.0], &[3]).unwrap();
        let d = leaky_relu_backward(&g, &x, Scalar::Float(0.1), false).unwrap();
        assert_eq!(d.to_vec::<f64>().unwrap(), [0.1, 0.1, 1.0]);
        assert!(leaky_relu_backward(&g, &x, Scalar::Float(-0.1), true)
            .unwrap_err()
            .to_string()
            .starts_with("In-place leakyReLu backward"));
        let i = Tensor::from_vec(vec![1i64], &[1]).unwrap();
        assert_eq!(
            leaky_relu(&i, Scalar::Float(0.1)).unwrap_err().to_string(),
            "\"leaky_relu_cpu\" not implemented for 'Long'"
        );
    }

    #[test]
    fn hardtanh_clamps_and_its_backward_masks() {
        let x = Tensor::from_vec(vec![-2.0f32, -1.0, 0.5, 1.0, 3.0], &[5]).unwrap();
        let y = hardtanh(&x, Scalar::Int(-1), Scalar::Int(1)).unwrap();
        assert_eq!(y.to_vec::<f32>().unwrap(), [-1.0, -1.0, 0.5, 1.0, 1.0]);
        let g = Tensor::from_vec(vec![1.0f32; 5], &[5]).unwrap();
        let d = hardtanh_backward(&g, &x, Scalar::Int(-1), Scalar::Int(1)).unwrap();
        assert_eq!(d.to_vec::<f32>().unwrap(), [0.0, 0.0, 1.0, 0.0, 0.0]);
        let i = Tensor::from_vec(vec![-5i64, 0, 5], &[3]).unwrap();
        let r = hardtanh(&i, Scalar::Float(-1.5), Scalar::Float(2.5)).unwrap();
        assert_eq!(r.to_vec::<i64>().unwrap(), [-1, 0, 2]);
        let u = Tensor::from_vec(vec![1u8, 2, 200], &[3]).unwrap();
        let r = hardtanh(&u, Scalar::Int(-1), Scalar::Int(5)).unwrap();
        assert_eq!(r.to_vec::<u8>().unwrap(), [1, 2, 5]);
        let b = Tensor::from_vec(vec![true], &[1]).unwrap();
        assert_eq!(
            hardtanh(&b, Scalar::Int(-1), Scalar::Int(1))
                .unwrap_err()
                .to_string(),
            "Bool inputs not supported for hardtanh"
        );
    }
}
