//! Copies and conversions: `copy_`, `clone`, `contiguous`, `_to_copy`, and the dtype cast the
//! iterator uses for promoted inputs.

use switchboard_tensor::{
    convert, dispatch_dtype, Device, Layout, MemoryFormat, ScalarType, StorageElement, Tensor,
    TensorError,
};

use crate::error::{check_cpu_or_meta, shape_str, Result};
use crate::iter::{reorder_dims, strides_for_perm, IterConfig};
use crate::{dispatch_all_types_and_bool, dispatch_dtype::CpuElement};

/// An empty tensor with `t`'s sizes, laid out in `t`'s stride order (`empty_like` with
/// `preserve_format` for dense tensors), of `dtype` on `device`.
pub fn empty_like_layout(t: &Tensor, dtype: ScalarType, device: Device) -> Result<Tensor> {
    if t.is_contiguous() {
        return Tensor::empty_on(t.sizes(), dtype, device);
    }
    let perm = reorder_dims(t.sizes(), &[t.strides()]);
    let strides = strides_for_perm(t.sizes(), &perm);
    Tensor::empty_strided(t.sizes(), &strides, dtype, device)
}

/// An empty tensor like `t` in memory format `format` (`Preserve`: `t`'s stride order).
pub fn empty_like_format(
    t: &Tensor,
    dtype: ScalarType,
    device: Device,
    format: MemoryFormat,
) -> Result<Tensor> {
    match format {
        MemoryFormat::Preserve => empty_like_layout(t, dtype, device),
        f => Tensor::empty_with_format(t.sizes(), dtype, device, f),
    }
}

/// `t` converted to `dtype` (the same tensor if it already has it). Zero-dim CPU tensors are
/// converted directly; others keep their stride order.
pub fn cast(t: &Tensor, dtype: ScalarType) -> Result<Tensor> {
    if t.dtype() == dtype {
        return Ok(t.clone());
    }
    if t.dim() == 0 && t.is_cpu() {
        return Ok(Tensor::scalar_tensor(t.item()?, dtype));
    }
    let out = empty_like_layout(t, dtype, t.device())?;
    if t.has_data() {
        copy_into(&out, t)?;
    }
    Ok(out)
}

/// Copies `src` into `dst` elementwise, broadcasting `src` and converting its dtype (the body
/// of `copy_`, without its early exits).
pub fn copy_into(dst: &Tensor, src: &Tensor) -> Result<()> {
    let iter = IterConfig::new("copy_")
        .out(dst)
        .input_exact(src)
        .out_dtype(dst.dtype())
        .check_out_cast(false)
        .broadcast_to_out()
        .build()?;
    if src.dtype().is_complex() || dst.dtype().is_complex() {
        return copy_complex(&iter, src.dtype(), dst.dtype());
    }
    if src.dtype() == dst.dtype() {
        return dispatch_all_types_and_bool!(src.dtype(), "copy_", T => iter.for_each1(|x: T| x));
    }
    dispatch_all_types_and_bool!(src.dtype(), "copy_", S => {
        dispatch_all_types_and_bool!(dst.dtype(), "copy_", D => {
            iter.for_each1(|x: S| convert::<S, D>(x))
        })
    })
}

/// A copy from or to a complex dtype, with C++'s casts (Note [Complex elements] in
/// switchboard-tensor); complex to real warns once, as PyTorch's `copy_`.
fn copy_complex(iter: &crate::iter::TensorIter, src: ScalarType, dst: ScalarType) -> Result<()> {
    if src.is_complex() && !dst.is_complex() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        switchboard_dispatcher::warn_once(
            &ONCE,
            "Casting complex values to real discards the imaginary part",
        );
    }
    dispatch_dtype!(src, S => {
        dispatch_dtype!(dst, D => {
            iter.for_each1(|x: S| D::from_complex(x.to_complex()))
        }, D => {
            iter.for_each1(|x: S| D::from_complex(x.to_complex()))
        })
    }, S => {
        dispatch_dtype!(dst, D => {
            iter.for_each1(|x: S| D::from_complex(x.to_complex()))
        }, D => {
            iter.for_each1(|x: S| D::from_complex(x.to_complex()))
        })
    })
}

/// `copy_(self, src, non_blocking=False)`: copies `src` (broadcast to `self`'s shape, any dtype)
/// into `self` and returns `self`. Meta tensors only check shapes.
///
/// ```
/// use switchboard_cpu::copy_;
/// use switchboard_tensor::{ScalarType, Tensor};
/// let dst = Tensor::zeros(&[2, 2], ScalarType::Float).unwrap();
/// copy_(&dst, &Tensor::from_vec(vec![1i64, 2], &[2]).unwrap(), false).unwrap();
/// assert_eq!(dst.to_vec::<f32>().unwrap(), [1.0, 2.0, 1.0, 2.0]);
/// ```
pub fn copy_(self_: &Tensor, src: &Tensor, non_blocking: bool) -> Result<Tensor> {
    let _ = non_blocking;
    if Tensor::ptr_eq(self_, src) {
        return Ok(self_.clone());
    }
    let same_data = self_.is_alias_of(src)
        && self_.storage_offset() == src.storage_offset()
        && self_.strides() == src.strides()
        && self_.sizes() == src.sizes()
        && self_.dtype() == src.dtype();
    if same_data {
        return Ok(self_.clone());
    }
    if self_.has_data() && !src.has_data() {
        return Err(TensorError::invalid(
            "Cannot copy out of meta tensor; no data!",
        ));
    }
    if !self_.has_data() {
        // A copy into a tensor without data only checks that `src` broadcasts to it, with the
        // messages of the CPU's iterator (PyTorch's meta copy_ gives the CPU's).
        let shape = switchboard_tensor::infer_size(self_.sizes(), src.sizes())?;
        if &shape[..] != self_.sizes() {
            return Err(TensorError::invalid(format!(
                "output with shape {} doesn't match the broadcast shape {}",
                shape_str(self_.sizes()),
                shape_str(&shape)
            )));
        }
        return Ok(self_.clone());
    }
    copy_into(self_, src)?;
    Ok(self_.clone())
}

