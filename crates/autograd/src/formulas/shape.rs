//! Views, concatenation and indexing.

use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

use super::new_zeros;
use crate::node::err;

fn wrap(dim: i64, n: usize) -> i64 {
    if dim < 0 {
        dim + n as i64
    } else {
        dim
    }
}

/// A 1-D index tensor on `like`'s device.
fn index_tensor(v: Vec<i64>, like: &Tensor) -> Result<Tensor> {
    let n = v.len() as i64;
    let t = Tensor::from_vec(v, &[n])?;
    if t.device() == like.device() {
        return Ok(t);
    }
    ops::_to_copy_with(&t, ops::ToCopyOptions::default().device(like.device()))
}

/// Flat storage positions of every element of a geometry, relative to `base`.
fn positions(sizes: &[i64], strides: &[i64], offset: i64, base: i64) -> Vec<i64> {
    let mut out = vec![offset - base];
    for (&n, &s) in sizes.iter().zip(strides) {
        let prev = std::mem::take(&mut out);
        for p in prev {
            for i in 0..n {
                out.push(p + i * s);
            }
        }
    }
    out
}

/// `as_strided`'s gradient for an input whose elements do not overlap: the gradient is
/// scattered (summed where the output's elements overlap) into a buffer covering both
/// geometries' storage, and the input's elements are read back from it.
pub(crate) fn as_strided_backward(
    grad: &Tensor,
    input_sizes: &[i64],
    input_strides: &[i64],
    input_offset: i64,
    size: &[i64],
    stride: &[i64],
    storage_offset: Option<i64>,
) -> Result<Tensor> {
    let out_offset = storage_offset.unwrap_or(input_offset);
    let base = out_offset.min(input_offset);
    let pout = positions(size, stride, out_offset, base);
    let pin = positions(input_sizes, input_strides, input_offset, base);
    let len = pout.iter().chain(&pin).copied().max().unwrap_or(0) + 1;
    let buffer = ops::index_add(
        &new_zeros(grad, &[len])?,
        0,
        &index_tensor(pout, grad)?,
        &ops::reshape(grad, &[-1])?,
    )?;
    let r = ops::index_select(&buffer, 0, &index_tensor(pin, grad)?)?;
    ops::reshape(&r, input_sizes)
}

/// `cat`'s gradients: the slices of `grad` along `dim` (an input of legacy shape `[0]` gets an
/// empty gradient).
pub(crate) fn cat_tensors_backward(
    grad: &Tensor,
    sizes: &[Vec<i64>],
    dim: i64,
) -> Result<Vec<Tensor>> {
    // PyTorch's legacy_cat_wrap_dim: wrapped against the first input that is not `[0]`.
    let ndim = sizes
        .iter()
        .find(|s| !(s.len() == 1 && s[0] == 0))
        .map_or(1, Vec::len);
    let dim = wrap(dim, ndim);
    let mut offset = 0;
    let mut out = Vec::with_capacity(sizes.len());
    for s in sizes {
        if s.len() == 1 && s[0] == 0 {
            out.push(new_zeros(grad, &[0])?);
            continue;
        }
        let n = s[dim as usize];
        out.push(ops::narrow(grad, dim, offset, n)?);
        offset += n;
    }
    Ok(out)
}

/// `stack`'s gradients: the slices of `grad` at each index of `dim`.
pub(crate) fn stack_tensors_backward(grad: &Tensor, dim: i64) -> Result<Vec<Tensor>> {
    let d = wrap(dim, grad.dim());
    let n = grad.sizes().get(d as usize).copied().unwrap_or(0);
    (0..n).map(|i| ops::select(grad, d, i)).collect()
}

/// `index_select`'s gradient: `grad` added into zeros of the input's sizes at `index`.
pub(crate) fn index_select_backward(
    grad: &Tensor,
    sizes: &[i64],
    dim: i64,
    index: &Tensor,
) -> Result<Tensor> {
    ops::index_add(&new_zeros(grad, sizes)?, dim, index, grad)
}

/// `gather`'s gradient: `grad` scattered (added) into zeros of the input's sizes.
pub(crate) fn gather_backward(
    grad: &Tensor,
    sizes: &[i64],
    dim: i64,
    index: &Tensor,
    sparse_grad: bool,
) -> Result<Tensor> {
    if sparse_grad {
        return Err(err(
            "gather: sparse_grad=True needs sparse tensors, which are not supported",
        ));
    }
    ops::scatter_add(&new_zeros(grad, sizes)?, dim, index, grad)
}

/// `index`'s gradient (`index_backward`): `grad` put into `zeros_like_self` at `indices`,
/// repeated indices adding up.
pub(crate) fn index_backward(
    zeros_like_self: &Tensor,
    indices: &[Option<Tensor>],
    grad: &Tensor,
) -> Result<Tensor> {
    ops::index_put_with(
        zeros_like_self,
        indices,
        grad,
        ops::IndexPutOptions::default().accumulate(true),
    )
}

/// `permute`'s gradient: `grad` permuted back.
pub(crate) fn permute_backwards(grad: &Tensor, dims: &[i64]) -> Result<Tensor> {
    let n = dims.len();
    let mut inverse = vec![0i64; n];
    for (i, &d) in dims.iter().enumerate() {
        inverse[(wrap(d, n) as usize).min(n.saturating_sub(1))] = i as i64;
    }
    ops::permute(grad, &inverse)
}

/// `squeeze`'s gradient: `grad` with the input's dimensions of size 1 put back.
pub(crate) fn unsqueeze_to(grad: &Tensor, sizes: &[i64]) -> Result<Tensor> {
    let mut r = grad.clone();
    for (d, &s) in sizes.iter().enumerate() {
        if s == 1 {
            r = ops::unsqueeze(&r, d as i64)?;
        }
    }
    Ok(r)
}

/// `squeeze.dim`'s gradient: `grad` with `dim` put back when the input had size 1 there.
pub(crate) fn unsqueeze_to_dim(grad: &Tensor, dim: i64, sizes: &[i64]) -> Result<Tensor> {
    if sizes.is_empty() {
        return Ok(grad.clone());
    }
    let d = wrap(dim, sizes.len());
    if sizes.get(d as usize) == Some(&1) {
        return ops::unsqueeze(grad, d);
    }
    Ok(grad.clone())
}

/// `squeeze.dims`' gradient (PyTorch's `unsqueeze_multiple` over the input's sizes): `grad`
/// with each listed dimension that had size 1 put back.
pub(crate) fn unsqueeze_squeezed_dims(
    grad: &Tensor,
    dims: &[i64],
    sizes: &[i64],
) -> Result<Tensor> {
    let mut r = grad.clone();
    for (d, &s) in sizes.iter().enumerate() {
        if s == 1 && dims.iter().any(|&x| wrap(x, sizes.len()) == d as i64) {
            r = ops::unsqueeze(&r, d as i64)?;
        }
    }
    Ok(r)
}

/// `slice.Tensor`'s gradient: `slice_backward` with the defaults of `start` and `end` spelled
/// out.
pub(crate) fn slice_backward_wrapper(
    grad: &Tensor,
    sizes: &[i64],
    dim: i64,
    start: Option<i64>,
    end: Option<i64>,
    step: i64,
) -> Result<Tensor> {
    ops::slice_backward(
        grad,
        sizes,
        dim,
        start.unwrap_or(0),
        end.unwrap_or(i64::MAX),
        step,
    )
}
