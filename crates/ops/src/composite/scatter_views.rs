//! The `*_scatter` operators (CompositeExplicitAutogradNonFunctional, as in PyTorch): a copy
//! of `self` with a view's region replaced by `src`. Functionalization writes a mutated view
//! back into its base with them (Note [Writing through a view] in switchboard-functionalize).

use switchboard_dispatcher::Result;
use switchboard_tensor::{wrap_dim, MemoryFormat, Tensor};

use super::error;

/// `self.clone()` (its layout kept), the view `region` of the copy overwritten with `src`.
fn scatter_into_view(
    self_: &Tensor,
    src: &Tensor,
    region: impl FnOnce(&Tensor) -> Result<Tensor>,
) -> Result<Tensor> {
    let output = crate::clone_with(
        self_,
        crate::CloneOptions::default().memory_format(MemoryFormat::Preserve),
    )?;
    let view = region(&output)?;
    if view.sizes() != src.sizes() {
        let list = |s: &[i64]| {
            let items: Vec<String> = s.iter().map(i64::to_string).collect();
            format!("[{}]", items.join(", "))
        };
        return Err(error(format!(
            "expected src to have a size equal to the slice of self. src size = {}, slice size \
             = {}",
            list(src.sizes()),
            list(view.sizes())
        )));
    }
    crate::copy_(&view, src)?;
    Ok(output)
}

/// `select_scatter(Tensor self, Tensor src, int dim, SymInt index) -> Tensor`
pub fn select_scatter(self_: &Tensor, src: &Tensor, dim: i64, index: i64) -> Result<Tensor> {
    scatter_into_view(self_, src, |o| crate::select(o, dim, index))
}

/// `slice_scatter(Tensor self, Tensor src, int dim=0, SymInt? start=None, SymInt? end=None,
/// SymInt step=1) -> Tensor`
pub fn slice_scatter(
    self_: &Tensor,
    src: &Tensor,
    dim: i64,
    start: Option<i64>,
    end: Option<i64>,
    step: i64,
) -> Result<Tensor> {
    scatter_into_view(self_, src, |o| {
        crate::slice_with(
            o,
            crate::SliceOptions {
                dim,
                start,
                end,
                step,
            },
        )
    })
}

/// `as_strided_scatter(Tensor self, Tensor src, SymInt[] size, SymInt[] stride, SymInt?
/// storage_offset=None) -> Tensor`
pub fn as_strided_scatter(
    self_: &Tensor,
    src: &Tensor,
    size: &[i64],
    stride: &[i64],
    storage_offset: Option<i64>,
) -> Result<Tensor> {
    scatter_into_view(self_, src, |o| {
        crate::as_strided_with(o, size, stride, crate::AsStridedOptions { storage_offset })
    })
}

/// The geometry of `t.diagonal(offset, dim1, dim2)`: sizes, strides and storage offset.
pub fn diagonal_geometry(
    t: &Tensor,
    offset: i64,
    dim1: i64,
    dim2: i64,
) -> Result<(Vec<i64>, Vec<i64>, i64)> {
    let (d1, d2) = (wrap_dim(dim1, t.dim())?, wrap_dim(dim2, t.dim())?);
    if d1 == d2 {
        return Err(error(format!(
            "diagonal dimensions cannot be identical {dim1}, {dim2}"
        )));
    }
    let (s1, s2) = (t.sizes()[d1], t.sizes()[d2]);
    let (st1, st2) = (t.strides()[d1], t.strides()[d2]);
    let mut storage_offset = t.storage_offset();
    let len = if offset >= 0 {
        s1.min(s2.saturating_sub(offset)).max(0)
    } else {
        s1.saturating_add(offset).min(s2).max(0)
    };
    if len > 0 {
        storage_offset += if offset >= 0 {
            offset * st2
        } else {
            -offset * st1
        };
    }
    let mut sizes = Vec::with_capacity(t.dim() - 1);
    let mut strides = Vec::with_capacity(t.dim() - 1);
    for d in (0..t.dim()).filter(|&d| d != d1 && d != d2) {
        sizes.push(t.sizes()[d]);
        strides.push(t.strides()[d]);
    }
    sizes.push(len);
    strides.push(st1 + st2);
    Ok((sizes, strides, storage_offset))
}

/// `diagonal_scatter(Tensor self, Tensor src, int offset=0, int dim1=0, int dim2=1) -> Tensor`
pub fn diagonal_scatter(
    self_: &Tensor,
    src: &Tensor,
    offset: i64,
    dim1: i64,
    dim2: i64,
) -> Result<Tensor> {
    scatter_into_view(self_, src, |o| {
        let (sizes, strides, storage_offset) = diagonal_geometry(o, offset, dim1, dim2)?;
        crate::as_strided_with(
            o,
            &sizes,
            &strides,
            crate::AsStridedOptions::default().storage_offset(storage_offset),
        )
    })
}
