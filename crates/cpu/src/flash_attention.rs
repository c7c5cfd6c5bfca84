//! PyTorch's fused CPU attention: `_scaled_dot_product_flash_attention_for_cpu` and its
//! backward (the kernel `scaled_dot_product_attention` picks on CPU). This file checks the
//! arguments with PyTorch's messages, lays out the outputs and prepares the operands; the
//! loops are in `flash_attention_kernel.rs`.
//!
//! Note [Flash attention on CPU]
//! The forward never materialises the `[L, S]` attention matrix: each task takes one block
//! of queries of one head (32, 64 or 256 rows by the query length, as PyTorch) and walks the
//! keys in blocks of 512 with an online softmax, keeping per row the running maximum and sum
//! of `exp(score - max)` and rescaling the output accumulator when the maximum grows. It
//! returns the output and the per-row logsumexp (`max + ln(sum)`, in the accumulation type,
//! stored `[B, L, H]` and returned as a `[B, H, L]` view, as PyTorch). The backward
//! recomputes the weights `exp(scale * q k^T + mask - lse)` block by block from that
//! logsumexp, so nothing `[L, S]` is saved for it. Causal attention (the top-left diagonal)
//! skips the key blocks past the diagonal. The products are `gemm_float` calls on the strided
//! blocks of q, k, v (no copies); they run serially inside the parallel loops. Both passes
//! take the exps of f32 rows eight lanes at a time with `exp_f32` (within 1 ulp; PyTorch's
//! forward uses its vector `exp_u20`, its backward its vector `exp`), where a libm `expf`
//! call per element would not vectorise. float16 and bfloat16 compute in f32 on converted
//! copies, rounding the weights (and their gradient) to the input dtype before the products
//! that take them, as PyTorch's reduced-precision kernel does. Grouped-query attention
//! (fewer key/value heads dividing the query heads) maps query head `h` to key/value head `h
//! / (Hq / Hkv)`, and the backward's tasks are (batch, key/value head) so that each owns the
//! gradients it adds to. Deviations: PyTorch reads out of bounds when the batch sizes, head
//! counts or mask shape do not fit the query; here those are errors.

use switchboard_tensor::{Access, MemoryFormat, ScalarType, Tensor};

use crate::copy::{cast, copy_into};
use crate::error::{check_cpu_or_meta, invalid, same_device, shape_str, Result};
use crate::flash_attention_kernel::{backward, forward, Backward, Forward, Operand, Problem};

const PREFIX: &str = "scaled_dot_product_attention_flash_attention: ";

fn err(msg: &str) -> switchboard_tensor::TensorError {
    invalid(format!("{PREFIX}{msg}"))
}

