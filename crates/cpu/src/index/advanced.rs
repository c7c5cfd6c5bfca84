//! Advanced indexing with a list of optional index tensors: `index.Tensor` and `index_put`
//! (+ in-place).

use switchboard_tensor::{broadcast_shapes, contiguous_strides, Access, DimVec, RawOps, Tensor};

use crate::copy::clone;
use crate::dispatch_all_types_and_bool;
use crate::dispatch_dtype::{CpuElement, Num};
use crate::error::{check_cpu_or_meta, invalid, shape_str, Result};
use crate::iter::{reorder_dims, strides_for_perm};
use crate::nonzero::nonzero;
use crate::shape::check_no_overlap;

use super::common::Positions;

// Note [Advanced indexing layout]
// As PyTorch's `AdvancedIndex` (TensorAdvancedIndexing.cpp): boolean (and uint8) masks become
// one int64 index per masked dimension (their `nonzero` columns, so a mask needs values:
// on Meta it fails as `nonzero` does), the defined indices broadcast together, and the
// indexed dimensions are replaced by that broadcast shape. When the defined indices are not
// adjacent (`x[i, :, j]`), `self` is first permuted so that the indexed dimensions lead
// (`transposeToFront`), so the broadcast shape comes first in the result. The result is laid
// out as PyTorch's TensorIterator lays it out: dimensions ordered by the strides of `self`
// (with zero strides over the broadcast dimensions) and then of the indices.
//
// Values are checked row-major before anything is written, with PyTorch's message; its
// "dimension" is the position among the indexed dimensions, as in PyTorch's kernel.

/// The plan of one advanced indexing (PyTorch's `AdvancedIndex`).
struct AdvancedIndex {
    /// `self`, permuted so that the indexed dimensions are `before..before + sizes.len()`.
    src: Tensor,
    /// The number of dimensions of `src` before the indexed ones.
    before: usize,
    /// The int64 (or int32) index of each indexed dimension, broadcast to `shape`.
    indices: Vec<Tensor>,
    /// The broadcast shape of the indices.
    shape: DimVec,
}

/// `indices` with masks replaced by their `nonzero` columns (`expandTensors`), and PyTorch's
/// checks of the list.
fn expand_indices(self_: &Tensor, indices: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
    if indices.len() > self_.dim() {
        return Err(invalid(format!(
            "too many indices for tensor of dimension {} (got {})",
            self_.dim(),
            indices.len()
        )));
    }
    let mut out = Vec::with_capacity(indices.len());
    for index in indices {
        let Some(index) = index else {
            out.push(None);
            continue;
        };
        use switchboard_tensor::ScalarType::{Bool, Byte, Int, Long};
        match index.dtype() {
            Long | Int => out.push(Some(index.clone())),
            Bool | Byte => {
                // A mask covers as many dimensions as it has, from the next one.
                let first = out.len();
                for (j, &size) in index.sizes().iter().enumerate() {
                    let d = first + j;
                    if d >= self_.dim() || self_.sizes()[d] != size {
                        return Err(invalid(format!(
                            "The shape of the mask {} at index {j} does not match the shape of \
                             the indexed tensor {} at index {d}",
                            shape_str(index.sizes()),
                            shape_str(self_.sizes())
                        )));
                    }
                }
                let positions = nonzero(index)?;
                for j in 0..index.dim() {
                    out.push(Some(positions.select(1, j as i64)?));
                }
            }
            _ => {
                return Err(invalid(
                    "tensors used as indices must be long, int, byte or bool tensors",
                ))
            }
        }
    }
    if out.len() > self_.dim() {
        return Err(invalid(format!(
            "too many indices for tensor of dimension {} (got {})",
            self_.dim(),
            out.len()
        )));
    }
    Ok(out)
}

