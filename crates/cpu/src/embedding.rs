//! `embedding_dense_backward`: the gradient of an embedding lookup with respect to its
//! weight table.

use std::collections::HashMap;

use rayon::prelude::*;
use switchboard_tensor::RawOps;
use switchboard_tensor::{ScalarType, Tensor};

use crate::dispatch_all_types_and_bool;
use crate::dispatch_dtype::{CpuElement, Num};
use crate::error::{check_cpu_or_meta, invalid, same_device, shape_str, Result};
use crate::loops::{in_parallel_region, parallel_region, GRAIN_SIZE};

/// `embedding_dense_backward(Tensor grad_output, Tensor indices, SymInt num_weights, SymInt
/// padding_idx, bool scale_grad_by_freq) -> Tensor`: a `(num_weights, D)` tensor whose row
/// `r` sums the rows of `grad_output` (shape `indices.shape + [D]`) looked up at index `r`,
/// skipping `padding_idx` and dividing by the index's frequency when `scale_grad_by_freq`.
/// Floating dtypes; indices `Long` or `Int`.
///
/// ```
/// use switchboard_tensor::Tensor;
/// let g = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]).unwrap();
/// let idx = Tensor::from_vec(vec![2i64, 0, 2], &[3]).unwrap();
/// let w = switchboard_cpu::embedding_dense_backward(&g, &idx, 3, -1, false).unwrap();
/// assert_eq!(w.to_vec::<f32>().unwrap(), [3.0, 4.0, 0.0, 0.0, 6.0, 8.0]);
/// ```
pub fn embedding_dense_backward(
    grad_output: &Tensor,
    indices: &Tensor,
    num_weights: i64,
    padding_idx: i64,
    scale_grad_by_freq: bool,
) -> Result<Tensor> {
    let device = same_device(&[grad_output, indices])?;
    check_cpu_or_meta("embedding_dense_backward", device)?;
    if !matches!(indices.dtype(), ScalarType::Long | ScalarType::Int) {
        return Err(invalid(format!(
            "Expected tensor for argument #2 'indices' to have one of the following scalar \
             types: Long, Int; but got {} instead (while checking arguments for \
             embedding_backward)",
            indices.type_string()
        )));
    }
    let expected: Vec<i64> = indices
        .sizes()
        .iter()
        .copied()
        .chain(grad_output.sizes().last().copied())
        .collect();
    if grad_output.dim() == 0 || grad_output.sizes() != expected.as_slice() {
        return Err(invalid(format!(
            "embedding_dense_backward: expected grad_output of shape indices.shape + \
             [embedding_dim] = {}, but got {}",
            shape_str(&expected),
            shape_str(grad_output.sizes())
        )));
    }
    if num_weights < 0 {
        return Err(invalid(format!(
            "embedding_dense_backward: num_weights must be non-negative, got {num_weights}"
        )));
    }
    let d = grad_output.sizes()[grad_output.dim() - 1];
    let out = Tensor::zeros_on(&[num_weights, d], grad_output.dtype(), device)?;
    if device.is_meta() {
        return Ok(out);
    }
    let idx = indices.to_vec_as::<i64>()?;
    if let Some(&bad) = idx
        .iter()
        .find(|&&i| i != padding_idx && (i < 0 || i >= num_weights))
    {
        return Err(invalid(format!(
            "embedding_dense_backward: index {bad} is out of range for {num_weights} weights"
        )));
    }
    // Counted per index given, not per weight: `num_weights` is the caller's number, and
    // with an embedding dimension of 0 nothing else bounds it.
    let mut counts: HashMap<i64, u32> = HashMap::new();
    if scale_grad_by_freq {
        for &i in idx.iter().filter(|&&i| i != padding_idx) {
            *counts.entry(i).or_default() += 1;
        }
    }
    let g = grad_output.contiguous()?;
    let d = d as usize;
    // Every dtype, as PyTorch's (an integer gradient scaled by frequency truncates).
    dispatch_all_types_and_bool!(g.dtype(), "embedding_backward", T => {
        let gs = g.data::<T>()?;
        let mut os = out.data_mut::<T>()?;
        // Each task owns a range of weight rows and adds the lookups landing in it, so no two
        // tasks write one row.
        let add_rows = |first: usize, rows: &mut [T]| {
            let n_rows = rows.len().checked_div(d).unwrap_or(0);
            for (k, &i) in idx.iter().enumerate() {
                let r = i as usize;
                if i == padding_idx || r < first || r >= first + n_rows {
                    continue;
                }
                let scale = if scale_grad_by_freq {
                    1.0 / counts[&i] as f64
                } else {
                    1.0
                };
                let s = <<T as CpuElement>::Acc as Num>::from_f64(scale);
                let dst = &mut rows[(r - first) * d..][..d];
                for (o, &v) in dst.iter_mut().zip(&gs[k * d..][..d]) {
                    *o = T::from_acc(o.to_acc().add(v.to_acc().mul(s)));
                }
            }
        };
        let threads = rayon::current_num_threads();
        if d == 0 || idx.len() * d < GRAIN_SIZE || threads <= 1 || in_parallel_region() {
            add_rows(0, &mut os);
        } else {
            let rows_per = (num_weights as usize).div_ceil(threads).max(1);
            os.par_chunks_mut(rows_per * d)
                .enumerate()
                .for_each(|(c, chunk)| parallel_region(|| add_rows(c * rows_per, chunk)));
        }
        Ok(())
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::copy::cast;
    use crate::nn_testutil::{assert_close, ramp};
    use switchboard_tensor::Device;

    #[test]
    fn accumulates_skips_padding_and_scales() {
        let g = ramp(&[2, 3, 4], ScalarType::Double);
        let idx = Tensor::from_vec(vec![1i64, 4, 1, 0, 4, 4], &[2, 3]).unwrap();
        let gv = g.to_vec::<f64>().unwrap();
        let iv = [1usize, 4, 1, 0, 4, 4];
        for (pad, scale) in [(-1, false), (0, false), (4, true)] {
            let w = embedding_dense_backward(&g, &idx, 6, pad, scale).unwrap();
            assert_eq!(w.sizes(), &[6, 4]);
            let mut want = vec![0.0; 24];
            for (k, &r) in iv.iter().enumerate() {
                if r as i64 == pad {
                    continue;
                }
                let cnt = iv.iter().filter(|&&x| x == r).count() as f64;
                for j in 0..4 {
                    want[r * 4 + j] += gv[k * 4 + j] / if scale { cnt } else { 1.0 };
                }
            }
            assert_close(&w.to_vec::<f64>().unwrap(), &want, 1e-12);
        }
        // Int indices, Float grads, the parallel path (many lookups).
        let n = 5000;
        let gi = ramp(&[n, 16], ScalarType::Float);
        let ii: Vec<i32> = (0..n as i32).map(|i| (i * 7) % 97).collect();
        let it = Tensor::from_vec(ii.clone(), &[n as i64]).unwrap();
        let w = embedding_dense_backward(&gi, &it, 97, -1, false).unwrap();
        let gv = gi.to_vec::<f32>().unwrap();
        let mut want = vec![0.0f64; 97 * 16];
        for (k, &r) in ii.iter().enumerate() {
            for j in 0..16 {
                want[r as usize * 16 + j] += gv[k * 16 + j] as f64;
            }
        }
        assert_close(&w.to_vec_as::<f64>().unwrap(), &want, 1e-4);
    }

    #[test]
    fn errors_and_meta() {
        let g = ramp(&[3, 2], ScalarType::Float);
        let idx = Tensor::from_vec(vec![0i64, 1, 7], &[3]).unwrap();
        assert!(embedding_dense_backward(&g, &idx, 5, -1, false)
            .unwrap_err()
            .to_string()
            .contains("index 7 is out of range"));
        let fidx = cast(&idx, ScalarType::Float).unwrap();
        assert_eq!(
            embedding_dense_backward(&g, &fidx, 5, -1, false)
                .unwrap_err()
                .to_string(),
            "Expected tensor for argument #2 'indices' to have one of the following scalar \
             types: Long, Int; but got torch.FloatTensor instead (while checking arguments for \
             embedding_backward)"
        );
        assert!(
            embedding_dense_backward(&ramp(&[4, 2], ScalarType::Float), &idx, 9, -1, false)
                .is_err()
        );
        let m = Tensor::empty_on(&[2, 5, 8], ScalarType::BFloat16, Device::META).unwrap();
        let mi = Tensor::empty_on(&[2, 5], ScalarType::Long, Device::META).unwrap();
        let w = embedding_dense_backward(&m, &mi, 11, 0, true).unwrap();
        assert!(w.is_meta());
        assert_eq!(w.sizes(), &[11, 8]);
        assert_eq!(w.dtype(), ScalarType::BFloat16);
    }

    #[test]
    fn huge_weight_counts_allocate_by_the_indices() {
        // An embedding dimension of 0: the output is empty whatever num_weights is, and the
        // per-weight counts of scale_grad_by_freq must not be allocated per weight.
        let g = Tensor::zeros(&[3, 0], ScalarType::Float).unwrap();
        let idx = Tensor::from_vec(vec![0i64, 1 << 61, 1 << 61], &[3]).unwrap();
        let w = embedding_dense_backward(&g, &idx, 1 << 62, -1, true).unwrap();
        assert_eq!(w.sizes(), &[1 << 62, 0]);
    }
}
