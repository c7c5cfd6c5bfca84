//! Views and shape operators: the CompositeExplicitAutograd views are the tensor crate's
//! metadata primitives (`RawOps`); reshape, flatten, narrow and contiguous decompose into
//! dispatched operators (CompositeImplicitAutograd).

use switchboard_dispatcher::Result;
use switchboard_tensor::{MemoryFormat, RawOps, ScalarType, Tensor};

use super::error;

/// `view` (CompositeExplicitAutograd).
pub fn view(self_: &Tensor, size: &[i64]) -> Result<Tensor> {
    Ok(RawOps::view(self_, size)?)
}

/// `view.dtype` (CompositeExplicitAutograd): the same bytes read as another dtype (Note
/// [Views of another dtype] in switchboard-tensor). A non-differentiable view, as in PyTorch.
pub fn view_dtype(self_: &Tensor, dtype: ScalarType) -> Result<Tensor> {
    Ok(RawOps::view_dtype(self_, dtype)?)
}

/// `transpose.int` (CompositeExplicitAutograd).
pub fn transpose(self_: &Tensor, dim0: i64, dim1: i64) -> Result<Tensor> {
    Ok(RawOps::transpose(self_, dim0, dim1)?)
}

/// `t` (CompositeExplicitAutograd).
pub fn t(self_: &Tensor) -> Result<Tensor> {
    Ok(RawOps::t(self_)?)
}

/// `permute` (CompositeExplicitAutograd).
pub fn permute(self_: &Tensor, dims: &[i64]) -> Result<Tensor> {
    Ok(RawOps::permute(self_, dims)?)
}

/// `expand` (CompositeExplicitAutograd).
pub fn expand(self_: &Tensor, size: &[i64], _implicit: bool) -> Result<Tensor> {
    Ok(RawOps::expand(self_, size)?)
}

/// `squeeze` (CompositeExplicitAutograd).
pub fn squeeze(self_: &Tensor) -> Result<Tensor> {
    Ok(RawOps::squeeze(self_)?)
}

/// `squeeze.dim` (CompositeExplicitAutograd).
pub fn squeeze_dim(self_: &Tensor, dim: i64) -> Result<Tensor> {
    Ok(RawOps::squeeze_dim(self_, dim)?)
}

/// `squeeze.dims` (CompositeExplicitAutograd).
pub fn squeeze_dims(self_: &Tensor, dim: &[i64]) -> Result<Tensor> {
    Ok(RawOps::squeeze_dims(self_, dim)?)
}

/// `unsqueeze` (CompositeExplicitAutograd).
pub fn unsqueeze(self_: &Tensor, dim: i64) -> Result<Tensor> {
    Ok(RawOps::unsqueeze(self_, dim)?)
}

/// `select.int` (CompositeExplicitAutograd).
pub fn select(self_: &Tensor, dim: i64, index: i64) -> Result<Tensor> {
    Ok(RawOps::select(self_, dim, index)?)
}

/// `slice.Tensor` (CompositeExplicitAutograd).
pub fn slice(
    self_: &Tensor,
    dim: i64,
    start: Option<i64>,
    end: Option<i64>,
    step: i64,
) -> Result<Tensor> {
    Ok(RawOps::slice(self_, dim, start, end, step)?)
}

/// `as_strided` (CompositeExplicitAutograd).
pub fn as_strided(
    self_: &Tensor,
    size: &[i64],
    stride: &[i64],
    storage_offset: Option<i64>,
) -> Result<Tensor> {
    let offset = storage_offset.unwrap_or(self_.storage_offset());
    Ok(RawOps::as_strided(self_, size, stride, offset)?)
}

/// `_unsafe_view` (CompositeExplicitAutograd): `view`'s result, which autograd does not
/// treat as a view (its schema has no alias annotation): what `reshape` returns over the
/// copy it made, whose memory nothing else can reach.
pub fn _unsafe_view(self_: &Tensor, size: &[i64]) -> Result<Tensor> {
    Ok(RawOps::view(self_, size)?)
}

/// `reshape` (CompositeImplicitAutograd): a `view` when the strides allow it, else, as
/// PyTorch's, `_unsafe_view` of a contiguous `clone`.
pub fn reshape(self_: &Tensor, shape: &[i64]) -> Result<Tensor> {
    if self_.reshape_view(shape)?.is_some() {
        crate::view(self_, shape)
    } else {
        let c = crate::clone_with(
            self_,
            crate::CloneOptions::default().memory_format(MemoryFormat::Contiguous),
        )?;
        crate::_unsafe_view(&c, shape)
    }
}

/// `flatten.using_ints` (CompositeImplicitAutograd).
pub fn flatten(self_: &Tensor, start_dim: i64, end_dim: i64) -> Result<Tensor> {
    // Validates the dims and computes the shape (a metadata-only view, then discarded).
    let shape = RawOps::flatten(self_, start_dim, end_dim)?.sizes().to_vec();
    if shape.as_slice() == self_.sizes() {
        return Ok(self_.clone());
    }
    reshape(self_, &shape)
}

