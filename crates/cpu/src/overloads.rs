//! PyTorch's other overloads of operators whose kernels live elsewhere: `out=` forms
//! (`.Scalar_out`, `.unary_out`, `.grad_input`, ...), in-place and Scalar/Tensor forms, each a
//! thin layer over the functional kernel, so the numbers are the functional form's.
//!
//! Note [out= forms of functional kernels]
//! An `out=` form computes the functional result, then writes it into `out`, as PyTorch's
//! structured kernels do: `out` must be on the result's device; its dtype must be the
//! result's (`OutDtype::Exact`: reductions, matrix and loss kernels) or one the result can
//! be cast to (`OutDtype::Castable`: TensorIterator ops); it is resized when its shape differs
//! (`resize_output`, Note [Functional resize]) and the resized tensor is returned.

use switchboard_tensor::{can_cast, MemoryFormat, Scalar, ScalarType, Tensor};

use crate::copy::copy_into;
use crate::error::{invalid, Result};

/// How an `out=` form checks the dtype of `out` (Note [out= forms of functional kernels]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OutDtype {
    /// `out` must have the result's dtype.
    Exact,
    /// The result must cast to `out`'s dtype.
    Castable,
}

/// Writes `result` into `out` (resized to its shape); returns the resized `out`.
fn write_out(result: &Tensor, out: &Tensor, rule: OutDtype) -> Result<Tensor> {
    if out.device() != result.device() {
        return Err(invalid(format!(
            "Expected out tensor to have device {}, but got {} instead",
            result.device(),
            out.device()
        )));
    }
    match rule {
        OutDtype::Exact if out.dtype() != result.dtype() => {
            return Err(invalid(format!(
                "Expected out tensor to have dtype {}, but got {} instead",
                result.dtype().type_meta_name(),
                out.dtype().type_meta_name()
            )));
        }
        OutDtype::Castable if !can_cast(result.dtype(), out.dtype()) => {
            return Err(invalid(format!(
                "result type {} can't be cast to the desired output type {}",
                result.dtype().c10_name(),
                out.dtype().c10_name()
            )));
        }
        _ => {}
    }
    let out = out.resize_output(result.sizes())?;
    if out.has_data() && result.has_data() {
        copy_into(&out, result)?;
    }
    Ok(out)
}

/// The two-output form of [`write_out`] (`max.dim_max`, `nll_loss_forward.output`, ...).
fn write_outs(
    results: (Tensor, Tensor),
    outs: (&Tensor, &Tensor),
    rule: OutDtype,
) -> Result<(Tensor, Tensor)> {
    Ok((
        write_out(&results.0, outs.0, rule)?,
        write_out(&results.1, outs.1, rule)?,
    ))
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
    crate::pow_tensor_tensor_out(&Tensor::wrapped_scalar(self_), exponent, out)
}

/// `relu.out(Tensor self, *, Tensor(a!) out)`.
pub fn relu_out(self_: &Tensor, out: &Tensor) -> Result<Tensor> {
    write_out(&crate::relu(self_)?, out, OutDtype::Castable)
}

/// `masked_fill.Scalar_out(Tensor self, Tensor mask, Scalar value, *, Tensor(a!) out)`.
pub fn masked_fill_scalar_out(
    self_: &Tensor,
    mask: &Tensor,
    value: Scalar,
    out: &Tensor,
) -> Result<Tensor> {
    write_out(
        &crate::masked_fill_scalar(self_, mask, value)?,
        out,
        OutDtype::Exact,
    )
}

/// `masked_fill.Tensor_out(Tensor self, Tensor mask, Tensor value, *, Tensor(a!) out)`.
pub fn masked_fill_tensor_out(
    self_: &Tensor,
    mask: &Tensor,
    value: &Tensor,
    out: &Tensor,
) -> Result<Tensor> {
    write_out(
        &crate::masked_fill_tensor(self_, mask, value)?,
        out,
        OutDtype::Exact,
    )
}

