//! Factories and fills: `empty.memory_format`, `empty_strided`, `fill_.Scalar`,
//! `fill_.Tensor`, `zero_` and `arange.start_out`. Factories take their device from the
//! `device` argument (`None` is the CPU); on the meta device they make meta tensors.

use switchboard_tensor::{
    bf16, f16, Access, Device, Element, Layout, MemoryFormat, RawOps, Scalar, ScalarType,
    StridedOffsets, Tensor,
};

use crate::copy::{clone, copy_};
use crate::dispatch_all_types_and_bool;
use crate::error::{check_cpu_or_meta, invalid, not_implemented, Result};
use crate::iter::{check_internal_overlap, IterConfig};
use crate::promote::DEFAULT_FLOAT;

fn check_factory_options(
    op: &str,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Device> {
    let device = device.unwrap_or(Device::CPU);
    check_cpu_or_meta(op, device)?;
    if let Some(l) = layout {
        if l != Layout::Strided {
            return Err(invalid(format!("{op}: unsupported layout {l}")));
        }
    }
    if pin_memory == Some(true) {
        return Err(invalid(
            "Need to provide pin_memory allocator to use pin memory.",
        ));
    }
    Ok(device)
}

/// `empty.memory_format(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None,
/// Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor`
///
/// An uninitialised (here zeroed) tensor; `dtype` defaults to Float, `memory_format` to
/// contiguous.
///
/// ```
/// use switchboard_cpu::empty_memory_format;
/// use switchboard_tensor::{Device, MemoryFormat};
/// let t = empty_memory_format(&[2, 3, 4, 5], None, None, None, None,
///                             Some(MemoryFormat::ChannelsLast)).unwrap();
/// assert_eq!(t.strides(), &[60, 1, 15, 3]);
/// let m = empty_memory_format(&[2], None, None, Some(Device::META), None, None).unwrap();
/// assert!(m.is_meta());
/// ```
pub fn empty_memory_format(
    size: &[i64],
    dtype: Option<ScalarType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
    memory_format: Option<MemoryFormat>,
) -> Result<Tensor> {
    let device = check_factory_options("empty.memory_format", layout, device, pin_memory)?;
    let dtype = dtype.unwrap_or(DEFAULT_FLOAT);
    match memory_format.unwrap_or(MemoryFormat::Contiguous) {
        MemoryFormat::Preserve => Err(invalid("unsupported memory format Preserve")),
        f => Tensor::empty_with_format(size, dtype, device, f),
    }
}

/// `empty_strided(SymInt[] size, SymInt[] stride, *, ScalarType? dtype=None, Layout?
/// layout=None, Device? device=None, bool? pin_memory=None) -> Tensor`
pub fn empty_strided(
    size: &[i64],
    stride: &[i64],
    dtype: Option<ScalarType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Tensor> {
    let device = check_factory_options("empty_strided", layout, device, pin_memory)?;
    Tensor::empty_strided(size, stride, dtype.unwrap_or(DEFAULT_FLOAT), device)
}

/// `self` with its broadcast (zero-stride) dimensions collapsed to size 1: the same memory
/// locations, each once, so that a fill may write them (fill is idempotent: PyTorch's
/// `fill_` skips the overlap check).
fn distinct_locations(t: &Tensor) -> Result<Tensor> {
    if !t
        .strides()
        .iter()
        .zip(t.sizes())
        .any(|(&st, &s)| st == 0 && s > 1)
    {
        return Ok(t.clone());
    }
    let sizes: Vec<i64> = t
        .sizes()
        .iter()
        .zip(t.strides())
        .map(|(&s, &st)| if st == 0 { s.min(1) } else { s })
        .collect();
    t.as_strided(&sizes, t.strides(), t.storage_offset())
}

/// `fill_.Scalar(Tensor(a!) self, Scalar value) -> Tensor(a!)`
///
/// Sets every element to `value` (checked against the dtype's range as c10 does).
///
/// ```
/// use switchboard_cpu::fill_scalar_;
/// use switchboard_tensor::{Scalar, ScalarType, Tensor};
/// let t = Tensor::zeros(&[3], ScalarType::Byte).unwrap();
/// fill_scalar_(&t, Scalar::Int(-1)).unwrap(); // wraps, as in PyTorch
/// assert_eq!(t.to_vec::<u8>().unwrap(), [255; 3]);
/// assert!(fill_scalar_(&t, Scalar::Int(300)).is_err());
/// ```
pub fn fill_scalar_(self_: &Tensor, value: Scalar) -> Result<Tensor> {
    check_cpu_or_meta("fill_", self_.device())?;
    if self_.dtype().is_complex() {
        // A real Scalar into a complex tensor: the real part, checked against the part type.
        value.check_fits(self_.dtype())?;
        crate::dispatch_complex_types!(self_.dtype(), "fill_cpu", C => {
            let v = <C as switchboard_tensor::StorageElement>::from_complex(value.to_complex());
            if self_.has_data() && self_.numel() > 0 {
                let target = distinct_locations(self_)?;
                let iter = IterConfig::new("fill_").out(&target).build()?;
                iter.for_each0(move || v)?;
            }
            Ok(())
        })?;
        return Ok(self_.clone());
    }
    dispatch_all_types_and_bool!(self_.dtype(), "fill_cpu", T => {
        let v = value.checked_to::<T>()?;
        if self_.has_data() && self_.numel() > 0 {
            let target = distinct_locations(self_)?;
            let iter = IterConfig::new("fill_").out(&target).build()?;
            iter.for_each0(move || v)?;
        }
        Ok(())
    })?;
    Ok(self_.clone())
}

/// `fill_.Tensor(Tensor(a!) self, Tensor value) -> Tensor(a!)`
///
/// Sets every element to the zero-dim tensor `value`'s element.
pub fn fill_tensor_(self_: &Tensor, value: &Tensor) -> Result<Tensor> {
    if value.dim() != 0 {
        return Err(invalid(format!(
            "fill_ only supports 0-dimension value tensor but got tensor with {} dimensions.",
            value.dim()
        )));
    }
    check_cpu_or_meta("fill_", self_.device())?;
    if self_.device() != value.device() {
        if !self_.has_data() {
            return Ok(self_.clone());
        }
        return fill_scalar_(self_, value.item()?);
    }
    if self_.is_alias_of(value) {
        copy_(self_, &clone(value, None)?, false)
    } else {
        copy_(self_, value, false)
    }
}

/// `zero_(Tensor(a!) self) -> Tensor(a!)`
pub fn zero_(self_: &Tensor) -> Result<Tensor> {
    fill_scalar_(self_, Scalar::Int(0))
}

/// The element count of `arange(start, end, step)` for `dtype`, with PyTorch's checks (in
/// `arange_out`'s order) on the values converted to the accumulate type.
fn arange_len(dtype: ScalarType, start: Scalar, end: Scalar, step: Scalar) -> Result<i64> {
    let (xs, xe, xst) = if dtype.is_integral(false) {
        let (s, e, st) = (
            start.checked_to::<i64>()?,
            end.checked_to::<i64>()?,
            step.checked_to::<i64>()?,
        );
        (s as f64, e as f64, st as f64)
    } else {
        (start.to_f64(), end.to_f64(), step.to_f64())
    };
    if xst == 0.0 {
        return Err(invalid("step must be nonzero"));
    }
    if !(xs.is_finite() && xe.is_finite()) {
        return Err(invalid(format!(
            "unsupported range: {} -> {}",
            Scalar::Float(xs),
            Scalar::Float(xe)
        )));
    }
    if !((xst > 0.0 && xe >= xs) || (xst < 0.0 && xe <= xs)) {
        return Err(invalid(
            "upper bound and lower bound inconsistent with step sign",
        ));
    }
    // Integer arithmetic when every bound is an integer (exact for large ones); PyTorch 2.15
    // sizes `arange(2.5, dtype=torch.int64)` from the doubles: 3 elements.
    let integral = [start, end, step]
        .iter()
        .all(|s| matches!(s, Scalar::Int(_) | Scalar::Bool(_)));
    let size = if dtype == ScalarType::Long && integral {
        let (s, e, st) = (
            start.to_i64() as i128,
            end.to_i64() as i128,
            step.to_i64() as i128,
        );
        let n = (e - s + st - st.signum()) / st;
        n as f64
    } else {
        ((end.to_f64() - start.to_f64()) / step.to_f64()).ceil()
    };
    if !(size >= 0.0 && size <= i64::MAX as f64) {
        return Err(invalid("invalid size, possible overflow?"));
    }
    Ok(size as i64)
}

/// `arange.start_out(Scalar start, Scalar end, Scalar step=1, *, Tensor(a!) out) ->
/// Tensor(a!)`
///
/// Writes `start + i * step` for `i` in `0..ceil((end - start) / step)` into `out` (in its
/// row-major order), computing in `out`'s accumulate type (`f64` for floats and doubles,
/// `f32` for Half/BFloat16, `i64` for integers). When `out`'s element count differs, `out` is
/// resized to `[n]` and the resized tensor returned (Note [Functional resize] in the tensor
/// crate); otherwise `out` keeps its shape, as in PyTorch.
///
/// ```
/// use switchboard_cpu::arange_start_out;
/// use switchboard_tensor::{Scalar, ScalarType, Tensor};
/// let out = Tensor::empty(&[0], ScalarType::Float).unwrap();
/// let r = arange_start_out(Scalar::Int(1), Scalar::Float(2.0), Scalar::Float(0.25), &out).unwrap();
/// assert_eq!(r.to_vec::<f32>().unwrap(), [1.0, 1.25, 1.5, 1.75]);
/// ```
pub fn arange_start_out(start: Scalar, end: Scalar, step: Scalar, out: &Tensor) -> Result<Tensor> {
    check_cpu_or_meta("arange", out.device())?;
    let dtype = out.dtype();
    if dtype == ScalarType::Bool {
        return Err(not_implemented("arange_cpu", dtype));
    }
    let size = arange_len(dtype, start, end, step)?;
    let out = if out.numel() != size {
        out.resized(&[size])?
    } else {
        out.clone()
    };
    if !out.has_data() || size == 0 {
        return Ok(out);
    }
    check_internal_overlap(&out)?;
    match dtype {
        ScalarType::Half => write_arange::<f16>(&out, |i| {
            f16::from_f32(start.to_f64() as f32 + step.to_f64() as f32 * i as f32)
        }),
        ScalarType::BFloat16 => write_arange::<bf16>(&out, |i| {
            bf16::from_f32(start.to_f64() as f32 + step.to_f64() as f32 * i as f32)
        }),
        ScalarType::Float => {
            write_arange::<f32>(&out, |i| (start.to_f64() + step.to_f64() * i as f64) as f32)
        }
        ScalarType::Double => {
            write_arange::<f64>(&out, |i| start.to_f64() + step.to_f64() * i as f64)
        }
        d => {
            let (s, st) = (start.checked_to::<i64>()?, step.checked_to::<i64>()?);
            crate::dispatch_integral_types!(d, "arange_cpu", T => {
                write_arange::<T>(&out, |i| T::from_i64(s.wrapping_add(st.wrapping_mul(i))))
            })
        }
    }?;
    Ok(out)
}

/// Writes `f(i)` to the `i`-th element of `out` in row-major order.
fn write_arange<T: Element>(out: &Tensor, f: impl Fn(i64) -> T) -> Result<()> {
    let _access = Access::new(&[], &[out])?;
    let p = out.mut_data_ptr_as::<T>()?;
    for (i, off) in StridedOffsets::new(out.sizes(), out.strides()).enumerate() {
        // SAFETY: `_access` holds `out`'s storage exclusively; `off` is an in-range strided
        // offset of `out` (Note [Tensor bounds invariant]).
        unsafe { *p.add(off as usize) = f(i as i64) };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_factories() {
        let t =
            empty_memory_format(&[2, 3], Some(ScalarType::Int), None, None, None, None).unwrap();
        assert_eq!((t.dtype(), t.strides()), (ScalarType::Int, &[3i64, 1][..]));
        assert!(t.is_cpu());
        let e = empty_memory_format(&[2, -1], None, None, None, None, None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Trying to create tensor with negative dimension -1: [2, -1]"
        );
        assert!(
            empty_memory_format(&[2], None, None, None, None, Some(MemoryFormat::Preserve))
                .is_err()
        );
        assert!(empty_memory_format(&[2], None, None, None, Some(true), None).is_err());
        let cuda: Device = "cuda:0".parse().unwrap();
        assert!(empty_memory_format(&[2], None, None, Some(cuda), None, None).is_err());
        let s = empty_strided(&[2, 3], &[1, 2], None, None, Some(Device::META), None).unwrap();
        assert!(s.is_meta());
        assert_eq!(
            (s.strides(), s.dtype()),
            (&[1i64, 2][..], ScalarType::Float)
        );
    }

    #[test]
    fn fills() {
        let t = Tensor::zeros(&[2, 3], ScalarType::Float).unwrap();
        fill_scalar_(&t.t().unwrap(), Scalar::Float(1.5)).unwrap();
        assert_eq!(t.to_vec::<f32>().unwrap(), [1.5; 6]);
        zero_(&t.narrow(1, 1, 1).unwrap()).unwrap();
        assert_eq!(t.to_vec::<f32>().unwrap(), [1.5, 0.0, 1.5, 1.5, 0.0, 1.5]);
        // Broadcast views are filled once per location.
        let base = Tensor::zeros(&[3], ScalarType::Long).unwrap();
        let ex = base.unsqueeze(0).unwrap().expand(&[4, 3]).unwrap();
        fill_scalar_(&ex, Scalar::Int(7)).unwrap();
        assert_eq!(base.to_vec::<i64>().unwrap(), [7; 3]);
        let b = Tensor::zeros(&[2], ScalarType::Bool).unwrap();
        fill_scalar_(&b, Scalar::Float(0.5)).unwrap();
        assert_eq!(b.to_vec::<bool>().unwrap(), [true; 2]);
        let h = Tensor::zeros(&[1], ScalarType::Half).unwrap();
        assert_eq!(
            fill_scalar_(&h, Scalar::Float(1e6))
                .unwrap_err()
                .to_string(),
            "value cannot be converted to type c10::Half without overflow"
        );
        fill_scalar_(&h, Scalar::Float(f64::INFINITY)).unwrap();
        let i = Tensor::zeros(&[1], ScalarType::Int).unwrap();
        assert!(fill_scalar_(&i, Scalar::Float(f64::NAN)).is_err());
        fill_scalar_(&i, Scalar::Float(-2.7)).unwrap();
        assert_eq!(i.to_vec::<i32>().unwrap(), [-2]);
        // fill_.Tensor: 0-dim values only, any dtype, meta self only checks.
        fill_tensor_(&t, &Tensor::scalar_tensor(3, ScalarType::Long)).unwrap();
        assert_eq!(t.to_vec::<f32>().unwrap(), [3.0; 6]);
        assert_eq!(
            fill_tensor_(&t, &Tensor::zeros(&[1], ScalarType::Float).unwrap())
                .unwrap_err()
                .to_string(),
            "fill_ only supports 0-dimension value tensor but got tensor with 1 dimensions."
        );
        let v = t.select(0, 0).unwrap().select(0, 2).unwrap();
        fill_scalar_(&v, Scalar::Int(9)).unwrap();
        fill_tensor_(&t, &v).unwrap(); // value aliases self
        assert_eq!(t.to_vec::<f32>().unwrap(), [9.0; 6]);
        let m = Tensor::zeros_on(&[2], ScalarType::Float, Device::META).unwrap();
        fill_scalar_(&m, Scalar::Int(1)).unwrap();
        fill_tensor_(&m, &Tensor::scalar_tensor(1, ScalarType::Float)).unwrap();
        zero_(&m).unwrap();
    }

    #[test]
    fn arange_out() {
        let out = Tensor::empty(&[0], ScalarType::Long).unwrap();
        let r = arange_start_out(Scalar::Int(10), Scalar::Int(0), Scalar::Int(-3), &out).unwrap();
        assert_eq!(r.to_vec::<i64>().unwrap(), [10, 7, 4, 1]);
        // Same element count: the shape (here transposed) is kept and filled in row-major order.
        let o = Tensor::zeros(&[3, 2], ScalarType::Int)
            .unwrap()
            .t()
            .unwrap();
        let r = arange_start_out(Scalar::Int(0), Scalar::Int(6), Scalar::Int(1), &o).unwrap();
        assert!(r.is_same(&o));
        assert_eq!(r.to_vec::<i32>().unwrap(), [0, 1, 2, 3, 4, 5]);
        // Integer outs truncate the scalars; the length uses the original values.
        let r = arange_start_out(Scalar::Int(0), Scalar::Float(2.5), Scalar::Int(1), &o).unwrap();
        assert_eq!(r.to_vec::<i32>().unwrap(), [0, 1, 2]);
        let h = Tensor::empty(&[0], ScalarType::Half).unwrap();
        let r = arange_start_out(Scalar::Int(0), Scalar::Int(3), Scalar::Float(0.5), &h).unwrap();
        assert_eq!(
            r.to_vec_as::<f32>().unwrap(),
            [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]
        );
        let f = Tensor::empty(&[0], ScalarType::Float).unwrap();
        assert_eq!(
            arange_start_out(Scalar::Int(0), Scalar::Int(10), Scalar::Int(-1), &f)
                .unwrap_err()
                .to_string(),
            "upper bound and lower bound inconsistent with step sign"
        );
        assert_eq!(
            arange_start_out(Scalar::Int(0), Scalar::Int(1), Scalar::Int(0), &f)
                .unwrap_err()
                .to_string(),
            "step must be nonzero"
        );
        assert_eq!(
            arange_start_out(
                Scalar::Int(0),
                Scalar::Float(f64::INFINITY),
                Scalar::Int(1),
                &f
            )
            .unwrap_err()
            .to_string(),
            "unsupported range: 0 -> inf"
        );
        let b = Tensor::empty(&[0], ScalarType::Bool).unwrap();
        assert_eq!(
            arange_start_out(Scalar::Int(0), Scalar::Int(1), Scalar::Int(1), &b)
                .unwrap_err()
                .to_string(),
            "\"arange_cpu\" not implemented for 'Bool'"
        );
        let m = Tensor::zeros_on(&[0], ScalarType::Float, Device::META).unwrap();
        let r = arange_start_out(Scalar::Int(0), Scalar::Int(5), Scalar::Int(1), &m).unwrap();
        assert!(r.is_meta());
        assert_eq!(r.sizes(), &[5]);
    }
}
