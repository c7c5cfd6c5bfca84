//! Helpers shared by the indexing kernels: position walks, index values, the slice and
//! scatter/gather loops, bound checks, the output of the scatters and `index_add`.

use smallvec::SmallVec;
use switchboard_ops::structured::{self, MetaOutput};
use switchboard_tensor::{contiguous_strides, DataRef, DimVec, RawOps, ScalarType, Tensor};

use crate::copy::copy_into;
use crate::error::{check_cpu, invalid, Result};
use crate::iter::{coalesce, reorder_dims};
use crate::loops::{for_each_row, parallel_for, Geometry, GRAIN_SIZE};
use crate::structured_output::structured_output;

/// The positions of a shape for `K` strided operands, walked row by row in memory-friendly
/// order (permuted and coalesced as the elementwise iterator does).
pub(crate) struct Positions<const K: usize> {
    geom: Geometry,
    rs: [isize; K],
}

impl<const K: usize> Positions<K> {
    pub(crate) fn new(shape: &[i64], strides: [&[i64]; K]) -> Positions<K> {
        let st: SmallVec<[DimVec; 4]> = strides.iter().map(|s| DimVec::from_slice(s)).collect();
        let perm = reorder_dims(shape, &strides);
        let geom = coalesce(shape, &st, &perm);
        let rs = std::array::from_fn(|k| geom.strides[k][0] as isize);
        Positions { geom, rs }
    }

    pub(crate) fn numel(&self) -> usize {
        self.geom.numel()
    }

    /// Calls `row(n, offsets, strides)` for the rows covering positions `start..end` (in
    /// walking order), on this thread: `n` positions from `offsets`, `strides` apart.
    pub(crate) fn run_rows(
        &self,
        start: usize,
        end: usize,
        mut row: impl FnMut(usize, [isize; K], [isize; K]),
    ) {
        if start >= end {
            return;
        }
        for_each_row::<K>(&self.geom, start, end, |n, offs| row(n, offs, self.rs));
    }

    /// Calls `f(offsets)` for every position, split across threads above `grain` positions.
    pub(crate) fn par_run(&self, grain: usize, f: impl Fn([isize; K]) + Sync) {
        parallel_for(self.numel(), grain.max(1), |s, e| {
            self.run_rows(s, e, |n, offs, rs| {
                for i in 0..n as isize {
                    f(std::array::from_fn(|k| offs[k] + i * rs[k]))
                }
            })
        });
    }
}

/// `t` with at least one dimension (`ensure_nonempty`: a 0-dim tensor viewed as `[1]`).
pub(super) fn nonempty(t: &Tensor) -> Result<Tensor> {
    if t.dim() == 0 {
        t.unsqueeze(0)
    } else {
        Ok(t.clone())
    }
}

/// The size of dimension `d`, 1 for a 0-dim tensor (`ensure_nonempty_size`).
pub(super) fn nonempty_size(t: &Tensor, d: usize) -> i64 {
    if t.dim() == 0 {
        1
    } else {
        t.sizes()[d]
    }
}

/// The values of an index tensor in row-major order: borrowed when it is a contiguous int64
/// tensor that does not share the written tensor's storage, else converted.
pub(super) enum IndexValues<'a> {
    Borrowed(DataRef<'a, i64>),
    Owned(Vec<i64>),
}

impl std::ops::Deref for IndexValues<'_> {
    type Target = [i64];
    fn deref(&self) -> &[i64] {
        match self {
            IndexValues::Borrowed(d) => d,
            IndexValues::Owned(v) => v,
        }
    }
}

pub(super) fn index_values<'a>(index: &'a Tensor, written: &Tensor) -> Result<IndexValues<'a>> {
    if index.dtype() == ScalarType::Long && index.is_contiguous() && !index.is_alias_of(written) {
        return Ok(IndexValues::Borrowed(index.data::<i64>()?));
    }
    Ok(IndexValues::Owned(index.to_vec_as::<i64>()?))
}

pub(super) fn is_index_dtype(t: &Tensor) -> bool {
    matches!(t.dtype(), ScalarType::Int | ScalarType::Long)
}

/// Whether `dim` is the innermost dimension of `t` in memory (the smallest stride among
/// dimensions of size > 1): then loops run along `dim` innermost.
pub(super) fn dim_is_innermost(t: &Tensor, dim: usize) -> bool {
    let inner = (0..t.dim())
        .filter(|&d| t.sizes()[d] > 1)
        .min_by_key(|&d| t.strides()[d]);
    inner.is_none_or(|d| d == dim)
}

