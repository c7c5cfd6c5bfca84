//! The backwards of `_embedding_bag` (Note [Embedding bags]): the weight's gradient
//! (`_embedding_bag_backward`, dense only, through `_embedding_bag_dense_backward`) and the
//! per-sample weights' (`_embedding_bag_per_sample_weights_backward`).

use std::collections::HashMap;

use switchboard_tensor::{RawOps, ScalarType, Tensor};

use crate::dispatch_dtype::{FloatElement, Num};
use crate::dispatch_floating_types;
use crate::embedding_bag::{check_index, check_index_dtype, check_offsets, offset2bag_of, BagMode};
use crate::error::{check_cpu_or_meta, invalid, same_device, shape_str, Result};

/// The `(bags, D)` gradient's checks: 2-d, floating.
fn check_grad(op: &str, grad: &Tensor) -> Result<()> {
    if grad.dim() != 2 {
        return Err(invalid(format!(
            "{op}: expected grad to be 2-D (bags, embedding_dim), but got sizes {}",
            shape_str(grad.sizes())
        )));
    }
    if !grad.dtype().is_floating_point() {
        return Err(crate::error::not_implemented(op, grad.dtype()));
    }
    Ok(())
}

/// The bag of every index: `offset2bag` when given, else computed from `offsets` (PyTorch's
/// backwards recompute it when the forward's fast path left it empty). Bags outside
/// `0..bags` are an error (PyTorch reads out of bounds).
fn bags_of(
    op: &str,
    n: usize,
    offsets: Option<&Tensor>,
    offset2bag: &Tensor,
    bags: i64,
) -> Result<Vec<i64>> {
    let o2b = match offsets {
        Some(offsets) if n != 0 && offset2bag.numel() == 0 => {
            let offs = offsets.to_vec_as::<i64>()?;
            check_offsets(&offs, n as i64)?;
            offset2bag_of(&offs, n)
        }
        _ => {
            check_index_dtype("offset2bag", offset2bag)?;
            if offset2bag.numel() as usize != n {
                return Err(invalid(format!(
                    "{op}: expected offset2bag to have one entry per index ({n}), but got sizes \
                     {}",
                    shape_str(offset2bag.sizes())
                )));
            }
            offset2bag.to_vec_as::<i64>()?
        }
    };
    if let Some(&b) = o2b.iter().find(|&&b| b >= bags) {
        return Err(invalid(format!(
            "{op}: offset2bag holds bag {b}, but grad has {bags} bags"
        )));
    }
    Ok(o2b)
}

/// `_embedding_bag_backward(Tensor grad, Tensor indices, Tensor offsets, Tensor offset2bag,
/// Tensor bag_size, Tensor maximum_indices, SymInt num_weights, bool scale_grad_by_freq, int
/// mode, bool sparse, Tensor? per_sample_weights, int padding_idx=-1) -> Tensor`: the weight's
/// gradient. Sparse gradients need sparse tensors, which the runtime does not have.
#[allow(clippy::too_many_arguments)]
pub fn _embedding_bag_backward(
    grad: &Tensor,
    indices: &Tensor,
    offsets: &Tensor,
    offset2bag: &Tensor,
    bag_size: &Tensor,
    maximum_indices: &Tensor,
    num_weights: i64,
    scale_grad_by_freq: bool,
    mode: i64,
    sparse: bool,
    per_sample_weights: Option<&Tensor>,
    padding_idx: i64,
) -> Result<Tensor> {
    check_index_dtype("indices", indices)?;
    check_index_dtype("offsets", offsets)?;
    if sparse {
        return Err(invalid(
            "_embedding_bag_backward: sparse gradients (sparse=True) need sparse tensors, which \
             are not supported; use sparse=False",
        ));
    }
    let n = indices.numel() as usize;
    let o2b;
    let offset2bag = if n != 0 && offset2bag.numel() == 0 && !grad.device().is_meta() {
        let offs = offsets.to_vec_as::<i64>()?;
        check_offsets(&offs, n as i64)?;
        o2b = crate::embedding_bag::longs(offset2bag_of(&offs, n), &[n as i64], ScalarType::Long)?;
        &o2b
    } else {
        offset2bag
    };
    _embedding_bag_dense_backward(
        grad,
        indices,
        offset2bag,
        bag_size,
        maximum_indices,
        num_weights,
        scale_grad_by_freq,
        mode,
        per_sample_weights,
        padding_idx,
    )
}

