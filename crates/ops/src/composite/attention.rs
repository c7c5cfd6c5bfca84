//! Scaled dot-product attention: `scaled_dot_product_attention`, which picks a kernel, and its
//! math path `_scaled_dot_product_attention_math` with `_safe_softmax`.
//!
//! Note [Attention as a composite]
//! `scaled_dot_product_attention` is CompositeImplicitAutograd, as in PyTorch: it checks its
//! arguments, asks the query's device which kernel to run (Note [Asking the device for the
//! attention kernel]), turns a boolean mask into an additive one, and calls either the fused
//! kernel (`_scaled_dot_product_flash_attention_for_cpu`, with its own derivative) or the math
//! composite, which autograd, autocast, tracers and the lazy backend see operator by operator.
//! The math path follows PyTorch's op for op: half and bfloat16 inputs computed in float (its
//! `allowFP16BF16ReductionMathSDP` default), `sqrt(scale)` multiplying queries and keys each
//! (which keeps the scores' magnitude), the causal mask as `ones(L, S).tril()` made additive,
//! grouped-query heads repeated with `repeat_interleave`, `_safe_softmax` (a row whose every
//! score is `-inf` attends to nothing: zeros, not NaN), then dropout.
//!
//! Note [Asking the device for the attention kernel]
//! PyTorch asks a per-device-type function (`_fused_sdp_choice_stub`, a DispatchStub) for the
//! backend; no operator call, so dispatch modes and tracers never see the question. Here the
//! question is the `_fused_sdp_choice` operator, asked by redispatching straight to the
//! kernel registered at the query's backend key: the same effect (nothing above that key sees
//! it), and an out-of-tree backend answers by registering a kernel, as PyTorch's PrivateUse1
//! backends register the stub. A device without such a kernel (the lazy backend) runs math,
//! as PyTorch does on a device whose stub is empty; Meta's kernel answers math.

use switchboard_dispatcher::{DispatchKeySet, Result};
use switchboard_tensor::{wrap_dim, Layout, MemoryFormat, ScalarType, Tensor};

use super::error;
use crate::SdpBackend;

const SDP_MATH: i64 = SdpBackend::Math as i64;
const SDP_FLASH: i64 = SdpBackend::Flash as i64;

/// `scaled_dot_product_attention` (CompositeImplicitAutograd): `softmax(q k^T * scale + mask)
/// v` over the last two dims, by the kernel the device chooses (Note [Attention as a
/// composite]).
#[allow(clippy::too_many_arguments)]
pub fn scaled_dot_product_attention(
    query: &Tensor,
    key: &Tensor,
    value: &Tensor,
    attn_mask: Option<&Tensor>,
    dropout_p: f64,
    is_causal: bool,
    scale: Option<f64>,
    enable_gqa: bool,
) -> Result<Tensor> {
    validate_sdpa_input(query, key, value, attn_mask, is_causal)?;
    let choice = fused_sdp_choice(
        query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa,
    )?;
    let mask = convert_boolean_attn_mask(attn_mask, query.dtype())?;
    match choice {
        SDP_FLASH => flash_for_cpu(
            query,
            key,
            value,
            mask.as_ref(),
            dropout_p,
            is_causal,
            scale,
        ),
        SDP_MATH => Ok(crate::_scaled_dot_product_attention_math_with(
            query,
            key,
            value,
            crate::ScaledDotProductAttentionMathOptions {
                attn_mask: mask.as_ref(),
                dropout_p,
                is_causal,
                dropout_mask: None,
                scale,
                enable_gqa,
            },
        )?
        .0),
        _ => Err(error(
            "No viable backend for scaled_dot_product_attention was found.",
        )),
    }
}

/// The device's answer to `_fused_sdp_choice` (Note [Asking the device for the attention
/// kernel]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn fused_sdp_choice(
    query: &Tensor,
    key: &Tensor,
    value: &Tensor,
    attn_mask: Option<&Tensor>,
    dropout_p: f64,
    is_causal: bool,
    scale: Option<f64>,
    enable_gqa: bool,
) -> Result<i64> {
    let Ok(backend) = query.device().ty.dense_key() else {
        return Ok(SDP_MATH);
    };
    if !crate::handles::_fused_sdp_choice()
        .handle()
        .has_kernel_for_dispatch_key(backend)
    {
        return Ok(SDP_MATH);
    }
    crate::redispatch::_fused_sdp_choice(
        DispatchKeySet::from_key(backend),
        query,
        key,
        value,
        attn_mask,
        dropout_p,
        is_causal,
        scale,
        enable_gqa,
    )
}

