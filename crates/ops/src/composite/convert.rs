//! Conversions and copies: `to`, `_to_copy`, `clone`.

use switchboard_dispatcher::{AutoDispatchBelowADInplaceOrView, Result};
use switchboard_tensor::{Device, Layout, MemoryFormat, ScalarType, Tensor};

use super::error;

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

/// `_to_copy` (CompositeExplicitAutograd, as in PyTorch): an empty tensor of the target dtype
/// and device laid out like `self` (`empty_like`: the same strides with the preserve format,
/// the default), then `copy_`. The copy dispatches on both tensors, so moving data between
/// devices is the business of the copy kernel of the backend with the higher priority (the
/// lazy backend's `copy_` materialises a lazy source or captures a CPU one; an out-of-tree
/// backend's `copy_` copies to and from its memory), and a new backend gets `to(device)` both
/// ways by implementing `empty_strided`, `empty.memory_format` and `copy_`.
#[allow(clippy::too_many_arguments)]
pub fn _to_copy(
    self_: &Tensor,
    dtype: Option<ScalarType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
    non_blocking: bool,
    memory_format: Option<MemoryFormat>,
) -> Result<Tensor> {
    if pin_memory == Some(true) {
        return Err(error(
            "Only dense CPU tensors can be pinned, and pinning needs an accelerator",
        ));
    }
    // Below ADInplaceOrView, as PyTorch's autograd kernels call composites: the fresh
    // result's version stays 0 (the copy is part of `_to_copy`, not an in-place op on it).
    let _below = AutoDispatchBelowADInplaceOrView::new();
    let out = crate::empty_like_with(
        self_,
        crate::EmptyLikeOptions {
            dtype,
            layout,
            device,
            memory_format,
            ..Default::default()
        },
    )?;
    crate::copy_with_(
        &out,
        self_,
        crate::CopyInplaceOptions::default().non_blocking(non_blocking),
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
