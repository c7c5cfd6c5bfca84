//! Device types and the dispatch key of a dense tensor on each.

use std::fmt;

use crate::backend::BackendComponent;
use crate::key::{DispatchKey, KeyError};

/// A device type, with PyTorch's names (`cpu`, `cuda`, `meta`, `privateuseone`, ...), and
/// Switchboard's two more private-use types (Note [Devices of PrivateUse2 and PrivateUse3]).
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
    /// Switchboard's: the device of the PrivateUse2 backend (Note [Devices of PrivateUse2 and
    /// PrivateUse3]).
    PrivateUse2,
    /// Switchboard's: the device of the PrivateUse3 backend.
    PrivateUse3,
}

// Note [Devices of PrivateUse2 and PrivateUse3]
// PyTorch reserves three private-use backends in its key sets (PrivateUse1..3, with their
// Autograd, Sparse, Quantized... keys) but gives only PrivateUse1 a device type, so only one
// out-of-tree backend can have tensors of its own at a time. Switchboard gives PrivateUse2 and
// PrivateUse3 device types too, so up to three out-of-tree backends work side by side, each
// named as PrivateUse1 is (`BackendComponent::rename`, Note [Renaming a private-use backend]).
// Their built-in names (`privateusetwo`, `privateusethree`) only print: PyTorch has no such
// device strings, so until a name is given they are not device strings (PyTorch's parse error
// and its type list are unchanged); once named, the name parses like PrivateUse1's.

impl DeviceType {
    /// Every device type: first the ones a device string may name, in the order PyTorch
    /// lists them in its parse error, then `Metal`, which no device string names.
    pub const ALL: [DeviceType; 23] = [
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
        Self::PrivateUse2,
        Self::PrivateUse3,
    ];

