//! The meta functions of PyTorch's structured reductions (`TORCH_META_FUNC` in
//! `ReduceOps.cpp`): the reduced dimensions checked and wrapped, the output dtype
//! (`infer_dtype_from_optional`: a given `out=` tensor's when no `dtype` is given), and a
//! contiguous output of the reduced shape (`resize_reduction`).

use smallvec::SmallVec;
use switchboard_tensor::{contiguous_strides, wrap_dim, DimVec, ScalarType, Tensor, TensorError};

use super::{MetaOutput, Result};

/// Which dimensions a reduction reduces: `dims` wrapped against `ndim`; `None` or an empty
/// list means all of them (`make_dim_vector`). A repeated dim fails as in PyTorch.
pub fn reduction_mask(dims: Option<&[i64]>, ndim: usize) -> Result<SmallVec<[bool; 6]>> {
    let mut mask: SmallVec<[bool; 6]> = SmallVec::from_elem(false, ndim);
    match dims {
        None | Some([]) => mask.iter_mut().for_each(|m| *m = true),
        Some(ds) => {
            for &d in ds {
                let w = wrap_dim(d, ndim)?;
                if ndim == 0 {
                    continue;
                }
                if mask[w] {
                    return Err(TensorError::invalid(format!(
                        "dim {w} appears multiple times in the list of dims"
                    )));
                }
                mask[w] = true;
            }
        }
    }
    Ok(mask)
}

/// The output shape of a reduction: reduced dims become 1 (`keepdim`) or disappear.
pub fn reduced_shape(sizes: &[i64], mask: &[bool], keepdim: bool) -> DimVec {
    let mut out = DimVec::new();
    for (d, &s) in sizes.iter().enumerate() {
        if !mask[d] {
            out.push(s);
        } else if keepdim {
            out.push(1);
        }
    }
    out
}

/// `resize_reduction`: a contiguous output of `self_`'s shape reduced over `dims`.
fn reduction_output(
    self_: &Tensor,
    dims: Option<&[i64]>,
    keepdim: bool,
    dtype: ScalarType,
) -> Result<MetaOutput> {
    let mask = reduction_mask(dims, self_.dim())?;
    let sizes = reduced_shape(self_.sizes(), &mask, keepdim);
    Ok(MetaOutput {
        strides: contiguous_strides(&sizes),
        sizes,
        dtype,
        device: self_.device(),
    })
}

/// `get_dtype_from_self(self, dtype, promote_integers=true)`: integers and bool sum to `Long`.
fn dtype_from_self(self_: &Tensor, dtype: Option<ScalarType>) -> ScalarType {
    dtype.unwrap_or(if self_.dtype().is_integral(true) {
        ScalarType::Long
    } else {
        self_.dtype()
    })
}

/// `infer_dtype_from_optional`: `dtype`, else a given output's dtype, else
/// [`dtype_from_self`].
fn infer_dtype_from_optional(
    self_: &Tensor,
    dtype: Option<ScalarType>,
    out: Option<&Tensor>,
) -> ScalarType {
    match out {
        Some(o) => dtype.unwrap_or(o.dtype()),
        None => dtype_from_self(self_, dtype),
    }
}

/// `sum.dim_IntList` (and `sum.IntList_out`).
pub fn sum_dim_int_list(
    self_: &Tensor,
    dim: Option<&[i64]>,
    keepdim: bool,
    dtype: Option<ScalarType>,
    out: Option<&Tensor>,
) -> Result<MetaOutput> {
    let dtype = infer_dtype_from_optional(self_, dtype, out);
    reduction_output(self_, dim, keepdim, dtype)
}

/// `mean.dim` (and `mean.out`): floating inputs, or a floating `dtype`, only.
pub fn mean_dim(
    self_: &Tensor,
    dim: Option<&[i64]>,
    keepdim: bool,
    dtype: Option<ScalarType>,
    out: Option<&Tensor>,
) -> Result<MetaOutput> {
    let in_dtype = dtype_from_self(self_, dtype);
    if !in_dtype.is_floating_point() {
        let (what, got) = match dtype {
            Some(d) => ("Optional", d),
            None => ("Input", self_.dtype()),
        };
        return Err(TensorError::invalid(format!(
            "mean(): could not infer output dtype. {what} dtype must be either a floating point \
             or complex dtype. Got: {}",
            got.c10_name()
        )));
    }
    let dtype = infer_dtype_from_optional(self_, dtype, out);
    reduction_output(self_, dim, keepdim, dtype)
}

