//! Tensor constructors: `from_vec`, `zeros`, `ones`, `full`, `empty`, `empty_strided`,
//! `arange`, `scalar_tensor`, `*_like`, on CPU (real data) and other devices (metadata only).

use crate::builder::{
    check_in_bounds, check_sizes, default_key_set, storage_extent, Dims, TensorBuilder, ValidParts,
    CPU_KEY_SET,
};
use switchboard_keys::DispatchKeySet;

use crate::checked_size::CheckedSize;
use crate::device::Device;
use crate::dispatch_dtype;
use crate::dtype::{Element, ScalarType, StorageElement};
use crate::error::{Result, TensorError};
use crate::layout::{self, MemoryFormat};
use crate::scalar::Scalar;
use crate::storage::Storage;
use crate::tensor::Tensor;
use crate::DimVec;

/// Bytes a tensor of these sizes, strides and offset needs (`computeStorageNbytes`).
pub(crate) fn storage_nbytes(
    sizes: &[i64],
    strides: &[i64],
    offset: i64,
    elem: usize,
) -> Result<usize> {
    check_sizes(sizes)?;
    let n = storage_extent(sizes, strides, offset, elem)?.unwrap_or(0);
    usize::try_from(n).map_err(|_| {
        TensorError::invalid(format!("Trying to create tensor with {n} bytes: too large"))
    })
}

fn numel_usize(sizes: &[i64]) -> Result<usize> {
    let n = check_sizes(sizes)?;
    usize::try_from(n).map_err(|_| TensorError::invalid("numel overflows usize"))
}

/// Bytes of a contiguous tensor of these sizes (`computeStorageNbytesContiguous`), checked.
#[inline]
fn contiguous_nbytes(sizes: &[i64], dtype: ScalarType) -> Result<usize> {
    Ok(contiguous_numel_and_nbytes(sizes, dtype)?.1)
}

/// The elements and [`contiguous_nbytes`] of a contiguous tensor of these sizes, checked.
#[inline]
fn contiguous_numel_and_nbytes(sizes: &[i64], dtype: ScalarType) -> Result<(i64, usize)> {
    let numel = check_sizes(sizes)?;
    let nbytes = (CheckedSize::new(numel) * dtype.element_size() as i64)
        .value()
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| nbytes_overflow(sizes))?;
    Ok((numel, nbytes))
}

#[cold]
fn nbytes_overflow(sizes: &[i64]) -> TensorError {
    TensorError::invalid(format!(
        "Storage size calculation overflowed with sizes={}",
        crate::error::list(sizes)
    ))
}

/// A contiguous CPU tensor over `storage`, whose sizes were checked and which holds exactly
/// their numel elements.
fn contiguous_tensor(storage: Storage, sizes: &[i64], dtype: ScalarType) -> Tensor {
    contiguous_on(storage, sizes, dtype, Device::CPU, CPU_KEY_SET)
}

#[inline]
fn contiguous_on(
    storage: Storage,
    sizes: &[i64],
    dtype: ScalarType,
    device: Device,
    key_set: DispatchKeySet,
) -> Tensor {
    let numel = sizes.iter().product();
    contiguous_with(
        storage,
        sizes,
        layout::contiguous_strides(sizes),
        numel,
        dtype,
        device,
        key_set,
    )
}

/// A tensor of `numel` elements over `storage`, whose sizes were checked, with contiguous
/// strides (size-1 dimensions may have any stride): in bounds without a check.
#[inline(always)]
fn contiguous_with<S: Dims, T: Dims>(
    storage: Storage,
    sizes: S,
    strides: T,
    numel: i64,
    dtype: ScalarType,
    device: Device,
    key_set: DispatchKeySet,
) -> Tensor {
    Tensor::from_valid_parts_with(
        ValidParts {
            storage,
            sizes,
            strides,
            storage_offset: 0,
            dtype,
            device,
            key_set,
            version: None,
            payload: None,
            payload_tag: 0,
            wrapped_number: false,
        },
        numel,
        true,
    )
}

