//! Sorting along a dimension: `sort` (+ `sort.stable`) and `topk`.

use std::cmp::Ordering;

use switchboard_tensor::{wrap_dim, Access, DimVec, ScalarType, Tensor};

use crate::copy::empty_like_layout;
use crate::dispatch_all_types_and_bool;
use crate::dispatch_dtype::{CpuElement, Num};
use crate::error::{check_cpu_or_meta, invalid, Result};
use crate::index::Positions;
use crate::loops::GRAIN_SIZE;

// Note [Sort order]
// As PyTorch's CPU kernels: NaN compares greater than every number (last in an ascending
// sort, first in a descending one, picked first by `topk(largest=True)`), and equal elements
// keep their order (a stable sort; `sort`'s `stable=False` may order ties either way in
// PyTorch, so this is one of its valid results). `topk` returns its elements sorted whatever
// `sorted` says, which PyTorch allows.

/// `a` before `b` in an ascending sort (NaN last).
fn ascending<A: Num>(a: A, b: A) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

/// Writes, for every line of `self_` along `d`, its first `k` elements in sorted order into
/// `values` and their positions into `indices` (both of `self_`'s shape but `k` along `d`).
fn sort_lines(
    self_: &Tensor,
    d: usize,
    k: usize,
    descending: bool,
    values: &Tensor,
    indices: &Tensor,
) -> Result<()> {
    let n = self_.sizes()[d] as usize;
    let mut lines = DimVec::from_slice(self_.sizes());
    lines[d] = 1;
    let pos = Positions::new(
        &lines,
        [self_.strides(), values.strides(), indices.strides()],
    );
    let (ss, sv, si) = (
        self_.strides()[d] as isize,
        values.strides()[d] as isize,
        indices.strides()[d] as isize,
    );
    let _access = Access::new(&[self_], &[values, indices])?;
    let (ps, pv, pi) = (
        self_.data_ptr() as usize,
        values.mut_data_ptr() as usize,
        indices.mut_data_ptr() as usize,
    );
    dispatch_all_types_and_bool!(self_.dtype(), "sort", T => {
        pos.par_run(GRAIN_SIZE / n.max(1), |[os, ov, oi]| {
            // SAFETY: `_access` holds the borrows (the fresh outputs exclusively); the offsets
            // address line elements of tensors of the line's shape; threads own whole lines.
            unsafe {
                let mut line: Vec<(T, i64)> = (0..n)
                    .map(|j| (*(ps as *const T).offset(os + j as isize * ss), j as i64))
                    .collect();
                line.sort_by(|a, b| {
                    let o = ascending(a.0.to_acc(), b.0.to_acc());
                    if descending { o.reverse() } else { o }
                });
                for (j, (v, i)) in line.into_iter().take(k).enumerate() {
                    *(pv as *mut T).offset(ov + j as isize * sv) = v;
                    *(pi as *mut i64).offset(oi + j as isize * si) = i;
                }
            }
        });
        Ok(())
    })
}

/// `sort(Tensor self, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)`
///
/// `self`'s elements sorted along `dim` (Note [Sort order]) and their positions along `dim`;
/// both laid out as `self`.
///
/// ```
/// use switchboard_cpu::sort;
/// use switchboard_tensor::Tensor;
/// let t = Tensor::from_vec(vec![2.0f32, f32::NAN, -1.0], &[3]).unwrap();
/// let (v, i) = sort(&t, -1, false).unwrap();
/// assert_eq!(i.to_vec::<i64>().unwrap(), [2, 0, 1]);
/// assert!(v.to_vec::<f32>().unwrap()[2].is_nan());
/// ```
pub fn sort(self_: &Tensor, dim: i64, descending: bool) -> Result<(Tensor, Tensor)> {
    sort_stable(self_, None, dim, descending)
}

/// `sort.stable(Tensor self, *, bool? stable, int dim=-1, bool descending=False) -> (Tensor
/// values, Tensor indices)`
pub fn sort_stable(
    self_: &Tensor,
    stable: Option<bool>,
    dim: i64,
    descending: bool,
) -> Result<(Tensor, Tensor)> {
    let _ = stable;
    check_cpu_or_meta("sort", self_.device())?;
    let d = wrap_dim(dim, self_.dim())?;
    let values = empty_like_layout(self_, self_.dtype(), self_.device())?;
    let indices = empty_like_layout(self_, ScalarType::Long, self_.device())?;
    if !values.has_data() || values.numel() == 0 {
        return Ok((values, indices));
    }
    if self_.dim() == 0 {
        crate::copy::copy_into(&values, self_)?;
        crate::copy::copy_into(&indices, &Tensor::scalar_tensor(0, ScalarType::Long))?;
        return Ok((values, indices));
    }
    let n = self_.sizes()[d] as usize;
    sort_lines(self_, d, n, descending, &values, &indices)?;
    Ok((values, indices))
}

/// `topk(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor
/// values, Tensor indices)`
///
/// The `k` largest (or smallest) elements along `dim` and their positions, in sorted order
/// (Note [Sort order]).
///
/// ```
/// use switchboard_cpu::topk;
/// use switchboard_tensor::Tensor;
/// let t = Tensor::from_vec(vec![2.0f32, 5.0, -1.0, 3.0], &[4]).unwrap();
/// let (v, i) = topk(&t, 2, -1, true, true).unwrap();
/// assert_eq!((v.to_vec::<f32>().unwrap(), i.to_vec::<i64>().unwrap()), (vec![5.0, 3.0], vec![1, 3]));
/// ```
pub fn topk(
    self_: &Tensor,
    k: i64,
    dim: i64,
    largest: bool,
    sorted: bool,
) -> Result<(Tensor, Tensor)> {
    let _ = sorted;
    check_cpu_or_meta("topk", self_.device())?;
    let d = wrap_dim(dim, self_.dim())?;
    let size = if self_.dim() == 0 {
        1
    } else {
        self_.sizes()[d]
    };
    if k < 0 || k > size {
        return Err(invalid("selected index k out of range"));
    }
    if self_.dtype() == ScalarType::Bool {
        return Err(invalid("topk does not support bool dtypes on CPU"));
    }
    let mut sizes = DimVec::from_slice(self_.sizes());
    if self_.dim() > 0 {
        sizes[d] = k;
    }
    let values = Tensor::empty_on(&sizes, self_.dtype(), self_.device())?;
    let indices = Tensor::empty_on(&sizes, ScalarType::Long, self_.device())?;
    if !values.has_data() || values.numel() == 0 {
        return Ok((values, indices));
    }
    if self_.dim() == 0 {
        crate::copy::copy_into(&values, self_)?;
        crate::copy::copy_into(&indices, &Tensor::scalar_tensor(0, ScalarType::Long))?;
        return Ok((values, indices));
    }
    sort_lines(self_, d, k as usize, largest, &values, &indices)?;
    Ok((values, indices))
}
