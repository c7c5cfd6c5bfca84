//! Device types and the dispatch key of a dense tensor on each.

use std::fmt;

use crate::key::{DispatchKey, KeyError};

/// A device type, with PyTorch's names (`cpu`, `cuda`, `meta`, `privateuseone`, ...).
///
/// ```
/// use switchboard_keys::{DeviceType, DispatchKey};
/// assert_eq!(DispatchKey::for_device("lazy").unwrap(), DispatchKey::Lazy);
/// assert_eq!("privateuseone".parse::<DeviceType>().unwrap(), DeviceType::PrivateUse1);
/// ```
#[allow(clippy::upper_case_acronyms, missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeviceType {
    CPU,
    CUDA,
    MKLDNN,
    OPENGL,
    OPENCL,
    IDEEP,
    HIP,
    FPGA,
    MAIA,
    XLA,
    Vulkan,
    Metal,
    XPU,
    MPS,
    Meta,
    HPU,
    VE,
    Lazy,
    IPU,
    MTIA,
    PrivateUse1,
}

impl DeviceType {
    /// Every device type, in the order PyTorch lists them in its parse error.
    pub const ALL: [DeviceType; 21] = [
        Self::CPU,
        Self::CUDA,
        Self::IPU,
        Self::XPU,
        Self::MKLDNN,
        Self::OPENGL,
        Self::OPENCL,
        Self::IDEEP,
        Self::HIP,
        Self::VE,
        Self::FPGA,
        Self::MAIA,
        Self::XLA,
        Self::Lazy,
        Self::Vulkan,
        Self::MPS,
        Self::Meta,
        Self::HPU,
        Self::MTIA,
        Self::PrivateUse1,
        Self::Metal,
    ];

    /// The lower-case name used in device strings.
    pub const fn name(self) -> &'static str {
        match self {
            Self::CPU => "cpu",
            Self::CUDA => "cuda",
            Self::MKLDNN => "mkldnn",
            Self::OPENGL => "opengl",
            Self::OPENCL => "opencl",
            Self::IDEEP => "ideep",
            Self::HIP => "hip",
            Self::FPGA => "fpga",
            Self::MAIA => "maia",
            Self::XLA => "xla",
            Self::Vulkan => "vulkan",
            Self::Metal => "metal",
            Self::XPU => "xpu",
            Self::MPS => "mps",
            Self::Meta => "meta",
            Self::HPU => "hpu",
            Self::VE => "ve",
            Self::Lazy => "lazy",
            Self::IPU => "ipu",
            Self::MTIA => "mtia",
            Self::PrivateUse1 => "privateuseone",
        }
    }

    /// The dispatch key of a dense (strided, non-quantized) tensor on this device
    /// (`computeDispatchKey`). The grandfathered Caffe2 types have none.
    pub fn dense_key(self) -> Result<DispatchKey, KeyError> {
        Ok(match self {
            Self::CPU => DispatchKey::CPU,
            Self::CUDA => DispatchKey::CUDA,
            Self::HIP => DispatchKey::HIP,
            Self::XLA => DispatchKey::XLA,
            Self::MPS => DispatchKey::MPS,
            Self::IPU => DispatchKey::IPU,
            Self::XPU => DispatchKey::XPU,
            Self::HPU => DispatchKey::HPU,
            Self::VE => DispatchKey::VE,
            Self::Lazy => DispatchKey::Lazy,
            Self::MTIA => DispatchKey::MTIA,
            Self::MAIA => DispatchKey::MAIA,
            Self::PrivateUse1 => DispatchKey::PrivateUse1,
            Self::Meta => DispatchKey::Meta,
            Self::FPGA => DispatchKey::FPGA,
            Self::Vulkan => DispatchKey::Vulkan,
            Self::Metal => DispatchKey::Metal,
            Self::MKLDNN | Self::OPENGL | Self::OPENCL | Self::IDEEP => {
                return Err(KeyError::new(format!(
                    "This is a grandfathered Caffe2 device type {}, it shouldn't ever convert to \
                     a DispatchKey.  File a bug describing what you were doing if you think this \
                     is in error.",
                    self.name()
                )))
            }
        })
    }
}

impl fmt::Display for DeviceType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for DeviceType {
    type Err = KeyError;
    fn from_str(s: &str) -> Result<Self, KeyError> {
        DeviceType::ALL
            .iter()
            .copied()
            .find(|d| d.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = DeviceType::ALL
                    .iter()
                    .filter(|d| **d != DeviceType::Metal)
                    .map(|d| d.name())
                    .collect();
                KeyError::new(format!(
                    "Expected one of {} device type at start of device string: {s}",
                    names.join(", ")
                ))
            })
    }
}

impl DispatchKey {
    /// The dispatch key for a device-type string (`torch._C._dispatch_key_for_device`): `cpu`
    /// -> CPU, `meta` -> Meta, `privateuseone` -> PrivateUse1. A device index (`cuda:0`) is an
    /// error, as are unknown names and the grandfathered Caffe2 types.
    pub fn for_device(device: &str) -> Result<DispatchKey, KeyError> {
        let (ty, index) = match device.split_once(':') {
            Some((ty, index)) => (ty, Some(index)),
            None => (device, None),
        };
        let ty: DeviceType = ty.parse()?;
        if let Some(index) = index {
            if index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
                return Err(KeyError::new(format!("Invalid device string: '{device}'")));
            }
            return Err(KeyError::new(format!(
                "Expected device_type string to not have a device index; got {device}"
            )));
        }
        ty.dense_key()
    }
}