/// `narrow` (CompositeImplicitAutograd): a `slice`.
pub fn narrow(self_: &Tensor, dim: i64, start: i64, length: i64) -> Result<Tensor> {
    RawOps::narrow(self_, dim, start, length)?; // PyTorch's checks and messages
    let d = switchboard_tensor::wrap_dim(dim, self_.dim())?;
    let size = self_.sizes()[d];
    let start = if start < 0 { start + size } else { start };
    crate::slice_with(
        self_,
        crate::SliceOptions::default()
            .dim(dim)
            .start(start)
            .end(start + length),
    )
}

/// `contiguous` (CompositeImplicitAutograd): `self` when already contiguous in
/// `memory_format`, else a `clone` in it.
pub fn contiguous(self_: &Tensor, memory_format: MemoryFormat) -> Result<Tensor> {
    if memory_format == MemoryFormat::Preserve {
        return Err(error(
            "preserve memory format is unsupported by the contiguous operator",
        ));
    }
    if self_.is_contiguous_as(memory_format) {
        return Ok(self_.clone());
    }
    crate::clone_with(
        self_,
        crate::CloneOptions::default().memory_format(memory_format),
    )
}

/// `get_stack_inputs` after `check_stack_inputs`: the inputs unsqueezed at the wrapped `dim`,
/// and that `dim`.
fn stack_inputs(tensors: &[Tensor], dim: i64) -> Result<(Vec<Tensor>, i64)> {
    let Some(first) = tensors.first() else {
        return Err(error("stack expects a non-empty TensorList"));
    };
    let dim = switchboard_tensor::wrap_dim(dim, first.dim() + 1)? as i64;
    for (i, t) in tensors.iter().enumerate() {
        if t.sizes() != first.sizes() {
            return Err(error(format!(
                "stack expects each tensor to be equal size, but got {:?} at entry 0 and {:?} at \
                 entry {i}",
                first.sizes(),
                t.sizes()
            )));
        }
    }
    let parts = tensors
        .iter()
        .map(|t| crate::unsqueeze(t, dim))
        .collect::<Result<Vec<Tensor>>>()?;
    Ok((parts, dim))
}

/// `stack` (CompositeExplicitAutograd): `cat` of the inputs unsqueezed at `dim`.
pub fn stack(tensors: &[Tensor], dim: i64) -> Result<Tensor> {
    let (parts, dim) = stack_inputs(tensors, dim)?;
    crate::cat_with(&parts, crate::CatOptions::default().dim(dim))
}

/// `stack.out` (CompositeExplicitAutograd): `out` resized to the stacked shape (PyTorch
/// resizes it first), then `cat.out` of the inputs unsqueezed at `dim`.
pub fn stack_out(tensors: &[Tensor], dim: i64, out: &Tensor) -> Result<Tensor> {
    let (parts, dim) = stack_inputs(tensors, dim)?;
    let mut sizes = tensors[0].sizes().to_vec();
    sizes.insert(dim as usize, tensors.len() as i64);
    let out = out.resize_output(&sizes)?;
    crate::cat_out_with(&parts, &out, crate::CatOutOptions::default().dim(dim))
}

/// Zeros of `sizes` with `like`'s dtype and device (PyTorch's `at::zeros(sizes, grad.options())`).
fn zeros_as(sizes: &[i64], like: &Tensor) -> Result<Tensor> {
    crate::zeros_with(
        sizes,
        crate::ZerosOptions::default()
            .dtype(like.dtype())
            .device(like.device()),
    )
}

/// `select_backward` (CompositeExplicitAutograd): zeros of `input_sizes` with `grad_output`
/// copied into the selected slice, the gradient of `select.int`.
pub fn select_backward(
    grad_output: &Tensor,
    input_sizes: &[i64],
    dim: i64,
    index: i64,
) -> Result<Tensor> {
    let grad_input = zeros_as(input_sizes, grad_output)?;
    crate::copy_(&crate::select(&grad_input, dim, index)?, grad_output)?;
    Ok(grad_input)
}

/// `slice_backward` (CompositeExplicitAutograd): zeros of `input_sizes` with `grad_output`
/// copied into the slice, the gradient of `slice.Tensor`.
pub fn slice_backward(
    grad_output: &Tensor,
    input_sizes: &[i64],
    dim: i64,
    start: i64,
    end: i64,
    step: i64,
) -> Result<Tensor> {
    let grad_input = zeros_as(input_sizes, grad_output)?;
    let region = crate::slice_with(
        &grad_input,
        crate::SliceOptions::default()
            .dim(dim)
            .start(start)
            .end(end)
            .step(step),
    )?;
    crate::copy_(&region, grad_output)?;
    Ok(grad_input)
}
