//! Splitting into views (CompositeExplicitAutograd, as in PyTorch, with their own
//! derivatives): `split_with_sizes`, `split.Tensor` and `unbind.int` return lists of views of
//! `self` (`Tensor(a)[]`), made with `slice` and `select`; `chunk` (CompositeImplicitAutograd)
//! splits into equal parts through them.

use switchboard_dispatcher::Result;
use switchboard_tensor::{wrap_dim, Tensor};

use super::error;

/// `[a, b, c]`, as PyTorch prints an int list in messages.
fn list(v: &[i64]) -> String {
    let items: Vec<String> = v.iter().map(i64::to_string).collect();
    format!("[{}]", items.join(", "))
}

/// The view of `self` along `dim` from `start`, `length` long.
fn piece(self_: &Tensor, dim: i64, start: i64, length: i64) -> Result<Tensor> {
    crate::slice_with(
        self_,
        crate::SliceOptions {
            dim,
            start: Some(start),
            end: Some(start + length),
            step: 1,
        },
    )
}

/// `split_with_sizes(Tensor(a -> *) self, SymInt[] split_sizes, int dim=0) -> Tensor(a)[]`:
/// consecutive views along `dim`, of the given lengths, which must sum to the dimension's
/// size.
pub fn split_with_sizes(self_: &Tensor, split_sizes: &[i64], dim: i64) -> Result<Vec<Tensor>> {
    if self_.dim() == 0 {
        return Err(error("split expects at least a 1-dimensional tensor"));
    }
    let d = wrap_dim(dim, self_.dim())?;
    let dim_size = self_.sizes()[d];
    if split_sizes.iter().any(|&l| l < 0) {
        return Err(error(format!(
            "split_with_sizes expects split_sizes have only non-negative entries, but got \
             split_sizes={}",
            list(split_sizes)
        )));
    }
    let total = split_sizes
        .iter()
        .try_fold(0i64, |sum, &l| sum.checked_add(l));
    if total != Some(dim_size) {
        return Err(error(format!(
            "split_with_sizes expects split_sizes to sum exactly to {dim_size} (input tensor's \
             size at dimension {dim}), but got split_sizes={}",
            list(split_sizes)
        )));
    }
    let mut start = 0i64;
    let mut pieces = Vec::with_capacity(split_sizes.len());
    for &length in split_sizes {
        pieces.push(piece(self_, d as i64, start, length)?);
        start += length;
    }
    Ok(pieces)
}

/// `split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]`: views of
/// `split_size` along `dim`, the last one shorter when the size does not divide evenly.
pub fn split(self_: &Tensor, split_size: i64, dim: i64) -> Result<Vec<Tensor>> {
    if self_.dim() == 0 {
        return Err(error("split expects at least a 1-dimensional tensor"));
    }
    if split_size < 0 {
        return Err(error(format!(
            "split expects split_size be non-negative, but got split_size={split_size}"
        )));
    }
    let d = wrap_dim(dim, self_.dim())?;
    let dim_size = self_.sizes()[d];
    if split_size == 0 && dim_size != 0 {
        return Err(error(format!(
            "split_size can only be 0 if dimension size is 0, but got dimension size of \
             {dim_size}"
        )));
    }
    // One split when split_size is 0 (and so is the size), or larger than the size.
    let num_splits = if split_size == 0 {
        1
    } else {
        ((dim_size + split_size - 1) / split_size).max(1)
    };
    let last = dim_size - split_size * (num_splits - 1);
    (0..num_splits)
        .map(|i| {
            let length = if i < num_splits - 1 { split_size } else { last };
            piece(self_, d as i64, i * split_size, length)
        })
        .collect()
}

/// `unbind.int(Tensor(a -> *) self, int dim=0) -> Tensor(a)[]`: the views `select(dim, i)`.
pub fn unbind(self_: &Tensor, dim: i64) -> Result<Vec<Tensor>> {
    if self_.dim() == 0 {
        return Err(error(format!(
            "Dimension specified as {dim} but tensor has no dimensions"
        )));
    }
    let d = wrap_dim(dim, self_.dim())?;
    (0..self_.sizes()[d])
        .map(|i| crate::select(self_, d as i64, i))
        .collect()
}

/// `chunk(Tensor(a -> *) self, int chunks, int dim=0) -> Tensor(a)[]`
/// (CompositeImplicitAutograd): `split` into parts of `ceil(size / chunks)`; a zero-size
/// dimension gives `chunks` empty views through `split_with_sizes`.
pub fn chunk(self_: &Tensor, chunks: i64, dim: i64) -> Result<Vec<Tensor>> {
    if self_.dim() == 0 {
        return Err(error("chunk expects at least a 1-dimensional tensor"));
    }
    if chunks <= 0 {
        return Err(error(format!(
            "chunk expects `chunks` to be greater than 0, got: {chunks}"
        )));
    }
    let d = wrap_dim(dim, self_.dim())?;
    let dim_size = self_.sizes()[d];
    let split_size = (dim_size + chunks - 1) / chunks;
    if split_size == 0 && dim_size == 0 {
        let sizes = vec![0i64; chunks as usize];
        return crate::split_with_sizes_with(self_, &sizes, crate::SplitWithSizesOptions { dim });
    }
    crate::split_with(self_, split_size, crate::SplitOptions { dim })
}
