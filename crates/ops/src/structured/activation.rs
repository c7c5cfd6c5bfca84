//! The meta functions of the structured activations of `Activation.cpp` beyond those of
//! `pointwise.rs`: `leaky_relu` and `leaky_relu_backward`.

use switchboard_tensor::{Scalar, Tensor, TensorError};

use super::{Elementwise, MetaOutput, Result};

/// `leaky_relu` (and `leaky_relu_`, `leaky_relu.out`).
pub fn leaky_relu(
    self_: &Tensor,
    _negative_slope: Scalar,
    out: Option<&Tensor>,
) -> Result<MetaOutput> {
    Elementwise::new(out, [self_]).compute()
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
