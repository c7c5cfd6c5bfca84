//! `nll_loss2d_forward` / `nll_loss2d_backward`: the negative log-likelihood of spatial
//! log-probabilities `(N, C, H, W)` at class indices `(N, H, W)`, PyTorch's
//! `LossNLL2d.cpp` operators.
//!
//! Each class score at pixel `(n, h, w)` is one sample of the 2-d loss: the kernels move the
//! class dimension last, flatten the pixels into a batch of `N * H * W` rows and run
//! [`nll_loss_forward`] / [`nll_loss_backward`], whose sums, `total_weight`, `ignore_index`
//! handling and messages are the ones PyTorch's 2-d loops share with the 1-d ones.

use switchboard_ops::structured;
use switchboard_tensor::{RawOps, ScalarType, Tensor};

use crate::error::{check_cpu_or_meta, invalid, not_implemented, same_device, shape_str, Result};
use crate::{nll_loss_backward, nll_loss_forward};

/// PyTorch's `check_inputs_nll_loss2d`.
fn check_inputs(self_: &Tensor, target: &Tensor, weight: Option<&Tensor>) -> Result<()> {
    let mut all = vec![self_, target];
    all.extend(weight);
    check_cpu_or_meta("nll_loss2d", same_device(&all)?)?;
    if target.dim() != 3 {
        return Err(invalid(format!(
            "only batches of spatial targets supported (3D tensors) but got targets of \
             dimension: {}",
            target.dim()
        )));
    }
    if self_.dim() != 4 {
        return Err(invalid(format!(
            "only batches of spatial inputs supported (4D tensors), but got input of dimension: \
             {}",
            self_.dim()
        )));
    }
    if weight.is_some_and(|w| w.numel() != self_.sizes()[1]) {
        return Err(invalid(
            "weight tensor should be defined either for all or no classes",
        ));
    }
    let (i, t) = (self_.sizes(), target.sizes());
    if i[0] != t[0] || i[2] != t[1] || i[3] != t[2] {
        return Err(invalid(format!(
            "size mismatch (got input: {} , target: {}",
            shape_str(i),
            shape_str(t)
        )));
    }
    if !matches!(target.dtype(), ScalarType::Long | ScalarType::Byte) {
        return Err(invalid(format!(
            "expected target dtype to be Long or Byte, but got {}",
            target.dtype().c10_name()
        )));
    }
    if !self_.dtype().is_floating_point() {
        return Err(not_implemented(
            "nll_loss2d_forward_out_frame",
            self_.dtype(),
        ));
    }
    // The 2-d kernels read the target as int64 only.
    if target.dtype() != ScalarType::Long {
        return Err(invalid(format!(
            "expected scalar type Long but found {}",
            target.dtype().c10_name()
        )));
    }
    Ok(())
}

/// `(N, C, H, W)` as `(N * H * W, C)`: the pixels as rows of class scores.
fn pixels_as_rows(t: &Tensor) -> Result<Tensor> {
    let c = t.sizes()[1];
    t.permute(&[0, 2, 3, 1])?.reshape(&[-1, c])
}

/// `nll_loss2d_forward(Tensor self, Tensor target, Tensor? weight, int reduction, SymInt
/// ignore_index) -> (Tensor output, Tensor total_weight)`: the output is `(N, H, W)` for
/// `reduction=0` (with a `total_weight` of 0), else a scalar.
///
/// ```
/// use switchboard_tensor::Tensor;
/// // N=1, C=2, H=1, W=2: pixel 0 is class 1, pixel 1 class 0.
/// let logp = Tensor::from_vec(vec![-1.0f32, -2.0, -3.0, -4.0], &[1, 2, 1, 2]).unwrap();
/// let target = Tensor::from_vec(vec![1i64, 0], &[1, 1, 2]).unwrap();
/// let (loss, total) = switchboard_cpu::nll_loss2d_forward(&logp, &target, None, 2, -100).unwrap();
/// assert_eq!(loss.to_vec::<f32>().unwrap(), [5.0]); // 3 + 2
/// assert_eq!(total.to_vec::<f32>().unwrap(), [2.0]);
/// ```
pub fn nll_loss2d_forward(
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    ignore_index: i64,
) -> Result<(Tensor, Tensor)> {
    check_inputs(self_, target, weight)?;
    let rows = pixels_as_rows(self_)?;
    let flat_target = target.reshape(&[-1])?;
    // This kernel is also the Meta kernel of `nll_loss2d_forward` (not structured in
    // PyTorch), and `nll_loss_forward`'s CPU kernel computes only into tensors with data: meta
    // rows take its meta function.
    let (output, total_weight) = if rows.is_meta() {
        let [output, total_weight] = structured::nll_loss_forward(
            &rows,
            &flat_target,
            weight,
            reduction,
            ignore_index,
            None,
        )?;
        (output.allocate()?, total_weight.allocate()?)
    } else {
        nll_loss_forward(&rows, &flat_target, weight, reduction, ignore_index)?
    };
    if reduction == 0 {
        return Ok((output.reshape(target.sizes())?, total_weight));
    }
    Ok((output, total_weight))
}

/// `nll_loss2d_backward(Tensor grad_output, Tensor self, Tensor target, Tensor? weight, int
/// reduction, SymInt ignore_index, Tensor total_weight) -> Tensor`: the gradient with respect
/// to `self`, contiguous, zero except at each pixel's target class.
#[allow(clippy::too_many_arguments)]
pub fn nll_loss2d_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    ignore_index: i64,
    total_weight: &Tensor,
) -> Result<Tensor> {
    check_inputs(self_, target, weight)?;
    same_device(&[grad_output, self_])?;
    if total_weight.numel() != 1 {
        return Err(invalid(format!(
            "expected total_weight to be a single element tensor, got: {} ({} elements)",
            shape_str(total_weight.sizes()),
            total_weight.numel()
        )));
    }
    let grad_rows = if reduction == 0 {
        // PyTorch's `check_gradout_shape_nll_loss2d`.
        if grad_output.dim() != 3 {
            return Err(invalid(format!(
                "grad_output must have same dimension as target (3) but got dimension: {}",
                shape_str(grad_output.sizes())
            )));
        }
        if grad_output.sizes() != target.sizes() {
            return Err(invalid(format!(
                "size mismatch (got grad_output: {} target: {}",
                shape_str(grad_output.sizes()),
                shape_str(target.sizes())
            )));
        }
        grad_output.reshape(&[-1])?
    } else {
        if grad_output.dim() > 1 || grad_output.numel() != 1 {
            return Err(invalid(format!(
                "Expected a single element grad_output tensor, but got: {}",
                shape_str(grad_output.sizes())
            )));
        }
        grad_output.clone()
    };
    let rows = pixels_as_rows(self_)?;
    let flat_target = target.reshape(&[-1])?;
    // As in `nll_loss2d_forward`: meta rows take the 1-d backward's meta function.
    let grad = if rows.is_meta() {
        structured::nll_loss_backward(
            &grad_rows,
            &rows,
            &flat_target,
            weight,
            reduction,
            ignore_index,
            total_weight,
            None,
        )?
        .allocate()?
    } else {
        nll_loss_backward(
            &grad_rows,
            &rows,
            &flat_target,
            weight,
            reduction,
            ignore_index,
            total_weight,
        )?
    };
    let (n, c, h, w) = (
        self_.sizes()[0],
        self_.sizes()[1],
        self_.sizes()[2],
        self_.sizes()[3],
    );
    grad.reshape(&[n, h, w, c])?
        .permute(&[0, 3, 1, 2])?
        .contiguous()
}