impl Tensor {
    /// A CPU tensor holding `data` with shape `sizes` (contiguous). Takes over the vector's
    /// buffer when it is larger than 64 bytes.
    ///
    /// ```
    /// use switchboard_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![1i64, 2, 3, 4, 5, 6], &[2, 3]).unwrap();
    /// assert_eq!(t.to_vec::<i64>().unwrap(), [1, 2, 3, 4, 5, 6]);
    /// assert!(Tensor::from_vec(vec![1i64, 2, 3], &[2, 2]).is_err());
    /// ```
    pub fn from_vec<T: StorageElement>(data: Vec<T>, sizes: &[i64]) -> Result<Tensor> {
        let numel = check_sizes(sizes)?;
        if numel != data.len() as i64 {
            return Err(TensorError::ShapeNumel {
                shape: sizes.to_vec(),
                numel: data.len() as i64,
            });
        }
        Ok(contiguous_tensor(Storage::from_vec(data), sizes, T::DTYPE))
    }

    /// A CPU tensor holding a copy of `data` with shape `sizes`.
    pub fn from_slice<T: StorageElement>(data: &[T], sizes: &[i64]) -> Result<Tensor> {
        let numel = numel_usize(sizes)?;
        if numel != data.len() {
            return Err(TensorError::ShapeNumel {
                shape: sizes.to_vec(),
                numel: data.len() as i64,
            });
        }
        let storage = Storage::cpu_with_typed::<T>(numel, |d| d.copy_from_slice(data))?;
        Ok(contiguous_tensor(storage, sizes, T::DTYPE))
    }

    /// A 0-dim CPU tensor holding `value` converted to `dtype`.
    ///
    /// ```
    /// use switchboard_tensor::{ScalarType, Tensor};
    /// let t = Tensor::scalar_tensor(2.5, ScalarType::Float);
    /// assert_eq!(t.dim(), 0);
    /// assert_eq!(t.item().unwrap().to_f64(), 2.5);
    /// ```
    pub fn scalar_tensor(value: impl Into<Scalar>, dtype: ScalarType) -> Tensor {
        let value = value.into();
        let storage = dispatch_dtype!(dtype, T => {
            Storage::cpu_with_typed::<T>(1, |d| d[0] = value.to::<T>())
        }, C => {
            Storage::cpu_with_typed::<C>(1, |d| d[0] = C::from_complex(value.to_complex()))
        })
        .expect("one element always fits");
        contiguous_tensor(storage, &[], dtype)
    }

    /// A 0-dim CPU tensor standing for a Python number (`Bool`, `Long` or `Double`, marked as a
    /// wrapped number for type promotion).
    pub fn wrapped_scalar(value: impl Into<Scalar>) -> Tensor {
        let value = value.into();
        let t = Tensor::scalar_tensor(value, value.dtype());
        t.to_builder().wrapped_number(true).build_unchecked()
    }

    /// An uninitialised (here: zeroed) contiguous CPU tensor.
    pub fn empty(sizes: &[i64], dtype: ScalarType) -> Result<Tensor> {
        Tensor::zeros_on(sizes, dtype, Device::CPU)
    }

    /// A contiguous CPU tensor whose elements are not initialised (buffers of up to
    /// [`INLINE_BYTES`](crate::INLINE_BYTES) are zeroed anyway): for kernels that write every
    /// element of a fresh output, sparing large outputs a zero fill.
    ///
    /// # Safety
    /// As [`Storage::uninit_cpu`]: every element must be written through raw pointers (under an
    /// [`Access`](crate::Access)) before anything reads any of them; until then the tensor must
    /// not reach code that may read its data.
    ///
    /// ```
    /// use switchboard_tensor::{Access, ScalarType, Tensor};
    /// // SAFETY: both elements are written below before the tensor is read.
    /// let t = unsafe { Tensor::empty_uninit(&[2], ScalarType::Int) }.unwrap();
    /// let access = Access::new(&[], &[&t]).unwrap();
    /// let p = t.mut_data_ptr_as::<i32>().unwrap();
    /// // SAFETY: `access` borrows the storage exclusively; 0 and 1 are in bounds.
    /// unsafe { p.write(1); p.add(1).write(2) };
    /// drop(access);
    /// assert_eq!(t.to_vec::<i32>().unwrap(), [1, 2]);
    /// ```
    pub unsafe fn empty_uninit(sizes: &[i64], dtype: ScalarType) -> Result<Tensor> {
        let nbytes = contiguous_nbytes(sizes, dtype)?;
        // SAFETY: the caller's obligation, passed on.
        let storage = unsafe { Storage::uninit_cpu(nbytes, dtype)? };
        Ok(contiguous_tensor(storage, sizes, dtype))
    }

