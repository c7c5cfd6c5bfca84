//! `scatter` (a source tensor or a value), `scatter_add` and `scatter_reduce`, with their
//! in-place and `out=` forms: the checks and the output's geometry are their meta functions'
//! (`switchboard_ops::structured::scatter_src`, ...), as PyTorch's `scatter_meta_impl`.

use switchboard_ops::structured::{self, MetaOutput, ScatterReduce};
use switchboard_tensor::{wrap_dim, Access, DimVec, Scalar, Tensor};

use crate::dispatch_all_types_and_bool;
use crate::dispatch_dtype::{CpuElement, Num};
use crate::error::{not_implemented, Result};

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

impl From<ScatterReduce> for Reduce {
    fn from(op: ScatterReduce) -> Reduce {
        match op {
            ScatterReduce::Sum => Reduce::Sum,
            ScatterReduce::Prod => Reduce::Prod,
            ScatterReduce::Mean => Reduce::Mean,
            ScatterReduce::Amax => Reduce::Max,
            ScatterReduce::Amin => Reduce::Min,
        }
    }
}

/// The scatter kernels' common body, after the meta function: every index position's
/// element combined into `result` (a copy of `self`, or `self` in place).
fn scatter_into(
    method: &'static str,
    result: &Tensor,
    dim: i64,
    index: &Tensor,
    source: Source,
    (reduce, include_self): (Reduce, bool),
) -> Result<()> {
    let src = match source {
        Source::Tensor(t) => Some(t),
        Source::Value(_) => None,
    };
    if index.numel() == 0 {
        return Ok(());
    }
    let d = wrap_dim(dim, result.dim())?;
    if reduce == Reduce::Mean && result.dtype() == switchboard_tensor::ScalarType::Bool {
        return Err(not_implemented(
            "scatter_gather_tensor_cpu_reduce_mean",
            result.dtype(),
        ));
    }
    let idx = index_values(index, result)?;
    check_bounds(&idx, d, nonempty_size(result, d))?;
    let x = nonempty(result)?;
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
    })
}

/// A scatter after its meta function's result `meta`: the output (Note [Structured kernels]
/// in switchboard-ops), then the scattered elements combined into it.
#[allow(clippy::too_many_arguments)]
fn scatter_impl(
    method: &'static str,
    self_: &Tensor,
    meta: MetaOutput,
    dim: i64,
    index: &Tensor,
    source: Source,
    reduce: (Reduce, bool),
    (out, inplace): (Option<&Tensor>, bool),
) -> Result<Tensor> {
    let result = output_holding_self(method, self_, meta, out, inplace)?;
    scatter_into(method, &result, dim, index, source, reduce)?;
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
    scatter_tensor_impl(SCATTER_SRC, self_, dim, index, src, None, false)
}

/// `scatter_.src(Tensor(a!) self, int dim, Tensor index, Tensor src) -> Tensor(a!)`
pub fn scatter_(self_: &Tensor, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
    scatter_tensor_impl(SCATTER_SRC, self_, dim, index, src, None, true)
}

/// `scatter.src_out(Tensor self, int dim, Tensor index, Tensor src, *, Tensor(a!) out) ->
/// Tensor(a!)`
pub fn scatter_src_out(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    src: &Tensor,
    out: &Tensor,
) -> Result<Tensor> {
    scatter_tensor_impl(SCATTER_SRC, self_, dim, index, src, Some(out), false)
}

/// The meta function of a scatter whose source is a tensor (`scatter.src`, `scatter_add`).
type TensorSourceMeta = fn(&Tensor, i64, &Tensor, &Tensor, Option<&Tensor>) -> Result<MetaOutput>;

/// `scatter.src`: a scattered element replaces the one it lands on.
const SCATTER_SRC: (TensorSourceMeta, Reduce) = (structured::scatter_src, Reduce::Replace);

/// `scatter_add`: a scattered element is added to the one it lands on.
const SCATTER_ADD: (TensorSourceMeta, Reduce) = (structured::scatter_add, Reduce::Sum);

