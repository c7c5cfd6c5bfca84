//! The gradients of the operators returning a list of views (`split_with_sizes`,
//! `split.Tensor`, `unbind.int`): PyTorch's `split_with_sizes_backward`, `split_backward`
//! and `unbind_backward`. An output whose gradient is missing (PyTorch's undefined tensor)
//! contributes zeros.

use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::{wrap_dim, Device, ScalarType, Tensor};

/// Zeros of `sizes` with `dtype` on `device`.
fn zeros(sizes: &[i64], dtype: ScalarType, device: Device) -> Result<Tensor> {
    ops::zeros_with(
        sizes,
        ops::ZerosOptions::default().dtype(dtype).device(device),
    )
}

/// `split_with_sizes`' gradient: the outputs' gradients concatenated along `dim`.
pub(crate) fn split_with_sizes_backward(
    grads: &[Option<&Tensor>],
    split_sizes: &[i64],
    dim: i64,
    sizes: &[i64],
    dtype: ScalarType,
    device: Device,
) -> Result<Tensor> {
    let dim = wrap_dim(dim, sizes.len())?;
    let all: Vec<Tensor> = grads
        .iter()
        .zip(split_sizes)
        .map(|(g, &length)| match g {
            Some(g) => Ok((*g).clone()),
            None => {
                let mut shape = sizes.to_vec();
                shape[dim] = length;
                zeros(&shape, dtype, device)
            }
        })
        .collect::<Result<_>>()?;
    ops::cat_with(&all, ops::CatOptions::default().dim(dim as i64))
}

/// `split.Tensor`'s gradient: `split_with_sizes_backward` with the sizes `split` made.
pub(crate) fn split_backward(
    grads: &[Option<&Tensor>],
    split_size: i64,
    dim: i64,
    sizes: &[i64],
    dtype: ScalarType,
    device: Device,
) -> Result<Tensor> {
    let d = wrap_dim(dim, sizes.len())?;
    let dim_size = sizes[d];
    let n = grads.len() as i64;
    let split_sizes: Vec<i64> = (0..n)
        .map(|i| {
            if i < n - 1 {
                split_size
            } else {
                split_size - (split_size * n - dim_size)
            }
        })
        .collect();
    split_with_sizes_backward(grads, &split_sizes, dim, sizes, dtype, device)
}

/// `unbind.int`'s gradient: the outputs' gradients stacked along `dim`; a missing one is
/// zeros of the shape and options of the first present one.
pub(crate) fn unbind_backward(grads: &[Option<&Tensor>], dim: i64) -> Result<Tensor> {
    let Some(first) = grads.iter().flatten().next() else {
        return Err(crate::node::err(
            "unbind_backward: no output has a gradient",
        ));
    };
    let all: Vec<Tensor> = grads
        .iter()
        .map(|g| match g {
            Some(g) => Ok((*g).clone()),
            None => zeros(first.sizes(), first.dtype(), first.device()),
        })
        .collect::<Result<_>>()?;
    ops::stack_with(&all, ops::StackOptions::default().dim(dim))
}
