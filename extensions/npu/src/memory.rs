//! The backend's memory: host memory tagged as the device. `empty.memory_format` and
//! `empty_strided` allocate it (BackendSelect routes a factory given `device="npu"` here), and
//! `copy_` moves data between it and the CPU, which is all `to("npu")`, `to("cpu")` and the
//! CPU fallback need (`_to_copy` is `empty_like` + `copy_`).

use switchboard::dispatcher::{DispatchErrorKind, Result};
use switchboard::tensor::{
    copy_strided, Device, Layout, MemoryFormat, ScalarType, Storage, Tensor, TensorBuilder,
};

use crate::backend::{check_index, Backend};

fn error(msg: String) -> switchboard::dispatcher::DispatchError {
    DispatchErrorKind::Kernel(msg).into()
}

/// The device a factory of `op` allocates on: one of an installed backend's, index 0 when none
/// is given.
fn factory_device(
    op: &str,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Device> {
    if let Some(layout) = layout.filter(|l| *l != Layout::Strided) {
        return Err(error(format!(
            "{op}: the {} backend only has strided tensors, not {layout:?}",
            device.map_or("private-use".to_string(), |d| d.ty.to_string())
        )));
    }
    if pin_memory == Some(true) {
        return Err(error(
            "Only dense CPU tensors can be pinned, and pinning needs an accelerator".into(),
        ));
    }
    let device = device.ok_or_else(|| error(format!("{op}: no device given")))?;
    let backend = Backend::for_device_type(device.ty).ok_or_else(|| {
        error(format!(
            "{op}: {} is not the device of an installed backend",
            device.ty
        ))
    })?;
    let index = device.index.unwrap_or(0);
    check_index(backend.name(), index)?;
    Ok(Device::with_index(device.ty, index))
}

/// A tensor of `sizes` and `strides` in fresh zeroed host memory tagged as `device`.
pub(crate) fn empty_on(
    sizes: &[i64],
    strides: &[i64],
    dtype: ScalarType,
    device: Device,
) -> Result<Tensor> {
    // A meta tensor checks the geometry and sizes the storage with checked arithmetic.
    let geometry = Tensor::empty_strided(sizes, strides, dtype, Device::META)?;
    let storage = Storage::zeros_host_backed(device, geometry.storage().nbytes(), dtype)?;
    Ok(TensorBuilder::new(storage, dtype)
        .sizes(sizes)
        .strides(strides)
        .device(device)
        .build()?)
}

/// A contiguous tensor in fresh host memory tagged as `device`.
pub(crate) fn empty_contiguous(sizes: &[i64], dtype: ScalarType, device: Device) -> Result<Tensor> {
    let strides = MemoryFormat::Contiguous.strides(sizes)?;
    empty_on(sizes, &strides, dtype, device)
}

/// `empty.memory_format(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None,
/// Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None)`.
pub(crate) fn empty_memory_format(
    size: &[i64],
    dtype: Option<ScalarType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
    memory_format: Option<MemoryFormat>,
) -> Result<Tensor> {
    let device = factory_device("empty.memory_format", layout, device, pin_memory)?;
    let format = memory_format.unwrap_or(MemoryFormat::Contiguous);
    if format == MemoryFormat::Preserve {
        return Err(error("unsupported memory format Preserve".into()));
    }
    let strides = format.strides(size)?;
    empty_on(size, &strides, dtype.unwrap_or(ScalarType::Float), device)
}

/// `empty_strided(SymInt[] size, SymInt[] stride, *, ScalarType? dtype=None, Layout?
/// layout=None, Device? device=None, bool? pin_memory=None)`.
pub(crate) fn empty_strided(
    size: &[i64],
    stride: &[i64],
    dtype: Option<ScalarType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Tensor> {
    let device = factory_device("empty_strided", layout, device, pin_memory)?;
    empty_on(size, stride, dtype.unwrap_or(ScalarType::Float), device)
}

/// `copy_(Tensor(a!) self, Tensor src, bool non_blocking=False)`: between this backend's
/// devices and the CPU, in any direction (the call dispatches here whenever either side is
/// ours, since a private-use backend ranks above the CPU). The bytes are host memory on both
/// sides, so the tensor runtime's strided copy (broadcasting `src`, converting dtypes, safe
/// for overlapping memory) does the transfer.
pub(crate) fn copy_(self_: &Tensor, src: &Tensor, non_blocking: bool) -> Result<Tensor> {
    let _ = non_blocking; // every copy is synchronous here
    if Tensor::ptr_eq(self_, src) {
        return Ok(self_.clone());
    }
    for t in [self_, src] {
        let ours = Backend::for_device_type(t.device().ty).is_some();
        if !(ours || t.is_cpu()) || !t.has_data() {
            return Err(error(format!(
                "copy_: cannot copy from a tensor on {} to a tensor on {}: a {} tensor has \
                 no memory this backend can reach",
                src.device(),
                self_.device(),
                t.device()
            )));
        }
    }
    let (a, b) = (self_.device().ty, src.device().ty);
    if a != b && !self_.is_cpu() && !src.is_cpu() {
        return Err(error(format!(
            "copy_: copies between two private-use backends ({} and {}) go through the CPU",
            src.device(),
            self_.device()
        )));
    }
    copy_strided(src, self_)?;
    Ok(self_.clone())
}
