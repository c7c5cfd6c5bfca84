//! The meta functions of the structured indexing operators of `TensorAdvancedIndexing.cpp`:
//! `gather`, the scatter family (`scatter.src`, `scatter.value`, `scatter_add`,
//! `scatter_reduce.two`) with `ScatterGatherChecks.h`'s checks, and `index_add`
//! (`index_func_meta_impl`). Every output is contiguous: `self`'s shape for the scatters and
//! `index_add`, `index`'s for `gather`, in `self`'s dtype. Index values are data: their bounds
//! are the CPU kernels' checks.

use switchboard_tensor::{contiguous_strides, wrap_dim, DimVec, Scalar, ScalarType, Tensor};
use switchboard_tensor::{Device, TensorError};

use super::{check_internal_overlap, check_no_overlap, check_no_partial_overlap, same_device};
use super::{MetaOutput, Result};

/// How `scatter_reduce` combines the elements scattered to one position (PyTorch's
/// `SCATTER_GATHER_OP` for the `reduce` names of `scatter_reduce.two`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScatterReduce {
    /// `sum`: adds them.
    Sum,
    /// `prod`: multiplies them.
    Prod,
    /// `mean`: their average (integers rounding down).
    Mean,
    /// `amax` (or `max`): their maximum, NaN propagating.
    Amax,
    /// `amin` (or `min`): their minimum, NaN propagating.
    Amin,
}

/// `get_operator_enum` with `scatter_reduce`'s names (`max` and `min` are accepted too, as
/// PyTorch 2.15 does).
pub fn scatter_reduce_op(reduce: &str) -> Result<ScatterReduce> {
    Ok(match reduce {
        "sum" => ScatterReduce::Sum,
        "prod" => ScatterReduce::Prod,
        "mean" => ScatterReduce::Mean,
        "amax" | "max" => ScatterReduce::Amax,
        "amin" | "min" => ScatterReduce::Amin,
        _ => {
            return Err(TensorError::invalid(format!(
                "reduce argument must be either sum, prod, mean, amax or amin, got {reduce}"
            )))
        }
    })
}

/// A contiguous output of `sizes` in `dtype` on `device`.
fn contiguous(sizes: &[i64], dtype: ScalarType, device: Device) -> MetaOutput {
    MetaOutput {
        sizes: DimVec::from_slice(sizes),
        strides: contiguous_strides(sizes),
        dtype,
        device,
    }
}

/// The size of dimension `d`, 1 for a 0-dim tensor (`ensure_nonempty_size`).
fn nonempty_size(t: &Tensor, d: usize) -> i64 {
    if t.dim() == 0 {
        1
    } else {
        t.sizes()[d]
    }
}

fn is_index_dtype(t: &Tensor) -> bool {
    matches!(t.dtype(), ScalarType::Int | ScalarType::Long)
}

/// `gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False)` (and
/// `gather.out`): `index`'s shape in `self`'s dtype; `index` is int32 or int64 (unless
/// empty), of `self`'s rank, and no larger than `self` off `dim`.
pub fn gather(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    _sparse_grad: bool,
    out: Option<&Tensor>,
) -> Result<MetaOutput> {
    let device = same_device(&[self_, index])?;
    let d = wrap_dim(dim, self_.dim())?;
    if let Some(out) = out {
        check_internal_overlap(out)?;
        check_no_overlap(out, self_)?;
        check_no_partial_overlap(out, index)?;
    }
    let meta = contiguous(index.sizes(), self_.dtype(), device);
    if index.numel() == 0 {
        return Ok(meta);
    }
    if !is_index_dtype(index) {
        return Err(TensorError::invalid(
            "gather(): Expected dtype int32/int64 for index",
        ));
    }
    // `gather_shape_check`.
    let rank = self_.dim().max(1);
    if rank != index.dim().max(1) {
        return Err(TensorError::invalid(
            "Index tensor must have the same number of dimensions as input tensor",
        ));
    }
    for i in (0..rank).filter(|&i| i != d) {
        if nonempty_size(index, i) > nonempty_size(self_, i) {
            return Err(TensorError::invalid(format!(
                "Size does not match at dimension {i} expected index {:?} to be no larger than \
                 self {:?} apart from dimension {d}",
                index.sizes(),
                self_.sizes()
            )));
        }
    }
    Ok(meta)
}

