//! The thread's autocast state (enabled per device, dtype per device, cache switch, nesting) and
//! the ways to set it: [`AutocastGuard`], [`autocast`], [`autocast_with`].

use std::cell::{Cell, RefCell};
use std::marker::PhantomData;

use switchboard_dispatcher::{
    tls_is_dispatch_key_excluded, tls_set_dispatch_key_excluded, DispatchError, DispatchErrorKind,
    Dispatcher, Result,
};
use switchboard_keys::DeviceType;
use switchboard_tensor::{Device, ScalarType};

use crate::cache::clear_autocast_cache;
use crate::policy::{registered_policy, BackendPolicy};

thread_local! {
    /// Dtypes set on this thread, by device type; a device absent here uses its policy's default.
    static DTYPES: RefCell<Vec<(DeviceType, ScalarType)>> = const { RefCell::new(Vec::new()) };
    static CACHE_ENABLED: Cell<bool> = const { Cell::new(true) };
    /// The live regions of this thread, outermost first, with what each replaced (their
    /// number is PyTorch's nesting depth, `at::autocast::increment_nesting`).
    static REGIONS: RefCell<Vec<Region>> = const { RefCell::new(Vec::new()) };
    static NEXT_REGION: Cell<u64> = const { Cell::new(0) };
}

/// A live region: its id, its device type, and the settings it replaced when entered.
struct Region {
    id: u64,
    device_type: DeviceType,
    prev_enabled: bool,
    prev_dtype: ScalarType,
    prev_cache_enabled: bool,
}

// Note [Autocast regions dropped out of order]
// An `AutocastGuard` restores what it replaced, which is right when regions end innermost
// first (Note [Guards dropped out of order] in switchboard-dispatcher). A guard can be dropped
// early, though, and with regions A (outer) and B (inner) of one device ending A first, A would
// put back the state from before A and then B the state from before B, that is A's: autocast
// stays on for good. So the thread keeps its live regions in order, and a region that ends
// while others inside it live restores nothing now: it hands what it replaced to the next
// region inside it of the same device type (for that device's enabled flag and dtype) and to
// the next region inside it (for the cast cache switch, which all devices share); with no such
// region, nothing inside it set that state, and it is restored at once. So a device's state is
// its innermost live region's, and once all regions are gone, what it was before the first.
// The cast cache is emptied when the last live region ends.

fn policy(device_type: DeviceType) -> Result<&'static BackendPolicy> {
    // The policies register with the global dispatcher's start-up registrations.
    let _ = Dispatcher::global();
    registered_policy(device_type).ok_or_else(|| {
        DispatchError::from(DispatchErrorKind::Kernel(format!(
            "User specified an unsupported autocast device_type '{}'",
            device_type.name()
        )))
    })
}

/// Whether regions of `device_type` can be entered (`torch.amp.is_autocast_available`): its
/// backend has a registered policy. PyTorch defines autocast keys only for some backends
/// (`getAutocastRelatedKeySetFromBackend`: CPU, CUDA, XPU, IPU, HPU, XLA, MPS, MTIA, MAIA and
/// PrivateUse1); lazy and meta have none, so `torch.autocast("lazy")` is an error.
pub fn is_autocast_available(device_type: DeviceType) -> bool {
    policy(device_type).is_ok()
}

/// The device types with a registered policy, CPU first (what [`is_autocast_available`]
/// accepts).
pub fn autocast_device_types() -> Vec<DeviceType> {
    let _ = Dispatcher::global();
    crate::policy::registered_device_types()
}

/// Whether autocast is on for `device_type` on this thread (`torch.is_autocast_enabled(device)`):
/// its Autocast key is not excluded. False for a device without a policy.
pub fn is_autocast_enabled(device_type: DeviceType) -> bool {
    policy(device_type).is_ok_and(|p| !tls_is_dispatch_key_excluded(p.key))
}

/// Turns autocast on or off for `device_type` on this thread (`torch.set_autocast_enabled`),
/// by removing its Autocast key from the excluded set or adding it back.
pub fn set_autocast_enabled(device_type: DeviceType, enabled: bool) -> Result<()> {
    let p = policy(device_type)?;
    tls_set_dispatch_key_excluded(p.key, !enabled);
    Ok(())
}

