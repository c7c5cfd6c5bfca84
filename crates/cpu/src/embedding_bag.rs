//! `_embedding_bag`: sums, means or maxima of bags of embedding rows, with PyTorch's four
//! outputs and argument checks (EmbeddingBag.cpp); its backwards are in
//! `embedding_bag_backward.rs`.
//!
//! Note [Embedding bags]
//! `offsets[b]` is where bag `b` starts in the flat `indices`; a bag ends where the next
//! starts, the last one at the end of `indices` (with `include_last_offset`, `offsets` has one
//! more entry, the end, and one fewer bag). Each index belongs to `offset2bag[i]`, the last bag
//! starting at or before it (an empty bag never owns an index). Indices equal to
//! `padding_idx` are skipped and, in mean and max modes, not counted in `bag_size`. The
//! outputs, as PyTorch's CPU kernel returns them:
//! - `output` `(bags, D)`: the sum (times `per_sample_weights`, sum mode only), the mean (the
//!   sum over `max(bag_size, 1)`) or the elementwise maximum (the first of equal values; 0 for
//!   an empty bag);
//! - `offset2bag` `(n,)`: empty in sum mode on PyTorch's fast path (float, half and bfloat16
//!   weights with unit row stride, no `padding_idx`), which does not need it;
//! - `bag_size` `(bags,)`: zeros in sum mode (one per offset from
//!   `_embedding_bag_forward_only`);
//! - `max_indices`: the index each maximum came from `(bags, D)` in max mode; otherwise a copy
//!   of `bag_size` (PyTorch leaves that tensor unwritten; its allocator hands back the same
//!   values).

use switchboard_tensor::{RawOps, ScalarType, Tensor, TensorError};

use crate::dispatch_dtype::{CpuElement, FloatElement, Num};
use crate::dispatch_floating_types;
use crate::error::{check_cpu_or_meta, invalid, same_device, Result};

/// `mode`: PyTorch's `EmbeddingBagMode`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum BagMode {
    Sum,
    Mean,
    Max,
}

impl BagMode {
    pub(crate) fn from_i64(mode: i64) -> Result<BagMode> {
        match mode {
            0 => Ok(BagMode::Sum),
            1 => Ok(BagMode::Mean),
            2 => Ok(BagMode::Max),
            _ => Err(invalid("`mode` must be sum, mean, or max.")),
        }
    }
}

/// A tensor's legacy type name as the CPU kernel prints it (`torch.FloatTensor`), also for
/// meta tensors: the Meta kernel is the CPU kernel without data, and gives its messages.
pub(crate) fn type_name(t: &Tensor) -> String {
    t.type_string().replacen("torch.meta.", "torch.", 1)
}

/// PyTorch's `checkScalarTypes` message.
pub(crate) fn check_index_dtype(name: &str, t: &Tensor) -> Result<()> {
    if !matches!(t.dtype(), ScalarType::Long | ScalarType::Int) {
        return Err(invalid(format!(
            "Expected tensor for argument #1 '{name}' to have one of the following scalar \
             types: Long, Int; but got {} instead (while checking arguments for embedding_bag)",
            type_name(t)
        )));
    }
    Ok(())
}

/// PyTorch's `TORCH_CHECK(cond)` message without a text of its own.
fn unexplained(cond: &str) -> TensorError {
    invalid(format!(
        "Expected {cond} to be true, but got false.  (Could this error message be improved?  \
         If so, please report an enhancement request to PyTorch.)"
    ))
}

/// The index dtype of the outputs: PyTorch's `promoteIndicesAndOffsets` (Long unless both are
/// Int).
pub(crate) fn index_dtype(indices: &Tensor, offsets: &Tensor) -> ScalarType {
    if indices.dtype() == offsets.dtype() {
        indices.dtype()
    } else {
        ScalarType::Long
    }
}

/// `offset2bag` of every index (Note [Embedding bags]): the number of bag starts at or before
/// it, minus one (-1, no bag, when there are none). `offsets` must be non-decreasing.
pub(crate) fn offset2bag_of(offsets: &[i64], n: usize) -> Vec<i64> {
    let mut bag = -1i64;
    let mut next = 0usize;
    (0..n as i64)
        .map(|i| {
            while next < offsets.len() && offsets[next] <= i {
                bag += 1;
                next += 1;
            }
            bag
        })
        .collect()
}

