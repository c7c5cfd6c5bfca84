//! The inverse of one view operation: a base with the view's region replaced by a new value,
//! computed with pure operators (Note [Writing through a view]).

use switchboard_dispatcher::{Dispatcher, IValue, Result};
use switchboard_tensor::{RawOps, Tensor};

use crate::view_meta::ViewMeta;
use crate::wrapper::{call_plain, single_tensor};

impl ViewMeta {
    /// `base` (the tensor this view was taken of) with the view's elements replaced by
    /// `value`, or `None` when the view has no inverse here (`as_strided`, `expand`).
    pub(crate) fn scatter(
        &self,
        base: &Tensor,
        value: &Tensor,
        remove_views: bool,
    ) -> Result<Option<Tensor>> {
        let int = |i: usize| match self.args.get(i) {
            Some(IValue::Int(v)) => Some(*v),
            _ => None,
        };
        let name = self.op.name();
        let inverse = match (name.name(), name.overload_name()) {
            ("aten::view", "dtype") => Some(switchboard_ops::view_dtype(value, base.dtype())?),
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
                Some(single_tensor(&op, call_plain(&op, stack)?)?)
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
                Some(switchboard_ops::permute(value, &inverse)?)
            }
            ("aten::select", "int") => {
                let (Some(dim), Some(index)) = (int(1), int(2)) else {
                    return Ok(None);
                };
                let dim = normalize_dim(dim, base.dim());
                let positions = region_positions(base, dim, |line| line.select(0, index))?;
                let unsqueezed = switchboard_ops::unsqueeze(value, dim as i64)?;
                Some(replace_positions(base, dim, &positions, &unsqueezed)?)
            }
            ("aten::slice", "Tensor") => {
                let dim = normalize_dim(int(1).unwrap_or(0), base.dim());
                let bound = |i: usize| int(i);
                let (start, end, step) = (bound(2), bound(3), int(4).unwrap_or(1));
                let positions =
                    region_positions(base, dim, |line| line.slice(0, start, end, step))?;
                Some(replace_positions(base, dim, &positions, value)?)
            }
            _ => None,
        };
        Ok(inverse)
    }
}

fn normalize_dim(dim: i64, ndim: usize) -> usize {
    let n = ndim.max(1) as i64;
    (if dim < 0 { dim + n } else { dim }) as usize
}

/// The positions along `dim` of `base` that `view` (applied to a line of positions) keeps,
/// with the view's own normalisation of indices.
fn region_positions(
    base: &Tensor,
    dim: usize,
    view: impl FnOnce(&Tensor) -> switchboard_tensor::Result<Tensor>,
) -> Result<Vec<i64>> {
    let size = base.sizes().get(dim).copied().unwrap_or(1);
    let line = Tensor::from_vec((0..size).collect::<Vec<i64>>(), &[size])?;
    Ok(view(&line)?.to_vec::<i64>()?)
}

/// `base` with the slices at `positions` along `dim` replaced by the slices of `value` (of
/// `positions.len()` along `dim`), as `where(mask, index_select(value, ...), base)`.
fn replace_positions(
    base: &Tensor,
    dim: usize,
    positions: &[i64],
    value: &Tensor,
) -> Result<Tensor> {
    let size = base.sizes()[dim];
    let mut mask = vec![false; size as usize];
    let mut source = vec![0i64; size as usize];
    for (k, &p) in positions.iter().enumerate() {
        mask[p as usize] = true;
        source[p as usize] = k as i64;
    }
    let mut shape = vec![1i64; base.dim()];
    shape[dim] = size;
    let mut mask = Tensor::from_vec(mask, &shape)?;
    let mut source = Tensor::from_vec(source, &[size])?;
    if !base.device().is_cpu() {
        mask = switchboard_ops::to_device(&mask, base.device(), mask.dtype())?;
        source = switchboard_ops::to_device(&source, base.device(), source.dtype())?;
    }
    let spread = switchboard_ops::index_select(value, dim as i64, &source)?;
    switchboard_ops::r#where(&mask, &spread, base)
}
