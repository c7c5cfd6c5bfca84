//! `elu` (Activation.cpp) with its in-place, `out=` and backward forms: floating dtypes only
//! ("elu_cpu" not implemented for 'Long'), computed in the dtype's compute type.

use switchboard_ops::structured;
use switchboard_tensor::{Scalar, Tensor};

use crate::binary::binary_op;
use crate::dispatch_dtype::{Acc, CpuElement, FloatElement, Num};
use crate::dispatch_floating_types;
use crate::error::Result;
use crate::iter::{BinaryLoop, IterConfig};

/// PyTorch's `negcoef = alpha * scale`, `poscoef = scale`, `negiptcoef = input_scale`, in the
/// compute type of `T`.
fn coefficients<T: FloatElement>(
    alpha: Scalar,
    scale: Scalar,
    input_scale: Scalar,
) -> (Acc<T>, Acc<T>, Acc<T>) {
    let f = |s: Scalar| <Acc<T> as Num>::from_f64(s.to_f64());
    (f(alpha).mul(f(scale)), f(scale), f(input_scale))
}

fn elu_impl(
    self_: &Tensor,
    alpha: Scalar,
    scale: Scalar,
    input_scale: Scalar,
    out: Option<&Tensor>,
) -> Result<Tensor> {
    let iter = IterConfig::new("elu")
        .maybe_out(out)
        .input(self_)
        .all_same_dtype(true)
        .build()?;
    dispatch_floating_types!(iter.common_dtype(), "elu_cpu", T => {
        let (negcoef, poscoef, negiptcoef) = coefficients::<T>(alpha, scale, input_scale);
        iter.for_each1(move |a: T| {
            let a = a.to_acc();
            T::from_acc(if a <= Acc::<T>::ZERO {
                a.mul(negiptcoef).exp_m1().mul(negcoef)
            } else {
                a.mul(poscoef)
            })
        })
    })?;
    iter.finish()
}

/// `elu(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1)`:
/// `scale * x` where positive, else `alpha * scale * (exp(x * input_scale) - 1)`.
///
/// ```
/// use switchboard_cpu::elu;
/// use switchboard_tensor::{Scalar, Tensor};
/// let t = Tensor::from_vec(vec![0.0f64, 2.0], &[2]).unwrap();
/// let r = elu(&t, Scalar::Int(1), Scalar::Int(3), Scalar::Int(1)).unwrap();
/// assert_eq!(r.to_vec::<f64>().unwrap(), [0.0, 6.0]);
/// ```
pub fn elu(self_: &Tensor, alpha: Scalar, scale: Scalar, input_scale: Scalar) -> Result<Tensor> {
    elu_impl(self_, alpha, scale, input_scale, None)
}

/// `elu.out(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1, *, Tensor(a!)
/// out)`.
pub fn elu_out(
    self_: &Tensor,
    alpha: Scalar,
    scale: Scalar,
    input_scale: Scalar,
    out: &Tensor,
) -> Result<Tensor> {
    elu_impl(self_, alpha, scale, input_scale, Some(out))
}

/// `elu_(Tensor(a!) self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1)`.
pub fn elu_(self_: &Tensor, alpha: Scalar, scale: Scalar, input_scale: Scalar) -> Result<Tensor> {
    elu_impl(self_, alpha, scale, input_scale, Some(self_))
}

fn elu_backward_kernel(
    iter: &impl BinaryLoop,
    alpha: Scalar,
    scale: Scalar,
    input_scale: Scalar,
    is_result: bool,
) -> Result<()> {
    dispatch_floating_types!(iter.common_dtype(), "elu_backward_cpu", T => {
        let (negcoef, poscoef, negiptcoef) = coefficients::<T>(alpha, scale, input_scale);
        iter.for_each2(move |g: T, x: T| {
            let (g, x) = (g.to_acc(), x.to_acc());
            T::from_acc(if x > Acc::<T>::ZERO {
                g.mul(poscoef)
            } else if is_result {
                // The result `y` of the negative branch gives the derivative as
                // `input_scale * (y + negcoef)`.
                g.mul(negiptcoef).mul(x.add(negcoef))
            } else {
                g.mul(negiptcoef).mul(negcoef).mul(x.mul(negiptcoef).exp())
            })
        })
    })
}

fn elu_backward_impl(
    grad_output: &Tensor,
    alpha: Scalar,
    scale: Scalar,
    input_scale: Scalar,
    is_result: bool,
    self_or_result: &Tensor,
    grad_input: Option<&Tensor>,
) -> Result<Tensor> {
    structured::check_elu_backward(alpha, is_result)?;
    binary_op!(
        "elu_backward",
        grad_output,
        self_or_result,
        grad_input,
        false,
        |it| { elu_backward_kernel(it, alpha, scale, input_scale, is_result) }
    )
}

/// `elu_backward(Tensor grad_output, Scalar alpha, Scalar scale, Scalar input_scale, bool
/// is_result, Tensor self_or_result)`: `elu`'s derivative times `grad_output`, from the input
/// or (`is_result`, after the in-place form) from the result.
pub fn elu_backward(
    grad_output: &Tensor,
    alpha: Scalar,
    scale: Scalar,
    input_scale: Scalar,
    is_result: bool,
    self_or_result: &Tensor,
) -> Result<Tensor> {
    elu_backward_impl(
        grad_output,
        alpha,
        scale,
        input_scale,
        is_result,
        self_or_result,
        None,
    )
}

/// `elu_backward.grad_input(..., *, Tensor(a!) grad_input)`.
pub fn elu_backward_out(
    grad_output: &Tensor,
    alpha: Scalar,
    scale: Scalar,
    input_scale: Scalar,
    is_result: bool,
    self_or_result: &Tensor,
    grad_input: &Tensor,
) -> Result<Tensor> {
    elu_backward_impl(
        grad_output,
        alpha,
        scale,
        input_scale,
        is_result,
        self_or_result,
        Some(grad_input),
    )
}