    /// An uninitialised contiguous tensor on `device`: zeroed CPU data, or metadata only on
    /// other devices (meta, and devices whose backends hold their own data).
    ///
    /// ```
    /// use switchboard_tensor::{Device, ScalarType, Tensor};
    /// let t = Tensor::empty_on(&[2, 3], ScalarType::Float, "cuda:0".parse().unwrap()).unwrap();
    /// assert_eq!(t.device().to_string(), "cuda:0");
    /// assert!(!t.has_data());
    /// assert_eq!(t.key_set().to_string(),
    ///     "DispatchKeySet(CUDA, ADInplaceOrView, AutogradCUDA, AutocastCUDA)");
    /// ```
    pub fn empty_on(sizes: &[i64], dtype: ScalarType, device: Device) -> Result<Tensor> {
        Tensor::zeros_on(sizes, dtype, device)
    }

    /// An uninitialised tensor with these sizes and strides, which it takes over rather than
    /// copies: the output a structured kernel's meta function describes (zeroed CPU data, or
    /// metadata only on other devices, as [`Tensor::empty_on`]). Contiguous geometry, the
    /// common case, skips the bounds checks of arbitrary strides.
    ///
    /// ```
    /// use switchboard_tensor::{Device, DimVec, ScalarType, Tensor};
    /// let sizes = DimVec::from_slice(&[2, 3]);
    /// let strides = DimVec::from_slice(&[1, 2]);
    /// let t = Tensor::empty_with_geometry(sizes, strides, ScalarType::Float, Device::META).unwrap();
    /// assert_eq!((t.sizes(), t.strides(), t.has_data()), (&[2i64, 3][..], &[1i64, 2][..], false));
    /// ```
    #[inline]
    pub fn empty_with_geometry(
        sizes: DimVec,
        strides: DimVec,
        dtype: ScalarType,
        device: Device,
    ) -> Result<Tensor> {
        if sizes.len() != strides.len() || !layout::is_contiguous(&sizes, &strides) {
            return Tensor::empty_strided(&sizes, &strides, dtype, device);
        }
        // Note [The devices of CPU and meta tensors]
        let device = device.tensor_device();
        let (numel, nbytes) = contiguous_numel_and_nbytes(&sizes, dtype)?;
        let key_set = default_key_set(device)?;
        let storage = if device.is_cpu() {
            Storage::zeros_for(device, nbytes, dtype)?
        } else {
            Storage::without_bytes(device, nbytes, dtype)
        };
        Ok(contiguous_with(
            storage, sizes, strides, numel, dtype, device, key_set,
        ))
    }

    /// An uninitialised tensor in memory format `format` (`Contiguous`, `ChannelsLast`,
    /// `ChannelsLast3d`).
    pub fn empty_with_format(
        sizes: &[i64],
        dtype: ScalarType,
        device: Device,
        format: MemoryFormat,
    ) -> Result<Tensor> {
        check_sizes(sizes)?;
        let strides = format.strides(sizes)?;
        Tensor::empty_strided(sizes, &strides, dtype, device)
    }

