//! Matrix products.

use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::{Scalar, Tensor};

use super::maybe_multiply;

// Note [Matrix product gradients in the operand's layout]
// The gradient of a matrix product's operand is computed in that operand's layout, as
// PyTorch's `mm_mat1_backward` / `mm_mat2_backward` do: for a column-major operand (strides
// `[1, rows]`, such as a `t()` of a contiguous matrix, which is what `linear` passes as
// `weight.t()`), `grad_mat2 = mat1^T @ g` is computed as `(g^T @ mat1)^T`. The product is then
// a transposed view of a contiguous matrix, the `t()` backward makes it contiguous again, and
// the weight's gradient arrives in the weight's own layout: AccumulateGrad keeps it as it is
// (no copy), and the optimizer's elementwise updates run over dense rows. The GEMM takes either
// layout without copies.

/// Whether a matrix of `sizes` and `strides` is column-major (PyTorch's test).
fn column_major(sizes: &[i64], strides: &[i64]) -> bool {
    sizes.len() == 2 && strides[0] == 1 && strides[1] == sizes[0]
}

/// The gradient of `mat1` in `mat1 @ mat2` (times `alpha`), in `mat1`'s layout (Note [Matrix
/// product gradients in the operand's layout]).
pub(crate) fn mm_mat1_backward(
    grad: &Tensor,
    mat2: &Tensor,
    mat1_sizes: &[i64],
    mat1_strides: &[i64],
    alpha: impl Into<Scalar>,
) -> Result<Tensor> {
    if column_major(mat1_sizes, mat1_strides) {
        return maybe_multiply(&ops::t(&ops::mm(mat2, &ops::t(grad)?)?)?, alpha);
    }
    maybe_multiply(&ops::mm(grad, &ops::t(mat2)?)?, alpha)
}

/// The gradient of `mat2` in `mat1 @ mat2` (times `alpha`), in `mat2`'s layout.
pub(crate) fn mm_mat2_backward(
    grad: &Tensor,
    mat1: &Tensor,
    mat2_sizes: &[i64],
    mat2_strides: &[i64],
    alpha: impl Into<Scalar>,
) -> Result<Tensor> {
    if column_major(mat2_sizes, mat2_strides) {
        return maybe_multiply(&ops::t(&ops::mm(&ops::t(grad)?, mat1)?)?, alpha);
    }
    maybe_multiply(&ops::mm(&ops::t(mat1)?, grad)?, alpha)
}
