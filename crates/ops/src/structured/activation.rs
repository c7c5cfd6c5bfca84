//! The meta functions of the structured activations of `Activation.cpp` beyond those of
//! `pointwise.rs`: `leaky_relu`, `elu` and their backwards.

use switchboard_tensor::{Scalar, Tensor, TensorError};

use super::{Elementwise, MetaOutput, Result};

/// `leaky_relu` (and `leaky_relu_`, `leaky_relu.out`).
pub fn leaky_relu(
    self_: &Tensor,
    _negative_slope: Scalar,
    out: Option<&Tensor>,
) -> Result<MetaOutput> {
    Elementwise::new(out, [self_]).all_same_dtype().compute()
}

/// `leaky_relu_backward` (and `leaky_relu_backward.grad_input`): over `self` and
/// `grad_output`, in that order; PyTorch's check that an in-place forward's result (whose
/// sign no longer tells the input's with a negative slope) is not differentiated.
pub fn leaky_relu_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    negative_slope: Scalar,
    self_is_result: bool,
    grad_input: Option<&Tensor>,
) -> Result<MetaOutput> {
    check_leaky_relu_backward(negative_slope, self_is_result)?;
    Elementwise::new(grad_input, [self_, grad_output]).compute()
}

/// `leaky_relu_backward`'s argument check (also the CPU kernel's).
pub fn check_leaky_relu_backward(negative_slope: Scalar, self_is_result: bool) -> Result<()> {
    if self_is_result && negative_slope.to_f64() < 0.0 {
        return Err(TensorError::invalid(
            "In-place leakyReLu backward calculation is triggered with a negative slope which is \
             not supported. This is caused by calling in-place forward function with a negative \
             slope, please call out-of-place version instead. File an issue at \
             https://github.com/pytorch/pytorch if you do require supporting in-place leakRelu \
             backward calculation with negative slope",
        ));
    }
    Ok(())
}

/// `elu` (and `elu_`, `elu.out`).
pub fn elu(
    self_: &Tensor,
    _alpha: Scalar,
    _scale: Scalar,
    _input_scale: Scalar,
    out: Option<&Tensor>,
) -> Result<MetaOutput> {
    Elementwise::new(out, [self_]).all_same_dtype().compute()
}

/// `elu_backward` (and `elu_backward.grad_input`): over `grad_output` and `self_or_result`;
/// PyTorch's refusal of an in-place forward's result with a negative `alpha`.
pub fn elu_backward(
    grad_output: &Tensor,
    alpha: Scalar,
    _scale: Scalar,
    _input_scale: Scalar,
    is_result: bool,
    self_or_result: &Tensor,
    grad_input: Option<&Tensor>,
) -> Result<MetaOutput> {
    check_elu_backward(alpha, is_result)?;
    Elementwise::new(grad_input, [grad_output, self_or_result]).compute()
}

/// `elu_backward`'s argument check (also the CPU kernel's).
pub fn check_elu_backward(alpha: Scalar, is_result: bool) -> Result<()> {
    if is_result && alpha.to_f64() < 0.0 {
        return Err(TensorError::invalid(
            "In-place elu backward calculation is triggered with a negative slope which is not \
             supported. This is caused by calling in-place forward function with a negative \
             slope, please call out-of-place version instead.",
        ));
    }
    Ok(())
}
