//! [`LazyBackend`]: everything one lazy device keeps (its pending graph, graph cache, executor,
//! statistics, operator filter and overhead profile), and the process-wide table of lazy
//! devices, `lazy:0` being the default.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, RwLock};
use std::time::Instant;

use switchboard_dispatcher::{IValue, Result};
use switchboard_keys::{DeviceType, DispatchKeySet};
use switchboard_tensor::{Device, Tensor, TensorError};

use crate::cache::GraphCache;
use crate::executor::{CpuExecutor, Executor};
use crate::intercepted_op::InterceptedOp;
use crate::op_filter::OperatorFilter;
use crate::pending_graph::PendingGraph;
use crate::registration::Registrations;
use crate::stats::Counters;
use crate::storage::LazyStorage;

// Note [Lazy devices]
// Each lazy device (`lazy:0`, `lazy:1`, ...) is one `LazyBackend` value, as a torch_xla /
// lazy-tensor-core backend keeps a device context per device: the device's pending graph and
// its lock, the graph cache, the executor, the counters, the operator filter of
// `disable_ops`, the overhead profile. Two devices capture and run independently: a sync of
// one runs only its graph, and each has its own statistics. Every lazy storage knows its
// device's backend, so a captured call finds the state it records into from its operands (or,
// for a factory, from its `device` argument) without a look-up; a call mixing tensors of two
// lazy devices fails as eager does for two CUDA devices. The free functions of this crate
// (`sync`, `stats`, `set_executor`, ...) act on the default device, `lazy:0`.
// What is not per device: what an operator is to the lazy backend (`InterceptedOp`, made from
// the dispatcher's process-wide tables), the intercept log (a process-wide diagnostic, as
// PyTorch's logging environment variables are), and lazy mode, which is per thread as grad
// mode is. The backends live as long as the process (a device does not go away), in a table
// of `MAX_LAZY_DEVICES`, each made on first use.

/// How many devices of each lazy device type there are: `lazy:0` to `lazy:63`.
pub const MAX_LAZY_DEVICES: usize = 64;

/// The device types the capture can run on: `lazy`, and the three private-use backends
/// (Note [Lazy device types]).
const DEVICE_TYPES: usize = 4;

// Note [Lazy device types]
// The capture is not tied to the `lazy` device type: [`install`](crate::install) puts the
// same kernels and fallback on a private-use backend under a name of its own (Genie's
// `remote_accelerator` is PrivateUse1 renamed, as its aten registrations use PrivateUse1), and
// that backend's devices then capture and run graphs exactly as `lazy` ones do, each device
// with its own `LazyBackend` (Note [Lazy devices]), typically with an executor of its own.
// What depends on the device type is only which device a tensor or a `device` argument names:
// every check asks `is_lazy_device_type`, and the CPU executor maps whatever lazy device the
// graph names to the CPU. `lazy` is always a lazy device type; a private-use one is once
// installed, and stays so (registrations are for the process's life).

// Note [Eager calls on the executor]
// With lazy mode off, a call on a lazy device runs at once: by default on the host's CPU, on
// its materialised inputs (interception layer 3). A device whose executor runs elsewhere (a
// remote worker, whose memory holds the device's data) can ask for eager calls to run there
// instead (`set_eager_on_executor`): the call is captured as in lazy mode and the device's
// graph runs at once, so each call is a graph of its own and its results are the executor's
// data, as an ordinary tensor of an accelerator lives in the accelerator's memory. Calls that
// cannot be captured, and operators given an implementation with `register_op`, still take
// the default path.

static BACKENDS: [[OnceLock<LazyBackend>; MAX_LAZY_DEVICES]; DEVICE_TYPES] =
    [const { [const { OnceLock::new() }; MAX_LAZY_DEVICES] }; DEVICE_TYPES];

/// Which private-use device types are lazy ones (installed), by slot (slot 0, `lazy`, always).
static INSTALLED: [AtomicBool; DEVICE_TYPES] = [
    AtomicBool::new(true),
    AtomicBool::new(false),
    AtomicBool::new(false),
    AtomicBool::new(false),
];

/// The slot of device type `ty` in the tables (Note [Lazy device types]).
#[inline]
pub(crate) fn slot_of(ty: DeviceType) -> Option<usize> {
    match ty {
        DeviceType::Lazy => Some(0),
        DeviceType::PrivateUse1 => Some(1),
        DeviceType::PrivateUse2 => Some(2),
        DeviceType::PrivateUse3 => Some(3),
        _ => None,
    }
}

/// Marks the private-use device type of `slot` as a lazy one.
pub(crate) fn mark_installed(slot: usize) {
    INSTALLED[slot].store(true, Ordering::Release);
}

/// Whether tensors of device type `ty` are captured by this crate: `lazy`, or a private-use
/// type [`install`](crate::install)ed (Note [Lazy device types]).
#[inline]
pub fn is_lazy_device_type(ty: DeviceType) -> bool {
    ty == DeviceType::Lazy || slot_of(ty).is_some_and(|s| INSTALLED[s].load(Ordering::Acquire))
}