/// A scatter of tensor `src` (`scatter.src` or `scatter_add`, which differ only in their
/// meta function and in how a scattered element combines with the one it lands on).
fn scatter_tensor_impl(
    (meta_function, reduce): (TensorSourceMeta, Reduce),
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    src: &Tensor,
    out: Option<&Tensor>,
    inplace: bool,
) -> Result<Tensor> {
    let written = if inplace { Some(self_) } else { out };
    let meta = meta_function(self_, dim, index, src, written)?;
    let source = Source::Tensor(src);
    scatter_impl(
        "scatter",
        self_,
        meta,
        dim,
        index,
        source,
        (reduce, true),
        (out, inplace),
    )
}

/// `scatter.value(Tensor self, int dim, Tensor index, Scalar value) -> Tensor`
///
/// A copy of `self` with `value` (converted to `self`'s dtype) at the index positions.
pub fn scatter_value(self_: &Tensor, dim: i64, index: &Tensor, value: Scalar) -> Result<Tensor> {
    scatter_value_impl(self_, dim, index, value, None, false)
}

/// `scatter_.value(Tensor(a!) self, int dim, Tensor index, Scalar value) -> Tensor(a!)`
pub fn scatter_value_(self_: &Tensor, dim: i64, index: &Tensor, value: Scalar) -> Result<Tensor> {
    scatter_value_impl(self_, dim, index, value, None, true)
}

/// `scatter.value_out(Tensor self, int dim, Tensor index, Scalar value, *, Tensor(a!) out) ->
/// Tensor(a!)`
pub fn scatter_value_out(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    value: Scalar,
    out: &Tensor,
) -> Result<Tensor> {
    scatter_value_impl(self_, dim, index, value, Some(out), false)
}

fn scatter_value_impl(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    value: Scalar,
    out: Option<&Tensor>,
    inplace: bool,
) -> Result<Tensor> {
    let written = if inplace { Some(self_) } else { out };
    let meta = structured::scatter_value(self_, dim, index, value, written)?;
    let reduce = (Reduce::Replace, true);
    let source = Source::Value(value);
    scatter_impl(
        "scatter",
        self_,
        meta,
        dim,
        index,
        source,
        reduce,
        (out, inplace),
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
    scatter_tensor_impl(SCATTER_ADD, self_, dim, index, src, None, false)
}

/// `scatter_add_(Tensor(a!) self, int dim, Tensor index, Tensor src) -> Tensor(a!)`
pub fn scatter_add_(self_: &Tensor, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
    scatter_tensor_impl(SCATTER_ADD, self_, dim, index, src, None, true)
}

/// `scatter_add.out(Tensor self, int dim, Tensor index, Tensor src, *, Tensor(a!) out) ->
/// Tensor(a!)`
pub fn scatter_add_out(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    src: &Tensor,
    out: &Tensor,
) -> Result<Tensor> {
    scatter_tensor_impl(SCATTER_ADD, self_, dim, index, src, Some(out), false)
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
    scatter_reduce_impl(self_, dim, index, src, (reduce, include_self), None, false)
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
    scatter_reduce_impl(self_, dim, index, src, (reduce, include_self), None, true)
}

/// `scatter_reduce.two_out(Tensor self, int dim, Tensor index, Tensor src, str reduce, *,
/// bool include_self=True, Tensor(a!) out) -> Tensor(a!)`
pub fn scatter_reduce_two_out(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    src: &Tensor,
    reduce: &str,
    include_self: bool,
    out: &Tensor,
) -> Result<Tensor> {
    let how = (reduce, include_self);
    scatter_reduce_impl(self_, dim, index, src, how, Some(out), false)
}

fn scatter_reduce_impl(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    src: &Tensor,
    (reduce, include_self): (&str, bool),
    out: Option<&Tensor>,
    inplace: bool,
) -> Result<Tensor> {
    let written = if inplace { Some(self_) } else { out };
    let meta =
        structured::scatter_reduce_two(self_, dim, index, src, reduce, include_self, written)?;
    let op = Reduce::from(structured::scatter_reduce_op(reduce)?);
    let source = Source::Tensor(src);
    let how = (op, include_self);
    scatter_impl(
        "scatter_reduce",
        self_,
        meta,
        dim,
        index,
        source,
        how,
        (out, inplace),
    )
}
