//! The meta functions of the structured losses of `LossNLL.cpp` and `Loss.cpp`:
//! `nll_loss_forward` (two outputs: the loss and `total_weight`), `nll_loss_backward` and
//! `mse_loss`.

use switchboard_tensor::{contiguous_strides, DimVec, ScalarType, Tensor, TensorError};

use super::{common_device, same_device, Elementwise, MetaOutput, Result};

/// PyTorch's `Reduction::None` (1 averages, 2 sums).
pub(super) const REDUCTION_NONE: i64 = 0;

// Note [Reduction values]
// PyTorch's loss kernels treat any `reduction` other than 0 (none) and 1 (mean) as a sum;
// Switchboard refuses values outside 0..=2 (a call with such a value is a caller's mistake
// that PyTorch's Python layer never makes), in the meta function so that Meta and CPU agree.
pub(super) fn check_reduction(reduction: i64) -> Result<()> {
    if !(0..=2).contains(&reduction) {
        return Err(TensorError::invalid(format!(
            "{reduction} is not a valid value for reduction (expected 0 = 'none', 1 = 'mean' \
             or 2 = 'sum')"
        )));
    }
    Ok(())
}

/// `t.size(0)`, with ATen's error for a zero-dim tensor.
fn size0(t: &Tensor) -> Result<i64> {
    t.sizes().first().copied().ok_or_else(|| {
        TensorError::invalid("Dimension specified as 0 but tensor has no dimensions")
    })
}

/// The checks both directions share: a 1-d or 2-d input, a 0-d or 1-d target, one device.
fn check_input_and_target(self_: &Tensor, target: &Tensor, weight: Option<&Tensor>) -> Result<()> {
    let mut all = vec![self_, target];
    all.extend(weight);
    same_device(&all)?;
    if self_.dim() == 0 || self_.dim() > 2 {
        return Err(TensorError::invalid("input tensor should be 1D or 2D"));
    }
    if target.dim() > 1 {
        return Err(TensorError::invalid(
            "0D or 1D target tensor expected, multi-target not supported",
        ));
    }
    Ok(())
}

fn size_mismatch(self_: &Tensor, target: &Tensor) -> TensorError {
    TensorError::invalid(format!(
        "size mismatch (got input: {:?}, target: {:?})",
        self_.sizes(),
        target.sizes()
    ))
}

/// A fresh output of `sizes` (contiguous) in `self_`'s dtype and device.
pub(super) fn like_input(self_: &Tensor, sizes: &[i64]) -> MetaOutput {
    MetaOutput {
        sizes: DimVec::from_slice(sizes),
        strides: contiguous_strides(sizes),
        dtype: self_.dtype(),
        device: self_.device(),
    }
}

/// `nll_loss_forward` (and `nll_loss_forward.output`): the loss, `(N,)` for `reduction=0`
/// on a 2-d input and a scalar otherwise, and a scalar `total_weight`, in `self`'s dtype.
pub fn nll_loss_forward(
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    _ignore_index: i64,
    _outputs: Option<[&Tensor; 2]>,
) -> Result<[MetaOutput; 2]> {
    check_input_and_target(self_, target, weight)?;
    if !matches!(target.dtype(), ScalarType::Long | ScalarType::Byte) {
        return Err(TensorError::invalid(format!(
            "expected target dtype to be Long or Byte, but got {}",
            target.dtype().c10_name()
        )));
    }
    if self_.dim() == 1 && target.dim() == 1 && target.sizes()[0] != 1 {
        return Err(TensorError::invalid(format!(
            "For 1D input, 1D target must have size 1, but got target size: {}",
            target.sizes()[0]
        )));
    }
    if self_.dim() != 1 && self_.sizes()[0] != size0(target)? {
        return Err(size_mismatch(self_, target));
    }
    let n_classes = self_.sizes()[self_.dim() - 1];
    if let Some(w) = weight {
        if w.dim() != 1 || w.numel() != n_classes {
            return Err(TensorError::invalid(format!(
                "weight tensor should be defined either for all {n_classes} classes or no \
                 classes but got weight tensor of shape: {:?}",
                w.sizes()
            )));
        }
    }
    check_reduction(reduction)?;
    let loss = if reduction == REDUCTION_NONE && self_.dim() == 2 {
        like_input(self_, &self_.sizes()[..1])
    } else {
        like_input(self_, &[])
    };
    Ok([loss, like_input(self_, &[])])
}

/// `nll_loss_backward` (and `nll_loss_backward.grad_input`): `self`'s sizes, contiguous.
#[allow(clippy::too_many_arguments)]
pub fn nll_loss_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    _ignore_index: i64,
    total_weight: &Tensor,
    _grad_input: Option<&Tensor>,
) -> Result<MetaOutput> {
    same_device(&[grad_output, self_])?;
    check_input_and_target(self_, target, weight)?;
    let no_batch_dim = self_.dim() == 1 && target.dim() == 0;
    if !no_batch_dim && self_.sizes()[0] != size0(target)? {
        return Err(size_mismatch(self_, target));
    }
    if total_weight.numel() != 1 {
        return Err(TensorError::invalid(format!(
            "expected total_weight to be a  single element tensor, got: {:?} ({} elements)",
            total_weight.sizes(),
            total_weight.numel()
        )));
    }
    let n_classes = self_.sizes()[self_.dim() - 1];
    if weight.is_some_and(|w| w.numel() != n_classes) {
        return Err(TensorError::invalid(
            "weight tensor should be defined either for all or no classes",
        ));
    }
    check_reduction(reduction)?;
    if reduction == REDUCTION_NONE && self_.dim() == 2 {
        let batch = self_.sizes()[0];
        if grad_output.dim() != 1 || grad_output.sizes()[0] != batch {
            return Err(TensorError::invalid(format!(
                "Expected a tensor of dimension 1 and tensor.size[0] == {batch} but got: \
                 dimension {} and tensor.size[0] = {}",
                grad_output.dim(),
                grad_output.sizes().first().copied().unwrap_or(-1)
            )));
        }
    } else if grad_output.dim() > 1 || grad_output.numel() != 1 {
        return Err(TensorError::invalid(format!(
            "Expected a single element grad_output tensor, but got: {:?}",
            grad_output.sizes()
        )));
    }
    Ok(like_input(self_, self_.sizes()))
}

/// `mse_loss` (and `mse_loss.out`): the elementwise geometry of `self` and `target`
/// (broadcast, promoted), a 0-dim result when reduced.
pub fn mse_loss(
    self_: &Tensor,
    target: &Tensor,
    reduction: i64,
    out: Option<&Tensor>,
) -> Result<MetaOutput> {
    common_device(&[self_, target])?;
    check_reduction(reduction)?;
    if reduction == REDUCTION_NONE {
        return Elementwise::new(out, [self_, target]).compute();
    }
    let elementwise = Elementwise::new(None, [self_, target]).compute()?;
    Ok(MetaOutput {
        sizes: DimVec::new(),
        strides: DimVec::new(),
        ..elementwise
    })
}
