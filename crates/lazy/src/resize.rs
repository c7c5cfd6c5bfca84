//! Growing a lazy storage when an `out=` tensor is resized to more elements than its storage
//! holds (Note [Growing storages without data] in switchboard-tensor): a new lazy storage,
//! captured as the old storage's elements padded with zeros.

use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::{AnyArc, Storage, Tensor, TensorError};

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
    let (kept, wanted) = (elements(t.storage().nbytes()), elements(needed));
    // Lazy values have no views (Note [Lazy values]): the old elements are copied out whole
    // and padded with zeros.
    let grown = if kept > 0 {
        let old = ops::as_strided_copy_with(
            t,
            &[kept],
            &[1],
            ops::AsStridedCopyOptions::default().storage_offset(0),
        )?;
        ops::constant_pad_nd(&old, &[0, wanted.saturating_sub(kept)])?
    } else {
        ops::zeros_with(
            &[wanted],
            ops::ZerosOptions::default()
                .dtype(t.dtype())
                .device(t.device()),
        )?
    };
    Ok((grown.storage().clone(), grown.payload().cloned()))
}
