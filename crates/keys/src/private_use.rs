//! Names for the private-use backends: PyTorch's `rename_privateuse1_backend`.

use std::sync::{Mutex, OnceLock};

use crate::backend::BackendComponent;
use crate::device::DeviceType;
use crate::key::KeyError;

// Note [Renaming a private-use backend]
// An out-of-tree backend built on PrivateUse1 gives it its own device name, once per process
// (PyTorch's `torch.utils.rename_privateuse1_backend("npu")`, c10's
// `register_privateuse1_backend`). From then on the name parses as a device type (`npu`,
// `npu:0`, after every built-in name, so a built-in name keeps its meaning) and PrivateUse1
// devices print with it, lower-cased as PyTorch prints it; `privateuseone` still parses.
// Dispatch key names do not change (`PrivateUse1`, `AutogradPrivateUse1`).
// As in PyTorch: naming it again with the same name is accepted, with another name is an error,
// and the in-tree device names `cpu, cuda, hip, mps, xpu, mtia` are refused. Names are kept per
// backend component, so PrivateUse2 and PrivateUse3 take names the same way, and have devices
// of their own (Note [Devices of PrivateUse2 and PrivateUse3]): up to three out-of-tree
// backends side by side, which PyTorch does not allow. So that a device string names one
// backend, two private-use backends cannot share a name (compared lower-cased, as devices are
// printed and parsed): the second claim is an error naming the backend that holds it. And
// PrivateUse2 and PrivateUse3, which PyTorch does not constrain, may not take any built-in
// device type name, which would never parse as theirs. A name is stored once and lives for the
// process (at most three small strings), so it can be handed out as `&'static str`; names are
// read without locking, claims are serialised.

/// A registered name: as given (for messages), and lower-cased (the device name).
struct BackendName {
    given: &'static str,
    lower: &'static str,
}

static NAMES: [OnceLock<BackendName>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];

/// Held while a name is claimed, so that two backends cannot take one name at once.
static CLAIMS: Mutex<()> = Mutex::new(());

/// The device names a private-use backend may not take (PyTorch's list).
const IN_TREE_DEVICE_NAMES: [&str; 6] = ["cpu", "cuda", "hip", "mps", "xpu", "mtia"];

const PRIVATE_USE: [BackendComponent; 3] = [
    BackendComponent::PrivateUse1Bit,
    BackendComponent::PrivateUse2Bit,
    BackendComponent::PrivateUse3Bit,
];

fn slot(backend: BackendComponent) -> Option<&'static OnceLock<BackendName>> {
    match backend {
        BackendComponent::PrivateUse1Bit => Some(&NAMES[0]),
        BackendComponent::PrivateUse2Bit => Some(&NAMES[1]),
        BackendComponent::PrivateUse3Bit => Some(&NAMES[2]),
        _ => None,
    }
}

impl BackendComponent {
    /// Names a private-use backend (see Note [Renaming a private-use backend]).
    ///
    /// ```
    /// use switchboard_keys::{BackendComponent, DeviceType};
    /// BackendComponent::PrivateUse3Bit.rename("my_accel").unwrap();
    /// assert_eq!(BackendComponent::PrivateUse3Bit.renamed(), Some("my_accel"));
    /// assert_eq!("my_accel:0".parse::<DeviceType>().is_err(), true); // a device string, not a type
    /// assert_eq!("my_accel".parse::<DeviceType>().unwrap(), DeviceType::PrivateUse3);
    /// // Once named, a private-use backend keeps its name, and no other backend can take it.
    /// assert!(BackendComponent::PrivateUse3Bit.rename("other").is_err());
    /// assert!(BackendComponent::PrivateUse3Bit.rename("my_accel").is_ok());
    /// let err = BackendComponent::PrivateUse2Bit.rename("my_accel").unwrap_err();
    /// assert_eq!(err.message(), "Cannot name the PrivateUse2 backend 'my_accel': the \
    ///                            PrivateUse3 backend already has that name");
    /// ```
    pub fn rename(self, name: &str) -> Result<(), KeyError> {
        let slot = slot(self).ok_or_else(|| {
            KeyError::new(format!(
                "only the private-use backends (PrivateUse1Bit, PrivateUse2Bit, PrivateUse3Bit) \
                 can be renamed, not {self}"
            ))
        })?;
        let _claiming = CLAIMS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(current) = slot.get() {
            if current.given == name {
                return Ok(());
            }
            return Err(KeyError::new(if self == BackendComponent::PrivateUse1Bit {
                format!(
                    "torch.register_privateuse1_backend() has already been set! Current \
                         backend: {}",
                    current.given
                )
            } else {
                format!(
                    "the {self} backend has already been named! Current backend: {}",
                    current.given
                )
            }));
        }
        if IN_TREE_DEVICE_NAMES.contains(&name) {
            return Err(KeyError::new(format!(
                "Cannot register privateuse1 backend with in-tree device name: {name}"
            )));
        }
        let lower = name.to_ascii_lowercase();
        let backend = self.backend_name();
        if self != BackendComponent::PrivateUse1Bit {
            if let Some(ty) = DeviceType::PARSEABLE
                .iter()
                .find(|d| d.builtin_name() == lower)
            {
                return Err(KeyError::new(format!(
                    "Cannot name the {backend} backend '{name}': it is the name of the built-in \
                     device type {}",
                    ty.builtin_name()
                )));
            }
        }
        let holder = PRIVATE_USE
            .into_iter()
            .find(|other| *other != self && other.renamed() == Some(lower.as_str()));
        if let Some(other) = holder {
            return Err(KeyError::new(format!(
                "Cannot name the {backend} backend '{name}': the {} backend already has that name",
                other.backend_name()
            )));
        }
        let named = BackendName {
            given: Box::leak(name.into()),
            lower: Box::leak(lower.into_boxed_str()),
        };
        // Claims are serialised and the slot was empty: this value is the one set.
        let _ = slot.set(named);
        Ok(())
    }

