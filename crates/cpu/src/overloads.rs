//! PyTorch's other overloads of operators whose kernels live elsewhere: `out=` forms
//! (`.Scalar_out`, `.unary_out`, `.grad_input`, ...), in-place and Scalar/Tensor forms, each a
//! thin layer over the functional kernel, so the numbers are the functional form's.
//!
//! Note [out= forms of functional kernels]
//! Most `out=` forms whose result must have `out`'s dtype exactly are generated for every
//! backend from an `autogen:` line (Note [Generated out= kernels] in switchboard-codegen). The
//! ones here are TensorIterator ops, as PyTorch's structured kernels are: they compute the
//! functional result, then write it into `out`, which must be on the result's device and of a
//! dtype the result can be cast to; it is resized when its shape differs (`resize_output`, Note
//! [Functional resize]) and the resized tensor is returned.

use switchboard_ops::structured::{resize_out, MetaOutput};
use switchboard_tensor::{can_cast, DimVec, Scalar, ScalarType, Tensor};

use crate::copy::copy_into;
use crate::error::{invalid, Result};

/// Writes `result` into `out` (resized to its shape), casting to `out`'s dtype; returns the
/// resized `out` (Note [out= forms of functional kernels]).
fn write_out(result: &Tensor, out: &Tensor) -> Result<Tensor> {
    if out.device() != result.device() {
        return Err(invalid(format!(
            "Expected out tensor to have device {}, but got {} instead",
            result.device(),
            out.device()
        )));
    }
    if !can_cast(result.dtype(), out.dtype()) {
        return Err(invalid(format!(
            "result type {} can't be cast to the desired output type {}",
            result.dtype().c10_name(),
            out.dtype().c10_name()
        )));
    }
    // Resized as the structured glue resizes `out=` (`resize_out`): to the result's strides,
    // which follow the inputs' layout.
    let meta = MetaOutput {
        sizes: DimVec::from_slice(result.sizes()),
        strides: DimVec::from_slice(result.strides()),
        dtype: out.dtype(),
        device: out.device(),
    };
    let out = resize_out(out, &meta)?;
    if out.has_data() && result.has_data() {
        copy_into(&out, result)?;
    }
    Ok(out)
}

// ------------------------------------------------------------------ pointwise

/// `mul.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out)`.
pub fn mul_scalar_out(self_: &Tensor, other: Scalar, out: &Tensor) -> Result<Tensor> {
    crate::mul_out(self_, &Tensor::wrapped_scalar(other), out)
}

/// `rsub.Scalar(Tensor self, Scalar other, Scalar alpha=1)`: `other - alpha * self`.
pub fn rsub_scalar(self_: &Tensor, other: Scalar, alpha: Scalar) -> Result<Tensor> {
    crate::rsub_tensor(self_, &Tensor::wrapped_scalar(other), alpha)
}

/// `rsub.Tensor_out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out)`.
pub fn rsub_tensor_out(
    self_: &Tensor,
    other: &Tensor,
    alpha: Scalar,
    out: &Tensor,
) -> Result<Tensor> {
    crate::sub_out(other, self_, alpha, out)
}

/// `rsub.Scalar_out(Tensor self, Scalar other, Scalar alpha=1, *, Tensor(a!) out)`.
pub fn rsub_scalar_out(
    self_: &Tensor,
    other: Scalar,
    alpha: Scalar,
    out: &Tensor,
) -> Result<Tensor> {
    crate::sub_out(&Tensor::wrapped_scalar(other), self_, alpha, out)
}

/// `div.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out)`.
pub fn div_scalar_out(self_: &Tensor, other: Scalar, out: &Tensor) -> Result<Tensor> {
    crate::div_out(self_, &Tensor::wrapped_scalar(other), out)
}

/// `div.Scalar_mode_out(Tensor self, Scalar other, *, str? rounding_mode, Tensor(a!) out)`.
pub fn div_scalar_mode_out(
    self_: &Tensor,
    other: Scalar,
    rounding_mode: Option<&str>,
    out: &Tensor,
) -> Result<Tensor> {
    crate::div_out_mode(self_, &Tensor::wrapped_scalar(other), rounding_mode, out)
}

/// `div_.Scalar_mode(Tensor(a!) self, Scalar other, *, str? rounding_mode)`.
pub fn div_scalar_mode_(
    self_: &Tensor,
    other: Scalar,
    rounding_mode: Option<&str>,
) -> Result<Tensor> {
    crate::div_mode_(self_, &Tensor::wrapped_scalar(other), rounding_mode)
}