    /// An uninitialised tensor with the given strides; the storage is as large as they need.
    ///
    /// ```
    /// use switchboard_tensor::{Device, ScalarType, Tensor};
    /// let t = Tensor::empty_strided(&[2, 3], &[1, 2], ScalarType::Float, Device::CPU).unwrap();
    /// assert_eq!(t.strides(), &[1, 2]);
    /// assert!(!t.is_contiguous());
    /// ```
    pub fn empty_strided(
        sizes: &[i64],
        strides: &[i64],
        dtype: ScalarType,
        device: Device,
    ) -> Result<Tensor> {
        if sizes.len() != strides.len() {
            // empty_strided's message (as_strided's is "mismatch in length of strides ...").
            return Err(TensorError::invalid(format!(
                "dimensionality of sizes ({}) must match dimensionality of strides ({})",
                sizes.len(),
                strides.len()
            )));
        }
        let elem = dtype.element_size();
        let nbytes = storage_nbytes(sizes, strides, 0, elem)?;
        check_in_bounds(sizes, strides, 0, elem, nbytes)?;
        let storage = Storage::zeros_for(device, nbytes, dtype)?;
        TensorBuilder::new(storage, dtype)
            .sizes(sizes)
            .strides(strides)
            .device(device)
            .build()
    }

    /// A contiguous CPU tensor of zeros.
    ///
    /// ```
    /// use switchboard_tensor::{ScalarType, Tensor};
    /// let t = Tensor::zeros(&[2, 2], ScalarType::Int).unwrap();
    /// assert_eq!(t.to_vec::<i32>().unwrap(), [0, 0, 0, 0]);
    /// ```
    pub fn zeros(sizes: &[i64], dtype: ScalarType) -> Result<Tensor> {
        Tensor::zeros_on(sizes, dtype, Device::CPU)
    }

    /// A contiguous tensor of zeros on `device` (metadata only off the CPU).
    pub fn zeros_on(sizes: &[i64], dtype: ScalarType, device: Device) -> Result<Tensor> {
        // Note [The devices of CPU and meta tensors]
        let device = device.tensor_device();
        let nbytes = contiguous_nbytes(sizes, dtype)?;
        let key_set = default_key_set(device)?;
        let storage = Storage::zeros_for(device, nbytes, dtype)?;
        Ok(contiguous_on(storage, sizes, dtype, device, key_set))
    }

    /// A contiguous tensor of zeros on `device` backed by host memory even off the CPU (see
    /// [`Storage::zeros_host_backed`]): for backends that emulate a device with CPU memory.
    ///
    /// ```
    /// use switchboard_tensor::{ScalarType, Tensor};
    /// let d = "privateuseone:0".parse().unwrap();
    /// let t = Tensor::zeros_host_backed(&[2], ScalarType::Float, d).unwrap();
    /// assert!(t.has_data());
    /// t.data_mut::<f32>().unwrap()[0] = 1.0;
    /// assert_eq!(t.to_string(), "tensor([1., 0.], device='privateuseone:0')");
    /// ```
    pub fn zeros_host_backed(sizes: &[i64], dtype: ScalarType, device: Device) -> Result<Tensor> {
        let nbytes = contiguous_nbytes(sizes, dtype)?;
        let storage = Storage::zeros_host_backed(device, nbytes, dtype)?;
        TensorBuilder::new(storage, dtype)
            .sizes(sizes)
            .device(device)
            .build()
    }

    /// A contiguous CPU tensor of ones.
    pub fn ones(sizes: &[i64], dtype: ScalarType) -> Result<Tensor> {
        Tensor::full_on(sizes, 1, dtype, Device::CPU)
    }

    /// A contiguous tensor of ones on `device`.
    pub fn ones_on(sizes: &[i64], dtype: ScalarType, device: Device) -> Result<Tensor> {
        Tensor::full_on(sizes, 1, dtype, device)
    }

    /// A contiguous CPU tensor filled with `value` (converted to `dtype`).
    ///
    /// ```
    /// use switchboard_tensor::{ScalarType, Tensor};
    /// let t = Tensor::full(&[3], 1.5, ScalarType::Double).unwrap();
    /// assert_eq!(t.to_vec::<f64>().unwrap(), [1.5; 3]);
    /// ```
    pub fn full(sizes: &[i64], value: impl Into<Scalar>, dtype: ScalarType) -> Result<Tensor> {
        Tensor::full_on(sizes, value, dtype, Device::CPU)
    }