/// `_embedding_bag_dense_backward(Tensor grad, Tensor indices, Tensor offset2bag, Tensor
/// bag_size, Tensor maximum_indices, SymInt num_weights, bool scale_grad_by_freq, int mode,
/// Tensor? per_sample_weights, int padding_idx=-1) -> Tensor`: a `(num_weights, D)` gradient.
/// Sum and mean add each index's bag gradient to its row (over the bag's size in mean mode,
/// over the index's count with `scale_grad_by_freq`, times its per-sample weight), skipping
/// `padding_idx`; max adds each non-empty bag's gradient to the rows its maxima came from.
#[allow(clippy::too_many_arguments)]
pub fn _embedding_bag_dense_backward(
    grad: &Tensor,
    indices: &Tensor,
    offset2bag: &Tensor,
    bag_size: &Tensor,
    maximum_indices: &Tensor,
    num_weights: i64,
    scale_grad_by_freq: bool,
    mode: i64,
    per_sample_weights: Option<&Tensor>,
    padding_idx: i64,
) -> Result<Tensor> {
    let op = "_embedding_bag_dense_backward";
    let mut all = vec![grad, indices, offset2bag, bag_size, maximum_indices];
    all.extend(per_sample_weights);
    let device = same_device(&all)?;
    check_cpu_or_meta(op, device)?;
    check_grad(op, grad)?;
    check_index_dtype("indices", indices)?;
    let mode = BagMode::from_i64(mode)?;
    if num_weights < 0 {
        return Err(invalid(format!(
            "{op}: num_weights must be non-negative, got {num_weights}"
        )));
    }
    let (bags, d) = (grad.sizes()[0], grad.sizes()[1]);
    if let Some(p) = per_sample_weights {
        if mode != BagMode::Sum {
            return Err(invalid(
                "embedding_bag: per_sample_weights only supported with mode='sum'",
            ));
        }
        if p.numel() != indices.numel() {
            return Err(invalid(format!(
                "{op}: expected per_sample_weights to have one entry per index ({}), but got \
                 sizes {}",
                indices.numel(),
                shape_str(p.sizes())
            )));
        }
    }
    let out = Tensor::zeros_on(&[num_weights, d], grad.dtype(), device)?;
    if device.is_meta() {
        return Ok(out);
    }
    if bag_size.numel() != bags {
        return Err(invalid(format!(
            "{op}: expected bag_size to have one entry per bag ({bags}), but got sizes {}",
            shape_str(bag_size.sizes())
        )));
    }
    let sizes = bag_size.to_vec_as::<i64>()?;
    let g = grad.contiguous()?;
    let d_u = d as usize;
    if mode == BagMode::Max {
        if maximum_indices.sizes() != [bags, d] {
            return Err(invalid(format!(
                "{op}: expected maximum_indices of sizes {}, but got {}",
                shape_str(&[bags, d]),
                shape_str(maximum_indices.sizes())
            )));
        }
        let mi = maximum_indices.to_vec_as::<i64>()?;
        // (element of out, element of grad) per column of each non-empty bag.
        let mut pairs = Vec::new();
        for (b, &s) in sizes.iter().enumerate() {
            if s == 0 {
                continue;
            }
            for c in 0..d_u {
                let row = mi[b * d_u + c];
                check_index(row, num_weights)?;
                pairs.push((row as usize * d_u + c, b * d_u + c));
            }
        }
        dispatch_floating_types!(grad.dtype(), op, T => {
            scatter_elements::<T>(&g.data::<T>()?, &mut out.data_mut::<T>()?, &pairs);
            Ok(())
        })?;
        return Ok(out);
    }
    let idx = indices.to_vec_as::<i64>()?;
    let o2b = bags_of(op, idx.len(), None, offset2bag, bags)?;
    let psw = per_sample_weights
        .map(|p| p.to_vec_as::<f64>())
        .transpose()?;
    let mut counts: HashMap<i64, u32> = HashMap::new();
    if scale_grad_by_freq {
        for &i in &idx {
            *counts.entry(i).or_default() += 1;
        }
    }
    let mut plan = Vec::with_capacity(idx.len());
    for (i, (&row, &b)) in idx.iter().zip(&o2b).enumerate() {
        if row == padding_idx || b < 0 {
            continue;
        }
        check_index(row, num_weights)?;
        let mut scale = 1.0f64;
        if scale_grad_by_freq {
            scale /= f64::from(counts[&row]);
        }
        if mode == BagMode::Mean && sizes[b as usize] != 0 {
            scale /= sizes[b as usize] as f64;
        }
        if let Some(p) = &psw {
            scale *= p[i];
        }
        plan.push((row as usize, b as usize, scale));
    }
    dispatch_floating_types!(grad.dtype(), op, T => {
        scatter_rows::<T>(&g.data::<T>()?, &mut out.data_mut::<T>()?, d_u, &plan);
        Ok(())
    })?;
    Ok(out)
}