/// `clone(self, *, memory_format=None)`: a copy with its own storage (`None` and `Preserve`
/// keep the input's stride order).
pub fn clone(self_: &Tensor, memory_format: Option<MemoryFormat>) -> Result<Tensor> {
    check_cpu_or_meta("clone", self_.device())?;
    let format = memory_format.unwrap_or(MemoryFormat::Preserve);
    let out = empty_like_format(self_, self_.dtype(), self_.device(), format)?;
    if self_.has_data() {
        copy_into(&out, self_)?;
    }
    Ok(out)
}

/// `contiguous(self, *, memory_format=contiguous_format)`: `self` if it is contiguous in that
/// format, else a copy that is.
pub fn contiguous(self_: &Tensor, memory_format: MemoryFormat) -> Result<Tensor> {
    if memory_format == MemoryFormat::Preserve {
        return Err(TensorError::invalid(
            "preserve memory format is unsupported by the contiguous operator",
        ));
    }
    if self_.is_contiguous_as(memory_format) {
        return Ok(self_.clone());
    }
    clone(self_, Some(memory_format))
}

/// `_to_copy(self, *, dtype=None, layout=None, device=None, pin_memory=None,
/// non_blocking=False, memory_format=None)`: a copy converted to `dtype` and moved to `device`
/// (CPU or meta; copying from meta to the CPU fails as in PyTorch).
pub fn _to_copy(
    self_: &Tensor,
    dtype: Option<ScalarType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
    non_blocking: bool,
    memory_format: Option<MemoryFormat>,
) -> Result<Tensor> {
    let _ = (layout, non_blocking);
    if pin_memory == Some(true) {
        return Err(TensorError::invalid(
            "Only dense CPU tensors can be pinned, and pinning needs an accelerator",
        ));
    }
    let dtype = dtype.unwrap_or(self_.dtype());
    let device = device.unwrap_or(self_.device());
    check_cpu_or_meta("_to_copy", device)?;
    check_cpu_or_meta("_to_copy", self_.device())?;
    let format = memory_format.unwrap_or(MemoryFormat::Preserve);
    let out = empty_like_format(self_, dtype, device, format)?;
    if !out.has_data() {
        return Ok(out);
    }
    if !self_.has_data() {
        return Err(TensorError::invalid(
            "Cannot copy out of meta tensor; no data!",
        ));
    }
    copy_into(&out, self_)?;
    Ok(out)
}

/// Reads one element of `t` (any dtype) as `T`'s compute type: for scalar arguments given as
/// zero-dim tensors.
pub fn scalar_value<T: CpuElement>(t: &Tensor) -> Result<T::Acc> {
    let v = t.item()?;
    Ok(v.to::<T>().to_acc())
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_tensor::RawOps;

    #[test]
    fn conversions_and_layouts() {
        let t = Tensor::from_vec(vec![1.5f32, -2.5, 3.0, 4.0], &[2, 2]).unwrap();
        let tt = t.t().unwrap();
        let c = cast(&tt, ScalarType::Long).unwrap();
        assert_eq!(c.strides(), &[1, 2], "stride order is kept");
        assert_eq!(c.to_vec::<i64>().unwrap(), [1, 3, -2, 4]);
        let k = clone(&tt, Some(MemoryFormat::Contiguous)).unwrap();
        assert!(k.is_contiguous());
        assert_eq!(k.to_vec::<f32>().unwrap(), [1.5, 3.0, -2.5, 4.0]);
        let m = _to_copy(
            &t,
            Some(ScalarType::Half),
            None,
            Some(Device::META),
            None,
            false,
            None,
        )
        .unwrap();
        assert!(m.is_meta());
        assert_eq!(m.dtype(), ScalarType::Half);
        assert!(_to_copy(&m, None, None, Some(Device::CPU), None, false, None).is_err());
        let b = _to_copy(&t, Some(ScalarType::Bool), None, None, None, false, None).unwrap();
        assert_eq!(b.to_vec::<bool>().unwrap(), [true; 4]);
    }

    #[test]
    fn copy_broadcasts_and_checks() {
        let dst = Tensor::zeros(&[2, 3], ScalarType::Int).unwrap();
        let src = Tensor::from_vec(vec![1.9f64, 2.0, 3.0], &[3]).unwrap();
        copy_(&dst, &src, false).unwrap();
        assert_eq!(dst.to_vec::<i32>().unwrap(), [1, 2, 3, 1, 2, 3]);
        let bad = Tensor::zeros(&[4], ScalarType::Int).unwrap();
        assert!(copy_(&dst, &bad, false).is_err());
    }
}