/// `clamp_min.Tensor(Tensor self, Tensor min)`.
pub fn clamp_min_tensor(self_: &Tensor, min: &Tensor) -> Result<Tensor> {
    crate::clamp_tensor(self_, Some(min), None)
}

/// `clamp_min.out(Tensor self, Scalar min, *, Tensor(a!) out)`.
pub fn clamp_min_out(self_: &Tensor, min: Scalar, out: &Tensor) -> Result<Tensor> {
    crate::clamp_out(self_, Some(min), None, out)
}

/// `clamp_min.Tensor_out(Tensor self, Tensor min, *, Tensor(a!) out)`.
pub fn clamp_min_tensor_out(self_: &Tensor, min: &Tensor, out: &Tensor) -> Result<Tensor> {
    crate::clamp_tensor_out(self_, Some(min), None, out)
}

/// `clamp_min_(Tensor(a!) self, Scalar min)`.
pub fn clamp_min_(self_: &Tensor, min: Scalar) -> Result<Tensor> {
    crate::clamp_(self_, Some(min), None)
}

/// `clamp_min_.Tensor(Tensor(a!) self, Tensor min)`.
pub fn clamp_min_tensor_(self_: &Tensor, min: &Tensor) -> Result<Tensor> {
    crate::clamp_tensor_(self_, Some(min), None)
}

/// `clamp_max.Tensor(Tensor self, Tensor max)`.
pub fn clamp_max_tensor(self_: &Tensor, max: &Tensor) -> Result<Tensor> {
    crate::clamp_tensor(self_, None, Some(max))
}

/// `clamp_max.out(Tensor self, Scalar max, *, Tensor(a!) out)`.
pub fn clamp_max_out(self_: &Tensor, max: Scalar, out: &Tensor) -> Result<Tensor> {
    crate::clamp_out(self_, None, Some(max), out)
}

/// `clamp_max.Tensor_out(Tensor self, Tensor max, *, Tensor(a!) out)`.
pub fn clamp_max_tensor_out(self_: &Tensor, max: &Tensor, out: &Tensor) -> Result<Tensor> {
    crate::clamp_tensor_out(self_, None, Some(max), out)
}

/// `clamp_max_(Tensor(a!) self, Scalar max)`.
pub fn clamp_max_(self_: &Tensor, max: Scalar) -> Result<Tensor> {
    crate::clamp_(self_, None, Some(max))
}

/// `clamp_max_.Tensor(Tensor(a!) self, Tensor max)`.
pub fn clamp_max_tensor_(self_: &Tensor, max: &Tensor) -> Result<Tensor> {
    crate::clamp_tensor_(self_, None, Some(max))
}

// ------------------------------------------------------------------ reductions

/// `sum.out(Tensor self, *, ScalarType? dtype=None, Tensor(a!) out)`.
pub fn sum_out(self_: &Tensor, dtype: Option<ScalarType>, out: &Tensor) -> Result<Tensor> {
    crate::sum_int_list_out(self_, None, false, dtype, out)
}

/// `mean.dtype_out(Tensor self, *, ScalarType? dtype=None, Tensor(a!) out)`.
pub fn mean_dtype_out(self_: &Tensor, dtype: Option<ScalarType>, out: &Tensor) -> Result<Tensor> {
    crate::mean_out(self_, None, false, dtype, out)
}

/// `amax.out(Tensor self, int[1] dim=[], bool keepdim=False, *, Tensor(a!) out)`.
pub fn amax_out(self_: &Tensor, dim: &[i64], keepdim: bool, out: &Tensor) -> Result<Tensor> {
    write_out(&crate::amax(self_, dim, keepdim)?, out, OutDtype::Exact)
}

/// `amin.out(Tensor self, int[1] dim=[], bool keepdim=False, *, Tensor(a!) out)`.
pub fn amin_out(self_: &Tensor, dim: &[i64], keepdim: bool, out: &Tensor) -> Result<Tensor> {
    write_out(&crate::amin(self_, dim, keepdim)?, out, OutDtype::Exact)
}

