//! The meta functions of `LossNLL2d.cpp`'s `nll_loss2d_forward` and `nll_loss2d_backward`,
//! which PyTorch does not make structured: the Meta backend registers them (Note [Meta
//! functions outside structured families] in switchboard-codegen) and the CPU kernels run
//! them for their checks.

use switchboard_tensor::{ScalarType, Tensor, TensorError};

use super::loss::{check_reduction, like_input, REDUCTION_NONE};
use super::{same_device, MetaOutput, Result};

/// PyTorch's `check_inputs_nll_loss2d`, with the target dtype checks of the 1-d loss and of
/// the 2-d kernels: a `(N, C, H, W)` input, an `(N, H, W)` target of int64 class indices, a
/// weight of `C` elements, one device.
fn check_inputs(self_: &Tensor, target: &Tensor, weight: Option<&Tensor>) -> Result<()> {
    let mut all = vec![self_, target];
    all.extend(weight);
    same_device(&all)?;
    if target.dim() != 3 {
        return Err(TensorError::invalid(format!(
            "only batches of spatial targets supported (3D tensors) but got targets of \
             dimension: {}",
            target.dim()
        )));
    }
    if self_.dim() != 4 {
        return Err(TensorError::invalid(format!(
            "only batches of spatial inputs supported (4D tensors), but got input of dimension: \
             {}",
            self_.dim()
        )));
    }
    if weight.is_some_and(|w| w.numel() != self_.sizes()[1]) {
        return Err(TensorError::invalid(
            "weight tensor should be defined either for all or no classes",
        ));
    }
    let (i, t) = (self_.sizes(), target.sizes());
    if i[0] != t[0] || i[2] != t[1] || i[3] != t[2] {
        // PyTorch's message, with its unbalanced parenthesis.
        return Err(TensorError::invalid(format!(
            "size mismatch (got input: {i:?} , target: {t:?}"
        )));
    }
    if !matches!(target.dtype(), ScalarType::Long | ScalarType::Byte) {
        return Err(TensorError::invalid(format!(
            "expected target dtype to be Long or Byte, but got {}",
            target.dtype().c10_name()
        )));
    }
    // PyTorch's 2-d kernels read the target as int64 only, on every backend.
    if target.dtype() != ScalarType::Long {
        return Err(TensorError::invalid(format!(
            "expected scalar type Long but found {}",
            target.dtype().c10_name()
        )));
    }
    Ok(())
}

/// `nll_loss2d_forward(Tensor self, Tensor target, Tensor? weight, int reduction, SymInt
/// ignore_index)`: the loss, the target's `(N, H, W)` for `reduction=0` and a scalar
/// otherwise, and a scalar `total_weight`, contiguous in `self`'s dtype.
pub fn nll_loss2d_forward(
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    _ignore_index: i64,
    _outputs: Option<[&Tensor; 2]>,
) -> Result<[MetaOutput; 2]> {
    check_inputs(self_, target, weight)?;
    check_reduction(reduction)?;
    let loss = if reduction == REDUCTION_NONE {
        like_input(self_, target.sizes())
    } else {
        like_input(self_, &[])
    };
    Ok([loss, like_input(self_, &[])])
}

/// `nll_loss2d_backward(Tensor grad_output, Tensor self, Tensor target, Tensor? weight, int
/// reduction, SymInt ignore_index, Tensor total_weight)`: `self`'s sizes, contiguous; the
/// gradient is the target's shape for `reduction=0`, else one element.
#[allow(clippy::too_many_arguments)]
pub fn nll_loss2d_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    _ignore_index: i64,
    total_weight: &Tensor,
    _grad_input: Option<&Tensor>,
) -> Result<MetaOutput> {
    check_inputs(self_, target, weight)?;
    same_device(&[grad_output, self_])?;
    if total_weight.numel() != 1 {
        return Err(TensorError::invalid(format!(
            "expected total_weight to be a single element tensor, got: {:?} ({} elements)",
            total_weight.sizes(),
            total_weight.numel()
        )));
    }
    if reduction == REDUCTION_NONE {
        // PyTorch's `check_gradout_shape_nll_loss2d`.
        if grad_output.dim() != 3 {
            return Err(TensorError::invalid(format!(
                "grad_output must have same dimension as target (3) but got dimension: {:?}",
                grad_output.sizes()
            )));
        }
        if grad_output.sizes() != target.sizes() {
            return Err(TensorError::invalid(format!(
                "size mismatch (got grad_output: {:?} target: {:?}",
                grad_output.sizes(),
                target.sizes()
            )));
        }
    } else if grad_output.dim() > 1 || grad_output.numel() != 1 {
        return Err(TensorError::invalid(format!(
            "Expected a single element grad_output tensor, but got: {:?}",
            grad_output.sizes()
        )));
    }
    check_reduction(reduction)?;
    Ok(like_input(self_, self_.sizes()))
}
