//! Which kernel `scaled_dot_product_attention` runs: PyTorch's CPU selection
//! (`select_sdp_backend_cpp`), flash attention when [`use_flash_attention_cpp`] passes, else
//! the math composite.
//!
//! Note [Choosing the attention kernel]
//! PyTorch's `scaled_dot_product_attention` asks `_fused_sdp_choice` for a backend. On CPU the
//! order is flash, then math; flash (`_scaled_dot_product_flash_attention_for_cpu`) is taken
//! when every gate of `use_flash_attention_cpp` passes: flash enabled
//! ([`set_flash_sdp_enabled`], `torch.backends.cuda.enable_flash_sdp`), no dropout, q, k
//! and v of the same rank 4 (or 3: 2.15 unsqueezes them), one batch size and head count, a
//! mask that does not require grad and broadcasts as `[1|B, 1|H, 1|L, 1|S]` (2-d or 4-d),
//! equal head dims, non-empty sequences, unit last strides, and a floating dtype. Meta
//! tensors (PyTorch's `_fused_sdp_choice_meta`) and every device other than the CPU (the lazy
//! backend included) take math. `requires_grad` is not a criterion: training uses flash and
//! its backward.

use std::sync::atomic::{AtomicBool, Ordering};

use switchboard_autograd::AutogradTensor;
use switchboard_tensor::{ScalarType, Tensor};

/// PyTorch's `SDPBackend` values as `torch._fused_sdp_choice` returns them on CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SdpBackend {
    /// `_scaled_dot_product_attention_math`: the composite of matmul, softmax, where.
    Math = 0,
    /// `_scaled_dot_product_flash_attention_for_cpu`.
    Flash = 1,
}

static FLASH_ENABLED: AtomicBool = AtomicBool::new(true);

/// Enables or disables the flash kernel (`torch.backends.cuda.enable_flash_sdp`); returns
/// the previous setting.
pub fn set_flash_sdp_enabled(enabled: bool) -> bool {
    FLASH_ENABLED.swap(enabled, Ordering::Relaxed)
}

/// Whether the flash kernel may be chosen (`torch.backends.cuda.flash_sdp_enabled()`).
pub fn flash_sdp_enabled() -> bool {
    FLASH_ENABLED.load(Ordering::Relaxed)
}

/// The kernel `scaled_dot_product_attention` runs for these arguments on their device (Note
/// [Choosing the attention kernel]); `torch._fused_sdp_choice` without `enable_gqa`.
///
/// ```
/// use switchboard_nn::{sdp_backend, SdpBackend};
/// use switchboard_tensor::{ScalarType, Tensor};
/// let q = Tensor::zeros(&[2, 4, 16, 8], ScalarType::Float).unwrap();
/// assert_eq!(sdp_backend(&q, &q, &q, None, 0.0), SdpBackend::Flash);
/// assert_eq!(sdp_backend(&q, &q, &q, None, 0.1), SdpBackend::Math);
/// ```
pub fn sdp_backend(
    query: &Tensor,
    key: &Tensor,
    value: &Tensor,
    attn_mask: Option<&Tensor>,
    dropout_p: f64,
) -> SdpBackend {
    if use_flash_attention_cpp(query, key, value, attn_mask, dropout_p) {
        SdpBackend::Flash
    } else {
        SdpBackend::Math
    }
}

/// PyTorch's `use_flash_attention_cpp` (its gates in its order), for CPU tensors only.
fn use_flash_attention_cpp(
    query: &Tensor,
    key: &Tensor,
    value: &Tensor,
    attn_mask: Option<&Tensor>,
    dropout_p: f64,
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
    if q[0] != k[0] || q[0] != v[0] || q[1] != k[1] || q[1] != v[1] {
        return false;
    }
    let (b, h, l, s) = (q[0], q[1], q[2], k[2]);
    if let Some(mask) = attn_mask {
        if mask.requires_grad() || !mask.device().is_cpu() {
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