/// `max.unary_out(Tensor self, *, Tensor(a!) out)`.
pub fn max_unary_out(self_: &Tensor, out: &Tensor) -> Result<Tensor> {
    write_out(&crate::max(self_)?, out, OutDtype::Exact)
}

/// `min.unary_out(Tensor self, *, Tensor(a!) out)`.
pub fn min_unary_out(self_: &Tensor, out: &Tensor) -> Result<Tensor> {
    write_out(&crate::min(self_)?, out, OutDtype::Exact)
}

/// `max.dim_max(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) max, Tensor(b!)
/// max_values) -> (Tensor(a!) values, Tensor(b!) indices)`.
pub fn max_dim_max(
    self_: &Tensor,
    dim: i64,
    keepdim: bool,
    max: &Tensor,
    max_values: &Tensor,
) -> Result<(Tensor, Tensor)> {
    write_outs(
        crate::max_dim(self_, dim, keepdim)?,
        (max, max_values),
        OutDtype::Exact,
    )
}

/// `min.dim_min(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) min, Tensor(b!)
/// min_indices) -> (Tensor(a!) values, Tensor(b!) indices)`.
pub fn min_dim_min(
    self_: &Tensor,
    dim: i64,
    keepdim: bool,
    min: &Tensor,
    min_indices: &Tensor,
) -> Result<(Tensor, Tensor)> {
    write_outs(
        crate::min_dim(self_, dim, keepdim)?,
        (min, min_indices),
        OutDtype::Exact,
    )
}

/// `argmax.out(Tensor self, int? dim=None, bool keepdim=False, *, Tensor(a!) out)`.
pub fn argmax_out(self_: &Tensor, dim: Option<i64>, keepdim: bool, out: &Tensor) -> Result<Tensor> {
    write_out(&crate::argmax(self_, dim, keepdim)?, out, OutDtype::Exact)
}

/// `argmin.out(Tensor self, int? dim=None, bool keepdim=False, *, Tensor(a!) out)`.
pub fn argmin_out(self_: &Tensor, dim: Option<i64>, keepdim: bool, out: &Tensor) -> Result<Tensor> {
    write_out(&crate::argmin(self_, dim, keepdim)?, out, OutDtype::Exact)
}

/// `var.out(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False, *, Tensor(a!)
/// out)`.
pub fn var_out(
    self_: &Tensor,
    dim: Option<&[i64]>,
    unbiased: bool,
    keepdim: bool,
    out: &Tensor,
) -> Result<Tensor> {
    write_out(
        &crate::var_dim(self_, dim, unbiased, keepdim)?,
        out,
        OutDtype::Exact,
    )
}

/// `var.correction_out(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool
/// keepdim=False, Tensor(a!) out)`.
pub fn var_correction_out(
    self_: &Tensor,
    dim: Option<&[i64]>,
    correction: Option<Scalar>,
    keepdim: bool,
    out: &Tensor,
) -> Result<Tensor> {
    write_out(
        &crate::var_correction(self_, dim, correction, keepdim)?,
        out,
        OutDtype::Exact,
    )
}

// ------------------------------------------------------------------ nn

/// `_softmax.out(Tensor self, int dim, bool half_to_float, *, Tensor(a!) out)`.
pub fn _softmax_out(self_: &Tensor, dim: i64, half_to_float: bool, out: &Tensor) -> Result<Tensor> {
    write_out(
        &crate::_softmax(self_, dim, half_to_float)?,
        out,
        OutDtype::Exact,
    )
}

/// `_log_softmax.out(Tensor self, int dim, bool half_to_float, *, Tensor(a!) out)`.
pub fn _log_softmax_out(
    self_: &Tensor,
    dim: i64,
    half_to_float: bool,
    out: &Tensor,
) -> Result<Tensor> {
    write_out(
        &crate::_log_softmax(self_, dim, half_to_float)?,
        out,
        OutDtype::Exact,
    )
}