    /// The device types a device string may name, by their built-in names (`parse_type`'s
    /// table): PyTorch's types but `Metal`.
    pub const PARSEABLE: &'static [DeviceType] = {
        let (parseable, _metal) = Self::ALL.split_at(20);
        parseable
    };

    /// The lower-case name used in device strings (`DeviceTypeName(type, true)`). PrivateUse1
    /// prints its registered name once renamed (see [`rename_privateuse1_backend`]), and
    /// `privateuseone` before; PrivateUse2 and PrivateUse3 likewise.
    ///
    /// [`rename_privateuse1_backend`]: crate::rename_privateuse1_backend
    pub fn name(self) -> &'static str {
        match self.private_use_backend() {
            Some(backend) => backend.renamed().unwrap_or(self.builtin_name()),
            None => self.builtin_name(),
        }
    }

    /// The private-use backend whose device this is (PrivateUse1..3), if it is one.
    pub const fn private_use_backend(self) -> Option<BackendComponent> {
        match self {
            Self::PrivateUse1 => Some(BackendComponent::PrivateUse1Bit),
            Self::PrivateUse2 => Some(BackendComponent::PrivateUse2Bit),
            Self::PrivateUse3 => Some(BackendComponent::PrivateUse3Bit),
            _ => None,
        }
    }

    /// The built-in lower-case name (`privateuseone` for PrivateUse1, renamed or not).
    pub const fn builtin_name(self) -> &'static str {
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
            Self::PrivateUse2 => "privateusetwo",
            Self::PrivateUse3 => "privateusethree",
        }
    }

    /// Whether this is one of the grandfathered Caffe2 device types (`mkldnn`, `opengl`,
    /// `opencl`, `ideep`): they parse, but no tensor can live on them.
    pub const fn is_grandfathered(self) -> bool {
        matches!(
            self,
            Self::MKLDNN | Self::OPENGL | Self::OPENCL | Self::IDEEP
        )
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
            Self::PrivateUse2 => DispatchKey::PrivateUse2,
            Self::PrivateUse3 => DispatchKey::PrivateUse3,
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

impl BackendComponent {
    /// The device type whose dense tensors carry this backend bit: `CPUBit` -> `cpu`,
    /// `PrivateUse2Bit` -> PrivateUse2's device (Note [Devices of PrivateUse2 and
    /// PrivateUse3]), `MetaBit` -> `meta`; `None` for `InvalidBit`.
    ///
    /// ```
    /// use switchboard_keys::{BackendComponent, DeviceType};
    /// assert_eq!(BackendComponent::PrivateUse2Bit.device_type(), Some(DeviceType::PrivateUse2));
    /// assert_eq!(DeviceType::PrivateUse2.dense_key().unwrap().to_backend_component(),
    ///            BackendComponent::PrivateUse2Bit);
    /// ```
    pub const fn device_type(self) -> Option<DeviceType> {
        Some(match self {
            Self::InvalidBit => return None,
            Self::CPUBit => DeviceType::CPU,
            Self::CUDABit => DeviceType::CUDA,
            Self::HIPBit => DeviceType::HIP,
            Self::XLABit => DeviceType::XLA,
            Self::MPSBit => DeviceType::MPS,
            Self::IPUBit => DeviceType::IPU,
            Self::XPUBit => DeviceType::XPU,
            Self::HPUBit => DeviceType::HPU,
            Self::VEBit => DeviceType::VE,
            Self::LazyBit => DeviceType::Lazy,
            Self::MTIABit => DeviceType::MTIA,
            Self::MAIABit => DeviceType::MAIA,
            Self::PrivateUse1Bit => DeviceType::PrivateUse1,
            Self::PrivateUse2Bit => DeviceType::PrivateUse2,
            Self::PrivateUse3Bit => DeviceType::PrivateUse3,
            Self::MetaBit => DeviceType::Meta,
        })
    }
}

impl fmt::Display for DeviceType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The warning PyTorch gives, once per process, when a device string names `mkldnn`
/// (`parse_type`'s `TORCH_WARN_ONCE`): the type still parses.
pub const MKLDNN_DEPRECATION: &str = "'mkldnn' is no longer used as device type. So \
    torch.device('mkldnn') will be deprecated and removed in the future. Please use other \
    valid device types instead.";

impl std::str::FromStr for DeviceType {
    type Err = KeyError;
    /// Parses a device type name as PyTorch's `parse_type` does: a built-in name, else the
    /// renamed PrivateUse1 backend's name (or PrivateUse2's, PrivateUse3's: Note [Devices of
    /// PrivateUse2 and PrivateUse3]), else an error listing the built-in names. `mkldnn`
    /// parses with PyTorch's deprecation warning ([`MKLDNN_DEPRECATION`], once per process).
    fn from_str(s: &str) -> Result<Self, KeyError> {
        if s == "mkldnn" {
            static ONCE: std::sync::Once = std::sync::Once::new();
            crate::warn_once(&ONCE, MKLDNN_DEPRECATION);
        }
        if let Some(ty) = Self::PARSEABLE.iter().find(|d| d.builtin_name() == s) {
            return Ok(*ty);
        }
        for ty in [Self::PrivateUse1, Self::PrivateUse2, Self::PrivateUse3] {
            if ty.private_use_backend().and_then(BackendComponent::renamed) == Some(s) {
                return Ok(ty);
            }
        }
        let names: Vec<&str> = Self::PARSEABLE.iter().map(|d| d.builtin_name()).collect();
        Err(KeyError::new(format!(
            "Expected one of {} device type at start of device string: {s}",
            names.join(", ")
        )))
    }
}

// Note [Device strings]
// A device string is `type` or `type:index` (c10::Device's constructor), checked in this order:
// - the empty string: "Device string must not be empty";
// - the syntax `[A-Za-z_]+(:([1-9][0-9]*|0))?`: "Invalid device string: 'cuda:01'";
// - the index, read as a C `int`: "Could not parse device index '9999999999' in device string
//   '...'" when it does not fit;
// - the type name (`DeviceType::from_str`), whose message names the type, not the string.
// The index is then stored as PyTorch's 8-bit `DeviceIndex` (`int8_t` in 2.15), wrapping as its
// cast does: `cuda:300` is index 44, `cuda:255` is -1, i.e. no index. PyTorch checks the index
// range and the CPU index only in debug builds; a release build, the reference, accepts `cpu:1`.

/// Parses a device string as PyTorch's `c10::Device(std::string)` does (Note [Device
/// strings]): the device type and the index, `None` when there is none (PyTorch's -1).
///
/// ```
/// use switchboard_keys::{parse_device, DeviceType};
/// assert_eq!(parse_device("cuda:1").unwrap(), (DeviceType::CUDA, Some(1)));
/// assert_eq!(parse_device("meta").unwrap(), (DeviceType::Meta, None));
/// assert_eq!(
///     parse_device("cuda:01").unwrap_err().message(),
///     "Invalid device string: 'cuda:01'"
/// );
/// assert!(parse_device("metal").unwrap_err().message().starts_with("Expected one of cpu, cuda"));
/// ```
pub fn parse_device(device: &str) -> Result<(DeviceType, Option<i8>), KeyError> {
    if device.is_empty() {
        return Err(KeyError::new("Device string must not be empty".into()));
    }
    let (name, index) = match device.split_once(':') {
        Some((name, index)) => (name, Some(index)),
        None => (device, None),
    };
    let name_ok = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphabetic() || b == b'_');
    let index_ok = index.is_none_or(|ix| {
        !ix.is_empty()
            && ix.bytes().all(|b| b.is_ascii_digit())
            && (ix == "0" || !ix.starts_with('0'))
    });
    if !name_ok || !index_ok {
        return Err(KeyError::new(format!("Invalid device string: '{device}'")));
    }
    let index = match index {
        None => None,
        Some(ix) => {
            let value: i32 = ix.parse().map_err(|_| {
                KeyError::new(format!(
                    "Could not parse device index '{ix}' in device string '{device}'"
                ))
            })?;
            // PyTorch's `static_cast<DeviceIndex>`: the low 8 bits, as a signed number.
            Some(value as i8).filter(|i| *i != -1)
        }
    };
    Ok((name.parse()?, index))
}