/// `out[row] += grad[bag] * scale` for each `(row, bag, scale)`, in the compute type.
fn scatter_rows<T: FloatElement>(g: &[T], out: &mut [T], d: usize, plan: &[(usize, usize, f64)]) {
    let mut acc = vec![<T::F as Num>::ZERO; out.len()];
    for &(row, bag, scale) in plan {
        let s = <T::F as Num>::from_f64(scale);
        let src = &g[bag * d..][..d];
        for (a, x) in acc[row * d..][..d].iter_mut().zip(src) {
            *a = a.add(x.to_acc().mul(s));
        }
    }
    for (o, a) in out.iter_mut().zip(acc) {
        *o = T::from_acc(a);
    }
}

/// `out[dst] += grad[src]` for each `(dst, src)` element pair.
fn scatter_elements<T: FloatElement>(g: &[T], out: &mut [T], pairs: &[(usize, usize)]) {
    let mut acc = vec![<T::F as Num>::ZERO; out.len()];
    for &(dst, src) in pairs {
        acc[dst] = acc[dst].add(g[src].to_acc());
    }
    for (o, a) in out.iter_mut().zip(acc) {
        *o = T::from_acc(a);
    }
}

/// `_embedding_bag_per_sample_weights_backward(Tensor grad, Tensor weight, Tensor indices,
/// Tensor offsets, Tensor offset2bag, int mode, int padding_idx=-1) -> Tensor`: for each
/// index, the dot product of its bag's gradient with its weight row (0 for `padding_idx`).
#[allow(clippy::too_many_arguments)]
pub fn _embedding_bag_per_sample_weights_backward(
    grad: &Tensor,
    weight: &Tensor,
    indices: &Tensor,
    offsets: &Tensor,
    offset2bag: &Tensor,
    mode: i64,
    padding_idx: i64,
) -> Result<Tensor> {
    let op = "_embedding_bag_per_sample_weights_backward";
    let device = same_device(&[grad, weight, indices, offsets, offset2bag])?;
    check_cpu_or_meta(op, device)?;
    if BagMode::from_i64(mode)? != BagMode::Sum {
        return Err(invalid(
            "embedding_bag_backward: per_sample_weights only supported for mode='sum'",
        ));
    }
    check_grad(op, grad)?;
    check_index_dtype("indices", indices)?;
    check_index_dtype("offsets", offsets)?;
    if indices.dim() != 1 {
        return Err(invalid(format!(
            "{op}: expected 1-D indices, but got sizes {}",
            shape_str(indices.sizes())
        )));
    }
    if weight.dim() != 2 || weight.sizes()[1] != grad.sizes()[1] {
        return Err(invalid(format!(
            "{op}: expected weight of sizes [num_weights, {}], but got {}",
            grad.sizes()[1],
            shape_str(weight.sizes())
        )));
    }
    if weight.dtype() != grad.dtype() {
        return Err(invalid(format!(
            "expected scalar type {} but found {}",
            grad.dtype().c10_name(),
            weight.dtype().c10_name()
        )));
    }
    let n = indices.numel();
    let out = Tensor::zeros_on(&[n], grad.dtype(), device)?;
    if device.is_meta() {
        return Ok(out);
    }
    let idx = indices.to_vec_as::<i64>()?;
    let o2b = bags_of(op, n as usize, Some(offsets), offset2bag, grad.sizes()[0])?;
    let num_weights = weight.sizes()[0];
    let rows = Rows {
        idx: &idx,
        o2b: &o2b,
        padding_idx,
        num_weights,
        d: grad.sizes()[1] as usize,
    };
    let (g, w) = (grad.contiguous()?, weight.contiguous()?);
    dispatch_floating_types!(grad.dtype(), op, T => {
        rows.dots::<T>(&g.data::<T>()?, &w.data::<T>()?, &mut out.data_mut::<T>()?)
    })?;
    Ok(out)
}

/// Each index's row and bag, for the per-sample weights' gradient.
struct Rows<'a> {
    idx: &'a [i64],
    o2b: &'a [i64],
    padding_idx: i64,
    num_weights: i64,
    d: usize,
}

impl Rows<'_> {
    /// `out[i]`: the dot product of index `i`'s bag gradient and weight row.
    fn dots<T: FloatElement>(&self, g: &[T], w: &[T], out: &mut [T]) -> Result<()> {
        let d = self.d;
        for (i, (&row, &b)) in self.idx.iter().zip(self.o2b).enumerate() {
            if row == self.padding_idx || b < 0 {
                continue;
            }
            check_index(row, self.num_weights)?;
            let (gr, wr) = (&g[b as usize * d..][..d], &w[row as usize * d..][..d]);
            let dot = gr.iter().zip(wr).fold(<T::F as Num>::ZERO, |a, (x, y)| {
                a.add(x.to_acc().mul(y.to_acc()))
            });
            out[i] = T::from_acc(dot);
        }
        Ok(())
    }
}