/// `_softmax_backward_data.out(Tensor grad_output, Tensor output, int dim, ScalarType
/// input_dtype, *, Tensor(a!) grad_input)`.
pub fn _softmax_backward_data_out(
    grad_output: &Tensor,
    output: &Tensor,
    dim: i64,
    input_dtype: ScalarType,
    grad_input: &Tensor,
) -> Result<Tensor> {
    let r = crate::_softmax_backward_data(grad_output, output, dim, input_dtype)?;
    write_out(&r, grad_input, OutDtype::Exact)
}

/// `_log_softmax_backward_data.out(Tensor grad_output, Tensor output, int dim, ScalarType
/// input_dtype, *, Tensor(a!) out)`.
pub fn _log_softmax_backward_data_out(
    grad_output: &Tensor,
    output: &Tensor,
    dim: i64,
    input_dtype: ScalarType,
    out: &Tensor,
) -> Result<Tensor> {
    let r = crate::_log_softmax_backward_data(grad_output, output, dim, input_dtype)?;
    write_out(&r, out, OutDtype::Exact)
}

/// `nll_loss_forward.output(Tensor self, Tensor target, Tensor? weight, int reduction, SymInt
/// ignore_index, *, Tensor(a!) output, Tensor(b!) total_weight) -> (Tensor(a!), Tensor(b!))`.
pub fn nll_loss_forward_output(
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    ignore_index: i64,
    output: &Tensor,
    total_weight: &Tensor,
) -> Result<(Tensor, Tensor)> {
    let r = crate::nll_loss_forward(self_, target, weight, reduction, ignore_index)?;
    write_outs(r, (output, total_weight), OutDtype::Exact)
}

/// `nll_loss_backward.grad_input(Tensor grad_output, Tensor self, Tensor target, Tensor?
/// weight, int reduction, SymInt ignore_index, Tensor total_weight, *, Tensor(a!) grad_input)`.
#[allow(clippy::too_many_arguments)]
pub fn nll_loss_backward_grad_input(
    grad_output: &Tensor,
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    ignore_index: i64,
    total_weight: &Tensor,
    grad_input: &Tensor,
) -> Result<Tensor> {
    let r = crate::nll_loss_backward(
        grad_output,
        self_,
        target,
        weight,
        reduction,
        ignore_index,
        total_weight,
    )?;
    write_out(&r, grad_input, OutDtype::Exact)
}

/// `nll_loss2d_forward.output(...)`: as [`nll_loss_forward_output`] for spatial inputs.
pub fn nll_loss2d_forward_output(
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    ignore_index: i64,
    output: &Tensor,
    total_weight: &Tensor,
) -> Result<(Tensor, Tensor)> {
    let r = crate::nll_loss2d_forward(self_, target, weight, reduction, ignore_index)?;
    write_outs(r, (output, total_weight), OutDtype::Exact)
}

/// `nll_loss2d_backward.grad_input(...)`: as [`nll_loss_backward_grad_input`] for spatial
/// inputs.
#[allow(clippy::too_many_arguments)]
pub fn nll_loss2d_backward_grad_input(
    grad_output: &Tensor,
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    ignore_index: i64,
    total_weight: &Tensor,
    grad_input: &Tensor,
) -> Result<Tensor> {
    let r = crate::nll_loss2d_backward(
        grad_output,
        self_,
        target,
        weight,
        reduction,
        ignore_index,
        total_weight,
    )?;
    write_out(&r, grad_input, OutDtype::Exact)
}

/// `mse_loss.out(Tensor self, Tensor target, int reduction=Mean, *, Tensor(a!) out)`.
pub fn mse_loss_out(
    self_: &Tensor,
    target: &Tensor,
    reduction: i64,
    out: &Tensor,
) -> Result<Tensor> {
    write_out(
        &crate::mse_loss(self_, target, reduction)?,
        out,
        OutDtype::Exact,
    )
}