/// Checks the offsets' values: the first 0, the last at most `len`, none decreasing.
pub(crate) fn check_offsets(offsets: &[i64], len: i64) -> Result<()> {
    if let (Some(&first), Some(&last)) = (offsets.first(), offsets.last()) {
        if first != 0 {
            return Err(invalid(format!(
                "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to \
                 start from position 0. However, got {first}"
            )));
        }
        if last > len {
            return Err(invalid(format!(
                "offsets[-1] can not be greater than input's length {len} but got offsets[-1] \
                 of {last}"
            )));
        }
    }
    if let Some(k) = offsets.windows(2).position(|w| w[1] < w[0]) {
        return Err(invalid(format!(
            "embedding_bag: expected offsets to be non-decreasing, but got offsets[{}] = {} \
             after offsets[{k}] = {}",
            k + 1,
            offsets[k + 1],
            offsets[k]
        )));
    }
    Ok(())
}

/// PyTorch's range check of an index into `num_weights` rows.
pub(crate) fn check_index(idx: i64, num_weights: i64) -> Result<()> {
    if idx < 0 || idx >= num_weights {
        return Err(invalid(format!(
            "embedding_bag: Expected idx >= 0 && idx < num_embeddings but found idx to be {idx}"
        )));
    }
    Ok(())
}

/// `_embedding_bag(Tensor weight, Tensor indices, Tensor offsets, bool
/// scale_grad_by_freq=False, int mode=0, bool sparse=False, Tensor? per_sample_weights=None,
/// bool include_last_offset=False, int padding_idx=-1) -> (Tensor, Tensor, Tensor, Tensor)`:
/// `(output, offset2bag, bag_size, max_indices)` (Note [Embedding bags]).
/// `scale_grad_by_freq` and `sparse` only matter to the backward.
///
/// ```
/// use switchboard_tensor::Tensor;
/// let w = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]).unwrap();
/// let idx = Tensor::from_vec(vec![0i64, 2, 1], &[3]).unwrap();
/// let off = Tensor::from_vec(vec![0i64, 2], &[2]).unwrap();
/// let (out, ..) =
///     switchboard_cpu::_embedding_bag(&w, &idx, &off, false, 1, false, None, false, -1).unwrap();
/// assert_eq!(out.to_vec::<f32>().unwrap(), [3.0, 4.0, 3.0, 4.0]);
/// ```
#[allow(clippy::too_many_arguments)]
pub fn _embedding_bag(
    weight: &Tensor,
    indices: &Tensor,
    offsets: &Tensor,
    _scale_grad_by_freq: bool,
    mode: i64,
    _sparse: bool,
    per_sample_weights: Option<&Tensor>,
    include_last_offset: bool,
    padding_idx: i64,
) -> Result<(Tensor, Tensor, Tensor, Tensor)> {
    let bag = Bag {
        mode,
        per_sample_weights,
        include_last_offset,
        padding_idx,
        for_backward: true,
    };
    bag.compute(weight, indices, offsets)
}

/// `_embedding_bag_forward_only(Tensor weight, Tensor indices, Tensor offsets, bool
/// scale_grad_by_freq=False, int mode=0, bool sparse=False, Tensor? per_sample_weights=None,
/// bool include_last_offset=False, int padding_idx=-1) -> (Tensor, Tensor, Tensor, Tensor)`:
/// `_embedding_bag` for a weight that needs no gradient, as PyTorch's `embedding_bag` calls
/// it. Only one output differs: in sum mode, `bag_size` (and `max_indices`, a copy) has one
/// entry per offset, where `_embedding_bag`'s has one per bag.
#[allow(clippy::too_many_arguments)]
pub fn _embedding_bag_forward_only(
    weight: &Tensor,
    indices: &Tensor,
    offsets: &Tensor,
    _scale_grad_by_freq: bool,
    mode: i64,
    _sparse: bool,
    per_sample_weights: Option<&Tensor>,
    include_last_offset: bool,
    padding_idx: i64,
) -> Result<(Tensor, Tensor, Tensor, Tensor)> {
    let bag = Bag {
        mode,
        per_sample_weights,
        include_last_offset,
        padding_idx,
        for_backward: false,
    };
    bag.compute(weight, indices, offsets)
}

/// The options of one bag reduction.
struct Bag<'a> {
    mode: i64,
    per_sample_weights: Option<&'a Tensor>,
    include_last_offset: bool,
    padding_idx: i64,
    /// `_embedding_bag` (its backward reads `bag_size`) rather than the forward-only form.
    for_backward: bool,
}