/// `zero_numel_check_dims` over a list of dims: an empty input needs the dims named, each of
/// non-zero size (the dim is reported as given).
pub fn zero_numel_check_dims(self_: &Tensor, dims: &[i64], name: &str) -> Result<()> {
    if dims.is_empty() {
        return Err(TensorError::invalid(format!(
            "{name}: Expected reduction dim to be specified for input.numel() == 0. Specify the \
             reduction dim with the 'dim' argument."
        )));
    }
    for &d in dims {
        zero_numel_check_dim(self_, d, name)?;
    }
    Ok(())
}

/// `zero_numel_check_dims` for one dim.
fn zero_numel_check_dim(self_: &Tensor, dim: i64, name: &str) -> Result<()> {
    if self_.dim() == 0 {
        if dim != 0 && dim != -1 {
            return Err(TensorError::invalid(format!(
                "{name}: Expected reduction dim -1 or 0 for scalar but got {dim}"
            )));
        }
        return Ok(());
    }
    let w = wrap_dim(dim, self_.dim())?;
    if self_.sizes()[w] == 0 {
        return Err(TensorError::invalid(format!(
            "{name}: Expected reduction dim {dim} to have non-zero size."
        )));
    }
    Ok(())
}

/// `amax`/`amin`'s meta function.
fn extremum(
    name: &str,
    self_: &Tensor,
    dim: &[i64],
    keepdim: bool,
    out: Option<&Tensor>,
) -> Result<MetaOutput> {
    if let Some(o) = out {
        if o.dtype() != self_.dtype() {
            return Err(TensorError::invalid(format!(
                "Expected the dtype for input and out to match, but got {} for input's dtype and \
                 {} for out's dtype.",
                self_.dtype().c10_name(),
                o.dtype().c10_name()
            )));
        }
    }
    if self_.numel() == 0 {
        zero_numel_check_dims(self_, dim, name)?;
    }
    reduction_output(self_, Some(dim), keepdim, self_.dtype())
}

/// `amax` (and `amax.out`).
pub fn amax(
    self_: &Tensor,
    dim: &[i64],
    keepdim: bool,
    out: Option<&Tensor>,
) -> Result<MetaOutput> {
    extremum("amax()", self_, dim, keepdim, out)
}

/// `amin` (and `amin.out`).
pub fn amin(
    self_: &Tensor,
    dim: &[i64],
    keepdim: bool,
    out: Option<&Tensor>,
) -> Result<MetaOutput> {
    extremum("amin()", self_, dim, keepdim, out)
}

/// `check_argmax_argmin` and the `Long` output of `argmax`/`argmin`.
fn arg_extremum(name: &str, self_: &Tensor, dim: Option<i64>, keepdim: bool) -> Result<MetaOutput> {
    match dim {
        Some(d) => {
            let w = wrap_dim(d, self_.dim())? as i64;
            zero_numel_check_dim(self_, w, name)?;
        }
        None if self_.numel() == 0 => {
            return Err(TensorError::invalid(format!(
                "{name}: Expected reduction dim to be specified for input.numel() == 0."
            )))
        }
        None => {}
    }
    let dims = dim.map(|d| [d]);
    reduction_output(
        self_,
        dims.as_ref().map(|d| &d[..]),
        keepdim,
        ScalarType::Long,
    )
}

/// `argmax` (and `argmax.out`).
pub fn argmax(
    self_: &Tensor,
    dim: Option<i64>,
    keepdim: bool,
    _out: Option<&Tensor>,
) -> Result<MetaOutput> {
    arg_extremum("argmax()", self_, dim, keepdim)
}

/// `argmin` (and `argmin.out`).
pub fn argmin(
    self_: &Tensor,
    dim: Option<i64>,
    keepdim: bool,
    _out: Option<&Tensor>,
) -> Result<MetaOutput> {
    arg_extremum("argmin()", self_, dim, keepdim)
}