/// The checked geometry of a call.
fn check(
    query: &Tensor,
    key: &Tensor,
    value: &Tensor,
    dropout_p: f64,
    is_causal: bool,
    attn_mask: Option<&Tensor>,
    scale: Option<f64>,
) -> Result<Problem> {
    // PyTorch reads the query's sizes 0..2 first (an index error below 3 dims).
    if query.dim() == 0 {
        return Err(invalid(
            "Dimension specified as 0 but tensor has no dimensions",
        ));
    }
    switchboard_tensor::wrap_dim(2, query.dim())?;
    let dtype = query.dtype();
    if !dtype.is_floating_point() {
        return Err(err(&format!(
            "Expected data type in FP32, FP64, BF16, FP16, but got {} instead.",
            dtype.c10_name()
        )));
    }
    if query.dim() != 4 || key.dim() != 4 || value.dim() != 4 {
        return Err(err("Accept only 4 dims inputs shape of {B, H, T, K}"));
    }
    if dropout_p != 0.0 {
        return Err(err("Currently do not support dropout > 0"));
    }
    let (qs, ks, vs) = (query.sizes(), key.sizes(), value.sizes());
    if qs[3] != vs[3] || ks[3] != vs[3] {
        return Err(err("Q/K/V should have the same head size"));
    }
    if let Some(mask) = attn_mask {
        if mask.dtype() != ScalarType::Float && mask.dtype() != dtype {
            return Err(err("Attention mask is the same data type as query"));
        }
        if mask.dim() != 2 && mask.dim() != 4 {
            return Err(err("Attention mask dim in {2, 4}"));
        }
    }
    let mut all = vec![query, key, value];
    all.extend(attn_mask);
    check_cpu_or_meta(
        "_scaled_dot_product_flash_attention_for_cpu",
        same_device(&all)?,
    )?;
    // Checks PyTorch does not make (its kernel reads out of bounds instead).
    if key.dtype() != dtype || value.dtype() != dtype {
        return Err(err(&format!(
            "Expected query, key and value to have the same dtype, but got {}, {} and {}",
            dtype.c10_name(),
            key.dtype().c10_name(),
            value.dtype().c10_name()
        )));
    }
    if !matches!(
        dtype,
        ScalarType::Float | ScalarType::Double | ScalarType::BFloat16 | ScalarType::Half
    ) {
        return Err(crate::error::not_implemented("flash_attention", dtype));
    }
    let (hq, hkv) = (qs[1], ks[1]);
    if ks[0] != qs[0]
        || vs[0] != qs[0]
        || ks[2] != vs[2]
        || vs[1] != hkv
        || hkv == 0 && hq != 0
        || hkv != 0 && hq % hkv != 0
    {
        return Err(err(&format!(
            "expected key and value of the query's batch size, the same number of keys and \
             of heads dividing the query's, but got query {}, key {} and value {}",
            shape_str(qs),
            shape_str(ks),
            shape_str(vs)
        )));
    }
    if let Some(mask) = attn_mask {
        let ms = mask.sizes();
        let want = [qs[0], hq, qs[2], ks[2]];
        let fits = ms
            .iter()
            .zip(&want[4 - ms.len()..])
            .all(|(&m, &w)| m == 1 || m == w);
        if !fits {
            return Err(err(&format!(
                "expected an attention mask broadcastable to {}, but got {}",
                shape_str(&want),
                shape_str(ms)
            )));
        }
    }
    let e = qs[3] as usize;
    Ok(Problem {
        batch: qs[0] as usize,
        q_heads: hq as usize,
        kv_heads: (hkv as usize).max(1),
        l: qs[2] as usize,
        s: ks[2] as usize,
        e,
        ev: vs[3] as usize,
        // sdp::calculate_scale.
        scale: scale.unwrap_or(1.0 / (e as f64).sqrt()),
        causal: is_causal,
    })
}

/// The accumulation dtype (PyTorch's opmath type).
fn acc_dtype(dtype: ScalarType) -> ScalarType {
    if dtype == ScalarType::Double {
        ScalarType::Double
    } else {
        ScalarType::Float
    }
}

/// A 4-d tensor as an [`Operand`].
fn operand(t: &Tensor) -> Operand {
    let s = t.strides();
    Operand {
        ptr: t.data_ptr() as usize,
        sb: s[0] as isize,
        sh: s[1] as isize,
        sm: s[2] as isize,
        se: s[3] as isize,
    }
}

/// The mask in `acc` with broadcast strides (0 along its size-1 dims), as `[B, H, L, S]`.
fn mask_operand(mask: &Tensor) -> Operand {
    let (sz, st) = (mask.sizes(), mask.strides());
    let lead = 4 - sz.len();
    let stride = |d: usize| -> isize {
        if d < lead || sz[d - lead] == 1 {
            0
        } else {
            st[d - lead] as isize
        }
    };
    Operand {
        ptr: mask.data_ptr() as usize,
        sb: stride(0),
        sh: stride(1),
        sm: stride(2),
        se: stride(3),
    }
}

/// The `[B, H, L]` logsumexp stored as `[B, L, H]`.
fn lse_operand(lse: &Tensor) -> Operand {
    let s = lse.strides();
    Operand {
        ptr: lse.data_ptr() as usize,
        sb: s[0] as isize,
        sh: s[1] as isize,
        sm: s[2] as isize,
        se: 0,
    }
}

/// An uninitialised (zeroed) tensor of `sizes` `[B, H, M, E]` stored as `[B, M, H, E]`.
fn empty_blhe(sizes: &[i64], dtype: ScalarType, like: &Tensor) -> Result<Tensor> {
    let (h, m, e) = (sizes[1], sizes[2], sizes[3]);
    let strides = [m * h * e, e, h * e, 1];
    Tensor::empty_strided(sizes, &strides, dtype, like.device())
}