/// `mse_loss_backward.grad_input(Tensor grad_output, Tensor self, Tensor target, int
/// reduction, *, Tensor(a!) grad_input)`.
pub fn mse_loss_backward_grad_input(
    grad_output: &Tensor,
    self_: &Tensor,
    target: &Tensor,
    reduction: i64,
    grad_input: &Tensor,
) -> Result<Tensor> {
    let r = crate::mse_loss_backward(grad_output, self_, target, reduction)?;
    write_out(&r, grad_input, OutDtype::Exact)
}

/// `threshold_backward.grad_input(Tensor grad_output, Tensor self, Scalar threshold, *,
/// Tensor(a!) grad_input)`.
pub fn threshold_backward_grad_input(
    grad_output: &Tensor,
    self_: &Tensor,
    threshold: Scalar,
    grad_input: &Tensor,
) -> Result<Tensor> {
    let r = crate::threshold_backward(grad_output, self_, threshold)?;
    write_out(&r, grad_input, OutDtype::Castable)
}

/// `sigmoid_backward.grad_input(Tensor grad_output, Tensor output, *, Tensor(a!) grad_input)`.
pub fn sigmoid_backward_grad_input(
    grad_output: &Tensor,
    output: &Tensor,
    grad_input: &Tensor,
) -> Result<Tensor> {
    write_out(
        &crate::sigmoid_backward(grad_output, output)?,
        grad_input,
        OutDtype::Castable,
    )
}

/// `tanh_backward.grad_input(Tensor grad_output, Tensor output, *, Tensor(a!) grad_input)`.
pub fn tanh_backward_grad_input(
    grad_output: &Tensor,
    output: &Tensor,
    grad_input: &Tensor,
) -> Result<Tensor> {
    write_out(
        &crate::tanh_backward(grad_output, output)?,
        grad_input,
        OutDtype::Castable,
    )
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
    write_out(&r, grad_input, OutDtype::Castable)
}

/// `silu_backward.grad_input(Tensor grad_output, Tensor self, *, Tensor(a!) grad_input)`.
pub fn silu_backward_grad_input(
    grad_output: &Tensor,
    self_: &Tensor,
    grad_input: &Tensor,
) -> Result<Tensor> {
    write_out(
        &crate::silu_backward(grad_output, self_)?,
        grad_input,
        OutDtype::Castable,
    )
}

// ------------------------------------------------------------------ indexing

/// `gather.out(Tensor self, int dim, Tensor index, *, bool sparse_grad=False, Tensor(a!)
/// out)`.
pub fn gather_out(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    sparse_grad: bool,
    out: &Tensor,
) -> Result<Tensor> {
    write_out(
        &crate::gather(self_, dim, index, sparse_grad)?,
        out,
        OutDtype::Exact,
    )
}

/// `scatter_add.out(Tensor self, int dim, Tensor index, Tensor src, *, Tensor(a!) out)`.
pub fn scatter_add_out(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    src: &Tensor,
    out: &Tensor,
) -> Result<Tensor> {
    write_out(
        &crate::scatter_add(self_, dim, index, src)?,
        out,
        OutDtype::Exact,
    )
}

/// `index_add.out(Tensor self, int dim, Tensor index, Tensor source, *, Scalar alpha=1,
/// Tensor(a!) out)`.
pub fn index_add_out(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    source: &Tensor,
    alpha: Scalar,
    out: &Tensor,
) -> Result<Tensor> {
    write_out(
        &crate::index_add(self_, dim, index, source, alpha)?,
        out,
        OutDtype::Exact,
    )
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

/// `clone.out(Tensor self, *, MemoryFormat? memory_format=None, Tensor(a!) out)`.
pub fn clone_out(
    self_: &Tensor,
    memory_format: Option<MemoryFormat>,
    out: &Tensor,
) -> Result<Tensor> {
    write_out(&crate::clone(self_, memory_format)?, out, OutDtype::Exact)
}
