//! Conversions and copies: `to`, `clone`.

use switchboard_dispatcher::Result;
use switchboard_tensor::{Device, MemoryFormat, ScalarType, Tensor};

fn needs_copy(
    self_: &Tensor,
    dtype: ScalarType,
    device: Device,
    copy: bool,
    mf: Option<MemoryFormat>,
) -> bool {
    let format_ok = match mf {
        None | Some(MemoryFormat::Preserve) => true,
        Some(f) => self_.is_contiguous_as(f),
    };
    copy || self_.dtype() != dtype || self_.device() != device || !format_ok
}

/// `to.dtype` (CompositeImplicitAutograd): `self` when nothing changes and no copy is
/// asked for, else `_to_copy`.
pub fn to(
    self_: &Tensor,
    dtype: ScalarType,
    non_blocking: bool,
    copy: bool,
    memory_format: Option<MemoryFormat>,
) -> Result<Tensor> {
    if !needs_copy(self_, dtype, self_.device(), copy, memory_format) {
        return Ok(self_.clone());
    }
    crate::_to_copy_with(
        self_,
        crate::ToCopyOptions {
            dtype: Some(dtype),
            non_blocking,
            memory_format,
            ..Default::default()
        },
    )
}

/// `to.device` (CompositeImplicitAutograd).
pub fn to_device(
    self_: &Tensor,
    device: Device,
    dtype: ScalarType,
    non_blocking: bool,
    copy: bool,
    memory_format: Option<MemoryFormat>,
) -> Result<Tensor> {
    if !needs_copy(self_, dtype, device, copy, memory_format) {
        return Ok(self_.clone());
    }
    crate::_to_copy_with(
        self_,
        crate::ToCopyOptions {
            dtype: Some(dtype),
            device: Some(device),
            non_blocking,
            memory_format,
            ..Default::default()
        },
    )
}

/// `clone` (CompositeExplicitAutograd): `empty_like` in `memory_format` (preserve by
/// default), then `copy_`.
pub fn clone(self_: &Tensor, memory_format: Option<MemoryFormat>) -> Result<Tensor> {
    let out = crate::empty_like_with(
        self_,
        crate::EmptyLikeOptions {
            memory_format,
            ..Default::default()
        },
    )?;
    crate::copy_(&out, self_)
}
