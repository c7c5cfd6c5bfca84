//! The meta functions of the structured softmax family of `SoftMax.cpp`: `_softmax`,
//! `_log_softmax` and their `_backward_data` ops.

use switchboard_tensor::{contiguous_strides, wrap_dim, DimVec, ScalarType, Tensor, TensorError};

use super::{same_device, MetaOutput, Result};

/// `input`'s sizes, contiguous (`LEGACY_CONTIGUOUS_MEMORY_FORMAT`: a channels-last input
/// gives a contiguous output), with `dtype`, after wrapping `dim` against them.
fn along_dim(input: &Tensor, dim: i64, dtype: ScalarType) -> Result<MetaOutput> {
    wrap_dim(dim, input.dim())?;
    let sizes = DimVec::from_slice(input.sizes());
    Ok(MetaOutput {
        strides: contiguous_strides(&sizes),
        sizes,
        dtype,
        device: input.device(),
    })
}

/// The forward's dtype: `Float` for `half_to_float` (which only CUDA computes; the CPU
/// kernel refuses it after this), else `self`'s.
fn forward_dtype(self_: &Tensor, half_to_float: bool) -> ScalarType {
    if half_to_float {
        ScalarType::Float
    } else {
        self_.dtype()
    }
}

/// `_softmax` (and `_softmax.out`): `self`'s sizes, contiguous.
pub fn _softmax(
    self_: &Tensor,
    dim: i64,
    half_to_float: bool,
    _out: Option<&Tensor>,
) -> Result<MetaOutput> {
    along_dim(self_, dim, forward_dtype(self_, half_to_float))
}

/// `_log_softmax` (and `_log_softmax.out`).
pub fn _log_softmax(
    self_: &Tensor,
    dim: i64,
    half_to_float: bool,
    _out: Option<&Tensor>,
) -> Result<MetaOutput> {
    along_dim(self_, dim, forward_dtype(self_, half_to_float))
}

/// The backwards' geometry: `grad_output`'s sizes, contiguous, in its dtype except that a
/// `Float` gradient of a `Half` input gives `Half` (the CUDA half-to-float case; the CPU
/// kernel then refuses to write a `Half` result from `Float` data, as PyTorch's).
fn backward(
    op: &str,
    grad_output: &Tensor,
    output: &Tensor,
    dim: i64,
    input_dtype: ScalarType,
) -> Result<MetaOutput> {
    same_device(&[grad_output, output])?;
    // Note [Softmax backward sizes]
    // PyTorch's `_softmax_backward_data` meta function checks that `grad_output` and `output`
    // have one size (`checkSameSize`, naming the first `grad`); `_log_softmax_backward_data`'s
    // does not, and its CPU kernel then reads `output` out of bounds. Both check here.
    if grad_output.sizes() != output.sizes() {
        return Err(TensorError::invalid(format!(
            "Expected tensor for argument #1 'grad' to have same size as tensor for argument \
             #2 'output'; but {:?} does not equal {:?} (while checking arguments for {op})",
            grad_output.sizes(),
            output.sizes()
        )));
    }
    let dtype = if grad_output.dtype() == ScalarType::Float && input_dtype == ScalarType::Half {
        ScalarType::Half
    } else {
        grad_output.dtype()
    };
    along_dim(grad_output, dim, dtype)
}

/// `_softmax_backward_data` (and `_softmax_backward_data.out`).
pub fn _softmax_backward_data(
    grad_output: &Tensor,
    output: &Tensor,
    dim: i64,
    input_dtype: ScalarType,
    _grad_input: Option<&Tensor>,
) -> Result<MetaOutput> {
    backward("softmax_backward", grad_output, output, dim, input_dtype)
}

/// `_log_softmax_backward_data` (and `_log_softmax_backward_data.out`).
pub fn _log_softmax_backward_data(
    grad_output: &Tensor,
    output: &Tensor,
    dim: i64,
    input_dtype: ScalarType,
    _out: Option<&Tensor>,
) -> Result<MetaOutput> {
    backward(
        "log_softmax_backward",
        grad_output,
        output,
        dim,
        input_dtype,
    )
}
