//! `BackendComponent`: the low 16 bits of a [`DispatchKeySet`](crate::DispatchKeySet).

use std::fmt;

/// A backend bit of a [`DispatchKeySet`](crate::DispatchKeySet).
///
/// The numeric value is PyTorch's: `InvalidBit = 0`, `CPUBit = 1`, ... `MetaBit = 16`. Bit `v - 1`
/// of a key set's raw representation holds backend `v` (so `CPUBit` is bit 0).
///
/// ```
/// use switchboard_keys::BackendComponent;
/// assert_eq!(BackendComponent::CPUBit as u8, 1);
/// assert_eq!(BackendComponent::from_index(16), Some(BackendComponent::MetaBit));
/// ```
#[allow(clippy::upper_case_acronyms, missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum BackendComponent {
    InvalidBit = 0,
    CPUBit,
    CUDABit,
    HIPBit,
    XLABit,
    MPSBit,
    IPUBit,
    XPUBit,
    HPUBit,
    VEBit,
    LazyBit,
    MTIABit,
    MAIABit,
    PrivateUse1Bit,
    PrivateUse2Bit,
    PrivateUse3Bit,
    MetaBit,
}

/// Number of backend bits in a key set (`num_backends` in PyTorch).
pub const NUM_BACKENDS: u8 = 16;

/// Mask of the backend bits of a key set's raw representation.
pub const FULL_BACKEND_MASK: u64 = (1u64 << NUM_BACKENDS) - 1;

impl BackendComponent {
    /// Every backend component, `InvalidBit` first, in numeric order.
    pub const ALL: [BackendComponent; 17] = [
        Self::InvalidBit,
        Self::CPUBit,
        Self::CUDABit,
        Self::HIPBit,
        Self::XLABit,
        Self::MPSBit,
        Self::IPUBit,
        Self::XPUBit,
        Self::HPUBit,
        Self::VEBit,
        Self::LazyBit,
        Self::MTIABit,
        Self::MAIABit,
        Self::PrivateUse1Bit,
        Self::PrivateUse2Bit,
        Self::PrivateUse3Bit,
        Self::MetaBit,
    ];

    /// The component with numeric value `v` (`0..=16`).
    #[inline]
    pub const fn from_index(v: u8) -> Option<BackendComponent> {
        if v <= NUM_BACKENDS {
            Some(Self::ALL[v as usize])
        } else {
            None
        }
    }

    /// The short backend name used in runtime key names (`CPU`, `Lazy`, `PrivateUse1`...);
    /// `Undefined` for `InvalidBit`.
    pub const fn backend_name(self) -> &'static str {
        match self {
            Self::InvalidBit => "Undefined",
            Self::CPUBit => "CPU",
            Self::CUDABit => "CUDA",
            Self::HIPBit => "HIP",
            Self::XLABit => "XLA",
            Self::MPSBit => "MPS",
            Self::IPUBit => "IPU",
            Self::XPUBit => "XPU",
            Self::HPUBit => "HPU",
            Self::VEBit => "VE",
            Self::LazyBit => "Lazy",
            Self::MTIABit => "MTIA",
            Self::MAIABit => "MAIA",
            Self::PrivateUse1Bit => "PrivateUse1",
            Self::PrivateUse2Bit => "PrivateUse2",
            Self::PrivateUse3Bit => "PrivateUse3",
            Self::MetaBit => "Meta",
        }
    }
}

impl fmt::Display for BackendComponent {
    /// PyTorch's `toString(BackendComponent)`: `CPUBit`, `CUDABit`, ... Note that PyTorch
    /// prints the MTIA and MAIA bits without the `Bit` suffix; we keep that quirk.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidBit => f.write_str("InvalidBit"),
            Self::MTIABit | Self::MAIABit => f.write_str(self.backend_name()),
            _ => write!(f, "{}Bit", self.backend_name()),
        }
    }
}