/// PyTorch's `validate_sdpa_input`.
fn validate_sdpa_input(
    query: &Tensor,
    key: &Tensor,
    value: &Tensor,
    attn_mask: Option<&Tensor>,
    is_causal: bool,
) -> Result<()> {
    if query.dtype() != key.dtype() || query.dtype() != value.dtype() {
        return Err(error(format!(
            "Expected query, key, and value to have the same dtype, but got query.dtype: {} \
             key.dtype: {} and value.dtype: {} instead.",
            query.dtype().type_meta_name(),
            key.dtype().type_meta_name(),
            value.dtype().type_meta_name()
        )));
    }
    if query.device() != key.device() || query.device() != value.device() {
        return Err(error(format!(
            "Expected query, key, and value to have the same device type, but got \
             query.device: {} key.device: {} and value.device: {} instead.",
            query.device(),
            key.device(),
            value.device()
        )));
    }
    if query.dim() < 2 || key.dim() < 2 || value.dim() < 2 {
        return Err(error(format!(
            "Expected query, key, and value to all be  at least 2 dimensional, but got \
             query.dim: {} key.dim: {} and value.dim: {} instead.",
            query.dim(),
            key.dim(),
            value.dim()
        )));
    }
    if let Some(mask) = attn_mask {
        let md = mask.dtype();
        if md != ScalarType::Bool && md != ScalarType::Float && md != query.dtype() {
            return Err(error(format!(
                "Expected attn_mask dtype to be bool or float or to match query dtype, but got \
                 attn_mask.dtype: {} and  query.dtype: {} instead.",
                md.type_meta_name(),
                query.dtype().type_meta_name()
            )));
        }
        if is_causal {
            return Err(causal_with_mask());
        }
    }
    Ok(())
}

fn causal_with_mask() -> switchboard_dispatcher::DispatchError {
    error(
        "_scaled_dot_product_attention: Explicit attn_mask should not be set when \
         is_causal=True",
    )
}

