//! Sorting along a dimension: `sort` (+ `sort.stable`) and `topk`.

use std::cmp::Ordering;

use switchboard_ops::structured::{self, resize_out};
use switchboard_tensor::{wrap_dim, Access, DimVec, ScalarType, Tensor};

use crate::copy::{copy_into, empty_like_layout};
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

/// `sort.stable(Tensor self, *, bool? stable, int dim=-1, bool descending=False) -> (Tensor
/// values, Tensor indices)`
///
/// `self`'s elements sorted along `dim` (Note [Sort order]) and their positions along `dim`;
/// both laid out as `self` (its meta function's geometry).
///
/// ```
/// use switchboard_cpu::sort_stable;
/// use switchboard_tensor::Tensor;
/// let t = Tensor::from_vec(vec![2.0f32, f32::NAN, -1.0], &[3]).unwrap();
/// let (v, i) = sort_stable(&t, Some(true), -1, false).unwrap();
/// assert_eq!(i.to_vec::<i64>().unwrap(), [2, 0, 1]);
/// assert!(v.to_vec::<f32>().unwrap()[2].is_nan());
/// ```
pub fn sort_stable(
    self_: &Tensor,
    stable: Option<bool>,
    dim: i64,
    descending: bool,
) -> Result<(Tensor, Tensor)> {
    check_cpu_or_meta("sort", self_.device())?;
    let [values, indices] = structured::sort_stable(self_, stable, dim, descending, None)?;
    let (values, indices) = (values.allocate()?, indices.allocate()?);
    sort_into(self_, dim, None, descending, [&values, &indices])?;
    Ok((values, indices))
}

/// `sort.values_stable(Tensor self, *, bool? stable, int dim=-1, bool descending=False,
/// Tensor(a!) values, Tensor(b!) indices)`.
pub fn sort_values_stable(
    self_: &Tensor,
    stable: Option<bool>,
    dim: i64,
    descending: bool,
    values: &Tensor,
    indices: &Tensor,
) -> Result<(Tensor, Tensor)> {
    check_cpu_or_meta("sort", self_.device())?;
    let [mv, mi] =
        structured::sort_stable(self_, stable, dim, descending, Some([values, indices]))?;
    let (values, indices) = (resize_out(values, &mv)?, resize_out(indices, &mi)?);
    sort_into(self_, dim, None, descending, [&values, &indices])?;
    Ok((values, indices))
}

/// PyTorch's `sort_stable_out` impl (and `topk_out_cpu`'s, with `k`): the first `k` (all
/// without `k`) of every line of `self_` along `dim` in sorted order into `values`, their
/// positions into `indices`.
fn sort_into(
    self_: &Tensor,
    dim: i64,
    k: Option<i64>,
    descending: bool,
    [values, indices]: [&Tensor; 2],
) -> Result<()> {
    if values.numel() == 0 {
        return Ok(());
    }
    let input = unaliased_input(self_, values, indices)?;
    if input.dim() == 0 {
        copy_into(values, &input)?;
        return copy_into(indices, &Tensor::scalar_tensor(0, ScalarType::Long));
    }
    let d = wrap_dim(dim, input.dim())?;
    let k = k.unwrap_or(input.sizes()[d]) as usize;
    sort_lines(&input, d, k, descending, values, indices)
}

/// `self_`, or a copy of it when an `out=` output shares its memory (the kernel reads lines
/// while it writes them).
fn unaliased_input(self_: &Tensor, values: &Tensor, indices: &Tensor) -> Result<Tensor> {
    if !values.is_alias_of(self_) && !indices.is_alias_of(self_) {
        return Ok(self_.clone());
    }
    let copy = empty_like_layout(self_, self_.dtype(), self_.device())?;
    copy_into(&copy, self_)?;
    Ok(copy)
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
    check_cpu_or_meta("topk", self_.device())?;
    let [values, indices] = structured::topk(self_, k, dim, largest, sorted, None)?;
    let (values, indices) = (values.allocate()?, indices.allocate()?);
    topk_into(self_, k, dim, largest, [&values, &indices])?;
    Ok((values, indices))
}

/// `topk.values(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True, *,
/// Tensor(a!) values, Tensor(b!) indices)`.
pub fn topk_values(
    self_: &Tensor,
    k: i64,
    dim: i64,
    largest: bool,
    sorted: bool,
    values: &Tensor,
    indices: &Tensor,
) -> Result<(Tensor, Tensor)> {
    check_cpu_or_meta("topk", self_.device())?;
    let [mv, mi] = structured::topk(self_, k, dim, largest, sorted, Some([values, indices]))?;
    let (values, indices) = (resize_out(values, &mv)?, resize_out(indices, &mi)?);
    topk_into(self_, k, dim, largest, [&values, &indices])?;
    Ok((values, indices))
}

/// PyTorch's `topk_out_cpu` impl: Bool has no kernel (a CPU error; the meta function
/// accepts it, as PyTorch's).
fn topk_into(self_: &Tensor, k: i64, dim: i64, largest: bool, outputs: [&Tensor; 2]) -> Result<()> {
    if self_.dtype() == ScalarType::Bool {
        return Err(invalid("topk does not support bool dtypes on CPU"));
    }
    sort_into(self_, dim, Some(k), largest, outputs)
}