/// The slice loop of `index_select` and `index_add`: for every `i` and every position `p` of
/// the slices (the shape of `a` without `dim`; `b` has the same one), applies the op to
/// `a_offset(p) + off_a[i]` and `b_offset(p) + off_b[i]`, by calls `row(n, oa, ob, sa, sb)`
/// covering `n` such pairs from `(oa, ob)`, `(sa, sb)` apart. With `i_parallel`, different
/// `i` may run on different threads (their `a` elements must be disjoint); otherwise `i` runs
/// serially and only slice positions are split across threads.
pub(super) fn slice_pairs(
    a: &Tensor,
    b: &Tensor,
    dim: usize,
    off_a: &[isize],
    off_b: &[isize],
    i_parallel: bool,
    row: impl Fn(usize, isize, isize, isize, isize) + Sync,
) {
    let n = off_a.len();
    let mut shape = DimVec::from_slice(a.sizes());
    shape[dim] = 1;
    let pos = Positions::new(&shape, [a.strides(), b.strides()]);
    let slice = pos.numel().max(1);
    if dim_is_innermost(a, dim) {
        // Along `dim` innermost; threads take disjoint slice positions.
        pos.par_run(GRAIN_SIZE / n.max(1), |[pa, pb]| {
            for i in 0..n {
                row(1, pa + off_a[i], pb + off_b[i], 0, 0);
            }
        });
    } else if i_parallel {
        // Whole slices per `i`, rows innermost.
        parallel_for(n, (GRAIN_SIZE / slice).max(1), |s, e| {
            for i in s..e {
                pos.run_rows(0, pos.numel(), |len, [pa, pb], [sa, sb]| {
                    row(len, pa + off_a[i], pb + off_b[i], sa, sb)
                });
            }
        });
    } else {
        for i in 0..n {
            parallel_for(pos.numel(), GRAIN_SIZE, |s, e| {
                pos.run_rows(s, e, |len, [pa, pb], [sa, sb]| {
                    row(len, pa + off_a[i], pb + off_b[i], sa, sb)
                });
            });
        }
    }
}

/// The loop of `gather` and `scatter_add` (`cpu_scatter_gather_base_kernel`): for every
/// position `q` of `index` (row-major values `idx`) calls `f(x_offset(q with dim = idx[q]),
/// y_offset(q))`. Threads take disjoint positions outside `dim`; along `dim` it is serial.
pub(super) fn scatter_gather(
    x: &Tensor,
    index_sizes: &[i64],
    idx: &[i64],
    y: &Tensor,
    dim: usize,
    f: impl Fn(isize, isize) + Sync,
) {
    let mut shape = DimVec::from_slice(index_sizes);
    let n = shape[dim];
    shape[dim] = 1;
    let istrides = contiguous_strides(index_sizes);
    let (xs, is, ys) = (
        x.strides()[dim] as isize,
        istrides[dim] as isize,
        y.strides()[dim] as isize,
    );
    let pos = Positions::new(&shape, [x.strides(), &istrides, y.strides()]);
    pos.par_run(GRAIN_SIZE / (n.max(1) as usize), |[px, pi, py]| {
        for j in 0..n as isize {
            let v = idx[(pi + j * is) as usize] as isize;
            f(px + v * xs, py + j * ys);
        }
    });
}

/// The bound check of the scatter/gather kernels, in row-major order of `index`.
pub(super) fn check_bounds(idx: &[i64], dim: usize, size: i64) -> Result<()> {
    match idx.iter().find(|&&i| i < 0 || i >= size) {
        Some(i) => Err(invalid(format!(
            "index {i} is out of bounds for dimension {dim} with size {size}"
        ))),
        None => Ok(()),
    }
}

/// The tensor a scatter or `index_add` writes, given its meta function's result: `self` in place, else `out`
/// (resized) or a fresh output, holding `self`'s elements (PyTorch's impls copy `self` into
/// an output that is not `self`).
pub(super) fn output_holding_self(
    op: &str,
    self_: &Tensor,
    meta: MetaOutput,
    out: Option<&Tensor>,
    inplace: bool,
) -> Result<Tensor> {
    check_cpu(op, meta.device)?;
    if inplace {
        structured::check_inplace(self_, &meta)?;
        return Ok(self_.clone());
    }
    let result = structured_output(meta, out)?;
    if !result.is_same(self_) {
        copy_into(&result, self_)?;
    }
    Ok(result)
}