impl Bag<'_> {
    fn compute(
        &self,
        weight: &Tensor,
        indices: &Tensor,
        offsets: &Tensor,
    ) -> Result<(Tensor, Tensor, Tensor, Tensor)> {
        let (mode, per_sample_weights, include_last_offset, padding_idx) = (
            self.mode,
            self.per_sample_weights,
            self.include_last_offset,
            self.padding_idx,
        );
        if indices.dim() != 1 && indices.dim() != 2 {
            return Err(invalid(format!(
                "input has to be a 1D or 2D Tensor, but got Tensor of dimension {}",
                indices.dim()
            )));
        }
        if offsets.dim() != 1 {
            return Err(invalid(format!(
                "offsets has to be a 1D Tensor, but got Tensor of dimension {}",
                offsets.dim()
            )));
        }
        if weight.dim() != 2 {
            return Err(invalid(format!(
                "weight has to be a 2D Tensor, but got Tensor of dimension {}",
                weight.dim()
            )));
        }
        let mut all = vec![weight, indices, offsets];
        all.extend(per_sample_weights);
        let device = same_device(&all)?;
        check_cpu_or_meta("_embedding_bag", device)?;
        check_index_dtype("indices", indices)?;
        check_index_dtype("offsets", offsets)?;
        let dtype = weight.dtype();
        if !matches!(
            dtype,
            ScalarType::Half | ScalarType::BFloat16 | ScalarType::Float | ScalarType::Double
        ) {
            return Err(invalid(format!(
                "Expected tensor for argument #1 'weight' to have one of the following scalar \
             types: Half, BFloat16, Float, Double; but got {} instead (while checking arguments \
             for embedding_bag)",
                type_name(weight)
            )));
        }
        let mode = BagMode::from_i64(mode)?;
        if let Some(psw) = per_sample_weights {
            if mode != BagMode::Sum {
                return Err(invalid(
                    "embedding_bag: per_sample_weights only supported with mode='sum'",
                ));
            }
            if psw.dtype() != dtype {
                return Err(invalid(format!(
                    "Expected tensor for argument #1 'weight' to have the same type as tensor for \
                 argument #1 'per_sample_weights'; but type {} does not equal {} (while \
                 checking arguments for embedding_bag)",
                    type_name(weight),
                    type_name(psw)
                )));
            }
            if psw.dim() != 1 {
                return Err(unexplained("per_sample_weights.value().dim() == 1"));
            }
            if psw.numel() != indices.numel() {
                return Err(unexplained(
                    "per_sample_weights.value().numel() == indices.numel()",
                ));
            }
        }
        let offsets_len = offsets.sizes()[0];
        if include_last_offset && offsets_len < 1 {
            return Err(invalid(
                "include_last_offset: number of offset should be at least 1",
            ));
        }
        let bags = offsets_len - i64::from(include_last_offset);
        let dim = weight.sizes()[1];
        let n = indices.numel();
        let idx_dtype = index_dtype(indices, offsets);
        // PyTorch's `is_fast_path`: its sum skips offset2bag.
        let fast_path = matches!(
            dtype,
            ScalarType::Float | ScalarType::Half | ScalarType::BFloat16
        ) && (weight.strides()[1] == 1 || dim <= 1)
            && padding_idx < 0
            && per_sample_weights.is_none_or(|p| p.strides()[0] == 1 || n <= 1);
        let o2b_len = if mode == BagMode::Sum && fast_path {
            0
        } else {
            n
        };
        // PyTorch sizes bag_size only when something reads it: the backward, mean and max.
        let sizes_len = if mode == BagMode::Sum && !self.for_backward {
            offsets_len
        } else {
            bags
        };
        let max_shape: &[i64] = if mode == BagMode::Max {
            &[bags, dim]
        } else {
            &[sizes_len]
        };
        if device.is_meta() {
            return Ok((
                Tensor::empty_on(&[bags, dim], dtype, device)?,
                Tensor::empty_on(&[o2b_len], idx_dtype, device)?,
                Tensor::empty_on(&[sizes_len], idx_dtype, device)?,
                Tensor::empty_on(max_shape, idx_dtype, device)?,
            ));
        }
        let idx = indices.to_vec_as::<i64>()?;
        let offs = offsets.to_vec_as::<i64>()?;
        check_offsets(&offs, indices.sizes()[0])?;
        let num_weights = weight.sizes()[0];
        for (i, &v) in idx.iter().enumerate() {
            if v < 0 || v >= num_weights {
                // The fast path's message names the position.
                if fast_path && mode != BagMode::Max {
                    return Err(invalid(format!(
                        "Index {i} of input takes value {v} which is not in the valid range [0, \
                     {num_weights})"
                    )));
                }
                check_index(v, num_weights)?;
            }
        }
        let offset2bag = offset2bag_of(&offs[..bags as usize], n as usize);
        let bags_u = bags as usize;
        let mut bag_size = vec![0i64; sizes_len as usize];
        if mode != BagMode::Sum && bags > 0 {
            // PyTorch's `make_bag_size_out`: offset differences, the last bag to the end of
            // `indices`; then padding indices are uncounted.
            for b in 0..bags_u - 1 {
                bag_size[b] = offs[b + 1] - offs[b];
            }
            bag_size[bags_u - 1] = indices.sizes()[0] - offs[bags_u - 1];
            for (&v, &b) in idx.iter().zip(&offset2bag) {
                if v == padding_idx && b >= 0 {
                    bag_size[b as usize] -= 1;
                }
            }
        }
        let w = weight.contiguous()?;
        let psw = per_sample_weights.map(|p| p.contiguous()).transpose()?;
        let output = Tensor::empty_on(&[bags, dim], dtype, device)?;
        let mut max_indices = vec![
            0i64;
            if mode == BagMode::Max {
                bags_u * dim as usize
            } else {
                0
            }
        ];
        let job = Job {
            idx: &idx,
            offset2bag: &offset2bag,
            bag_size: &bag_size,
            dim: dim as usize,
            padding_idx,
            mode,
        };
        dispatch_floating_types!(dtype, "embedding_bag_cpu", T => {
            let psw_data = psw.as_ref().map(|p| p.data::<T>()).transpose()?;
            let values = job.reduce::<T>(&w.data::<T>()?, psw_data.as_deref(), bags_u, &mut max_indices);
            let mut out = output.data_mut::<T>()?;
            for (d, v) in out.iter_mut().zip(values) {
                *d = T::from_acc(v);
            }
            Ok(())
        })?;
        let o2b = if o2b_len == 0 { Vec::new() } else { offset2bag };
        let max_values = if mode == BagMode::Max {
            max_indices
        } else {
            bag_size.clone()
        };
        Ok((
            output,
            longs(o2b, &[o2b_len], idx_dtype)?,
            longs(bag_size, &[sizes_len], idx_dtype)?,
            longs(max_values, max_shape, idx_dtype)?,
        ))
    }
}