    /// A contiguous tensor filled with `value` on `device` (metadata only off the CPU).
    pub fn full_on(
        sizes: &[i64],
        value: impl Into<Scalar>,
        dtype: ScalarType,
        device: Device,
    ) -> Result<Tensor> {
        if !device.is_cpu() {
            return Tensor::zeros_on(sizes, dtype, device);
        }
        let value = value.into();
        let numel = numel_usize(sizes)?;
        let storage = dispatch_dtype!(dtype, T => {
            let v = value.to::<T>();
            Storage::cpu_with_typed::<T>(numel, |d| d.fill(v))?
        }, C => {
            let v = C::from_complex(value.to_complex());
            Storage::cpu_with_typed::<C>(numel, |d| d.fill(v))?
        });
        Ok(contiguous_tensor(storage, sizes, dtype))
    }

    /// `torch.arange(start, end, step, dtype=dtype)` on the CPU: `dtype` defaults to `Long`
    /// when all three are integers, else `Float`.
    ///
    /// ```
    /// use switchboard_tensor::Tensor;
    /// let t = Tensor::arange(0, 5, 2, None).unwrap();
    /// assert_eq!(t.to_vec::<i64>().unwrap(), [0, 2, 4]);
    /// let f = Tensor::arange(0.0, 1.0, 0.25, None).unwrap();
    /// assert_eq!(f.to_vec::<f32>().unwrap(), [0.0, 0.25, 0.5, 0.75]);
    /// ```
    pub fn arange(
        start: impl Into<Scalar>,
        end: impl Into<Scalar>,
        step: impl Into<Scalar>,
        dtype: Option<ScalarType>,
    ) -> Result<Tensor> {
        let (start, end, step) = (start.into(), end.into(), step.into());
        let all_int = [start, end, step].iter().all(|s| s.is_integral(true));
        let dtype = dtype.unwrap_or(if all_int {
            ScalarType::Long
        } else {
            ScalarType::Float
        });
        let (s, e, st) = (start.to_f64(), end.to_f64(), step.to_f64());
        if st == 0.0 {
            return Err(TensorError::invalid("step must be nonzero"));
        }
        if !(s.is_finite() && e.is_finite() && st.is_finite()) {
            return Err(TensorError::invalid(format!(
                "unsupported range: {start} -> {end}"
            )));
        }
        if (st > 0.0 && e < s) || (st < 0.0 && e > s) {
            return Err(TensorError::invalid(
                "upper bound and lower bound inconsistent with step sign",
            ));
        }
        let len = if all_int && dtype.is_integral(false) {
            let (s, e, st) = (
                start.to_i64() as i128,
                end.to_i64() as i128,
                step.to_i64() as i128,
            );
            ((e - s + st - st.signum()) / st).max(0) as f64
        } else {
            ((e - s) / st).ceil()
        };
        if len > i64::MAX as f64 / 16.0 {
            return Err(TensorError::invalid("arange: too many elements"));
        }
        let n = len as usize;
        let storage = dispatch_dtype!(dtype, T => {
            Storage::cpu_with_typed::<T>(n, |d| {
                for (i, x) in d.iter_mut().enumerate() {
                    *x = if all_int && dtype.is_integral(false) {
                        // Inside [start, end), so it fits an i64.
                        T::from_i64((start.to_i64() as i128 + i as i128 * step.to_i64() as i128) as i64)
                    } else {
                        T::from_f64(s + i as f64 * st)
                    };
                }
            })?
        }, _C => return Err(TensorError::invalid(format!(
            "\"arange_cpu\" not implemented for '{}'",
            dtype.c10_name()
        ))));
        Ok(contiguous_tensor(storage, &[n as i64], dtype))
    }

    /// An uninitialised tensor like `self` (same sizes, dtype, device), contiguous.
    pub fn empty_like(&self) -> Result<Tensor> {
        Tensor::empty_on(&self.sizes, self.dtype, self.device)
    }