/// `d` with its index (`lazy` alone is `lazy:0`).
#[inline]
pub(crate) fn indexed(d: Device) -> Device {
    Device::with_index(d.ty, d.index.unwrap_or(0))
}

/// One lazy device's state (Note [Lazy devices]). Get it with [`backend`] or
/// [`default_backend`]; the crate's free functions act on the default one.
///
/// ```
/// use switchboard_lazy as lazy;
/// use switchboard_ops as ops;
/// use switchboard_tensor::Device;
///
/// let dev: Device = "lazy:1".parse().unwrap();
/// let other = lazy::backend(dev).unwrap();
/// let x = ops::ones_with(&[3], ops::OnesOptions::default().device(dev)).unwrap();
/// let y = ops::exp(&x).unwrap();
/// assert_eq!(y.device().to_string(), "lazy:1");
/// assert!(other.pending_calls() > 0); // captured on lazy:1, not on the default device
/// other.sync().unwrap();
/// assert_eq!(other.pending_calls(), 0);
/// ```
pub struct LazyBackend {
    device: Device,
    /// The key set of its tensors (its device's dense key set).
    pub(crate) key_set: DispatchKeySet,
    /// The pending graph, locked by `lock_pending_graph` (pending_graph.rs).
    pub(crate) pending: Mutex<PendingGraph>,
    /// Signalled when a sync ends (Note [Running without the lock]).
    pub(crate) sync_done: Condvar,
    pub(crate) cache: GraphCache,
    executor: RwLock<Arc<dyn Executor>>,
    pub(crate) stats: Counters,
    /// Whether the per-operator overhead profile is on (Note [Zero-cost profiling]).
    profiling: AtomicBool,
    /// `enable_ops` / `disable_ops` (Note [Selective interception]).
    pub(crate) filter: OperatorFilter,
    /// `register_op` (Note [Operators registered at run time]).
    pub(crate) registrations: Registrations,
    /// See [`LazyBackend::set_eager_on_executor`].
    eager_on_executor: AtomicBool,
    /// The per-operator counts, by operator id.
    op_counts: RwLock<HashMap<usize, Arc<OpCounts>>>,
}

/// The counts of one operator on one lazy device.
pub(crate) struct OpCounts {
    pub op: Arc<InterceptedOp>,
    pub fallback_captures: AtomicU64,
    pub eager: AtomicU64,
    pub profile_count: AtomicU64,
    pub profile_ns: AtomicU64,
    /// Calls and time reported by `record_execution_time`.
    pub recorded_calls: AtomicU64,
    pub recorded_ns: AtomicU64,
}

impl OpCounts {
    fn reset(&self) {
        for c in [
            &self.fallback_captures,
            &self.eager,
            &self.profile_count,
            &self.profile_ns,
            &self.recorded_calls,
            &self.recorded_ns,
        ] {
            c.store(0, Ordering::Relaxed);
        }
    }
}

/// The backend of lazy device `device` (`lazy` alone is `lazy:0`; a device of a type
/// [`install`](crate::install)ed on a private-use backend, such as `remote_accelerator:0`).
pub fn backend(device: Device) -> Result<&'static LazyBackend> {
    let slot = match slot_of(device.ty) {
        Some(s) if is_lazy_device_type(device.ty) => s,
        _ => return Err(TensorError::invalid(format!("{device} is not a lazy device")).into()),
    };
    let index = device.index.unwrap_or(0);
    match usize::try_from(index) {
        Ok(i) if i < MAX_LAZY_DEVICES => Ok(backend_at(slot, i)),
        _ => {
            let ty = device.ty.name();
            Err(TensorError::invalid(format!(
                "{ty} device index {index} is out of range: the {ty} devices are {ty}:0 to {ty}:{}",
                MAX_LAZY_DEVICES - 1
            ))
            .into())
        }
    }
}

/// The backend of device `index` of the device type in `slot`.
pub(crate) fn backend_at(slot: usize, index: usize) -> &'static LazyBackend {
    BACKENDS[slot][index].get_or_init(|| {
        let ty = match slot {
            0 => DeviceType::Lazy,
            1 => DeviceType::PrivateUse1,
            2 => DeviceType::PrivateUse2,
            _ => DeviceType::PrivateUse3,
        };
        LazyBackend::new(Device::with_index(ty, index as i16))
    })
}

/// The backend of the default lazy device, `lazy:0` ([`DEVICE`](crate::DEVICE)).
#[inline]
pub fn default_backend() -> &'static LazyBackend {
    backend_at(0, 0)
}

/// The backend of the lazy tensor `t`.
pub(crate) fn backend_of_tensor(t: &Tensor) -> Result<&'static LazyBackend> {
    match t.payload_as::<LazyStorage>() {
        Some(ls) => Ok(ls.backend),
        None => backend(t.device()),
    }
}