/// `scatter_gather_dtype_check` and `scatter_shape_check` (`src` is `None` for a scattered
/// value).
fn scatter_checks(self_: &Tensor, d: usize, index: &Tensor, src: Option<&Tensor>) -> Result<()> {
    if index.numel() != 0 && !is_index_dtype(index) {
        return Err(TensorError::invalid(
            "scatter(): Expected dtype int32/int64 for index",
        ));
    }
    if src.is_some_and(|s| s.dtype() != self_.dtype()) {
        return Err(TensorError::invalid(
            "scatter(): Expected self.dtype to be equal to src.dtype",
        ));
    }
    if index.numel() == 0 {
        return Ok(());
    }
    let rank = self_.dim().max(1);
    if rank != index.dim().max(1) {
        return Err(TensorError::invalid(
            "Index tensor must have the same number of dimensions as self tensor",
        ));
    }
    let larger_than_self =
        (0..rank).any(|i| i != d && nonempty_size(index, i) > nonempty_size(self_, i));
    let Some(src) = src else {
        if larger_than_self {
            return Err(TensorError::invalid(format!(
                "Expected index {:?} to be no larger than self {:?} apart from dimension {d}",
                index.sizes(),
                self_.sizes()
            )));
        }
        return Ok(());
    };
    // As PyTorch, `src`'s sizes are read (failing on a missing dimension) before its rank is
    // checked.
    let mut larger_than_src = false;
    if !larger_than_self {
        for i in 0..rank {
            if src.dim() > 0 {
                wrap_dim(i as i64, src.dim())?;
            }
            if nonempty_size(index, i) > nonempty_size(src, i) {
                larger_than_src = true;
                break;
            }
        }
    }
    if src.dim().max(1) != rank {
        return Err(TensorError::invalid(
            "Index tensor must have the same number of dimensions as src tensor",
        ));
    }
    if larger_than_self || larger_than_src {
        return Err(TensorError::invalid(format!(
            "Expected index {:?} to be no larger than self {:?} apart from dimension {d} and to \
             be no larger size than src {:?}",
            index.sizes(),
            self_.sizes(),
            src.sizes()
        )));
    }
    Ok(())
}

/// `scatter_meta_impl`: the scatter family's checks, then `self`'s shape (the written output,
/// `self` in place or `out`, shares no memory with `index` or `src`).
fn scatter_meta(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    src: Option<&Tensor>,
    out: Option<&Tensor>,
) -> Result<MetaOutput> {
    let mut all = vec![self_, index];
    all.extend(src);
    let device = same_device(&all)?;
    let d = wrap_dim(dim, self_.dim())?;
    scatter_checks(self_, d, index, src)?;
    if let Some(out) = out {
        check_internal_overlap(out)?;
        check_no_overlap(out, index)?;
        if let Some(src) = src {
            check_no_overlap(out, src)?;
        }
    }
    Ok(contiguous(self_.sizes(), self_.dtype(), device))
}

/// `scatter.src(Tensor self, int dim, Tensor index, Tensor src)` (and `scatter_.src`,
/// `scatter.src_out`).
pub fn scatter_src(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    src: &Tensor,
    out: Option<&Tensor>,
) -> Result<MetaOutput> {
    scatter_meta(self_, dim, index, Some(src), out)
}

/// `scatter.value(Tensor self, int dim, Tensor index, Scalar value)` (and `scatter_.value`,
/// `scatter.value_out`).
pub fn scatter_value(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    _value: Scalar,
    out: Option<&Tensor>,
) -> Result<MetaOutput> {
    scatter_meta(self_, dim, index, None, out)
}