/// An `i64` vector as a tensor of the index dtype.
pub(crate) fn longs(v: Vec<i64>, shape: &[i64], dtype: ScalarType) -> Result<Tensor> {
    match dtype {
        ScalarType::Int => Tensor::from_vec(v.into_iter().map(|x| x as i32).collect(), shape),
        _ => Tensor::from_vec(v, shape),
    }
}

/// One reduction's inputs.
struct Job<'a> {
    idx: &'a [i64],
    offset2bag: &'a [i64],
    bag_size: &'a [i64],
    dim: usize,
    padding_idx: i64,
    mode: BagMode,
}

impl Job<'_> {
    /// The `(bags, D)` output values, and the max mode's argmax rows into `max_indices`.
    fn reduce<T: FloatElement>(
        &self,
        w: &[T],
        psw: Option<&[T]>,
        bags: usize,
        max_indices: &mut [i64],
    ) -> Vec<T::F> {
        let d = self.dim;
        let mut out = vec![<T::F as Num>::ZERO; bags * d];
        let mut filled = vec![false; bags];
        for (i, (&v, &b)) in self.idx.iter().zip(self.offset2bag).enumerate() {
            if b < 0 || v == self.padding_idx {
                continue;
            }
            let (b, row) = (b as usize, &w[v as usize * d..][..d]);
            let o = &mut out[b * d..][..d];
            match self.mode {
                BagMode::Sum | BagMode::Mean => {
                    let scale = psw.map(|p| p[i].to_acc());
                    for (acc, x) in o.iter_mut().zip(row) {
                        let x = x.to_acc();
                        *acc = acc.add(scale.map_or(x, |s| x.mul(s)));
                    }
                }
                BagMode::Max => {
                    let first = !filled[b];
                    filled[b] = true;
                    let m = &mut max_indices[b * d..][..d];
                    for ((acc, x), mi) in o.iter_mut().zip(row).zip(m) {
                        let x = x.to_acc();
                        if first || x > *acc {
                            *acc = x;
                            *mi = v;
                        }
                    }
                }
            }
        }
        if self.mode == BagMode::Mean {
            for (o, &s) in out.chunks_mut(d.max(1)).zip(self.bag_size) {
                let s = <T::F as Num>::from_i64(s.max(1));
                for v in o {
                    *v = v.div(s);
                }
            }
        }
        out
    }
}

#[cfg(test)]
#[path = "embedding_bag_tests.rs"]
mod tests;
