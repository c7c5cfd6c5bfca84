//! Indexing along a dimension: `index_select` (+`out`), `gather`, `scatter_add` (+in-place)
//! and `index_add` (+in-place). `index_add` and `scatter_add` are what autograd uses for the
//! backward of `index_select` and `gather`.
//!
//! All validate every index before touching data (so an error leaves outputs unwritten) and
//! then run parallel loops whose threads write disjoint elements: over output slices for the
//! copies, and over positions other than `dim` (serially along `dim`) for the accumulations,
//! whose repeated indices would otherwise race.

use smallvec::SmallVec;
use switchboard_tensor::{
    contiguous_strides, wrap_dim, Access, DataRef, DimVec, RawOps, Scalar, ScalarType, Tensor,
};

use crate::binary::scalar_acc;
use crate::copy::copy_into;
use crate::dispatch_all_types_and_bool;
use crate::dispatch_dtype::{CpuElement, Num};
use crate::error::{check_cpu_or_meta, invalid, same_device, shape_str, Result};
use crate::iter::{check_internal_overlap, coalesce, reorder_dims};
use crate::loops::{for_each_row, parallel_for, Geometry, GRAIN_SIZE};
use crate::shape::check_no_overlap;

/// The positions of a shape for `K` strided operands, walked row by row in memory-friendly
/// order (permuted and coalesced as the elementwise iterator does).
struct Positions<const K: usize> {
    geom: Geometry,
    rs: [isize; K],
}

impl<const K: usize> Positions<K> {
    fn new(shape: &[i64], strides: [&[i64]; K]) -> Positions<K> {
        let st: SmallVec<[DimVec; 4]> = strides.iter().map(|s| DimVec::from_slice(s)).collect();
        let perm = reorder_dims(shape, &strides);
        let geom = coalesce(shape, &st, &perm);
        let rs = std::array::from_fn(|k| geom.strides[k][0] as isize);
        Positions { geom, rs }
    }

    fn numel(&self) -> usize {
        self.geom.numel()
    }