impl DispatchKey {
    /// The dispatch key for a device-type string (`torch._C._dispatch_key_for_device`): `cpu`
    /// -> CPU, `meta` -> Meta, `privateuseone` (or PrivateUse1's registered name) ->
    /// PrivateUse1. The string is parsed as a device (Note [Device strings]); one with an index
    /// (`cuda:0`) is an error, as are the grandfathered Caffe2 types.
    pub fn for_device(device: &str) -> Result<DispatchKey, KeyError> {
        let (ty, index) = parse_device(device)?;
        if index.is_some() {
            return Err(KeyError::new(format!(
                "Expected device_type string to not have a device index; got {device}"
            )));
        }
        ty.dense_key()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TYPE_LIST: &str = "cpu, cuda, ipu, xpu, mkldnn, opengl, opencl, ideep, hip, ve, fpga, \
                             maia, xla, lazy, vulkan, mps, meta, hpu, mtia, privateuseone";

    #[test]
    fn every_listed_type_parses_and_prints() {
        for ty in DeviceType::PARSEABLE {
            assert_eq!(ty.name().parse::<DeviceType>().unwrap(), *ty);
            assert_eq!(parse_device(ty.name()).unwrap(), (*ty, None));
            let indexed = format!("{}:3", ty.name());
            assert_eq!(parse_device(&indexed).unwrap(), (*ty, Some(3)));
        }
        let listed: Vec<&str> = DeviceType::PARSEABLE.iter().map(|d| d.name()).collect();
        assert_eq!(listed.join(", "), TYPE_LIST);
    }

    #[test]
    fn unknown_types_are_refused_with_the_type_list() {
        for (input, name) in [
            ("metal", "metal"),
            ("metal:0", "metal"),
            ("gpu", "gpu"),
            ("CPU", "CPU"),
            ("Cuda:1", "Cuda"),
            ("cuda_", "cuda_"),
            ("private_use", "private_use"),
        ] {
            assert_eq!(
                parse_device(input).unwrap_err().message(),
                format!(
                    "Expected one of {TYPE_LIST} device type at start of device string: {name}"
                ),
                "{input}"
            );
        }
        assert!("metal".parse::<DeviceType>().is_err());
        // Metal is still a device type, with a dense key, just not a device string.
        assert_eq!(DeviceType::Metal.dense_key().unwrap(), DispatchKey::Metal);
    }

    #[test]
    fn syntax_errors() {
        assert_eq!(
            parse_device("").unwrap_err().message(),
            "Device string must not be empty"
        );
        for bad in [
            "cuda:",
            ":0",
            ":",
            "cuda:01",
            "cuda:00",
            "cuda:-1",
            "cuda:+1",
            "cuda:1:2",
            "cuda::1",
            "cuda1",
            "privateuse1",
            "cu da",
            " cpu",
            "cpu ",
            "cuda:1 ",
            "cuda:x",
            "métal",
            "cuda:١",
        ] {
            assert_eq!(
                parse_device(bad).unwrap_err().message(),
                format!("Invalid device string: '{bad}'")
            );
        }
        // The syntax is checked before the name: a bad index on an unknown type is a syntax error.
        assert_eq!(
            parse_device("metal:x").unwrap_err().message(),
            "Invalid device string: 'metal:x'"
        );
    }

    #[test]
    fn indices() {
        assert_eq!(parse_device("cuda:0").unwrap(), (DeviceType::CUDA, Some(0)));
        assert_eq!(parse_device("xla:10").unwrap(), (DeviceType::XLA, Some(10)));
        assert_eq!(parse_device("cpu:1").unwrap(), (DeviceType::CPU, Some(1)));
        assert_eq!(
            parse_device("cuda:127").unwrap(),
            (DeviceType::CUDA, Some(127))
        );
        // The 8-bit cast of PyTorch's DeviceIndex.
        assert_eq!(
            parse_device("cuda:128").unwrap(),
            (DeviceType::CUDA, Some(-128))
        );
        assert_eq!(
            parse_device("cuda:300").unwrap(),
            (DeviceType::CUDA, Some(44))
        );
        assert_eq!(parse_device("cuda:255").unwrap(), (DeviceType::CUDA, None));
        assert_eq!(
            parse_device("cuda:256").unwrap(),
            (DeviceType::CUDA, Some(0))
        );
        assert_eq!(
            parse_device("cuda:2147483647").unwrap(),
            (DeviceType::CUDA, None)
        );
        for big in ["cuda:2147483648", "cuda:99999999999999999999"] {
            let ix = &big[5..];
            assert_eq!(
                parse_device(big).unwrap_err().message(),
                format!("Could not parse device index '{ix}' in device string '{big}'")
            );
        }
        // The index is read before the type is looked up.
        assert!(parse_device("metal:2147483648")
            .unwrap_err()
            .message()
            .starts_with("Could not parse device index"));
    }

    #[test]
    fn key_for_device() {
        let cases = [
            ("cpu", DispatchKey::CPU),
            ("cuda", DispatchKey::CUDA),
            ("meta", DispatchKey::Meta),
            ("lazy", DispatchKey::Lazy),
            ("xla", DispatchKey::XLA),
            ("mps", DispatchKey::MPS),
            ("ipu", DispatchKey::IPU),
            ("xpu", DispatchKey::XPU),
            ("hpu", DispatchKey::HPU),
            ("ve", DispatchKey::VE),
            ("mtia", DispatchKey::MTIA),
            ("maia", DispatchKey::MAIA),
            ("hip", DispatchKey::HIP),
            ("fpga", DispatchKey::FPGA),
            ("vulkan", DispatchKey::Vulkan),
            ("privateuseone", DispatchKey::PrivateUse1),
            ("cuda:255", DispatchKey::CUDA),
        ];
        for (device, key) in cases {
            assert_eq!(DispatchKey::for_device(device).unwrap(), key, "{device}");
        }
        for device in ["cuda:0", "cpu:1", "meta:3"] {
            assert_eq!(
                DispatchKey::for_device(device).unwrap_err().message(),
                format!("Expected device_type string to not have a device index; got {device}")
            );
        }
        for ty in ["mkldnn", "opengl", "opencl", "ideep"] {
            assert_eq!(
                DispatchKey::for_device(ty).unwrap_err().message(),
                format!(
                    "This is a grandfathered Caffe2 device type {ty}, it shouldn't ever convert \
                     to a DispatchKey.  File a bug describing what you were doing if you think \
                     this is in error."
                )
            );
            assert!(ty.parse::<DeviceType>().unwrap().is_grandfathered());
        }
        assert!(DispatchKey::for_device("metal")
            .unwrap_err()
            .message()
            .starts_with("Expected one of"));
    }
}
