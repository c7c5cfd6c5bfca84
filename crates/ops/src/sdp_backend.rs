//! The attention backends `scaled_dot_product_attention` chooses among, and the switch that
//! turns the flash kernel off (PyTorch's `torch.backends.cuda.enable_flash_sdp`, a global
//! setting of its `Context`, which the CPU's choice reads too).

use std::sync::atomic::{AtomicBool, Ordering};

use switchboard_dispatcher::Result;
use switchboard_tensor::Tensor;

/// PyTorch's `SDPBackend`, as `_fused_sdp_choice` answers (the two a CPU chooses from).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SdpBackend {
    /// `_scaled_dot_product_attention_math`: the composite of matmul, softmax and dropout.
    Math = 0,
    /// `_scaled_dot_product_flash_attention_for_cpu`.
    Flash = 1,
}

static FLASH_ENABLED: AtomicBool = AtomicBool::new(true);

/// Enables or disables the flash kernel (`torch.backends.cuda.enable_flash_sdp`) for the whole
/// process; returns the previous setting.
pub fn set_flash_sdp_enabled(enabled: bool) -> bool {
    FLASH_ENABLED.swap(enabled, Ordering::Relaxed)
}

/// Whether the flash kernel may be chosen (`torch.backends.cuda.flash_sdp_enabled()`).
pub fn flash_sdp_enabled() -> bool {
    FLASH_ENABLED.load(Ordering::Relaxed)
}

/// The kernel `scaled_dot_product_attention` would run for these arguments, asked of their
/// device as it asks (Note [Asking the device for the attention kernel]): the answer of
/// `torch._fused_sdp_choice`, with math on a device that has no choice kernel.
///
/// ```
/// use switchboard_ops::{sdp_backend, SdpBackend};
/// use switchboard_tensor::{ScalarType, Tensor};
/// let q = Tensor::zeros(&[2, 4, 16, 8], ScalarType::Float).unwrap();
/// let choice = sdp_backend(&q, &q, &q, None, 0.1, false, false).unwrap();
/// assert_eq!(choice, SdpBackend::Math); // dropout rules the fused kernel out
/// ```
pub fn sdp_backend(
    query: &Tensor,
    key: &Tensor,
    value: &Tensor,
    attn_mask: Option<&Tensor>,
    dropout_p: f64,
    is_causal: bool,
    enable_gqa: bool,
) -> Result<SdpBackend> {
    let choice = crate::composite::fused_sdp_choice(
        query, key, value, attn_mask, dropout_p, is_causal, None, enable_gqa,
    )?;
    Ok(if choice == SdpBackend::Flash as i64 {
        SdpBackend::Flash
    } else {
        SdpBackend::Math
    })
}
