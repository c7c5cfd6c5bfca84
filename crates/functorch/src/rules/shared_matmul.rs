//! The matrix product of a batch by a matrix every sample shares, where the shared matrix is
//! an expansion over the batch (stride 0): what `vmap(grad(f))` makes of shared parameters.

use switchboard_autograd::{apply, AutogradTensor, Function, FunctionCtx};
use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

// Note [Products with shared operands]
// Under `vmap(grad(f))` a parameter shared by the samples is lifted to one expanded leaf
// `[B, k, m]` with batch stride 0 (Note [Dynamic layers]), so that each sample's slice of its
// gradient is that sample's gradient. A batched product with it, computed as `bmm`, would read
// the matrix once per sample; since every sample's matrix is the same, the product is one
// `mm` of the batch folded into rows, as functorch computes it (the parameter is not batched
// there). Its gradients are the batch's: the folded `mm` for the batched operand and, for the
// shared one, the per-sample products `x_b^T g_b`, which autograd accumulates into the
// expanded leaf. A custom function gives autograd exactly those, with `create_graph` still
// available to outer transforms (its backward calls differentiable operators).

/// `a [B, n, k] @ b [B, k, m]` where `b` has batch stride 0.
struct SharedRightMatmul;

impl Function for SharedRightMatmul {
    fn name(&self) -> String {
        "MmBackward0".into()
    }

    fn forward(&self, ctx: &mut FunctionCtx, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let (a, b) = (&inputs[0], &inputs[1]);
        ctx.save_for_backward(&[a.clone(), b.clone()]);
        Ok(vec![folded_product(a, &ops::select(b, 0, 0)?)?])
    }

    fn backward(&self, ctx: &FunctionCtx, grads: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let saved = ctx.saved_tensors()?;
        let (a, b) = (&saved[0], &saved[1]);
        let g = &grads[0];
        let grad_a = if ctx.needs_input_grad(0) {
            Some(folded_product(
                g,
                &ops::transpose(&ops::select(b, 0, 0)?, 0, 1)?,
            )?)
        } else {
            None
        };
        let grad_b = if ctx.needs_input_grad(1) {
            Some(ops::matmul(&ops::transpose(a, 1, 2)?, g)?)
        } else {
            None
        };
        Ok(vec![grad_a, grad_b])
    }
}

/// `a [B, n, k] @ m [k, p]` as one `mm` of `[B * n, k]` rows.
fn folded_product(a: &Tensor, m: &Tensor) -> Result<Tensor> {
    let (b, n, k) = (a.sizes()[0], a.sizes()[1], a.sizes()[2]);
    let rows = ops::reshape(a, &[b * n, k])?;
    ops::reshape(&ops::mm(&rows, m)?, &[b, n, m.sizes()[1]])
}

/// The product of physical `[B, n, k]` and `[B, k, m]` operands when the right one is an
/// expansion over the batch (stride 0): one `mm`, with the right gradients (Note [Products
/// with shared operands]); `None` otherwise.
pub(crate) fn shared_right_matmul(a: &Tensor, b: &Tensor) -> Result<Option<Tensor>> {
    let shared = a.dim() == 3 && b.dim() == 3 && b.sizes()[0] > 1 && b.strides()[0] == 0;
    if !shared || a.dtype() != b.dtype() {
        return Ok(None);
    }
    if !b.requires_grad() && !a.requires_grad() {
        return Ok(Some(folded_product(a, &ops::select(b, 0, 0)?)?));
    }
    Ok(apply(SharedRightMatmul, &[a.clone(), b.clone()])?.pop())
}
