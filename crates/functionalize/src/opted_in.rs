//! The device types whose backends opted into functionalization (PyTorch's
//! `device_opted_into_functionalization`: XLA and Lazy there).

use std::sync::atomic::{AtomicU32, Ordering};

use switchboard_keys::DeviceType;

/// One bit per device type (`DeviceType as u32`; there are fewer than 32).
static OPTED_IN: AtomicU32 = AtomicU32::new(0);

/// Declares that the backend of device type `ty` takes only the calls functionalization makes
/// on its values: no views of them, no writes through views (Note [Composite kernels over
/// persistent functional tensors]). The lazy backend does this for its device types.
pub fn opt_into_functionalization(ty: DeviceType) {
    OPTED_IN.fetch_or(1 << ty as u32, Ordering::Relaxed);
}

/// Whether the backend of device type `ty` opted into functionalization.
#[inline]
pub fn device_opted_into_functionalization(ty: DeviceType) -> bool {
    OPTED_IN.load(Ordering::Relaxed) & (1 << ty as u32) != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_device_type_opts_in_alone() {
        assert!(!device_opted_into_functionalization(
            DeviceType::PrivateUse3
        ));
        opt_into_functionalization(DeviceType::PrivateUse3);
        assert!(device_opted_into_functionalization(DeviceType::PrivateUse3));
        assert!(!device_opted_into_functionalization(DeviceType::CPU));
        assert!(DeviceType::ALL.len() < 32);
    }
}