/// `pow.Scalar_out(Scalar self, Tensor exponent, *, Tensor(a!) out)`.
pub fn pow_scalar_out(self_: Scalar, exponent: &Tensor, out: &Tensor) -> Result<Tensor> {
    // Into `out` as its meta function resizes it: contiguous, whatever the exponent's layout.
    let meta = switchboard_ops::structured::pow_scalar(self_, exponent, Some(out))?;
    let result = crate::structured_output::structured_output(meta, Some(out))?;
    crate::pow_tensor_tensor_out(&Tensor::wrapped_scalar(self_), exponent, &result)
}

/// `relu.out(Tensor self, *, Tensor(a!) out)`.
pub fn relu_out(self_: &Tensor, out: &Tensor) -> Result<Tensor> {
    write_out(&crate::relu(self_)?, out)
}

// ------------------------------------------------------------------ reductions

/// `sum.out(Tensor self, *, ScalarType? dtype=None, Tensor(a!) out)`.
pub fn sum_out(self_: &Tensor, dtype: Option<ScalarType>, out: &Tensor) -> Result<Tensor> {
    if !self_.has_data() {
        // Note [Meta path of unstructured kernels] in structured_output.rs.
        let meta =
            switchboard_ops::structured::sum_dim_int_list(self_, None, false, dtype, Some(out))?;
        return resize_out(out, &meta);
    }
    crate::sum_int_list_out(self_, None, false, dtype, out)
}

/// `mean.dtype_out(Tensor self, *, ScalarType? dtype=None, Tensor(a!) out)`.
pub fn mean_dtype_out(self_: &Tensor, dtype: Option<ScalarType>, out: &Tensor) -> Result<Tensor> {
    if !self_.has_data() {
        // Note [Meta path of unstructured kernels] in structured_output.rs.
        let meta = switchboard_ops::structured::mean_dim(self_, None, false, dtype, Some(out))?;
        return resize_out(out, &meta);
    }
    crate::mean_out(self_, None, false, dtype, out)
}

// ------------------------------------------------------------------ nn

/// `threshold_backward.grad_input(Tensor grad_output, Tensor self, Scalar threshold, *,
/// Tensor(a!) grad_input)`.
pub fn threshold_backward_grad_input(
    grad_output: &Tensor,
    self_: &Tensor,
    threshold: Scalar,
    grad_input: &Tensor,
) -> Result<Tensor> {
    let r = crate::threshold_backward(grad_output, self_, threshold)?;
    write_out(&r, grad_input)
}

/// `sigmoid_backward.grad_input(Tensor grad_output, Tensor output, *, Tensor(a!) grad_input)`.
pub fn sigmoid_backward_grad_input(
    grad_output: &Tensor,
    output: &Tensor,
    grad_input: &Tensor,
) -> Result<Tensor> {
    write_out(&crate::sigmoid_backward(grad_output, output)?, grad_input)
}

/// `tanh_backward.grad_input(Tensor grad_output, Tensor output, *, Tensor(a!) grad_input)`.
pub fn tanh_backward_grad_input(
    grad_output: &Tensor,
    output: &Tensor,
    grad_input: &Tensor,
) -> Result<Tensor> {
    write_out(&crate::tanh_backward(grad_output, output)?, grad_input)
}

/// `gelu_backward.grad_input(Tensor grad_output, Tensor self, *, str approximate='none',
/// Tensor(a!) grad_input)`.
pub fn gelu_backward_grad_input(
    grad_output: &Tensor,
    self_: &Tensor,
    approximate: &str,
    grad_input: &Tensor,
) -> Result<Tensor> {
    let r = crate::gelu_backward(grad_output, self_, approximate)?;
    write_out(&r, grad_input)
}

/// `silu_backward.grad_input(Tensor grad_output, Tensor self, *, Tensor(a!) grad_input)`.
pub fn silu_backward_grad_input(
    grad_output: &Tensor,
    self_: &Tensor,
    grad_input: &Tensor,
) -> Result<Tensor> {
    write_out(&crate::silu_backward(grad_output, self_)?, grad_input)
}

// ------------------------------------------------------------------ factories and filling

/// `zeros.out(SymInt[] size, *, Tensor(a!) out)`: `out` resized to `size`, filled with 0.
pub fn zeros_out(size: &[i64], out: &Tensor) -> Result<Tensor> {
    crate::zero_(&out.resize_output(size)?)
}

/// `ones.out(SymInt[] size, *, Tensor(a!) out)`.
pub fn ones_out(size: &[i64], out: &Tensor) -> Result<Tensor> {
    crate::fill_scalar_(&out.resize_output(size)?, Scalar::Int(1))
}

/// `full.out(SymInt[] size, Scalar fill_value, *, Tensor(a!) out)`.
pub fn full_out(size: &[i64], fill_value: Scalar, out: &Tensor) -> Result<Tensor> {
    crate::fill_scalar_(&out.resize_output(size)?, fill_value)
}