impl AdvancedIndex {
    fn new(self_: &Tensor, indices: &[Option<Tensor>]) -> Result<AdvancedIndex> {
        if indices.is_empty() {
            return Err(invalid("at least one index must be provided"));
        }
        let mut expanded = expand_indices(self_, indices)?;
        expanded.resize(self_.dim(), None);
        let defined: Vec<usize> = (0..expanded.len())
            .filter(|&d| expanded[d].is_some())
            .collect();
        let (Some(&first), Some(&last)) = (defined.first(), defined.last()) else {
            // PyTorch's kernel fails an internal assertion here.
            return Err(invalid("at least one index must be provided"));
        };
        let shapes: Vec<&[i64]> = defined
            .iter()
            .map(|&d| expanded[d].as_ref().map_or(&[][..], |t| t.sizes()))
            .collect();
        let shape = broadcast_shapes(&shapes).map_err(|_| {
            let listed: Vec<String> = shapes.iter().map(|s| shape_str(s)).collect();
            invalid(format!(
                "shape mismatch: indexing tensors could not be broadcast together with shapes {}",
                listed.join(", ")
            ))
        })?;
        let adjacent = last - first + 1 == defined.len();
        let (src, before) = if adjacent {
            (self_.clone(), first)
        } else {
            // `transposeToFront`: the indexed dimensions first, the others after, in order.
            let mut perm: Vec<i64> = defined.iter().map(|&d| d as i64).collect();
            perm.extend(
                (0..self_.dim())
                    .filter(|d| !defined.contains(d))
                    .map(|d| d as i64),
            );
            (self_.permute(&perm)?, 0)
        };
        let indices = defined
            .iter()
            .map(|&d| {
                expanded[d]
                    .as_ref()
                    .map_or(Ok(self_.clone()), |t| t.expand(&shape))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(AdvancedIndex {
            src,
            before,
            indices,
            shape,
        })
    }

    /// The number of indexed dimensions.
    fn indexed(&self) -> usize {
        self.indices.len()
    }

    /// The sizes of the indexing result: `src`'s with the indexed dimensions replaced by the
    /// broadcast shape.
    fn result_sizes(&self) -> DimVec {
        let s = self.src.sizes();
        let mut out = DimVec::from_slice(&s[..self.before]);
        out.extend_from_slice(&self.shape);
        out.extend_from_slice(&s[self.before + self.indexed()..]);
        out
    }

    /// `src`'s strides over the result's dimensions: zero over the broadcast ones.
    fn src_strides(&self) -> DimVec {
        let s = self.src.strides();
        let mut out = DimVec::from_slice(&s[..self.before]);
        out.extend(std::iter::repeat_n(0, self.shape.len()));
        out.extend_from_slice(&s[self.before + self.indexed()..]);
        out
    }

    /// `strides` (over the broadcast shape) placed over the result's dimensions.
    fn over_result(&self, strides: &[i64]) -> DimVec {
        let rank = self.src.dim() - self.indexed() + self.shape.len();
        let mut out = DimVec::from_elem(0, rank);
        out[self.before..self.before + strides.len()].copy_from_slice(strides);
        out
    }

    /// The strides of a fresh result (Note [Advanced indexing layout]).
    fn result_strides(&self, sizes: &[i64]) -> DimVec {
        let mut operands = vec![self.src_strides()];
        for index in &self.indices {
            let st: DimVec = (0..self.shape.len())
                .map(|d| {
                    if self.shape[d] == 1 {
                        0
                    } else {
                        index.strides()[d]
                    }
                })
                .collect();
            operands.push(self.over_result(&st));
        }
        let refs: Vec<&[i64]> = operands.iter().map(|s| &s[..]).collect();
        strides_for_perm(sizes, &reorder_dims(sizes, &refs))
    }

    /// The element offset into `src` of each position of the broadcast shape (row-major),
    /// every index checked against its dimension and wrapped when negative.
    fn offsets(&self) -> Result<Vec<isize>> {
        let n: i64 = self.shape.iter().product();
        let mut offsets = vec![0isize; n as usize];
        for (j, index) in self.indices.iter().enumerate() {
            let size = self.src.sizes()[self.before + j];
            let stride = self.src.strides()[self.before + j];
            let values = index.to_vec_as::<i64>()?;
            for (o, &v) in offsets.iter_mut().zip(&values) {
                if v < -size || v >= size {
                    return Err(invalid(format!(
                        "index {v} is out of bounds for dimension {j} with size {size}"
                    )));
                }
                let v = if v < 0 { v + size } else { v };
                *o += (v * stride) as isize;
            }
        }
        Ok(offsets)
    }
}

/// `index.Tensor(Tensor self, Tensor?[] indices) -> Tensor`
///
/// `self[indices]` as Python's advanced indexing: each defined index (int64, int32, or a
/// boolean mask) selects along its dimension, the indices broadcast together, and a `None`
/// keeps its dimension whole (Note [Advanced indexing layout]).
///
/// ```
/// use switchboard_cpu::index;
/// use switchboard_tensor::Tensor;
/// let t = Tensor::from_vec((0..6).map(|v| v as f32).collect(), &[2, 3]).unwrap();
/// let i = Tensor::from_vec(vec![2i64, 0], &[2]).unwrap();
/// let r = index(&t, &[None, Some(i)]).unwrap();
/// assert_eq!(r.to_vec::<f32>().unwrap(), [2.0, 0.0, 5.0, 3.0]);
/// ```
pub fn index(self_: &Tensor, indices: &[Option<Tensor>]) -> Result<Tensor> {
    check_cpu_or_meta("index", self_.device())?;
    let plan = AdvancedIndex::new(self_, indices)?;
    let sizes = plan.result_sizes();
    let strides = plan.result_strides(&sizes);
    let result = Tensor::empty_strided(&sizes, &strides, self_.dtype(), self_.device())?;
    if !result.has_data() {
        return Ok(result);
    }
    let offsets = plan.offsets()?;
    if result.numel() == 0 {
        return Ok(result);
    }
    let src_strides = plan.src_strides();
    let offset_strides = plan.over_result(&contiguous_strides(&plan.shape));
    let pos = Positions::new(&sizes, [result.strides(), &src_strides, &offset_strides]);
    {
        let _access = Access::new(&[&plan.src], &[&result])?;
        let (po, ps) = (result.mut_data_ptr() as usize, plan.src.data_ptr() as usize);
        by_element_size!(result.element_size(), E => {
            pos.par_run(crate::loops::GRAIN_SIZE, |[o, s, k]| {
                // SAFETY: `_access` holds the borrows (the fresh result exclusively); `o` walks
                // the result's positions once each; `s + offsets[k]` is an element of `self`
                // (every index was checked against its dimension's size).
                unsafe {
                    *(po as *mut E).offset(o) = *(ps as *const E).offset(s + offsets[k as usize]);
                }
            })
        });
    }
    Ok(result)
}

fn index_put_impl(
    dst: &Tensor,
    indices: &[Option<Tensor>],
    values: &Tensor,
    accumulate: bool,
) -> Result<()> {
    if !dst.has_data() {
        // PyTorch's meta function for `index_put` checks nothing (the result is `self`'s
        // geometry; a mask's positions would need values).
        return Ok(());
    }
    if dst.dtype() != values.dtype() {
        return Err(invalid(format!(
            "Index put requires the source and destination dtypes match, got {} for the \
             destination and {} for the source.",
            dst.dtype().c10_name(),
            values.dtype().c10_name()
        )));
    }
    check_no_overlap(dst, values)?;
    for index in indices.iter().flatten() {
        check_no_overlap(dst, index)?;
    }
    let plan = AdvancedIndex::new(dst, indices)?;
    let sizes = plan.result_sizes();
    let values = values.broadcast_to(&sizes).map_err(|_| {
        invalid(format!(
            "shape mismatch: value tensor of shape {} cannot be broadcast to indexing result \
             of shape {}",
            shape_str(values.sizes()),
            shape_str(&sizes)
        ))
    })?;
    let offsets = plan.offsets()?;
    if values.numel() == 0 {
        return Ok(());
    }
    let dst_strides = plan.src_strides();
    let offset_strides = plan.over_result(&contiguous_strides(&plan.shape));
    let pos = Positions::new(&sizes, [values.strides(), &dst_strides, &offset_strides]);
    let _access = Access::new(&[&values], &[&plan.src])?;
    let (pv, pd) = (values.data_ptr() as usize, plan.src.mut_data_ptr() as usize);
    // Serial: repeated indices write the same element (the last write wins, or all add up).
    dispatch_all_types_and_bool!(dst.dtype(), "index_put", T => {
        pos.run_rows(0, pos.numel(), |n, [v, d, k], [sv, sd, sk]| {
            for i in 0..n as isize {
                let (v, d, k) = (v + i * sv, d + i * sd, k + i * sk);
                // SAFETY: `_access` holds the borrows (`self` exclusively; `values` and the
                // indices do not overlap it); `d + offsets[k]` is an element of `self` (the
                // indices were checked); one thread writes.
                unsafe {
                    let p = (pd as *mut T).offset(d + offsets[k as usize]);
                    let x = *(pv as *const T).offset(v);
                    *p = if accumulate { T::from_acc((*p).to_acc().add(x.to_acc())) } else { x };
                }
            }
        });
        Ok(())
    })
}

/// `index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor`
///
/// A copy of `self` with `copy[indices] = values` (`values` broadcast to the indexing
/// result's shape), or `+=` with `accumulate`, where repeated indices add up.
///
/// ```
/// use switchboard_cpu::index_put;
/// use switchboard_tensor::{ScalarType, Tensor};
/// let z = Tensor::zeros(&[3], ScalarType::Float).unwrap();
/// let i = Tensor::from_vec(vec![0i64, 2, 0], &[3]).unwrap();
/// let v = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
/// let r = index_put(&z, &[Some(i)], &v, true).unwrap();
/// assert_eq!(r.to_vec::<f32>().unwrap(), [4.0, 0.0, 2.0]);
/// ```
pub fn index_put(
    self_: &Tensor,
    indices: &[Option<Tensor>],
    values: &Tensor,
    accumulate: bool,
) -> Result<Tensor> {
    check_cpu_or_meta("index_put", self_.device())?;
    // PyTorch's `self.clone(at::MemoryFormat::Preserve).index_put_(...)`.
    let result = clone(self_, None)?;
    index_put_impl(&result, indices, values, accumulate)?;
    Ok(result)
}

/// `index_put_(Tensor(a!) self, Tensor?[] indices, Tensor values, bool accumulate=False) ->
/// Tensor(a!)`
///
/// [`index_put`] into `self`.
pub fn index_put_(
    self_: &Tensor,
    indices: &[Option<Tensor>],
    values: &Tensor,
    accumulate: bool,
) -> Result<Tensor> {
    check_cpu_or_meta("index_put_", self_.device())?;
    index_put_impl(self_, indices, values, accumulate)?;
    Ok(self_.clone())
}