    /// An uninitialised tensor like `self` in `format`; `Preserve` keeps `self`'s strides when
    /// they are non-overlapping and dense, else uses its suggested format (PyTorch's
    /// `empty_like`).
    pub fn empty_like_as(&self, format: MemoryFormat) -> Result<Tensor> {
        match format {
            MemoryFormat::Preserve => {
                if self.is_non_overlapping_and_dense() {
                    Tensor::empty_strided(&self.sizes, &self.strides, self.dtype, self.device)
                } else {
                    let f = self.suggest_memory_format();
                    Tensor::empty_with_format(&self.sizes, self.dtype, self.device, f)
                }
            }
            f => Tensor::empty_with_format(&self.sizes, self.dtype, self.device, f),
        }
    }

    /// A tensor of zeros like `self` (contiguous).
    pub fn zeros_like(&self) -> Result<Tensor> {
        Tensor::zeros_on(&self.sizes, self.dtype, self.device)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors() {
        let t = Tensor::ones(&[2, 3], ScalarType::Bool).unwrap();
        assert_eq!(t.to_vec::<bool>().unwrap(), [true; 6]);
        let t = Tensor::full(&[2], -1, ScalarType::Byte).unwrap();
        assert_eq!(t.to_vec::<u8>().unwrap(), [255, 255]);
        let t = Tensor::zeros_on(&[4, 5], ScalarType::Half, Device::META).unwrap();
        assert_eq!(t.storage().nbytes(), 40);
        assert!(t.to_vec::<half::f16>().is_err());
        let t = Tensor::from_slice(&[1u8, 2], &[2, 1]).unwrap();
        assert_eq!(t.strides(), &[1, 1]);
        let s = Tensor::wrapped_scalar(3);
        assert!(s.is_wrapped_number());
        assert_eq!(s.dtype(), ScalarType::Long);
        assert_eq!(
            Tensor::zeros(&[2, -1], ScalarType::Float)
                .unwrap_err()
                .to_string(),
            "Trying to create tensor with negative dimension -1: [2, -1]"
        );
        assert!(Tensor::zeros(&[i64::MAX, i64::MAX], ScalarType::Float).is_err());
        assert!(Tensor::zeros(&[i64::MAX / 2], ScalarType::Float).is_err());
    }

    #[test]
    fn arange_lengths() {
        assert_eq!(Tensor::arange(0, 10, 3, None).unwrap().numel(), 4);
        assert_eq!(
            Tensor::arange(10, 0, -3, None)
                .unwrap()
                .to_vec::<i64>()
                .unwrap(),
            [10, 7, 4, 1]
        );
        assert_eq!(Tensor::arange(0, 0, 1, None).unwrap().numel(), 0);
        assert!(Tensor::arange(0, 10, 0, None).is_err());
        assert_eq!(
            Tensor::arange(0, 10, -1, None).unwrap_err().to_string(),
            "upper bound and lower bound inconsistent with step sign"
        );
        let t = Tensor::arange(0, 3, 1, Some(ScalarType::Double)).unwrap();
        assert_eq!(t.to_vec::<f64>().unwrap(), [0.0, 1.0, 2.0]);
    }

    #[test]
    fn formats() {
        let t = Tensor::empty_with_format(
            &[1, 64, 5, 4],
            ScalarType::Float,
            Device::CPU,
            MemoryFormat::ChannelsLast,
        )
        .unwrap();
        assert_eq!(t.strides(), &[1280, 1, 256, 64]);
        assert!(t.is_contiguous_as(MemoryFormat::ChannelsLast));
        let u = t.empty_like_as(MemoryFormat::Preserve).unwrap();
        assert_eq!(u.strides(), t.strides());
        let e = Tensor::empty_strided(&[2, 2], &[0, 1], ScalarType::Float, Device::CPU).unwrap();
        assert_eq!(e.storage().nbytes(), 8);
        let v = e.empty_like_as(MemoryFormat::Preserve).unwrap();
        assert_eq!(v.strides(), &[2, 1]);
    }
}
