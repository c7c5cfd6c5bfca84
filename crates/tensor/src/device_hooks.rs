//! [`DeviceHooks`]: functions a backend whose tensors keep no data here registers per device
//! type, for the places this crate needs that backend's code (Notes [Host copies of tensors
//! without data] and [Growing storages without data]).

use std::sync::RwLock;

use switchboard_keys::DeviceType;

use crate::error::{Result, TensorError};
use crate::tensor::TensorImpl;

/// One function `F` per device type. CPU and meta tensors are handled by this crate itself, so
/// neither can register one, and [`for_tensor`](Self::for_tensor) never consults the table for
/// a tensor with data or a meta tensor: the common paths take no lock.
pub(crate) struct DeviceHooks<F: Copy> {
    table: RwLock<Vec<(DeviceType, F)>>,
}

impl<F: Copy> DeviceHooks<F> {
    pub(crate) const fn new() -> Self {
        DeviceHooks {
            table: RwLock::new(Vec::new()),
        }
    }

    /// Registers `f` for devices of type `ty`, replacing an earlier registration; `refusal`
    /// is the error's message for `cpu` and `meta`.
    pub(crate) fn register(
        &self,
        ty: DeviceType,
        f: F,
        refusal: impl FnOnce() -> String,
    ) -> Result<()> {
        if matches!(ty, DeviceType::CPU | DeviceType::Meta) {
            return Err(TensorError::invalid(refusal()));
        }
        let mut table = self.table.write().unwrap_or_else(|e| e.into_inner());
        table.retain(|(t, _)| *t != ty);
        table.push((ty, f));
        Ok(())
    }

    /// The function registered for `t`'s device type, when `t` is a tensor without data on a
    /// device other than meta.
    pub(crate) fn for_tensor(&self, t: &TensorImpl) -> Option<F> {
        if t.has_data() || t.is_meta() {
            return None;
        }
        let table = self.table.read().unwrap_or_else(|e| e.into_inner());
        table
            .iter()
            .find(|(ty, _)| *ty == t.device().ty)
            .map(|(_, f)| *f)
    }
}
