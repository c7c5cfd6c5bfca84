//! [`Device`]: a device type and optional index, parsed and printed like `torch.device`, and
//! the dispatch key set of a dense tensor on a device.

use std::fmt;
use std::str::FromStr;

use switchboard_keys::{DeviceType, DispatchKeySet};

use crate::error::{Result, TensorError};

/// A device: type plus optional index (`cpu`, `cuda:0`, `meta`, `privateuseone:1`).
///
/// ```
/// use switchboard_tensor::Device;
/// let d: Device = "cuda:1".parse().unwrap();
/// assert_eq!(d.index, Some(1));
/// assert_eq!(d.to_string(), "cuda:1");
/// assert_eq!(Device::CPU.to_string(), "cpu");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Device {
    /// The device type.
    pub ty: DeviceType,
    /// The device index; `None` means "the current device" (`-1` in PyTorch).
    pub index: Option<i16>,
}

impl Device {
    /// `cpu`.
    pub const CPU: Device = Device::new(DeviceType::CPU);
    /// `meta`.
    pub const META: Device = Device::new(DeviceType::Meta);

    /// The device of type `ty` with no index.
    pub const fn new(ty: DeviceType) -> Device {
        Device { ty, index: None }
    }

    /// The device of type `ty` with index `index`.
    pub const fn with_index(ty: DeviceType, index: i16) -> Device {
        Device {
            ty,
            index: Some(index),
        }
    }

    /// Whether this is a CPU device (tensors on it have real storage).
    pub const fn is_cpu(self) -> bool {
        matches!(self.ty, DeviceType::CPU)
    }

    /// Whether this is the meta device (tensors without data).
    pub const fn is_meta(self) -> bool {
        matches!(self.ty, DeviceType::Meta)
    }

    /// The device a tensor created on `self` reports (Note [The devices of CPU and meta
    /// tensors]): `cpu` for `cpu:0`, `meta` for `meta:0`, `self` for every other device.
    ///
    /// ```
    /// use switchboard_tensor::Device;
    /// let cpu0: Device = "cpu:0".parse().unwrap();
    /// assert_eq!(cpu0.to_string(), "cpu:0"); // as torch.device("cpu:0") prints
    /// assert_eq!(cpu0.tensor_device(), Device::CPU);
    /// let cuda1: Device = "cuda:1".parse().unwrap();
    /// assert_eq!(cuda1.tensor_device(), cuda1);
    /// ```
    #[inline]
    pub const fn tensor_device(self) -> Device {
        match self.ty {
            DeviceType::CPU | DeviceType::Meta => Device::new(self.ty),
            _ => self,
        }
    }

    /// The key set PyTorch gives a dense tensor on this device (`TensorImpl`'s constructor):
    /// the backend's dense key, `ADInplaceOrView` with the backend's autograd key, and its
    /// autocast key if it has one. CPU: `DispatchKeySet(CPU, ADInplaceOrView, AutogradCPU,
    /// AutocastCPU)`; meta: `DispatchKeySet(Meta, ADInplaceOrView, AutogradMeta)`.
    ///
    /// Fails for the grandfathered Caffe2 device types (`opengl`, `opencl`, `mkldnn`, `ideep`),
    /// which have no dispatch key.
    pub fn dense_key_set(self) -> Result<DispatchKeySet> {
        let key = self
            .ty
            .dense_key()
            .map_err(|e| TensorError::invalid(e.message().to_string()))?;
        let backend = key.to_backend_component();
        Ok(DispatchKeySet::from_key(key)
            | backend.autograd_related_key_set()
            | backend.autocast_related_key_set())
    }
}

// Note [The devices of CPU and meta tensors]
// `torch.device("cpu:0")` keeps its index (it prints `cpu:0` and is not equal to
// `torch.device("cpu")`), but a tensor created there reports `cpu`: a tensor's device is its
// storage's, which PyTorch's CPU and meta allocators always tag with the index-less device.
// So `torch.zeros(2, device="cpu:0") + torch.zeros(2)` is fine, and the same holds for
// `meta:0`. Every tensor creation that takes a device from its caller goes through
// `Device::tensor_device`, so tensor devices are compared as PyTorch compares them. Other
// devices keep their index (a backend fills in its current one: `npu` -> `npu:0`).

impl Default for Device {
    fn default() -> Self {
        Device::CPU
    }
}

impl From<DeviceType> for Device {
    fn from(ty: DeviceType) -> Self {
        Device::new(ty)
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.index {
            Some(i) => write!(f, "{}:{i}", self.ty),
            None => write!(f, "{}", self.ty),
        }
    }
}

impl FromStr for Device {
    type Err = TensorError;
    /// Parses `type` or `type:index` as `torch.device` does ([`switchboard_keys::parse_device`]:
    /// PyTorch's device types and the renamed PrivateUse1 backend, its syntax, index and
    /// messages). A CPU index other than 0 is refused, as PyTorch's debug builds do: a CPU tensor
    /// has no device index that could tell it from another.
    fn from_str(s: &str) -> Result<Device> {
        let (ty, index) = switchboard_keys::parse_device(s)
            .map_err(|e| TensorError::Parse(e.message().into()))?;
        if ty == DeviceType::CPU {
            if let Some(i) = index.filter(|i| *i != 0) {
                return Err(TensorError::Parse(format!(
                    "CPU device index must be -1 or zero, got {i}"
                )));
            }
        }
        Ok(Device {
            ty,
            index: index.map(i16::from),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_print() {
        for s in ["cpu", "cuda:0", "meta", "privateuseone", "lazy:3", "cpu:0"] {
            assert_eq!(s.parse::<Device>().unwrap().to_string(), s);
        }
        assert_eq!(
            "cuda:x".parse::<Device>().unwrap_err().to_string(),
            "Invalid device string: 'cuda:x'"
        );
        assert!("cuda:".parse::<Device>().is_err());
        assert!("cuda:01".parse::<Device>().is_err());
        assert!("cpu:1".parse::<Device>().is_err());
        assert!("metal".parse::<Device>().is_err());
        assert_eq!(
            "".parse::<Device>().unwrap_err().to_string(),
            "Device string must not be empty"
        );
        assert_eq!("cuda:300".parse::<Device>().unwrap().to_string(), "cuda:44");
        assert!("gpu"
            .parse::<Device>()
            .unwrap_err()
            .to_string()
            .starts_with("Expected one of cpu, cuda"));
    }

    #[test]
    fn key_sets() {
        assert_eq!(Device::CPU.dense_key_set().unwrap().raw(), 635655225345);
        assert_eq!(
            Device::META.dense_key_set().unwrap().to_string(),
            "DispatchKeySet(Meta, ADInplaceOrView, AutogradMeta)"
        );
        let hip = Device::new(DeviceType::HIP).dense_key_set().unwrap();
        assert_eq!(
            hip.to_string(),
            "DispatchKeySet(HIP, ADInplaceOrView, AutogradOther)"
        );
        assert!(Device::new(DeviceType::OPENGL).dense_key_set().is_err());
    }
}
