//! `_fused_sdp_choice` on CPU and Meta: which kernel `scaled_dot_product_attention` runs.
//!
//! Note [Choosing the attention kernel]
//! PyTorch's CPU order is flash, then math (`select_sdp_backend_cpp`). Flash
//! (`_scaled_dot_product_flash_attention_for_cpu`) is taken when every gate of
//! `use_flash_attention_cpp` passes: flash enabled (`switchboard_ops::set_flash_sdp_enabled`),
//! no dropout, q, k and v of the same rank 4 (or 3: 2.15's CPU branch unsqueezes them), one
//! batch size, one head count (or, with `enable_gqa`, key and value heads equal and dividing
//! the query's), a mask that does not require grad and broadcasts as `[1|B, 1|H, 1|L, 1|S]`
//! (2-d or 4-d), equal head dims, non-empty sequences, unit last strides, and a floating
//! dtype. `requires_grad` of q, k, v is not a gate: training uses flash and its backward.
//! Meta tensors answer math, as PyTorch's `_fused_sdp_choice_meta` does for a tensor of no
//! accelerator.

use switchboard_ops::{flash_sdp_enabled, SdpBackend};
use switchboard_tensor::{ScalarType, Tensor};

use crate::error::Result;

/// `_fused_sdp_choice` (CPU and Meta kernel): an `SdpBackend` value (Note [Choosing the
/// attention kernel]).
#[allow(clippy::too_many_arguments)]
pub fn _fused_sdp_choice(
    query: &Tensor,
    key: &Tensor,
    value: &Tensor,
    attn_mask: Option<&Tensor>,
    dropout_p: f64,
    _is_causal: bool,
    _scale: Option<f64>,
    enable_gqa: bool,
) -> Result<i64> {
    let flash = use_flash_attention_cpp(query, key, value, attn_mask, dropout_p, enable_gqa);
    Ok(if flash {
        SdpBackend::Flash
    } else {
        SdpBackend::Math
    } as i64)
}

/// PyTorch's `use_flash_attention_cpp`, its gates in its order.
fn use_flash_attention_cpp(
    query: &Tensor,
    key: &Tensor,
    value: &Tensor,
    attn_mask: Option<&Tensor>,
    dropout_p: f64,
    enable_gqa: bool,
) -> bool {
    let all = [query, key, value];
    if !flash_sdp_enabled() || all.iter().any(|t| !t.device().is_cpu()) {
        return false;
    }
    if dropout_p > 0.0 {
        return false;
    }
    let nd = query.dim();
    if !(nd == 3 || nd == 4) || key.dim() != nd || value.dim() != nd {
        return false;
    }
    // The 4-d sizes (a 3-d input is one batch).
    let four = |t: &Tensor| -> [i64; 4] {
        let s = t.sizes();
        if nd == 3 {
            [1, s[0], s[1], s[2]]
        } else {
            [s[0], s[1], s[2], s[3]]
        }
    };
    let (q, k, v) = (four(query), four(key), four(value));
    if q[0] != k[0] || q[0] != v[0] {
        return false;
    }
    let heads_ok = if enable_gqa {
        // `check_grouped_query_attention`: key and value heads equal and dividing the query's.
        k[1] == v[1] && k[1] != 0 && q[1] % k[1] == 0
    } else {
        q[1] == k[1] && q[1] == v[1]
    };
    if !heads_ok {
        return false;
    }
    let (b, h, l, s) = (q[0], q[1], q[2], k[2]);
    if let Some(mask) = attn_mask {
        if mask.requires_grad_hint() || !mask.device().is_cpu() {
            return false;
        }
        let ms = mask.sizes();
        let md = ms.len();
        // A 3-d mask of 3-d inputs is unsqueezed with them.
        let four_d = md == 4 || (md == 3 && nd == 3);
        if !(md == 2 || four_d) {
            return false;
        }
        let (ml, mss) = (ms[md - 2], ms[md - 1]);
        if !(ml == l || ml == 1) || !(mss == s || mss == 1) {
            return false;
        }
        if md == 4 && (!(ms[0] == 1 || ms[0] == b) || !(ms[1] == 1 || ms[1] == h)) {
            return false;
        }
        if md == 3 && !(ms[0] == 1 || ms[0] == h) {
            return false;
        }
    }
    if q[3] != k[3] || q[3] != v[3] {
        return false;
    }
    if l <= 0 || s <= 0 {
        return false;
    }
    if all.iter().any(|t| t.strides()[nd - 1] != 1) {
        return false;
    }
    let dtype = query.dtype();
    matches!(
        dtype,
        ScalarType::Float | ScalarType::Double | ScalarType::BFloat16 | ScalarType::Half
    ) && key.dtype() == dtype
        && value.dtype() == dtype
}