/// The lower-precision dtype of `device_type`'s regions on this thread
/// (`torch.get_autocast_dtype`): the last one set, else the policy's default (bfloat16 on CPU).
pub fn get_autocast_dtype(device_type: DeviceType) -> Result<ScalarType> {
    let p = policy(device_type)?;
    Ok(DTYPES
        .with(|d| {
            d.borrow()
                .iter()
                .find(|(t, _)| *t == device_type)
                .map(|&(_, s)| s)
        })
        .unwrap_or(p.default_dtype))
}

/// Sets the lower-precision dtype of `device_type` on this thread (`torch.set_autocast_dtype`).
pub fn set_autocast_dtype(device_type: DeviceType, dtype: ScalarType) -> Result<()> {
    policy(device_type)?;
    DTYPES.with(|d| {
        let mut d = d.borrow_mut();
        match d.iter_mut().find(|(t, _)| *t == device_type) {
            Some(slot) => slot.1 = dtype,
            None => d.push((device_type, dtype)),
        }
    });
    Ok(())
}

/// Whether casts of weights are cached in this thread's regions (`torch.is_autocast_cache_enabled`).
pub fn is_autocast_cache_enabled() -> bool {
    CACHE_ENABLED.with(Cell::get)
}

/// Turns the cast cache on or off for this thread (`torch.set_autocast_cache_enabled`).
pub fn set_autocast_cache_enabled(enabled: bool) {
    CACHE_ENABLED.with(|c| c.set(enabled));
}

/// The options of an autocast region (`torch.autocast`'s arguments); `Default` is PyTorch's:
/// enabled, the device's default dtype, cache on.
#[derive(Clone, Copy, Debug)]
pub struct AutocastOptions {
    /// The lower-precision dtype; `None`: the device's default (bfloat16 on CPU).
    pub dtype: Option<ScalarType>,
    /// Whether the region autocasts (`enabled=False` turns autocast off inside it).
    pub enabled: bool,
    /// Whether weight casts are cached in the region.
    pub cache_enabled: bool,
}

impl Default for AutocastOptions {
    fn default() -> Self {
        AutocastOptions {
            dtype: None,
            enabled: true,
            cache_enabled: true,
        }
    }
}

impl AutocastOptions {
    /// Sets `dtype`.
    #[must_use]
    pub fn dtype(mut self, dtype: ScalarType) -> Self {
        self.dtype = Some(dtype);
        self
    }

    /// Sets `enabled`.
    #[must_use]
    pub fn enabled(mut self, enabled: bool) -> Self {
        self.enabled = enabled;
        self
    }

    /// Sets `cache_enabled`.
    #[must_use]
    pub fn cache_enabled(mut self, cache_enabled: bool) -> Self {
        self.cache_enabled = cache_enabled;
        self
    }
}

/// An autocast region on this thread until dropped (`torch.autocast` as a context manager):
/// entering sets the device's enabled flag, dtype and cache switch; dropping restores the
/// previous ones, and leaving the outermost region empties the cast cache. Regions nest.
///
/// ```
/// use switchboard_autocast::{is_autocast_enabled, AutocastGuard};
/// use switchboard_keys::DeviceType;
/// use switchboard_tensor::{Device, ScalarType};
///
/// {
///     let _region = AutocastGuard::new(Device::CPU, ScalarType::BFloat16)?;
///     assert!(is_autocast_enabled(DeviceType::CPU));
/// }
/// assert!(!is_autocast_enabled(DeviceType::CPU));
/// # Ok::<(), switchboard_dispatcher::DispatchError>(())
/// ```
#[must_use = "the region lasts only while the guard lives"]
pub struct AutocastGuard {
    id: u64,
    _not_send: PhantomData<*const ()>,
}

impl AutocastGuard {
    /// Enters a region of `device` with lower-precision dtype `dtype`.
    pub fn new(device: Device, dtype: ScalarType) -> Result<AutocastGuard> {
        Self::with_options(device, AutocastOptions::default().dtype(dtype))
    }