/// Rounds an f32 to `dtype` and back (the reduced-precision kernels' rounding of the weights).
fn rounding(dtype: ScalarType) -> Option<fn(f32) -> f32> {
    match dtype {
        ScalarType::BFloat16 => Some(|x| switchboard_tensor::bf16::from_f32(x).to_f32()),
        ScalarType::Half => Some(|x| switchboard_tensor::f16::from_f32(x).to_f32()),
        _ => None,
    }
}

/// `_scaled_dot_product_flash_attention_for_cpu(Tensor query, Tensor key, Tensor value, float
/// dropout_p=0.0, bool is_causal=False, *, Tensor? attn_mask=None, float? scale=None) ->
/// (Tensor output, Tensor logsumexp)`: `softmax(scale * q k^T + mask) v` over `[B, H, L, E]`
/// queries, `[B, Hkv, S, E]` keys and `[B, Hkv, S, E]` values (Note [Flash attention on
/// CPU]). The output has the query's strides (`empty_like`); the logsumexp is `[B, H, L]` in
/// the accumulation dtype (f32, or f64 for f64 inputs), stored `[B, L, H]`.
///
/// ```
/// use switchboard_tensor::Tensor;
/// let q = Tensor::from_vec(vec![1.0f32, 0.0, 0.0, 1.0], &[1, 1, 2, 2]).unwrap();
/// use switchboard_cpu::_scaled_dot_product_flash_attention_for_cpu as flash;
/// let (out, lse) = flash(&q, &q, &q, 0.0, true, None, None).unwrap();
/// // The first query sees only the first key.
/// assert_eq!(out.to_vec::<f32>().unwrap()[..2], [1.0, 0.0]);
/// assert_eq!(lse.sizes(), &[1, 1, 2]);
/// ```
pub fn _scaled_dot_product_flash_attention_for_cpu(
    query: &Tensor,
    key: &Tensor,
    value: &Tensor,
    dropout_p: f64,
    is_causal: bool,
    attn_mask: Option<&Tensor>,
    scale: Option<f64>,
) -> Result<(Tensor, Tensor)> {
    let p = check(query, key, value, dropout_p, is_causal, attn_mask, scale)?;
    let dtype = query.dtype();
    let acc = acc_dtype(dtype);
    let out = query.empty_like_as(MemoryFormat::Preserve)?;
    let (b, h, l) = (p.batch as i64, p.q_heads as i64, p.l as i64);
    let lse = Tensor::empty_strided(&[b, h, l], &[l * h, 1, h], acc, query.device())?;
    if query.device().is_meta() || out.numel() == 0 {
        return Ok((out, lse));
    }
    let (q, k, v) = (cast(query, acc)?, cast(key, acc)?, cast(value, acc)?);
    let mask = attn_mask.map(|m| cast(m, acc)).transpose()?;
    let out_acc = if acc == dtype {
        out.clone()
    } else {
        Tensor::empty_on(out.sizes(), acc, out.device())?
    };
    {
        let mut reads = vec![&q, &k, &v];
        reads.extend(mask.as_ref());
        let _access = Access::new(&reads, &[&out_acc, &lse])?;
        macro_rules! run {
            ($a:ty, $round:expr) => {{
                let f = Forward::<$a> {
                    q: operand(&q),
                    k: operand(&k),
                    v: operand(&v),
                    mask: mask.as_ref().map(mask_operand),
                    out: operand(&out_acc),
                    lse: lse_operand(&lse),
                    round: $round,
                };
                // SAFETY: `_access` borrows the operands (the outputs exclusively, fresh
                // tensors disjoint from the inputs and dense); the operands' sizes were
                // checked against `p` (the mask broadcasts to [B, H, L, S]) and their strides
                // are their own; kv_heads divides q_heads.
                unsafe { forward::<$a>(&p, &f) }
            }};
        }
        if acc == ScalarType::Double {
            run!(f64, None)
        } else {
            run!(f32, rounding(dtype))
        }
    }
    if acc != dtype {
        copy_into(&out, &out_acc)?;
    }
    Ok((out, lse))
}

