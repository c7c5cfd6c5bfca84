//! The meta function of `cat` (PyTorch's `TORCH_META_FUNC(cat)` in TensorShape.cpp): the
//! concatenation's geometry, with PyTorch's type promotion across the inputs and its legacy
//! rule that 1-D empty tensors (size `[0]`) are skipped.

use switchboard_tensor::{
    can_cast, result_type, wrap_dim, CheckedSize, DimVec, MemoryFormat, Tensor, TensorError,
    DEFAULT_DTYPE,
};

use super::{check_internal_overlap, check_no_overlap, same_device, MetaOutput, Result};

/// `cat_should_skip_tensor`: 1-D tensors of size `[0]` take no part in `cat`'s shape checks.
pub fn cat_skips(t: &Tensor) -> bool {
    t.dim() == 1 && t.numel() == 0
}

/// `cat_compute_output_memory_format`: channels-last when every input suggests the same
/// channels-last format, else contiguous.
fn output_format(tensors: &[Tensor]) -> MemoryFormat {
    let mut format = None;
    for t in tensors {
        let f = t.suggest_memory_format();
        if f == MemoryFormat::Contiguous {
            return f;
        }
        if format.is_some_and(|g| g != f) {
            return MemoryFormat::Contiguous;
        }
        format = Some(f);
    }
    format.unwrap_or(MemoryFormat::Contiguous)
}

/// `check_cat_shape_except_dim`.
fn check_shape_except_dim(first: &Tensor, t: &Tensor, dim: usize, index: usize) -> Result<()> {
    if first.dim() != t.dim() {
        return Err(TensorError::invalid(format!(
            "Tensors must have same number of dimensions: got {} and {}",
            first.dim(),
            t.dim()
        )));
    }
    for d in (0..first.dim()).filter(|&d| d != dim) {
        if first.sizes()[d] != t.sizes()[d] {
            return Err(TensorError::invalid(format!(
                "Sizes of tensors must match except in dimension {dim}. Expected size {} but \
                 got size {} for tensor number {index} in the list.",
                first.sizes()[d],
                t.sizes()[d]
            )));
        }
    }
    Ok(())
}

/// `cat(Tensor[] tensors, int dim=0)` (and `cat.out`): the inputs' sizes joined along the
/// wrapped `dim` (`[0]` when every input is skipped), in their promoted dtype (`out`'s when
/// given, which the promoted one must cast to) and in the memory format all inputs suggest.
pub fn cat(tensors: &[Tensor], dim: i64, out: Option<&Tensor>) -> Result<MetaOutput> {
    for (i, t) in tensors.iter().enumerate() {
        if t.dim() == 0 {
            return Err(TensorError::invalid(format!(
                "zero-dimensional tensor (at position {i}) cannot be concatenated"
            )));
        }
    }
    // `legacy_cat_wrap_dim`: wrap against the first tensor that is not skipped.
    let valid = tensors.iter().position(|t| !cat_skips(t));
    let dim = match valid {
        Some(v) => wrap_dim(dim, tensors[v].dim())? as i64,
        None => dim,
    };
    if tensors.is_empty() {
        return Err(TensorError::invalid(
            "torch.cat(): expected a non-empty list of Tensors",
        ));
    }
    let mut all: Vec<&Tensor> = tensors.iter().collect();
    all.extend(out);
    let device = same_device(&all)?;
    let format = output_format(tensors);
    let mut dtype = result_type(&tensors.iter().collect::<Vec<_>>(), &[]).unwrap_or(DEFAULT_DTYPE);
    if let Some(o) = out {
        if !can_cast(dtype, o.dtype()) {
            return Err(TensorError::invalid(format!(
                "torch.cat(): input types can't be cast to the desired output type {}",
                o.dtype().c10_name()
            )));
        }
        dtype = o.dtype();
        if valid.is_some() {
            check_internal_overlap(o)?;
            for t in tensors {
                check_no_overlap(o, t)?;
            }
        }
    }
    let mut sizes = DimVec::from_slice(&[0]);
    if let Some(v) = valid {
        let first = &tensors[v];
        if dim as usize > first.dim() {
            return Err(TensorError::invalid(format!(
                "torch.cat(): dimension {dim}out of bounds"
            )));
        }
        let dim = dim as usize;
        // Checked: the sizes of tensors without elements can be as large as an int64.
        let mut total = CheckedSize::new(0);
        for (i, t) in tensors.iter().enumerate() {
            if !cat_skips(t) {
                check_shape_except_dim(first, t, dim, i)?;
                total = total + t.sizes()[dim];
            }
        }
        sizes = DimVec::from_slice(first.sizes());
        sizes[dim] = total.get(|| format!("torch.cat(): the size of dimension {dim}"))?;
    }
    Ok(MetaOutput {
        strides: format.strides(&sizes)?,
        sizes,
        dtype,
        device,
    })
}