    /// Enters a region of `device` with `options`. An unsupported dtype disables the region
    /// with PyTorch's warning (on stderr), as `torch.autocast` does; a device without an
    /// autocast policy is an error.
    pub fn with_options(device: Device, options: AutocastOptions) -> Result<AutocastGuard> {
        let device_type = device.ty;
        let p = policy(device_type)?;
        let dtype = options.dtype.unwrap_or(get_autocast_dtype(device_type)?);
        let mut enabled = options.enabled;
        if enabled && !p.supported_dtypes.contains(&dtype) {
            let names: Vec<String> = p
                .supported_dtypes
                .iter()
                .map(|d| format!("torch.{}", d.name()))
                .collect();
            eprintln!(
                "UserWarning: In {} autocast, but the target dtype is not supported. Disabling \
                 autocast.\n{} Autocast only supports dtypes of {} currently.",
                device_type.name().to_uppercase(),
                device_type.name().to_uppercase(),
                names.join(", ")
            );
            enabled = false;
        }
        let id = NEXT_REGION.with(|n| n.replace(n.get().wrapping_add(1)));
        let region = Region {
            id,
            device_type,
            prev_enabled: is_autocast_enabled(device_type),
            prev_dtype: get_autocast_dtype(device_type)?,
            prev_cache_enabled: is_autocast_cache_enabled(),
        };
        set_autocast_enabled(device_type, enabled)?;
        set_autocast_dtype(device_type, dtype)?;
        set_autocast_cache_enabled(options.cache_enabled);
        REGIONS.with(|r| r.borrow_mut().push(region));
        Ok(AutocastGuard {
            id,
            _not_send: PhantomData,
        })
    }
}

impl Drop for AutocastGuard {
    /// Leaves the region (Note [Autocast regions dropped out of order]).
    fn drop(&mut self) {
        let (ended, device_restored, cache_restored, outermost) = REGIONS.with(|r| {
            let mut regions = r.borrow_mut();
            let Some(at) = regions.iter().position(|x| x.id == self.id) else {
                return (None, false, false, false);
            };
            let ended = regions.remove(at);
            // `regions[at..]` are the regions that were inside this one.
            let inner_same_device = regions[at..]
                .iter_mut()
                .find(|x| x.device_type == ended.device_type);
            let device_restored = match inner_same_device {
                Some(inner) => {
                    inner.prev_enabled = ended.prev_enabled;
                    inner.prev_dtype = ended.prev_dtype;
                    false
                }
                None => true,
            };
            let cache_restored = match regions.get_mut(at) {
                Some(inner) => {
                    inner.prev_cache_enabled = ended.prev_cache_enabled;
                    false
                }
                None => true,
            };
            let outermost = regions.is_empty();
            (Some(ended), device_restored, cache_restored, outermost)
        });
        let Some(ended) = ended else { return };
        if outermost {
            clear_autocast_cache();
        }
        // The device had a policy when the guard was made; these cannot fail.
        if device_restored {
            let _ = set_autocast_enabled(ended.device_type, ended.prev_enabled);
            let _ = set_autocast_dtype(ended.device_type, ended.prev_dtype);
        }
        if cache_restored {
            set_autocast_cache_enabled(ended.prev_cache_enabled);
        }
    }
}

/// Runs `f` in an autocast region of `device` with lower-precision dtype `dtype`
/// (`with torch.autocast(device, dtype=dtype): f()`).
///
/// ```
/// use switchboard_autocast::autocast;
/// use switchboard_cpu as _; // links the CPU kernels
/// use switchboard_ops as ops;
/// use switchboard_tensor::{Device, ScalarType};
///
/// let a = ops::ones(&[2, 3])?;
/// let b = ops::ones(&[3, 4])?;
/// let c = autocast(Device::CPU, ScalarType::BFloat16, || ops::mm(&a, &b))?;
/// assert_eq!(c.dtype(), ScalarType::BFloat16); // mm runs in lower precision
/// # Ok::<(), switchboard_dispatcher::DispatchError>(())
/// ```
pub fn autocast<T, E: From<DispatchError>>(
    device: Device,
    dtype: ScalarType,
    f: impl FnOnce() -> std::result::Result<T, E>,
) -> std::result::Result<T, E> {
    let _region = AutocastGuard::new(device, dtype)?;
    f()
}

/// [`autocast`] with all of `torch.autocast`'s options (`enabled=False` to turn it off inside
/// a region, the device's default dtype, the cache switch).
pub fn autocast_with<T, E: From<DispatchError>>(
    device: Device,
    options: AutocastOptions,
    f: impl FnOnce() -> std::result::Result<T, E>,
) -> std::result::Result<T, E> {
    let _region = AutocastGuard::with_options(device, options)?;
    f()
}
