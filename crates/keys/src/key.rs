//! `DispatchKey`: PyTorch's dispatch key enum, its names, parser and classification.

use std::fmt;

use crate::backend::{BackendComponent, NUM_BACKENDS};

include!("key_list.rs");

macro_rules! define_dispatch_key {
    ($($ident:ident = $value:literal => $name:literal,)*) => {
        /// A dispatch key, with PyTorch 2.15's names and numeric values (`0..=155`).
        ///
        /// Four kinds of keys share this enum (see Note [Kinds of dispatch keys]):
        /// functionality keys (`0..=46`), the per-backend runtime keys that the six per-backend
        /// functionalities expand to (`48..=149`, e.g. `CPU`, `SparseCUDA`, `AutogradMeta`), and
        /// alias keys (`150..=155`, e.g. `CompositeImplicitAutograd`). The `StartOf*Backends`
        /// slots are the "invalid backend" instances of a per-backend functionality and print as
        /// `Undefined`, `QuantizedUndefined`, ...; value 47 prints as `UnknownUnknown`.
        ///
        /// ```
        /// use switchboard_keys::DispatchKey;
        /// assert_eq!(DispatchKey::AutogradCPU as u8, 134);
        /// assert_eq!(DispatchKey::AutogradCPU.to_string(), "AutogradCPU");
        /// assert_eq!("SparseCUDA".parse::<DispatchKey>().unwrap(), DispatchKey::SparseCUDA);
        /// assert!("AutogradHIP".parse::<DispatchKey>().is_err()); // PyTorch's parser rejects it too
        /// ```
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[repr(u8)]
        pub enum DispatchKey {
            $(#[doc = $name] $ident = $value,)*
        }

        impl DispatchKey {
            /// Every key in numeric order: `ALL[k as usize] == k`.
            pub const ALL: [DispatchKey; 156] = [$(DispatchKey::$ident,)*];

            const NAMES: [&'static str; 156] = [$($name,)*];
        }
    };
}
for_all_dispatch_keys!(define_dispatch_key);

// Note [Kinds of dispatch keys]
// A DispatchKeySet has one bit per *functionality* (Dense, Sparse, AutogradFunctionality,
// BackendSelect, ...) and one bit per *backend* (CPU, CUDA, ...). Six functionalities are
// "per backend": combined with a backend bit they name a runtime key (Dense+CPU = CPU,
// AutogradFunctionality+CUDA = AutogradCUDA), and each such runtime key gets its own slot in an
// operator's dispatch table. The other functionalities are runtime keys themselves and own a
// single slot. Alias keys (Autograd, CompositeImplicitAutograd, ...) never appear in a key set:
// a kernel registered to one is copied into the slots of the runtime keys the alias covers.

/// Number of functionality keys, `Undefined` included (`num_functionality_keys`).
pub const NUM_FUNCTIONALITY_KEYS: u8 = DispatchKey::EndOfFunctionalityKeys as u8;

/// The six per-backend functionalities, in numeric order.
pub const PER_BACKEND_FUNCTIONALITIES: [DispatchKey; 6] = [
    DispatchKey::Dense,
    DispatchKey::Quantized,
    DispatchKey::Sparse,
    DispatchKey::SparseCsr,
    DispatchKey::NestedTensor,
    DispatchKey::AutogradFunctionality,
];

/// The error of [`DispatchKey::parse`] and of device-string conversion: the input and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyError {
    message: String,
}

impl KeyError {
    pub(crate) fn new(message: String) -> Self {
        KeyError { message }
    }

    /// The message, in PyTorch's words.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for KeyError {}

/// Bitmasks (bit = `BackendComponent as u8`) of the backends whose runtime key of a given
/// non-dense per-backend functionality PyTorch's `parseDispatchKey` knows by name. Every dense
/// backend key parses; the other functionalities' keys parse only for these backends.
const fn parseable_backends(functionality: DispatchKey) -> u32 {
    use BackendComponent as B;
    const fn mask(bs: &[BackendComponent]) -> u32 {
        let mut m = 0;
        let mut i = 0;
        while i < bs.len() {
            m |= 1 << bs[i] as u32;
            i += 1;
        }
        m
    }
    match functionality {
        DispatchKey::Dense => !1,
        DispatchKey::Quantized => mask(&[B::CPUBit, B::CUDABit, B::XPUBit, B::PrivateUse1Bit]),
        DispatchKey::Sparse => mask(&[
            B::CPUBit,
            B::CUDABit,
            B::MPSBit,
            B::HIPBit,
            B::XPUBit,
            B::VEBit,
            B::MetaBit,
            B::PrivateUse1Bit,
        ]),
        DispatchKey::SparseCsr => mask(&[
            B::CPUBit,
            B::CUDABit,
            B::HIPBit,
            B::XPUBit,
            B::VEBit,
            B::MetaBit,
            B::PrivateUse1Bit,
            B::MPSBit,
        ]),
        DispatchKey::NestedTensor => mask(&[
            B::CPUBit,
            B::CUDABit,
            B::XPUBit,
            B::HPUBit,
            B::MetaBit,
            B::PrivateUse1Bit,
        ]),
        DispatchKey::AutogradFunctionality => mask(&[
            B::CPUBit,
            B::CUDABit,
            B::XLABit,
            B::LazyBit,
            B::MetaBit,
            B::IPUBit,
            B::XPUBit,
            B::MPSBit,
            B::HPUBit,
            B::PrivateUse1Bit,
            B::PrivateUse2Bit,
            B::PrivateUse3Bit,
        ]),
        _ => 0,
    }
}

impl DispatchKey {
    /// The key with numeric value `v`, if `v <= 155`.
    #[inline]
    pub const fn from_u8(v: u8) -> Option<DispatchKey> {
        if (v as usize) < Self::ALL.len() {
            Some(Self::ALL[v as usize])
        } else {
            None
        }
    }

    /// PyTorch's `toString(DispatchKey)`.
    #[inline]
    pub const fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// Parses a key name exactly as PyTorch's `c10::parseDispatchKey` does: the names of all
    /// functionality, dense-backend and alias keys, and the names of a fixed subset of the other
    /// per-backend runtime keys. `QuantizedUndefined`, `AutogradHIP`, `autograd`... are rejected.
    pub fn parse(name: &str) -> Result<DispatchKey, KeyError> {
        // `position` finds value 0 for "Undefined" (value 48 shares the name).
        let found = Self::NAMES
            .iter()
            .position(|n| *n == name)
            .map(|i| Self::ALL[i]);
        match found {
            Some(k) if k.is_parseable() => Ok(k),
            _ => Err(KeyError::new(format!(
                "could not parse dispatch key: {name}"
            ))),
        }
    }

    fn is_parseable(self) -> bool {
        if self == DispatchKey::EndOfFunctionalityKeys {
            return false;
        }
        if !self.is_runtime_per_backend() {
            return true;
        }
        let bc = self.to_backend_component();
        bc != BackendComponent::InvalidBit
            && parseable_backends(self.to_functionality_key()) & (1 << bc as u32) != 0
    }

    /// True for the six alias keys (`Autograd`, `CompositeImplicitAutograd`, ...).
    #[inline]
    pub const fn is_alias(self) -> bool {
        self as u8 > DispatchKey::StartOfAutogradFunctionalityBackends as u8 + NUM_BACKENDS
    }

    /// True for a functionality key (`0..=47`), including `Undefined`.
    #[inline]
    pub const fn is_functionality(self) -> bool {
        self as u8 <= DispatchKey::EndOfFunctionalityKeys as u8
    }

    /// True for a per-backend runtime key or its invalid-backend slot (`48..=149`).
    #[inline]
    pub const fn is_runtime_per_backend(self) -> bool {
        !self.is_functionality() && !self.is_alias()
    }

    /// True for Dense, Quantized, Sparse, SparseCsr, NestedTensor and AutogradFunctionality
    /// (`isPerBackendFunctionalityKey`).
    #[inline]
    pub const fn is_per_backend_functionality(self) -> bool {
        matches!(
            self,
            DispatchKey::Dense
                | DispatchKey::Quantized
                | DispatchKey::Sparse
                | DispatchKey::SparseCsr
                | DispatchKey::NestedTensor
                | DispatchKey::AutogradFunctionality
        )
    }

    /// The functionality of a key (`toFunctionalityKey`): itself for functionality keys, the
    /// per-backend functionality for runtime keys (`SparseCPU` -> `Sparse`), `Undefined` for
    /// alias keys.
    #[inline]
    pub const fn to_functionality_key(self) -> DispatchKey {
        let v = self as u8;
        if self.is_functionality() {
            self
        } else if self.is_alias() {
            DispatchKey::Undefined
        } else {
            let group = (v - DispatchKey::StartOfDenseBackends as u8) / (NUM_BACKENDS + 1);
            PER_BACKEND_FUNCTIONALITIES[group as usize]
        }
    }

    /// The backend of a per-backend runtime key (`toBackendComponent`); `InvalidBit` for all
    /// other keys.
    #[inline]
    pub const fn to_backend_component(self) -> BackendComponent {
        if self.is_runtime_per_backend() {
            let v = (self as u8 - DispatchKey::StartOfDenseBackends as u8) % (NUM_BACKENDS + 1);
            BackendComponent::ALL[v as usize]
        } else {
            BackendComponent::InvalidBit
        }
    }

    /// The runtime key of a per-backend functionality on a backend
    /// (`toRuntimePerBackendFunctionalityKey`): `(Sparse, CUDABit)` -> `SparseCUDA`. `Undefined`
    /// when `functionality` is not per-backend.
    #[inline]
    pub const fn to_runtime_per_backend_functionality_key(
        functionality: DispatchKey,
        backend: BackendComponent,
    ) -> DispatchKey {
        let start = match functionality {
            DispatchKey::Dense => DispatchKey::StartOfDenseBackends,
            DispatchKey::Quantized => DispatchKey::StartOfQuantizedBackends,
            DispatchKey::Sparse => DispatchKey::StartOfSparseBackends,
            DispatchKey::SparseCsr => DispatchKey::StartOfSparseCsrBackends,
            DispatchKey::NestedTensor => DispatchKey::StartOfNestedTensorBackends,
            DispatchKey::AutogradFunctionality => DispatchKey::StartOfAutogradFunctionalityBackends,
            _ => return DispatchKey::Undefined,
        };
        Self::ALL[start as usize + backend as usize]
    }

    /// True for a key whose kernels are "backend" kernels (`isBackendDispatchKey`): not
    /// `Undefined`, not an alias, not `NestedTensor`, and covered by `CompositeExplicitAutograd`.
    pub fn is_backend_key(self) -> bool {
        self != DispatchKey::Undefined
            && !self.is_alias()
            && self != DispatchKey::NestedTensor
            && crate::alias::BACKEND_DISPATCH_KEYSET.has(self)
    }
}

impl fmt::Display for DispatchKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for DispatchKey {
    type Err = KeyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DispatchKey::parse(s)
    }
}

impl From<DispatchKey> for u8 {
    fn from(k: DispatchKey) -> u8 {
        k as u8
    }
}

impl TryFrom<u8> for DispatchKey {
    type Error = KeyError;
    fn try_from(v: u8) -> Result<Self, KeyError> {
        DispatchKey::from_u8(v)
            .ok_or_else(|| KeyError::new(format!("invalid dispatch key value: {v}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_match_pytorch() {
        assert_eq!(DispatchKey::PythonDispatcher as u8, 46);
        assert_eq!(DispatchKey::CPU as u8, 49);
        assert_eq!(DispatchKey::Meta as u8, 64);
        assert_eq!(DispatchKey::AutogradCPU as u8, 134);
        assert_eq!(
            DispatchKey::CompositeExplicitAutogradNonFunctional as u8,
            155
        );
        for (i, k) in DispatchKey::ALL.iter().enumerate() {
            assert_eq!(*k as usize, i);
        }
    }

    #[test]
    fn runtime_keys_roundtrip() {
        for k in DispatchKey::ALL {
            if k.is_runtime_per_backend() {
                let back = DispatchKey::to_runtime_per_backend_functionality_key(
                    k.to_functionality_key(),
                    k.to_backend_component(),
                );
                assert_eq!(back, k);
            }
        }
        assert_eq!(
            DispatchKey::SparseCsrMeta.to_functionality_key(),
            DispatchKey::SparseCsr
        );
        assert_eq!(
            DispatchKey::Autograd.to_functionality_key(),
            DispatchKey::Undefined
        );
    }

    #[test]
    fn names_and_parse() {
        assert_eq!(DispatchKey::StartOfDenseBackends.name(), "Undefined");
        assert_eq!(
            DispatchKey::StartOfAutogradFunctionalityBackends.name(),
            "AutogradUndefined"
        );
        assert_eq!(DispatchKey::EndOfFunctionalityKeys.name(), "UnknownUnknown");
        assert_eq!(DispatchKey::parse("Undefined"), Ok(DispatchKey::Undefined));
        assert!(DispatchKey::parse("UnknownUnknown").is_err());
        assert!(DispatchKey::parse("cpu").is_err());
        let err = DispatchKey::parse("CatchAll").unwrap_err();
        assert_eq!(err.to_string(), "could not parse dispatch key: CatchAll");
        let failing = DispatchKey::ALL
            .iter()
            .filter(|k| DispatchKey::parse(k.name()).is_err());
        assert_eq!(
            failing.count(),
            48,
            "PyTorch rejects the names of 48 of the 156 values"
        );
    }
}