/// The backend a call on `stack` runs on: the lazy device its `device` argument names (a
/// factory's results are made there), else its first lazy tensor's, else the default one.
pub(crate) fn backend_of_call(stack: &[IValue]) -> Result<&'static LazyBackend> {
    for v in stack {
        if let IValue::Device(d) = v {
            if is_lazy_device_type(d.ty) {
                return backend(*d);
            }
        }
    }
    for v in stack {
        if let Some(t) = v.tensors().find(|t| is_lazy_device_type(t.device().ty)) {
            return backend_of_tensor(t);
        }
    }
    Ok(default_backend())
}

impl LazyBackend {
    fn new(device: Device) -> LazyBackend {
        // Its values take the calls functionalization makes only (Note [Lazy values]).
        switchboard_functionalize::opt_into_functionalization(device.ty);
        LazyBackend {
            device,
            key_set: device
                .dense_key_set()
                .expect("a lazy device type has a backend component"),
            pending: Mutex::new(PendingGraph::new()),
            sync_done: Condvar::new(),
            cache: GraphCache::new(),
            executor: RwLock::new(Arc::new(CpuExecutor)),
            stats: Counters::new(),
            profiling: AtomicBool::new(false),
            filter: OperatorFilter::default(),
            registrations: Registrations::default(),
            eager_on_executor: AtomicBool::new(false),
            op_counts: RwLock::new(HashMap::new()),
        }
    }

    /// This backend, as the table holds it (every backend is in the table, for the process's
    /// lifetime).
    #[inline]
    pub(crate) fn as_static(&self) -> &'static LazyBackend {
        let slot = slot_of(self.device.ty).expect("a lazy device type");
        backend_at(slot, self.device.index.unwrap_or(0) as usize)
    }

    /// The lazy device this backend is (`lazy:N`).
    #[inline]
    pub fn device(&self) -> Device {
        self.device
    }

    /// Whether calls made with lazy mode off run on the executor (Note [Eager calls on the
    /// executor]); off by default.
    pub fn eager_on_executor(&self) -> bool {
        self.eager_on_executor.load(Ordering::Relaxed)
    }

    /// Makes calls made with lazy mode off run on the executor, one call per graph, instead of
    /// on the host's CPU (Note [Eager calls on the executor]); returns the previous setting.
    pub fn set_eager_on_executor(&self, on: bool) -> bool {
        self.eager_on_executor.swap(on, Ordering::Relaxed)
    }

    /// The executor in use.
    pub fn executor(&self) -> Arc<dyn Executor> {
        self.executor
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Replaces the executor (the graph cache is emptied: its plans are the old executor's) and
    /// returns the previous one. Pending calls run with the new executor.
    pub fn set_executor(&self, executor: Arc<dyn Executor>) -> Arc<dyn Executor> {
        let old = std::mem::replace(
            &mut *self.executor.write().unwrap_or_else(|e| e.into_inner()),
            executor,
        );
        self.cache.clear();
        old
    }

    /// Empties the graph cache.
    pub fn clear_cache(&self) {
        self.cache.clear();
    }

    /// Turns the per-operator overhead profile on or off (Note [Zero-cost profiling]); returns
    /// the previous setting.
    pub fn set_profiling(&self, on: bool) -> bool {
        self.profiling.swap(on, Ordering::Relaxed)
    }

    /// Whether the per-operator overhead profile is on.
    #[inline(always)]
    pub fn profiling(&self) -> bool {
        self.profiling.load(Ordering::Relaxed)
    }

    /// The start of a profiled interception, when profiling is on.
    #[inline(always)]
    pub(crate) fn profile_start(&self) -> Option<Instant> {
        if self.profiling() {
            Some(Instant::now())
        } else {
            None
        }
    }

    #[inline]
    pub(crate) fn profile_end(&self, info: &Arc<InterceptedOp>, start: Option<Instant>) {
        if let Some(t) = start {
            let counts = self.op_counts(info);
            counts.profile_count.fetch_add(1, Ordering::Relaxed);
            counts
                .profile_ns
                .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
    }

    /// The counts of `info`'s operator on this device (made on first use).
    pub(crate) fn op_counts(&self, info: &Arc<InterceptedOp>) -> Arc<OpCounts> {
        if let Some(c) = self
            .op_counts
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&info.id)
        {
            return c.clone();
        }
        self.op_counts
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .entry(info.id)
            .or_insert_with(|| {
                Arc::new(OpCounts {
                    op: info.clone(),
                    fallback_captures: AtomicU64::new(0),
                    eager: AtomicU64::new(0),
                    profile_count: AtomicU64::new(0),
                    profile_ns: AtomicU64::new(0),
                    recorded_calls: AtomicU64::new(0),
                    recorded_ns: AtomicU64::new(0),
                })
            })
            .clone()
    }

    /// Every operator counted on this device.
    pub(crate) fn all_op_counts(&self) -> Vec<Arc<OpCounts>> {
        self.op_counts
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// Sets the per-operator counts back to zero.
    pub(crate) fn reset_op_counts(&self) {
        for c in self.all_op_counts() {
            c.reset();
        }
    }
}