/// `_scaled_dot_product_flash_attention_for_cpu_backward(Tensor grad_out, Tensor query,
/// Tensor key, Tensor value, Tensor out, Tensor logsumexp, float dropout_p, bool is_causal, *,
/// Tensor? attn_mask=None, float? scale=None) -> (Tensor grad_query, Tensor grad_key, Tensor
/// grad_value)`: the gradients of [`_scaled_dot_product_flash_attention_for_cpu`] from the
/// output's gradient, recomputing the weights from `logsumexp` (Note [Flash attention on
/// CPU]). The gradients have the inputs' shapes, stored `[B, M, H, E]` as PyTorch's.
#[allow(clippy::too_many_arguments)]
pub fn _scaled_dot_product_flash_attention_for_cpu_backward(
    grad_out: &Tensor,
    query: &Tensor,
    key: &Tensor,
    value: &Tensor,
    out: &Tensor,
    logsumexp: &Tensor,
    dropout_p: f64,
    is_causal: bool,
    attn_mask: Option<&Tensor>,
    scale: Option<f64>,
) -> Result<(Tensor, Tensor, Tensor)> {
    let p = check(query, key, value, dropout_p, is_causal, attn_mask, scale)?;
    let dtype = query.dtype();
    let acc = acc_dtype(dtype);
    let (b, h, l) = (p.batch as i64, p.q_heads as i64, p.l as i64);
    let out_sizes = [b, h, l, p.ev as i64];
    if grad_out.sizes() != out_sizes
        || out.sizes() != out_sizes
        || logsumexp.sizes() != [b, h, l]
        || grad_out.dtype() != dtype
        || out.dtype() != dtype
        || logsumexp.dtype() != acc
    {
        return Err(err(&format!(
            "expected grad_out and out of shape {} and dtype {}, and logsumexp of shape {} \
             and dtype {}, but got {} {}, {} {} and {} {}",
            shape_str(&out_sizes),
            dtype.c10_name(),
            shape_str(&[b, h, l]),
            acc.c10_name(),
            shape_str(grad_out.sizes()),
            grad_out.dtype().c10_name(),
            shape_str(out.sizes()),
            out.dtype().c10_name(),
            shape_str(logsumexp.sizes()),
            logsumexp.dtype().c10_name()
        )));
    }
    same_device(&[query, grad_out, out, logsumexp])?;
    let grads = [query, key, value].map(|t| empty_blhe(t.sizes(), dtype, t));
    let [gq, gk, gv] = grads;
    let (gq, gk, gv) = (gq?, gk?, gv?);
    if query.device().is_meta() || gq.numel() + gk.numel() + gv.numel() == 0 {
        return Ok((gq, gk, gv));
    }
    let c = |t: &Tensor| cast(t, acc);
    let (q, k, v, dout, o) = (c(query)?, c(key)?, c(value)?, c(grad_out)?, c(out)?);
    let mask = attn_mask.map(|m| cast(m, acc)).transpose()?;
    // Accumulated into: `empty_strided` gives zeroed CPU memory.
    let acc_grads = if acc == dtype {
        [gq.clone(), gk.clone(), gv.clone()]
    } else {
        [
            empty_blhe(gq.sizes(), acc, &gq)?,
            empty_blhe(gk.sizes(), acc, &gk)?,
            empty_blhe(gv.sizes(), acc, &gv)?,
        ]
    };
    {
        let mut reads = vec![&q, &k, &v, &dout, &o, logsumexp];
        reads.extend(mask.as_ref());
        let _access = Access::new(&reads, &[&acc_grads[0], &acc_grads[1], &acc_grads[2]])?;
        macro_rules! run {
            ($a:ty, $round:expr) => {{
                let f = Backward::<$a> {
                    q: operand(&q),
                    k: operand(&k),
                    v: operand(&v),
                    mask: mask.as_ref().map(mask_operand),
                    dout: operand(&dout),
                    out: operand(&o),
                    lse: lse_operand(logsumexp),
                    dq: operand(&acc_grads[0]),
                    dk: operand(&acc_grads[1]),
                    dv: operand(&acc_grads[2]),
                    round: $round,
                };
                // SAFETY: as in the forward: `_access` borrows the operands (the gradients
                // exclusively: fresh, dense and disjoint), whose shapes were checked against
                // `p`.
                unsafe { backward::<$a>(&p, &f) }
            }};
        }
        if acc == ScalarType::Double {
            run!(f64, None)
        } else {
            run!(f32, rounding(dtype))
        }
    }
    if acc != dtype {
        copy_into(&gq, &acc_grads[0])?;
        copy_into(&gk, &acc_grads[1])?;
        copy_into(&gv, &acc_grads[2])?;
    }
    Ok((gq, gk, gv))
}
