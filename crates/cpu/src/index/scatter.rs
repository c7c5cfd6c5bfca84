//! `scatter` (a source tensor or a value), `scatter_add` and `scatter_reduce` (+ in-place).

use switchboard_tensor::{wrap_dim, Access, DimVec, Scalar, Tensor};

use crate::copy::copy_into;
use crate::dispatch_all_types_and_bool;
use crate::dispatch_dtype::{CpuElement, Num};
use crate::error::{check_cpu_or_meta, invalid, not_implemented, same_device, shape_str, Result};
use crate::iter::check_internal_overlap;
use crate::shape::check_no_overlap;

use super::common::*;

/// What is scattered: a tensor's elements at the index positions, or one value.
#[derive(Clone, Copy)]
enum Source<'a> {
    Tensor(&'a Tensor),
    Value(Scalar),
}

/// How a scattered element combines with the one it lands on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reduce {
    /// It replaces it (`scatter`).
    Replace,
    Sum,
    Prod,
    Mean,
    Max,
    Min,
}

/// `scatter_reduce`'s `reduce` argument (`get_operator_enum` with the new names; `max` and
/// `min` are accepted too, as PyTorch does).
fn reduce_of(reduce: &str) -> Result<Reduce> {
    Ok(match reduce {
        "sum" => Reduce::Sum,
        "prod" => Reduce::Prod,
        "mean" => Reduce::Mean,
        "amax" | "max" => Reduce::Max,
        "amin" | "min" => Reduce::Min,
        _ => {
            return Err(invalid(format!(
                "reduce argument must be either sum, prod, mean, amax or amin, got {reduce}"
            )))
        }
    })
}