    /// The name a private-use backend was given, lower-cased as PyTorch prints it
    /// (`get_privateuse1_backend`); `None` if it was not renamed or is not a private-use
    /// backend.
    pub fn renamed(self) -> Option<&'static str> {
        slot(self).and_then(OnceLock::get).map(|n| n.lower)
    }
}

/// Names the PrivateUse1 backend's device type (PyTorch's `rename_privateuse1_backend`), once
/// per process: the name then parses as a device string and PrivateUse1 devices print with it.
/// See Note [Renaming a private-use backend].
///
/// ```
/// use switchboard_keys::{rename_privateuse1_backend, DeviceType, DispatchKey};
/// rename_privateuse1_backend("npu").unwrap();
/// assert_eq!(DeviceType::PrivateUse1.name(), "npu");
/// assert_eq!(DispatchKey::for_device("npu").unwrap(), DispatchKey::PrivateUse1);
/// assert!(rename_privateuse1_backend("cuda").is_err());
/// ```
pub fn rename_privateuse1_backend(name: &str) -> Result<(), KeyError> {
    BackendComponent::PrivateUse1Bit.rename(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_private_use_backends_take_names() {
        let err = BackendComponent::CPUBit.rename("foo").unwrap_err();
        assert!(err.message().contains("not CPUBit"), "{err}");
        assert_eq!(BackendComponent::CPUBit.renamed(), None);
        assert_eq!(BackendComponent::MetaBit.renamed(), None);
    }

    #[test]
    fn in_tree_names_are_refused_and_leave_no_trace() {
        for name in IN_TREE_DEVICE_NAMES {
            let err = BackendComponent::PrivateUse2Bit.rename(name).unwrap_err();
            assert_eq!(
                err.message(),
                format!("Cannot register privateuse1 backend with in-tree device name: {name}")
            );
        }
        assert_eq!(BackendComponent::PrivateUse2Bit.renamed(), None);
        BackendComponent::PrivateUse2Bit.rename("Second").unwrap();
        assert_eq!(BackendComponent::PrivateUse2Bit.renamed(), Some("second"));
        let err = BackendComponent::PrivateUse2Bit
            .rename("third")
            .unwrap_err();
        assert!(err.message().ends_with("Current backend: Second"), "{err}");
    }

    #[test]
    fn racing_renames_agree_on_one_name() {
        // PrivateUse3 is only renamed here and in the rustdoc example (another process).
        let names = ["alpha", "beta", "gamma", "delta"];
        let results: Vec<bool> = std::thread::scope(|s| {
            let handles: Vec<_> = names
                .iter()
                .map(|n| s.spawn(move || BackendComponent::PrivateUse3Bit.rename(n).is_ok()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(results.iter().filter(|ok| **ok).count(), 1);
        let winner = names[results.iter().position(|ok| *ok).unwrap()];
        assert_eq!(BackendComponent::PrivateUse3Bit.renamed(), Some(winner));
    }
}