/// `max.dim`/`min.dim`'s meta function (`resize_reduction_with_indices`): the dim must have
/// elements, the input must not be complex; values of the input's dtype and `Long` indices.
fn extremum_with_indices(
    name: &str,
    self_: &Tensor,
    dim: i64,
    keepdim: bool,
) -> Result<[MetaOutput; 2]> {
    let dim = wrap_dim(dim, self_.dim())? as i64;
    zero_numel_check_dim(self_, dim, name)?;
    if self_.dtype().is_complex() {
        return Err(TensorError::invalid(format!(
            "{name}: does not support complex input"
        )));
    }
    let values = reduction_output(self_, Some(&[dim]), keepdim, self_.dtype())?;
    let indices = MetaOutput {
        dtype: ScalarType::Long,
        ..values.clone()
    };
    Ok([values, indices])
}

/// `max.dim` (and `max.dim_max`).
pub fn max_dim(
    self_: &Tensor,
    dim: i64,
    keepdim: bool,
    _outputs: Option<[&Tensor; 2]>,
) -> Result<[MetaOutput; 2]> {
    extremum_with_indices("max()", self_, dim, keepdim)
}

/// `min.dim` (and `min.dim_min`).
pub fn min_dim(
    self_: &Tensor,
    dim: i64,
    keepdim: bool,
    _outputs: Option<[&Tensor; 2]>,
) -> Result<[MetaOutput; 2]> {
    extremum_with_indices("min()", self_, dim, keepdim)
}

/// `prod.dim_int` (and `prod.int_out`): `sum`'s dtype rule (integers and bool to `Long`).
pub fn prod_dim_int(
    self_: &Tensor,
    dim: i64,
    keepdim: bool,
    dtype: Option<ScalarType>,
    out: Option<&Tensor>,
) -> Result<MetaOutput> {
    let dtype = infer_dtype_from_optional(self_, dtype, out);
    reduction_output(self_, Some(&[dim]), keepdim, dtype)
}

/// `prod`'s output (not structured in PyTorch: its CPU kernel computes the same geometry).
pub fn prod(self_: &Tensor, dtype: Option<ScalarType>) -> Result<MetaOutput> {
    reduction_output(self_, None, false, dtype_from_self(self_, dtype))
}

/// `allany_meta`'s output dtype: a given `out`'s (bool or uint8 only), else uint8 for a
/// uint8 input (a legacy PyTorch keeps), else bool.
fn bytebool_dtype(name: &str, self_: &Tensor, out: Option<&Tensor>) -> Result<ScalarType> {
    match out {
        Some(o) if !matches!(o.dtype(), ScalarType::Bool | ScalarType::Byte) => {
            Err(TensorError::invalid(format!(
                "{name} only supports bool tensor for result, got: {}",
                o.dtype().c10_name()
            )))
        }
        Some(o) => Ok(o.dtype()),
        None if self_.dtype() == ScalarType::Byte => Ok(ScalarType::Byte),
        None => Ok(ScalarType::Bool),
    }
}

/// `any.dims` (and `any.dims_out`): unlike `sum`'s, an empty `dim` list reduces nothing
/// (`allow_empty_dims`); `None` reduces every dimension.
pub fn any_dims(
    self_: &Tensor,
    dim: Option<&[i64]>,
    keepdim: bool,
    out: Option<&Tensor>,
) -> Result<MetaOutput> {
    let dtype = bytebool_dtype("any", self_, out)?;
    let mask = match dim {
        Some([]) => SmallVec::from_elem(false, self_.dim()),
        _ => reduction_mask(dim, self_.dim())?,
    };
    let sizes = reduced_shape(self_.sizes(), &mask, keepdim);
    Ok(MetaOutput {
        strides: contiguous_strides(&sizes),
        sizes,
        dtype,
        device: self_.device(),
    })
}

/// `any.dim` (and `any.out`).
pub fn any_dim(
    self_: &Tensor,
    dim: i64,
    keepdim: bool,
    out: Option<&Tensor>,
) -> Result<MetaOutput> {
    any_dims(self_, Some(&[dim]), keepdim, out)
}

/// `any` (and `any.all_out`).
pub fn any(self_: &Tensor, out: Option<&Tensor>) -> Result<MetaOutput> {
    any_dims(self_, None, false, out)
}