/// PyTorch's `convert_boolean_attn_mask`: a boolean mask (true: attend) becomes 0 where true
/// and `-inf` elsewhere, in `dtype`; a float mask is already additive.
fn convert_boolean_attn_mask(mask: Option<&Tensor>, dtype: ScalarType) -> Result<Option<Tensor>> {
    let Some(mask) = mask else {
        return Ok(None);
    };
    if mask.dtype() != ScalarType::Bool {
        return Ok(Some(mask.clone()));
    }
    let device = Some(mask.device());
    let neg_inf = crate::scalar_tensor_with(
        f64::NEG_INFINITY,
        crate::ScalarTensorOptions {
            dtype: Some(dtype),
            device,
            ..Default::default()
        },
    )?;
    let zero = crate::scalar_tensor_with(
        0.0,
        crate::ScalarTensorOptions {
            dtype: Some(dtype),
            layout: Some(Layout::Strided),
            device,
            ..Default::default()
        },
    )?;
    Ok(Some(crate::r#where(mask, &zero, &neg_inf)?))
}

/// The flash branch on CPU: 3-d inputs (and a 3-d mask) gain a batch dimension of 1, as
/// PyTorch 2.15's CPU branch does.
fn flash_for_cpu(
    query: &Tensor,
    key: &Tensor,
    value: &Tensor,
    mask: Option<&Tensor>,
    dropout_p: f64,
    is_causal: bool,
    scale: Option<f64>,
) -> Result<Tensor> {
    let batched = query.dim() != 3;
    let four = |t: &Tensor| {
        if batched {
            Ok(t.clone())
        } else {
            crate::unsqueeze(t, 0)
        }
    };
    let mask = match mask {
        Some(m) if !batched && m.dim() == 3 => Some(crate::unsqueeze(m, 0)?),
        m => m.cloned(),
    };
    let (out, _logsumexp) = crate::_scaled_dot_product_flash_attention_for_cpu_with(
        &four(query)?,
        &four(key)?,
        &four(value)?,
        crate::ScaledDotProductFlashAttentionForCpuOptions {
            dropout_p,
            is_causal,
            attn_mask: mask.as_ref(),
            scale,
        },
    )?;
    if batched {
        Ok(out)
    } else {
        crate::squeeze_dim(&out, 0)
    }
}

/// `_scaled_dot_product_attention_math` (CompositeImplicitAutograd): the output and the
/// attention weights, computed op by op as PyTorch's math path (Note [Attention as a
/// composite]). `dropout_mask` (true: keep) replaces the random dropout, for testing.
#[allow(clippy::too_many_arguments)]
pub fn _scaled_dot_product_attention_math(
    query: &Tensor,
    key: &Tensor,
    value: &Tensor,
    attn_mask: Option<&Tensor>,
    dropout_p: f64,
    is_causal: bool,
    dropout_mask: Option<&Tensor>,
    scale: Option<f64>,
    enable_gqa: bool,
) -> Result<(Tensor, Tensor)> {
    let origin_dtype = query.dtype();
    // `.to(kFloat)` for half and bfloat16, as PyTorch's math path.
    let accurate = |t: &Tensor| -> Result<Tensor> {
        if matches!(t.dtype(), ScalarType::Half | ScalarType::BFloat16) {
            crate::to(t, ScalarType::Float)
        } else {
            Ok(t.clone())
        }
    };
    let (query, key, value) = (accurate(query)?, accurate(key)?, accurate(value)?);
    let negative = scale.is_some_and(|s| s < 0.0);
    let e = query.size(-1)?;
    let factor = scale
        .map(f64::abs)
        .unwrap_or_else(|| 1.0 / (e as f64).sqrt())
        .sqrt();
    let query = crate::mul_scalar(&query, if negative { 0.0 - factor } else { factor })?;
    let mut mask = attn_mask.cloned();
    if is_causal {
        if mask.is_some() {
            return Err(causal_with_mask());
        }
        let (l, s) = (query.size(-2)?, key.size(-2)?);
        let ones = crate::ones_with(
            &[l, s],
            crate::OnesOptions {
                dtype: Some(ScalarType::Bool),
                layout: Some(Layout::Strided),
                device: Some(query.device()),
                ..Default::default()
            },
        )?;
        mask = convert_boolean_attn_mask(Some(&crate::tril(&ones)?), query.dtype())?;
    }
    let (key, value) = repeat_kv_heads(&query, &key, &value, enable_gqa)?;
    let scaled_key_t = crate::mul_scalar(&crate::transpose(&key, -2, -1)?, factor)?;
    let mut attn = crate::matmul(&query, &scaled_key_t)?;
    if let Some(mask) = &mask {
        attn = crate::add(&attn, mask)?;
    }
    let mut attn = crate::_safe_softmax(&attn, -1)?;
    let mut value = value;
    if dropout_p > 0.0 {
        match dropout_mask {
            Some(keep) => {
                attn = crate::masked_fill(&attn, &crate::logical_not(keep)?, 0.0)?;
                value = crate::mul_scalar(&value, 1.0 / (1.0 - dropout_p))?;
            }
            None => attn = crate::dropout(&attn, dropout_p, true)?,
        }
    }
    // PyTorch converts the weights first (its tuple's arguments are evaluated right to left).
    let weights = crate::to(&attn, origin_dtype)?;
    let out = crate::to(&crate::matmul(&attn, &value)?, origin_dtype)?;
    Ok((out, weights))
}

/// PyTorch's `pre_process_group_query_attention_input`: with `enable_gqa`, key and value
/// heads repeated to the query's head count.
fn repeat_kv_heads(
    query: &Tensor,
    key: &Tensor,
    value: &Tensor,
    enable_gqa: bool,
) -> Result<(Tensor, Tensor)> {
    if !enable_gqa {
        return Ok((key.clone(), value.clone()));
    }
    let (hq, hk, hv) = (query.size(-3)?, key.size(-3)?, value.size(-3)?);
    if hq == hk && hk == hv {
        return Ok((key.clone(), value.clone()));
    }
    if hk == 0 || hv == 0 || hq % hk != 0 || hq % hv != 0 {
        return Err(error(
            "Number of heads in key and value must divide the number of heads in query",
        ));
    }
    Ok((
        crate::repeat_interleave_with(
            key,
            hq / hk,
            crate::RepeatInterleaveOptions {
                dim: Some(-3),
                ..Default::default()
            },
        )?,
        crate::repeat_interleave_with(
            value,
            hq / hv,
            crate::RepeatInterleaveOptions {
                dim: Some(-3),
                ..Default::default()
            },
        )?,
    ))
}

/// `_safe_softmax` (CompositeExplicitAutograd): `softmax`, with zeros for a row whose every
/// element is `-inf` (softmax would give NaN there). A row is all `-inf` exactly when its
/// maximum is (PyTorch asks `all(self == -inf)`; a NaN fails both tests).
pub fn _safe_softmax(self_: &Tensor, dim: i64, dtype: Option<ScalarType>) -> Result<Tensor> {
    let out = crate::softmax_with(self_, dim, crate::SoftmaxOptions { dtype })?;
    let options = |layout| crate::ScalarTensorOptions {
        dtype: Some(out.dtype()),
        layout,
        device: Some(out.device()),
        ..Default::default()
    };
    let neg_inf = crate::scalar_tensor_with(f64::NEG_INFINITY, options(None))?;
    let row_max = crate::amax_with(
        self_,
        crate::AmaxOptions {
            dim: &[dim],
            keepdim: true,
        },
    )?;
    let masked_rows = crate::eq(&row_max, &neg_inf)?;
    let zero = crate::scalar_tensor_with(0.0, options(None))?;
    crate::r#where(&masked_rows, &zero, &out)
}

/// `repeat_interleave.self_int` (CompositeImplicitAutograd): each slice along `dim` repeated
/// `repeats` times in place (the flattened input when `dim` is None), as PyTorch's
/// unsqueeze, expand, contiguous clone and flatten.
pub fn repeat_interleave(
    self_: &Tensor,
    repeats: i64,
    dim: Option<i64>,
    output_size: Option<i64>,
) -> Result<Tensor> {
    let input = match dim {
        Some(_) => self_.clone(),
        None => crate::flatten(self_)?,
    };
    let dim = wrap_dim(dim.unwrap_or(0), self_.dim())?;
    if repeats < 0 {
        return Err(error("Repeats must be non-negative"));
    }
    if let Some(size) = output_size {
        let expected = input
            .sizes()
            .get(dim)
            .copied()
            .unwrap_or(1)
            .checked_mul(repeats)
            .ok_or_else(|| error("repeat_interleave: the output size overflows"))?;
        if size != expected {
            return Err(error(format!(
                "repeat_interleave: Invalid output_size, expected {expected} but got {size}"
            )));
        }
    }
    let inserted = dim as i64 + 1;
    let unsqueezed = crate::unsqueeze(&input, inserted)?;
    let mut sizes = unsqueezed.sizes().to_vec();
    sizes[dim + 1] = repeats;
    let expanded = crate::expand(&unsqueezed, &sizes)?;
    let copy = crate::clone_with(
        &expanded,
        crate::CloneOptions {
            memory_format: Some(MemoryFormat::Contiguous),
        },
    )?;
    crate::flatten_with(
        &copy,
        crate::FlattenOptions {
            start_dim: dim as i64,
            end_dim: inserted,
        },
    )
}

/// `repeat_interleave.self_Tensor` (CompositeImplicitAutograd): slice `i` along `dim` (of the
/// flattened input when `dim` is None) repeated `repeats[i]` times, or every slice the one
/// count of a 0-dim or 1-element `repeats`; as PyTorch's, an `index_select` with the indices
/// `repeat_interleave.Tensor` makes.
pub fn repeat_interleave_self_tensor(
    self_: &Tensor,
    repeats: &Tensor,
    dim: Option<i64>,
    output_size: Option<i64>,
) -> Result<Tensor> {
    let (input, dim) = match dim {
        Some(d) => (self_.clone(), d),
        None => (crate::flatten(self_)?, 0),
    };
    if input.dim() == 0 {
        return Err(error(format!(
            "Dimension specified as {dim} but tensor has no dimensions"
        )));
    }
    let size = input.sizes()[wrap_dim(dim, input.dim())?];
    let repeats = match repeats.dim() {
        0 => crate::expand(&crate::reshape(repeats, &[1])?, &[size])?,
        1 if repeats.sizes()[0] == 1 => crate::expand(repeats, &[size])?,
        1 if repeats.sizes()[0] == size => repeats.clone(),
        1 => {
            return Err(error(format!(
                "repeats must have the same size as input along dim, but got repeats.size(0) = \
                 {} and input.size({dim}) = {size}",
                repeats.sizes()[0]
            )))
        }
        _ => return Err(error("repeats must be 0-dim or 1-dim tensor")),
    };
    let index = crate::repeat_interleave_tensor_with(
        &repeats,
        crate::RepeatInterleaveTensorOptions { output_size },
    )?;
    crate::index_select(&input, dim, &index)
}