    /// Calls `row(n, offsets, strides)` for the rows covering positions `start..end` (in
    /// walking order), on this thread: `n` positions from `offsets`, `strides` apart.
    fn run_rows(
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
    fn par_run(&self, grain: usize, f: impl Fn([isize; K]) + Sync) {
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
fn nonempty(t: &Tensor) -> Result<Tensor> {
    if t.dim() == 0 {
        t.unsqueeze(0)
    } else {
        Ok(t.clone())
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

/// The values of an index tensor in row-major order: borrowed when it is a contiguous int64
/// tensor that does not share the written tensor's storage, else converted.
enum IndexValues<'a> {
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

fn index_values<'a>(index: &'a Tensor, written: &Tensor) -> Result<IndexValues<'a>> {
    if index.dtype() == ScalarType::Long && index.is_contiguous() && !index.is_alias_of(written) {
        return Ok(IndexValues::Borrowed(index.data::<i64>()?));
    }
    Ok(IndexValues::Owned(index.to_vec_as::<i64>()?))
}

fn is_index_dtype(t: &Tensor) -> bool {
    matches!(t.dtype(), ScalarType::Int | ScalarType::Long)
}

/// Runs `$body` with `$E` an unsigned integer type of `$size` bytes (to move elements of any
/// dtype without converting them).
macro_rules! by_element_size {
    ($size:expr, $E:ident => $body:expr) => {
        match $size {
            1 => {
                type $E = u8;
                $body
            }
            2 => {
                type $E = u16;
                $body
            }
            4 => {
                type $E = u32;
                $body
            }
            _ => {
                type $E = u64;
                $body
            }
        }
    };
}

/// Whether `dim` is the innermost dimension of `t` in memory (the smallest stride among
/// dimensions of size > 1): then loops run along `dim` innermost.
fn dim_is_innermost(t: &Tensor, dim: usize) -> bool {
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
fn slice_pairs(
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
fn scatter_gather(
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

fn index_select_impl(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    out: Option<&Tensor>,
) -> Result<Tensor> {
    let mut all = vec![self_, index];
    all.extend(out);
    let device = same_device(&all)?;
    check_cpu_or_meta("index_select", device)?;
    let d = wrap_dim(dim, self_.dim())?;
    let n = index.numel();
    if index.dim() > 1 {
        return Err(invalid("index_select(): Index is supposed to be a vector"));
    }
    if self_.dim() == 0 && n != 1 {
        return Err(invalid(format!(
            "index_select(): Index to scalar can have only 1 value, got {n} value(s)"
        )));
    }
    if !is_index_dtype(index) {
        return Err(invalid(
            "index_select(): Expected dtype int32 or int64 for index",
        ));
    }
    let mut sizes = DimVec::from_slice(self_.sizes());
    if self_.dim() > 0 {
        sizes[d] = n;
    }
    let result = match out {
        Some(o) => {
            if o.dtype() != self_.dtype() {
                return Err(invalid(
                    "index_select(): self and result must have the same scalar type",
                ));
            }
            check_internal_overlap(o)?;
            check_no_overlap(o, self_)?;
            check_no_overlap(o, index)?;
            o.resize_output(&sizes)?
        }
        None => Tensor::empty_on(&sizes, self_.dtype(), device)?,
    };
    if !result.has_data() {
        return Ok(result);
    }
    let idx = index_values(index, &result)?;
    let bound = nonempty_size(self_, d);
    if idx.iter().any(|&i| i < 0 || i >= bound) {
        return Err(invalid("index out of range in self"));
    }
    if result.numel() == 0 {
        return Ok(result);
    }
    let (a, b) = (nonempty(&result)?, nonempty(self_)?);
    let (sa, sb) = (a.strides()[d] as isize, b.strides()[d] as isize);
    let off_a: Vec<isize> = (0..idx.len() as isize).map(|i| i * sa).collect();
    let off_b: Vec<isize> = idx.iter().map(|&i| i as isize * sb).collect();
    let _access = Access::new(&[&b], &[&a])?;
    let (pa, pb) = (a.mut_data_ptr() as usize, b.data_ptr() as usize);
    by_element_size!(a.element_size(), E => {
        slice_pairs(&a, &b, d, &off_a, &off_b, true, |n, oa, ob, sa, sb| {
            // SAFETY: `_access` borrows both storages (the output exclusively); the offsets
            // are in-range strided offsets (indices were checked against the size of `dim`);
            // each output element is written by one thread only; the output does not overlap
            // `self` (checked for `out=`, fresh otherwise).
            unsafe {
                let (pa, pb) = ((pa as *mut E).offset(oa), (pb as *const E).offset(ob));
                if sa == 1 && sb == 1 {
                    std::ptr::copy_nonoverlapping(pb, pa, n);
                } else {
                    for k in 0..n as isize {
                        *pa.offset(k * sa) = *pb.offset(k * sb);
                    }
                }
            }
        })
    });
    Ok(result)
}

/// `index_select(Tensor self, int dim, Tensor index) -> Tensor`
///
/// The slices of `self` along `dim` at the (int32 or int64) positions in the vector `index`.
///
/// ```
/// use switchboard_cpu::index_select;
/// use switchboard_tensor::Tensor;
/// let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]).unwrap();
/// let i = Tensor::from_vec(vec![2i64, 0, 2], &[3]).unwrap();
/// let r = index_select(&t, 0, &i).unwrap();
/// assert_eq!(r.to_vec::<f32>().unwrap(), [5.0, 6.0, 1.0, 2.0, 5.0, 6.0]);
/// ```
pub fn index_select(self_: &Tensor, dim: i64, index: &Tensor) -> Result<Tensor> {
    index_select_impl(self_, dim, index, None)
}

/// `index_select.out(Tensor self, int dim, Tensor index, *, Tensor(a!) out) -> Tensor(a!)`
///
/// Like [`index_select`], into `out` (same dtype as `self`; resized when its shape differs,
/// the returned tensor being the resized `out`).
pub fn index_select_out(self_: &Tensor, dim: i64, index: &Tensor, out: &Tensor) -> Result<Tensor> {
    index_select_impl(self_, dim, index, Some(out))
}

/// The bound check of the scatter/gather kernels, in row-major order of `index`.
fn check_bounds(idx: &[i64], dim: usize, size: i64) -> Result<()> {
    match idx.iter().find(|&&i| i < 0 || i >= size) {
        Some(i) => Err(invalid(format!(
            "index {i} is out of bounds for dimension {dim} with size {size}"
        ))),
        None => Ok(()),
    }
}

/// `gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor`
///
/// `out[i][j] = self[index[i][j]][j]` for `dim = 0` (and likewise for other dims): the
/// result has `index`'s shape and `self`'s dtype. `sparse_grad` only matters to autograd.
///
/// ```
/// use switchboard_cpu::gather;
/// use switchboard_tensor::Tensor;
/// let t = Tensor::from_vec(vec![1i32, 2, 3, 4], &[2, 2]).unwrap();
/// let i = Tensor::from_vec(vec![0i64, 0, 1, 0], &[2, 2]).unwrap();
/// assert_eq!(gather(&t, 1, &i, false).unwrap().to_vec::<i32>().unwrap(), [1, 1, 4, 3]);
/// ```
pub fn gather(self_: &Tensor, dim: i64, index: &Tensor, sparse_grad: bool) -> Result<Tensor> {
    let _ = sparse_grad;
    let device = same_device(&[self_, index])?;
    check_cpu_or_meta("gather", device)?;
    let d = wrap_dim(dim, self_.dim())?;
    let result = Tensor::empty_on(index.sizes(), self_.dtype(), device)?;
    if index.numel() == 0 {
        return Ok(result);
    }
    if !is_index_dtype(index) {
        return Err(invalid("gather(): Expected dtype int32/int64 for index"));
    }
    // `gather_shape_check`.
    let rank = self_.dim().max(1);
    if rank != index.dim().max(1) {
        return Err(invalid(
            "Index tensor must have the same number of dimensions as input tensor",
        ));
    }
    for i in (0..rank).filter(|&i| i != d) {
        if nonempty_size(index, i) > nonempty_size(self_, i) {
            return Err(invalid(format!(
                "Size does not match at dimension {i} expected index {} to be smaller than \
                 self {} apart from dimension {d}",
                shape_str(index.sizes()),
                shape_str(self_.sizes())
            )));
        }
    }
    if !result.has_data() {
        return Ok(result);
    }
    let idx = index_values(index, &result)?;
    check_bounds(&idx, d, nonempty_size(self_, d))?;
    let (x, y) = (nonempty(self_)?, nonempty(&result)?);
    let _access = Access::new(&[&x], &[&y])?;
    let (px, py) = (x.data_ptr() as usize, y.mut_data_ptr() as usize);
    by_element_size!(x.element_size(), E => {
        scatter_gather(&x, y.sizes(), &idx, &y, d, |ox, oy| {
            // SAFETY: `_access` holds the borrows; `ox` addresses `self` at an index position
            // (checked in bounds; index sizes <= self sizes off `dim`); each output element
            // is written once.
            unsafe { *(py as *mut E).offset(oy) = *(px as *const E).offset(ox) }
        })
    });
    Ok(result)
}

/// `scatter_shape_check` and the dtype checks of `scatter_add`.
fn scatter_add_checks(self_: &Tensor, d: usize, index: &Tensor, src: &Tensor) -> Result<()> {
    if index.numel() != 0 && !is_index_dtype(index) {
        return Err(invalid("scatter(): Expected dtype int32/int64 for index"));
    }
    if self_.dtype() != src.dtype() {
        return Err(invalid(
            "scatter(): Expected self.dtype to be equal to src.dtype",
        ));
    }
    if index.numel() == 0 {
        return Ok(());
    }
    let rank = self_.dim().max(1);
    if rank != index.dim().max(1) {
        return Err(invalid(
            "Index tensor must have the same number of dimensions as self tensor",
        ));
    }
    let wrong = (0..rank).any(|i| i != d && nonempty_size(index, i) > nonempty_size(self_, i))
        || (src.dim().max(1) == rank
            && (0..rank).any(|i| nonempty_size(index, i) > nonempty_size(src, i)));
    if src.dim().max(1) != rank {
        return Err(invalid(
            "Index tensor must have the same number of dimensions as src tensor",
        ));
    }
    if wrong {
        return Err(invalid(format!(
            "Expected index {} to be smaller than self {} apart from dimension {d} and to be \
             smaller size than src {}",
            shape_str(index.sizes()),
            shape_str(self_.sizes()),
            shape_str(src.sizes())
        )));
    }
    Ok(())
}

fn scatter_add_impl(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    src: &Tensor,
    inplace: bool,
) -> Result<Tensor> {
    let device = same_device(&[self_, index, src])?;
    check_cpu_or_meta("scatter_add", device)?;
    let d = wrap_dim(dim, self_.dim())?;
    scatter_add_checks(self_, d, index, src)?;
    let result = if inplace {
        check_internal_overlap(self_)?;
        check_no_overlap(self_, index)?;
        check_no_overlap(self_, src)?;
        self_.clone()
    } else {
        let r = Tensor::empty_on(self_.sizes(), self_.dtype(), device)?;
        if r.has_data() {
            copy_into(&r, self_)?;
        }
        r
    };
    if index.numel() == 0 || !result.has_data() {
        return Ok(result);
    }
    let idx = index_values(index, &result)?;
    check_bounds(&idx, d, nonempty_size(&result, d))?;
    let (x, y) = (nonempty(&result)?, nonempty(src)?);
    let isizes: DimVec = if index.dim() == 0 {
        DimVec::from_slice(&[1])
    } else {
        DimVec::from_slice(index.sizes())
    };
    let _access = Access::new(&[&y], &[&x])?;
    let (px, py) = (x.mut_data_ptr() as usize, y.data_ptr() as usize);
    dispatch_all_types_and_bool!(x.dtype(), "scatter_add_", T => {
        scatter_gather(&x, &isizes, &idx, &y, d, |ox, oy| {
            // SAFETY: `_access` holds the borrows (`self` exclusively, `src` does not overlap
            // it); offsets are in bounds (indices checked; index sizes <= self and src
            // sizes); threads own disjoint positions outside `dim`, so no element of `self`
            // is written by two threads.
            unsafe {
                let p = (px as *mut T).offset(ox);
                let v = *(py as *const T).offset(oy);
                *p = T::from_acc((*p).to_acc().add(v.to_acc()));
            }
        });
        Ok(())
    })?;
    Ok(result)
}

/// `scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor`
///
/// A copy of `self` where, for `dim = 0`, `out[index[i][j]][j] += src[i][j]` (likewise for
/// other dims); repeated indices accumulate.
///
/// ```
/// use switchboard_cpu::scatter_add;
/// use switchboard_tensor::{ScalarType, Tensor};
/// let z = Tensor::zeros(&[3], ScalarType::Float).unwrap();
/// let i = Tensor::from_vec(vec![0i64, 2, 0], &[3]).unwrap();
/// let s = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
/// assert_eq!(scatter_add(&z, 0, &i, &s).unwrap().to_vec::<f32>().unwrap(), [4.0, 0.0, 2.0]);
/// ```
pub fn scatter_add(self_: &Tensor, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
    scatter_add_impl(self_, dim, index, src, false)
}

/// `scatter_add_(Tensor(a!) self, int dim, Tensor index, Tensor src) -> Tensor(a!)`
pub fn scatter_add_(self_: &Tensor, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
    scatter_add_impl(self_, dim, index, src, true)
}

/// `index_func_meta_impl` for `index_add`.
fn index_add_checks(self_: &Tensor, d: usize, index: &Tensor, source: &Tensor) -> Result<()> {
    if index.dim() > 1 {
        return Err(invalid(format!(
            "index_add_(): Index is supposed to be a vector, but got dim: {} with type: {} and \
             size: {}",
            index.dim(),
            index.dtype().c10_name(),
            shape_str(index.sizes())
        )));
    }
    if !is_index_dtype(index) {
        return Err(invalid(format!(
            "index_add_(): Expected dtype int32/int64 for index but got: {}",
            index.dtype().c10_name()
        )));
    }
    if self_.dtype() != source.dtype() {
        return Err(invalid(format!(
            "index_add_(): self ({}) and source ({}) must have the same scalar type",
            self_.dtype().c10_name(),
            source.dtype().c10_name()
        )));
    }
    if d != 0 && d >= source.dim() {
        return Err(invalid(format!(
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
        return Err(invalid(format!(
            "index_add_(): Number of indices ({}) should be equal to source.size(dim): ({}), \
             for dim: {d}",
            index.numel(),
            source.size(d as i64)?
        )));
    }
    let mut ss = self_.sizes().to_vec();
    let mut rs = source.sizes().to_vec();
    if source.dim() != 0 && self_.dim() != 0 {
        ss.remove(d);
        rs.remove(d);
    }
    if ss != rs {
        return Err(invalid(format!(
            "source tensor shape must match self tensor shape, excluding the specified \
             dimension. Got self.shape = {} source.shape = {}",
            shape_str(self_.sizes()),
            shape_str(source.sizes())
        )));
    }
    Ok(())
}

fn index_add_impl(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    source: &Tensor,
    alpha: Scalar,
    inplace: bool,
) -> Result<Tensor> {
    let device = same_device(&[self_, index, source])?;
    check_cpu_or_meta("index_add", device)?;
    let d = wrap_dim(dim, self_.dim())?;
    index_add_checks(self_, d, index, source)?;
    let result = if inplace {
        check_internal_overlap(self_)?;
        check_no_overlap(self_, index)?;
        check_no_overlap(self_, source)?;
        self_.clone()
    } else {
        let r = Tensor::empty_on(self_.sizes(), self_.dtype(), device)?;
        if r.has_data() {
            copy_into(&r, self_)?;
        }
        r
    };
    if !result.has_data() || index.numel() == 0 {
        return Ok(result);
    }
    let idx = index_values(index, &result)?;
    let bound = if result.dim() > 1 {
        result.sizes()[d]
    } else {
        result.numel()
    };
    if idx.iter().any(|&i| i < 0 || i >= bound) {
        return Err(invalid("index out of range in self"));
    }
    if result.numel() == 0 {
        return Ok(result);
    }
    let (a, b) = (nonempty(&result)?, nonempty(source)?);
    let (sa, sb) = (a.strides()[d] as isize, b.strides()[d] as isize);
    let off_a: Vec<isize> = idx.iter().map(|&i| i as isize * sa).collect();
    let off_b: Vec<isize> = (0..idx.len() as isize).map(|i| i * sb).collect();
    let _access = Access::new(&[&b], &[&a])?;
    let (pa, pb) = (a.mut_data_ptr() as usize, b.data_ptr() as usize);
    dispatch_all_types_and_bool!(a.dtype(), "index_add_cpu_", T => {
        let alpha = scalar_acc::<T>(alpha);
        slice_pairs(&a, &b, d, &off_a, &off_b, false, |n, oa, ob, sa, sb| {
            for k in 0..n as isize {
                // SAFETY: `_access` holds the borrows (`self` exclusively; `source` does not
                // overlap it); offsets are in bounds (indices checked); repeated indices are
                // applied serially, and threads only split slice positions.
                unsafe {
                    let p = (pa as *mut T).offset(oa + k * sa);
                    let v = (*(pb as *const T).offset(ob + k * sb)).to_acc();
                    *p = T::from_acc((*p).to_acc().add(alpha.mul(v)));
                }
            }
        });
        Ok(())
    })?;
    Ok(result)
}

/// `index_add(Tensor self, int dim, Tensor index, Tensor source, *, Scalar alpha=1) ->
/// Tensor`
///
/// A copy of `self` with `alpha * source.select(dim, i)` added to its slice
/// `index[i]` along `dim` for every `i` (repeated indices accumulate).
///
/// ```
/// use switchboard_cpu::index_add;
/// use switchboard_tensor::{Scalar, ScalarType, Tensor};
/// let z = Tensor::zeros(&[3, 2], ScalarType::Float).unwrap();
/// let i = Tensor::from_vec(vec![2i32, 2], &[2]).unwrap();
/// let s = Tensor::ones(&[2, 2], ScalarType::Float).unwrap();
/// let r = index_add(&z, 0, &i, &s, Scalar::Int(3)).unwrap();
/// assert_eq!(r.to_vec::<f32>().unwrap(), [0.0, 0.0, 0.0, 0.0, 6.0, 6.0]);
/// ```
pub fn index_add(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    source: &Tensor,
    alpha: Scalar,
) -> Result<Tensor> {
    index_add_impl(self_, dim, index, source, alpha, false)
}

/// `index_add_(Tensor(a!) self, int dim, Tensor index, Tensor source, *, Scalar alpha=1) ->
/// Tensor(a!)`
pub fn index_add_(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    source: &Tensor,
    alpha: Scalar,
) -> Result<Tensor> {
    index_add_impl(self_, dim, index, source, alpha, true)
}

#[cfg(test)]
#[path = "index_tests.rs"]
mod tests;
