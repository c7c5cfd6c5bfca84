//! `nll_loss2d_forward` / `nll_loss2d_backward`: the negative log-likelihood of spatial
//! log-probabilities `(N, C, H, W)` at class indices `(N, H, W)`, PyTorch's
//! `LossNLL2d.cpp` operators.
//!
//! Each class score at pixel `(n, h, w)` is one sample of the 2-d loss: the kernels move the
//! class dimension last, flatten the pixels into a batch of `N * H * W` rows and run
//! [`nll_loss_forward`] / [`nll_loss_backward`], whose sums, `total_weight`, `ignore_index`
//! handling and messages are the ones PyTorch's 2-d loops share with the 1-d ones. The
//! arguments' checks and the outputs' geometry are the meta functions'
//! (`switchboard_ops::structured::nll_loss2d_forward`, `nll_loss2d_backward`), which the
//! Meta backend registers.

use switchboard_ops::structured;
use switchboard_tensor::{RawOps, Tensor};

use crate::error::{check_cpu, not_implemented, Result};
use crate::{nll_loss_backward, nll_loss_forward};

/// The check of the 2-d kernels after the meta function's: a floating input (the dtypes
/// PyTorch's kernels are compiled for), on the CPU.
fn check_kernel_dtype(op: &str, self_: &Tensor) -> Result<()> {
    check_cpu("nll_loss2d", self_.device())?;
    if !self_.dtype().is_floating_point() {
        return Err(not_implemented(op, self_.dtype()));
    }
    Ok(())
}

/// A weight of `C` elements as the 1-d loss takes it (PyTorch's 2-d kernels read any
/// shape of `C` elements).
fn flat_weight(weight: Option<&Tensor>) -> Result<Option<Tensor>> {
    weight.map(|w| w.reshape(&[-1])).transpose()
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
    structured::nll_loss2d_forward(self_, target, weight, reduction, ignore_index, None)?;
    check_kernel_dtype("nll_loss2d_forward_out_frame", self_)?;
    let rows = pixels_as_rows(self_)?;
    let flat_target = target.reshape(&[-1])?;
    let weight = flat_weight(weight)?;
    let (output, total_weight) = nll_loss_forward(
        &rows,
        &flat_target,
        weight.as_ref(),
        reduction,
        ignore_index,
    )?;
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
    structured::nll_loss2d_backward(
        grad_output,
        self_,
        target,
        weight,
        reduction,
        ignore_index,
        total_weight,
        None,
    )?;
    check_kernel_dtype("nll_loss2d_backward_out_frame", self_)?;
    let grad_rows = if reduction == 0 {
        grad_output.reshape(&[-1])?
    } else {
        grad_output.clone()
    };
    let rows = pixels_as_rows(self_)?;
    let flat_target = target.reshape(&[-1])?;
    let weight = flat_weight(weight)?;
    let grad = nll_loss_backward(
        &grad_rows,
        &rows,
        &flat_target,
        weight.as_ref(),
        reduction,
        ignore_index,
        total_weight,
    )?;
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
