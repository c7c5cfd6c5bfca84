//! The inverse of one view operation: a base with the view's region replaced by a new value,
//! computed with pure operators (Note [Writing through a view]).

use switchboard_dispatcher::{Dispatcher, IValue, Result};
use switchboard_tensor::Tensor;

use crate::view_meta::ViewMeta;
use crate::wrapper::{call_plain, single_tensor, Kind};

impl ViewMeta {
    /// `base` (the tensor this view was taken of) with the view's elements replaced by
    /// `value`, or `None` when the view has no inverse here (a view an extension adds).
    pub(crate) fn scatter(
        &self,
        base: &Tensor,
        value: &Tensor,
        kind: Kind,
    ) -> Result<Option<Tensor>> {
        let remove_views = kind.removes_views();
        // Below autograd no view reaches the values: the inverses that are views themselves
        // (a reshape of a fresh value, `permute`) are their `*_copy` forms, as PyTorch's
        // `FunctionalInverses` are without reapplied views. (`functionalize(f)` keeps the views
        // it has always made here.)
        let copies = kind == Kind::BelowAutograd;
        let int = |i: usize| match self.args.get(i) {
            Some(IValue::Int(v)) => Some(*v),
            _ => None,
        };
        let name = self.op.name();
        let inverse = match (name.name(), name.overload_name()) {
            ("aten::view", "dtype") if copies => {
                Some(switchboard_ops::view_copy_dtype(value, base.dtype())?)
            }
            ("aten::view", "dtype") => Some(switchboard_ops::view_dtype(value, base.dtype())?),
            ("aten::view" | "aten::squeeze" | "aten::unsqueeze", _) | ("aten::alias", "")
                if copies =>
            {
                let contiguous = switchboard_ops::contiguous(value)?;
                Some(switchboard_ops::view_copy(&contiguous, base.sizes())?)
            }
            ("aten::view" | "aten::squeeze" | "aten::unsqueeze", _) | ("aten::alias", "") => {
                Some(switchboard_ops::reshape(value, base.sizes())?)
            }
            ("aten::t", "") | ("aten::transpose", "int") => {
                // Its own inverse.
                let op = match remove_views
                    .then(|| Dispatcher::global().view_copy_form(&self.op))
                    .flatten()
                {
                    Some(copy) => copy,
                    None => self.op.clone(),
                };
                let mut stack = self.args.clone();
                stack[self.self_index] = IValue::Tensor(value.clone());
                Some(single_tensor(&op, call_plain(&op, stack, kind)?)?)
            }
            ("aten::permute", "") => {
                let Some(IValue::IntList(dims)) = self.args.get(1) else {
                    return Ok(None);
                };
                let n = dims.len() as i64;
                let mut inverse = vec![0i64; dims.len()];
                for (i, &d) in dims.iter().enumerate() {
                    let d = if d < 0 { d + n } else { d };
                    inverse[d as usize] = i as i64;
                }
                Some(if copies {
                    switchboard_ops::permute_copy(value, &inverse)?
                } else {
                    switchboard_ops::permute(value, &inverse)?
                })
            }
            // PyTorch's `FunctionalInverses` (the non-view modes): the `*_scatter` operators.
            ("aten::select", "int") => {
                let (Some(dim), Some(index)) = (int(1), int(2)) else {
                    return Ok(None);
                };
                Some(switchboard_ops::select_scatter(base, value, dim, index)?)
            }
            ("aten::diagonal", "") => {
                let options = switchboard_ops::DiagonalScatterOptions {
                    offset: int(1).unwrap_or(0),
                    dim1: int(2).unwrap_or(0),
                    dim2: int(3).unwrap_or(1),
                };
                Some(switchboard_ops::diagonal_scatter_with(
                    base, value, options,
                )?)
            }
            ("aten::slice", "Tensor") => {
                let options = switchboard_ops::SliceScatterOptions {
                    dim: int(1).unwrap_or(0),
                    start: int(2),
                    end: int(3),
                    step: int(4).unwrap_or(1),
                };
                Some(switchboard_ops::slice_scatter_with(base, value, options)?)
            }
            // Element `output` of a list of views: the slice (or the index) it covers.
            ("aten::split_with_sizes", "") => {
                let Some(IValue::IntList(sizes)) = self.args.get(1) else {
                    return Ok(None);
                };
                let start: i64 = sizes[..self.output].iter().sum();
                let options = switchboard_ops::SliceScatterOptions {
                    dim: int(2).unwrap_or(0),
                    start: Some(start),
                    end: Some(start + sizes[self.output]),
                    step: 1,
                };
                Some(switchboard_ops::slice_scatter_with(base, value, options)?)
            }
            ("aten::split", "Tensor") => {
                let Some(split_size) = int(1) else {
                    return Ok(None);
                };
                let start = self.output as i64 * split_size;
                let options = switchboard_ops::SliceScatterOptions {
                    dim: int(2).unwrap_or(0),
                    start: Some(start),
                    end: Some(start + split_size),
                    step: 1,
                };
                Some(switchboard_ops::slice_scatter_with(base, value, options)?)
            }
            ("aten::unbind", "int") => Some(switchboard_ops::select_scatter(
                base,
                value,
                int(1).unwrap_or(0),
                self.output as i64,
            )?),
            ("aten::as_strided", "") => {
                let (Some(IValue::IntList(size)), Some(IValue::IntList(stride))) =
                    (self.args.get(1), self.args.get(2))
                else {
                    return Ok(None);
                };
                let options = switchboard_ops::AsStridedScatterOptions {
                    storage_offset: int(3),
                };
                Some(switchboard_ops::as_strided_scatter_with(
                    base, value, size, stride, options,
                )?)
            }
            ("aten::expand", "") => {
                // `base + sum_to(value - base, base.sizes())`.
                let delta = sum_to(&switchboard_ops::sub(value, base)?, base.sizes(), copies)?;
                Some(switchboard_ops::add(base, &delta)?)
            }
            _ => None,
        };
        Ok(inverse)
    }
}

/// `t` summed over the dimensions it was broadcast along from `sizes` (`at::sum_to`), reshaped
/// by `view_copy` when `copies`.
fn sum_to(t: &Tensor, sizes: &[i64], copies: bool) -> Result<Tensor> {
    let lead = t.dim() - sizes.len().min(t.dim());
    let mut dims: Vec<i64> = (0..lead as i64).collect();
    for (i, &s) in sizes.iter().enumerate() {
        if s == 1 && t.sizes()[lead + i] != 1 {
            dims.push((lead + i) as i64);
        }
    }
    if dims.is_empty() {
        return Ok(t.clone());
    }
    let summed = switchboard_ops::sum_dim_int_list_with(
        t,
        Some(&dims),
        switchboard_ops::SumDimIntListOptions::default().keepdim(true),
    )?;
    if copies {
        return switchboard_ops::view_copy(&summed, sizes);
    }
    switchboard_ops::reshape(&summed, sizes)
}