/// `scatter_add(Tensor self, int dim, Tensor index, Tensor src)` (and `scatter_add_`,
/// `scatter_add.out`).
pub fn scatter_add(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    src: &Tensor,
    out: Option<&Tensor>,
) -> Result<MetaOutput> {
    scatter_meta(self_, dim, index, Some(src), out)
}

/// `scatter_reduce.two(Tensor self, int dim, Tensor index, Tensor src, str reduce, *, bool
/// include_self=True)` (and `scatter_reduce_.two`, `scatter_reduce.two_out`): `reduce` is
/// checked after the scatter family's checks, as PyTorch does.
pub fn scatter_reduce_two(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    src: &Tensor,
    reduce: &str,
    _include_self: bool,
    out: Option<&Tensor>,
) -> Result<MetaOutput> {
    let meta = scatter_meta(self_, dim, index, Some(src), out)?;
    scatter_reduce_op(reduce)?;
    Ok(meta)
}

/// `index_func_meta_impl`'s checks for `index_add` (`dim` wrapped).
fn index_add_checks(self_: &Tensor, d: usize, index: &Tensor, source: &Tensor) -> Result<()> {
    if index.dim() > 1 {
        return Err(TensorError::invalid(format!(
            "index_add_(): Index is supposed to be a vector, but got dim: {} with type: {} and \
             size: {:?}",
            index.dim(),
            index.dtype().c10_name(),
            index.sizes()
        )));
    }
    if !is_index_dtype(index) {
        return Err(TensorError::invalid(format!(
            "index_add_(): Expected dtype int32/int64 for index but got: {}",
            index.dtype().c10_name()
        )));
    }
    if self_.dtype() != source.dtype() {
        return Err(TensorError::invalid(format!(
            "index_add_(): self ({}) and source ({}) must have the same scalar type",
            self_.dtype().c10_name(),
            source.dtype().c10_name()
        )));
    }
    if d != 0 && d >= source.dim() {
        return Err(TensorError::invalid(format!(
            "index_add_(): Indexing dim {d} is out of bounds of the source tensor with dim {}",
            source.dim()
        )));
    }
    let expected = if source.dim() == 0 {
        1
    } else {
        source.sizes()[d]
    };
    if index.numel() != expected {
        return Err(TensorError::invalid(format!(
            "index_add_(): Number of indices ({}) should be equal to source.size(dim): ({}), \
             for dim: {d}",
            index.numel(),
            source.size(d as i64)?
        )));
    }
    let mut self_slice = self_.sizes().to_vec();
    let mut source_slice = source.sizes().to_vec();
    if source.dim() != 0 && self_.dim() != 0 {
        self_slice.remove(d);
        source_slice.remove(d);
    }
    if self_slice != source_slice {
        return Err(TensorError::invalid(format!(
            "source tensor shape must match self tensor shape, excluding the specified \
             dimension. Got self.shape = {:?} source.shape = {:?}",
            self_.sizes(),
            source.sizes()
        )));
    }
    Ok(())
}

/// `index_add(Tensor self, int dim, Tensor index, Tensor source, *, Scalar alpha=1)` (and
/// `index_add_`, `index_add.out`): `self`'s shape; `index` is a vector of int32 or int64
/// with one entry per slice of `source` along `dim`, whose other sizes are `self`'s.
pub fn index_add(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    source: &Tensor,
    _alpha: Scalar,
    out: Option<&Tensor>,
) -> Result<MetaOutput> {
    let device = same_device(&[self_, index, source])?;
    let d = wrap_dim(dim, self_.dim())?;
    index_add_checks(self_, d, index, source)?;
    if let Some(out) = out {
        check_internal_overlap(out)?;
        check_no_overlap(out, index)?;
        check_no_overlap(out, source)?;
    }
    Ok(contiguous(self_.sizes(), self_.dtype(), device))
}