/// `scatter_gather_dtype_check` and `scatter_shape_check` of the scatter family.
fn scatter_checks(
    method: &str,
    self_: &Tensor,
    d: usize,
    index: &Tensor,
    src: Option<&Tensor>,
) -> Result<()> {
    if index.numel() != 0 && !is_index_dtype(index) {
        return Err(invalid(format!(
            "{method}(): Expected dtype int32/int64 for index"
        )));
    }
    if src.is_some_and(|s| s.dtype() != self_.dtype()) {
        return Err(invalid(format!(
            "{method}(): Expected self.dtype to be equal to src.dtype"
        )));
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
    let larger_than_self =
        (0..rank).any(|i| i != d && nonempty_size(index, i) > nonempty_size(self_, i));
    let Some(src) = src else {
        if larger_than_self {
            return Err(invalid(format!(
                "Expected index {} to be no larger than self {} apart from dimension {d}",
                shape_str(index.sizes()),
                shape_str(self_.sizes())
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
        return Err(invalid(
            "Index tensor must have the same number of dimensions as src tensor",
        ));
    }
    if larger_than_self || larger_than_src {
        return Err(invalid(format!(
            "Expected index {} to be no larger than self {} apart from dimension {d} and to be \
             no larger size than src {}",
            shape_str(index.sizes()),
            shape_str(self_.sizes()),
            shape_str(src.sizes())
        )));
    }
    Ok(())
}

/// The scatter kernels' common body: checks, the result (`self` in place, else a copy of
/// it), then every index position's element combined into it.
fn scatter_impl(
    method: &'static str,
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    source: Source,
    (reduce, include_self): (Reduce, bool),
    inplace: bool,
) -> Result<Tensor> {
    let src = match source {
        Source::Tensor(t) => Some(t),
        Source::Value(_) => None,
    };
    let mut all = vec![self_, index];
    all.extend(src);
    let device = same_device(&all)?;
    check_cpu_or_meta(method, device)?;
    let d = wrap_dim(dim, self_.dim())?;
    scatter_checks(method, self_, d, index, src)?;
    let result = if inplace {
        check_internal_overlap(self_)?;
        check_no_overlap(self_, index)?;
        if let Some(src) = src {
            check_no_overlap(self_, src)?;
        }
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
    if reduce == Reduce::Mean && result.dtype() == switchboard_tensor::ScalarType::Bool {
        return Err(not_implemented(
            "scatter_gather_tensor_cpu_reduce_mean",
            result.dtype(),
        ));
    }
    let idx = index_values(index, &result)?;
    check_bounds(&idx, d, nonempty_size(&result, d))?;
    let x = nonempty(&result)?;
    let y = match src {
        Some(s) => nonempty(s)?,
        // Only offsets into `y` are computed, never read: any tensor of the same rank does.
        None => x.clone(),
    };
    let isizes: DimVec = if index.dim() == 0 {
        DimVec::from_slice(&[1])
    } else {
        DimVec::from_slice(index.sizes())
    };
    // `mean` counts the elements each position averages (`self`'s own with `include_self`),
    // in a contiguous int64 tensor of `self`'s shape.
    let counts = if reduce == Reduce::Mean {
        let c = Tensor::full(
            x.sizes(),
            i64::from(include_self),
            switchboard_tensor::ScalarType::Long,
        )?;
        let pc = c.mut_data_ptr() as usize;
        scatter_gather(&c, &isizes, &idx, &y, d, |oc, _| {
            // SAFETY: `c` is fresh and ours; `oc` is in bounds (indices checked); threads own
            // disjoint positions outside `dim`.
            unsafe { *(pc as *mut i64).offset(oc) += 1 }
        });
        Some(c)
    } else {
        None
    };
    let _access = match src {
        Some(_) => Access::new(&[&y], &[&x])?,
        None => Access::new(&[], &[&x])?,
    };
    let (px, py) = (x.mut_data_ptr() as usize, y.data_ptr() as usize);
    dispatch_all_types_and_bool!(x.dtype(), method, T => {
        let value: Option<T> = match source {
            Source::Value(v) => Some(v.to::<T>()),
            Source::Tensor(_) => None,
        };
        if !include_self {
            let identity = match reduce {
                Reduce::Prod => <T as CpuElement>::Acc::ONE,
                Reduce::Max => <T as CpuElement>::Acc::LOWEST,
                Reduce::Min => <T as CpuElement>::Acc::HIGHEST,
                _ => <T as CpuElement>::Acc::ZERO,
            };
            let identity = T::from_acc(identity);
            scatter_gather(&x, &isizes, &idx, &y, d, |ox, _| {
                // SAFETY: as below.
                unsafe { *(px as *mut T).offset(ox) = identity }
            });
        }
        scatter_gather(&x, &isizes, &idx, &y, d, |ox, oy| {
            // SAFETY: `_access` holds the borrows (`self` exclusively; `src` does not overlap
            // it); offsets are in bounds (indices checked; index sizes <= self and src sizes);
            // threads own disjoint positions outside `dim`, so no element of `self` is
            // written by two threads.
            unsafe {
                let p = (px as *mut T).offset(ox);
                let v = value.unwrap_or_else(|| *(py as *const T).offset(oy));
                let (a, b) = ((*p).to_acc(), v.to_acc());
                *p = match reduce {
                    Reduce::Replace => v,
                    Reduce::Sum | Reduce::Mean => T::from_acc(a.add(b)),
                    Reduce::Prod => T::from_acc(a.mul(b)),
                    // NaN propagates from either side.
                    Reduce::Max => T::from_acc(b.max_nan(a)),
                    Reduce::Min => T::from_acc(b.min_nan(a)),
                };
            }
        });
        if let Some(counts) = &counts {
            // `out / count` (rounding down for integers); a count of 0 (no element) is 1.
            let pc = counts.data_ptr() as usize;
            let pos = Positions::new(x.sizes(), [x.strides(), counts.strides()]);
            pos.par_run(crate::loops::GRAIN_SIZE, |[ox, oc]| {
                // SAFETY: `ox` and `oc` address the same position of `self` and of the fresh
                // counts; each position is visited once.
                unsafe {
                    let p = (px as *mut T).offset(ox);
                    let n = (*(pc as *const i64).offset(oc)).max(1);
                    let (a, n) = ((*p).to_acc(), <T as CpuElement>::Acc::from_i64(n));
                    let mean = if <T as CpuElement>::Acc::IS_FLOAT { a.div(n) } else { a.floor_div(n) };
                    *p = T::from_acc(mean);
                }
            });
        }
        Ok(())
    })?;
    Ok(result)
}

/// `scatter.src(Tensor self, int dim, Tensor index, Tensor src) -> Tensor`
///
/// A copy of `self` where, for `dim = 0`, `out[index[i][j]][j] = src[i][j]` (likewise for
/// other dims); with repeated indices, one of the written values remains.
///
/// ```
/// use switchboard_cpu::scatter;
/// use switchboard_tensor::{ScalarType, Tensor};
/// let z = Tensor::zeros(&[3], ScalarType::Float).unwrap();
/// let i = Tensor::from_vec(vec![2i64, 0], &[2]).unwrap();
/// let s = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
/// assert_eq!(scatter(&z, 0, &i, &s).unwrap().to_vec::<f32>().unwrap(), [2.0, 0.0, 1.0]);
/// ```
pub fn scatter(self_: &Tensor, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
    let source = Source::Tensor(src);
    scatter_impl(
        "scatter",
        self_,
        dim,
        index,
        source,
        (Reduce::Replace, true),
        false,
    )
}

/// `scatter_.src(Tensor(a!) self, int dim, Tensor index, Tensor src) -> Tensor(a!)`
pub fn scatter_(self_: &Tensor, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
    let source = Source::Tensor(src);
    scatter_impl(
        "scatter",
        self_,
        dim,
        index,
        source,
        (Reduce::Replace, true),
        true,
    )
}

/// `scatter.value(Tensor self, int dim, Tensor index, Scalar value) -> Tensor`
///
/// A copy of `self` with `value` (converted to `self`'s dtype) at the index positions.
pub fn scatter_value(self_: &Tensor, dim: i64, index: &Tensor, value: Scalar) -> Result<Tensor> {
    let source = Source::Value(value);
    scatter_impl(
        "scatter",
        self_,
        dim,
        index,
        source,
        (Reduce::Replace, true),
        false,
    )
}

/// `scatter_.value(Tensor(a!) self, int dim, Tensor index, Scalar value) -> Tensor(a!)`
pub fn scatter_value_(self_: &Tensor, dim: i64, index: &Tensor, value: Scalar) -> Result<Tensor> {
    let source = Source::Value(value);
    scatter_impl(
        "scatter",
        self_,
        dim,
        index,
        source,
        (Reduce::Replace, true),
        true,
    )
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
    let source = Source::Tensor(src);
    scatter_impl(
        "scatter",
        self_,
        dim,
        index,
        source,
        (Reduce::Sum, true),
        false,
    )
}

/// `scatter_add_(Tensor(a!) self, int dim, Tensor index, Tensor src) -> Tensor(a!)`
pub fn scatter_add_(self_: &Tensor, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
    let source = Source::Tensor(src);
    scatter_impl(
        "scatter",
        self_,
        dim,
        index,
        source,
        (Reduce::Sum, true),
        true,
    )
}

/// `scatter_reduce.two(Tensor self, int dim, Tensor index, Tensor src, str reduce, *, bool
/// include_self=True) -> Tensor`
///
/// A copy of `self` where the `src` elements scattered to each position are reduced with
/// `reduce` (`sum`, `prod`, `mean`, `amax`, `amin`), together with `self`'s element unless
/// `include_self` is false (positions no index reaches keep `self`'s element). `mean` divides
/// by the count (rounding down for integers); `amax` and `amin` propagate NaN.
///
/// ```
/// use switchboard_cpu::scatter_reduce;
/// use switchboard_tensor::Tensor;
/// let s = Tensor::from_vec(vec![0.0f32, 1.0, 2.0], &[3]).unwrap();
/// let i = Tensor::from_vec(vec![0i64, 0, 1, 1], &[4]).unwrap();
/// let v = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[4]).unwrap();
/// let r = scatter_reduce(&s, 0, &i, &v, "mean", false).unwrap();
/// assert_eq!(r.to_vec::<f32>().unwrap(), [1.5, 3.5, 2.0]);
/// ```
pub fn scatter_reduce(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    src: &Tensor,
    reduce: &str,
    include_self: bool,
) -> Result<Tensor> {
    let op = reduce_of(reduce)?;
    let source = Source::Tensor(src);
    scatter_impl(
        "scatter_reduce",
        self_,
        dim,
        index,
        source,
        (op, include_self),
        false,
    )
}

/// `scatter_reduce_.two(Tensor(a!) self, int dim, Tensor index, Tensor src, str reduce, *,
/// bool include_self=True) -> Tensor(a!)`
pub fn scatter_reduce_(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    src: &Tensor,
    reduce: &str,
    include_self: bool,
) -> Result<Tensor> {
    let op = reduce_of(reduce)?;
    let source = Source::Tensor(src);
    scatter_impl(
        "scatter_reduce",
        self_,
        dim,
        index,
        source,
        (op, include_self),
        true,
    )
}
