//! Growing a lazy storage when an `out=` tensor is resized to more elements than its storage
//! holds (Note [Growing storages without data] in switchboard-tensor): a new lazy storage,
//! captured as `zeros` with the old storage's elements copied to its front.

use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::{AnyArc, RawOps, Storage, Tensor, TensorError};

/// The growth function registered for lazy tensors: `needed` bytes of storage and its payload.
pub(crate) fn grow_storage(
    t: &Tensor,
    needed: usize,
) -> switchboard_tensor::Result<(Storage, Option<AnyArc>)> {
    grow(t, needed).map_err(|e| TensorError::invalid(e.to_string()))
}

fn grow(t: &Tensor, needed: usize) -> Result<(Storage, Option<AnyArc>)> {
    let elem = t.element_size();
    // Whole elements: sizes, strides and offset are counted in elements.
    let elements = |bytes: usize| i64::try_from(bytes.div_ceil(elem)).unwrap_or(i64::MAX);
    let grown = ops::zeros_with(
        &[elements(needed)],
        ops::ZerosOptions::default()
            .dtype(t.dtype())
            .device(t.device()),
    )?;
    let kept = elements(t.storage().nbytes());
    if kept > 0 {
        let old = RawOps::as_strided(t, &[kept], &[1], 0)?;
        ops::copy_(&ops::narrow(&grown, 0, 0, kept)?, &old)?;
    }
    Ok((grown.storage().clone(), grown.payload().cloned()))
}
