//! The gradients of the scatter reductions.

use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

use super::to_dtype;
use crate::node::err;

/// `scatter_reduce`'s gradients for `self` and `src` (PyTorch's `scatter_reduce_backward`):
/// `sum` passes `grad` through; `prod` divides the result by each factor, computing the
/// product of the others directly where a factor is the only zero; `mean` divides by the
/// count; `amax` and `amin` share `grad` evenly among the elements equal to the result.
/// Without `include_self`, `self`'s elements at scattered positions get no gradient.
#[allow(clippy::too_many_arguments)]
pub(crate) fn scatter_reduce_backward(
    grad: &Tensor,
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    src: &Tensor,
    reduce: &str,
    include_self: bool,
    result: &Tensor,
) -> Result<(Tensor, Tensor)> {
    let reduce_with = |s: &Tensor, source: &Tensor| {
        ops::scatter_reduce_with(
            s,
            dim,
            index,
            source,
            reduce,
            ops::ScatterReduceOptions::default().include_self(include_self),
        )
    };
    let (grad_self, grad_src) = match reduce {
        "sum" => (grad.clone(), ops::gather(grad, dim, index)?),
        "prod" => {
            let masked_self = ops::masked_fill(self_, &ops::eq_scalar(self_, 0)?, 1)?;
            let masked_self_result = reduce_with(&masked_self, src)?;
            let grad_self = ops::div(&ops::mul(grad, &masked_self_result)?, &masked_self)?;
            let src_zero = ops::eq_scalar(src, 0)?;
            let zeros_in_group = ops::scatter_add(
                &ops::zeros_like(self_)?,
                dim,
                index,
                &to_dtype(&src_zero, self_.dtype())?,
            )?;
            let src_num_zeros = ops::gather(&zeros_in_group, dim, index)?;
            let src_single_zero = ops::logical_and(&src_zero, &ops::eq_scalar(&src_num_zeros, 1)?)?;
            // Where `src` is its group's only zero, `grad * result / src` would be 0/0: the
            // product of the others is computed with that zero replaced by one.
            let masked_src = ops::masked_fill(src, &src_single_zero, 1)?;
            let masked_src_result = reduce_with(self_, &masked_src)?;
            let grad_src = ops::r#where(
                &src_single_zero,
                &ops::gather(&ops::mul(grad, &masked_src_result)?, dim, index)?,
                &ops::div(
                    &ops::gather(&ops::mul(grad, result)?, dim, index)?,
                    &ops::masked_fill(src, &src_zero, 1)?,
                )?,
            )?;
            (grad_self, grad_src)
        }
        "mean" => {
            let start = if include_self {
                ops::ones_like(grad)?
            } else {
                ops::zeros_like(grad)?
            };
            let n = ops::scatter_add(&start, dim, index, &ops::ones_like(src)?)?;
            let n = ops::masked_fill(&n, &ops::eq_scalar(&n, 0)?, 1)?;
            let grad_self = ops::div(grad, &n)?;
            let grad_src = ops::div(
                &ops::gather(grad, dim, index)?,
                &ops::gather(&n, dim, index)?,
            )?;
            (grad_self, grad_src)
        }
        "amax" | "amin" | "max" | "min" => {
            let value = ops::gather(result, dim, index)?;
            let self_is_result = ops::eq(self_, result)?;
            let src_is_result = ops::eq(src, &value)?;
            let n_to_distribute = ops::scatter_add(
                &to_dtype(&self_is_result, self_.dtype())?,
                dim,
                index,
                &to_dtype(&src_is_result, self_.dtype())?,
            )?;
            let grad_distributed = ops::div(grad, &n_to_distribute)?;
            let grad_self = ops::mul(&to_dtype(&self_is_result, grad.dtype())?, &grad_distributed)?;
            let grad_src = ops::mul(
                &to_dtype(&src_is_result, grad.dtype())?,
                &ops::gather(&grad_distributed, dim, index)?,
            )?;
            (grad_self, grad_src)
        }
        _ => {
            return Err(err(format!(
                "Expected 'reduce' argument to be one of 'sum', 'prod', 'mean', 'amax', 'amin' \
                 but got {reduce}."
            )))
        }
    };
    let grad_self = if include_self {
        grad_self
    } else {
        ops::scatter_value(&grad_self, dim, index, 0)?
    };
    Ok((grad_self, grad_src))
}

/// `masked_scatter`'s gradient for `source` (`masked_scatter_backward`): the elements of
/// `grad` where `mask` is true, in row-major order, followed by zeros for the source elements
/// no mask element took, viewed as `source`'s sizes.
pub(crate) fn masked_scatter_backward(
    grad: &Tensor,
    mask: &Tensor,
    sizes: &[i64],
) -> Result<Tensor> {
    let numel: i64 = sizes.iter().product();
    // `grad.masked_select(mask)`: flattened, so that a 0-dim `grad` selects too.
    let mask = ops::reshape(&ops::expand(mask, grad.sizes())?, &[-1])?;
    let selected = ops::index(&ops::reshape(grad, &[-1])?, &[Some(mask)])?;
    let missing = numel - selected.numel();
    let selected = if missing > 0 {
        let zeros = super::new_zeros(grad, &[missing])?;
        ops::cat(&[selected, zeros])?
    } else {
        selected
    };
    ops::view(&selected, sizes)
}

/// `t.diagonal(offset, dim1, dim2)`, as a strided view of `t`.
pub(crate) fn diagonal_of(t: &Tensor, offset: i64, dim1: i64, dim2: i64) -> Result<Tensor> {
    let (sizes, strides, storage_offset) =
        ops::composite::diagonal_geometry(t, offset, dim1, dim2)?;
    ops::as_strided_with(
        t,
        &sizes,
        &strides,
        ops::AsStridedOptions::default().storage_offset(storage_offset),
    )
}

/// `as_strided_scatter`'s gradient for `self`: `grad` (made contiguous, as PyTorch's formula
/// assumes a contiguous `self`) with the scattered region zeroed.
pub(crate) fn as_strided_scatter_backward(
    grad: &Tensor,
    zeros: &Tensor,
    size: &[i64],
    stride: &[i64],
    storage_offset: Option<i64>,
) -> Result<Tensor> {
    ops::as_strided_scatter_with(
        &ops::contiguous(grad)?,
        zeros,
        size,
        stride,
        ops::AsStridedScatterOptions { storage_offset },
    )
}
