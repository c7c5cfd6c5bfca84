//! [`LazyStorage`]: what a lazy tensor's storage holds (a pending graph value or materialised
//! data), shared by the tensor and all its views as the tensors' backend payload.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::backend::LazyBackend;
use crate::rules::plain_geometry;
use switchboard_dispatcher::Result;
use switchboard_graph::{NodeId, TensorMeta, Value};
use switchboard_keys::DeviceType;
use switchboard_tensor::{
    DatalessTensor, Device, DimVec, Storage, Tensor, TensorBuilder, TensorError, TensorImpl,
    VersionCounter,
};

/// The default lazy device, `lazy:0` (Note [Lazy devices]).
pub const DEVICE: Device = Device::with_index(DeviceType::Lazy, 0);

/// The payload tag [`tensor_of`] gives the tensors it makes (Note [Payload tags] in
/// switchboard-tensor): the tensor has its storage's base geometry. Shallow copies of it share
/// its storage, not its tag.
pub(crate) const AT_BASE: u32 = 1;

/// Whether `t`, a tensor of storage `ls`, has the storage's base geometry: the tensor
/// [`tensor_of`] made for it (its tag says so, no comparison), or one with the same metadata.
/// Every lazy value has it (Note [Lazy values]); [`whole`] checks it.
#[inline]
pub(crate) fn at_base(ls: &LazyStorage, t: &TensorImpl) -> bool {
    t.payload_tag() == AT_BASE || ls.base.matches_layout(t)
}

/// The metadata of `t` as the graph records values of lazy device `device`.
pub(crate) fn lazy_meta(t: &TensorImpl, device: Device) -> TensorMeta {
    TensorMeta {
        sizes: DimVec::from_slice(t.sizes()),
        strides: DimVec::from_slice(t.strides()),
        storage_offset: t.storage_offset(),
        dtype: t.dtype(),
        device,
    }
}

/// What a lazy storage holds (see Note [Lazy values] in lib.rs).
#[derive(Clone)]
pub(crate) enum Contents {
    /// Materialised: a CPU tensor with the storage's base geometry.
    Data(Tensor),
    /// Not computed yet: this value of the pending graph of epoch `epoch`.
    Pending { value: Value, epoch: u64 },
    /// The graph that was to compute it failed with this error.
    Failed(Arc<str>),
}

/// The mutable state of a lazy storage, guarded by its mutex (taken only while the pending graph
/// lock is held, or for a materialised storage, so the lock order is always pending graph, then
/// storage).
pub(crate) struct StorageState {
    pub contents: Contents,
    /// The graph input standing for `Data` in an epoch.
    pub input: Option<(u64, Value)>,
    /// The epoch whose pending list holds this storage.
    pub registered_epoch: u64,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A lazy tensor's storage: the backend payload of every lazy tensor (Note [Lazy tensors]), on
/// one lazy device. It remembers the metadata of the tensor that created it ("base") and its
/// size, and makes on demand the meta tensor that stands for it when shape functions run.
pub struct LazyStorage {
    pub(crate) id: u64,
    /// The backend of its lazy device (Note [Lazy devices]).
    pub(crate) backend: &'static LazyBackend,
    pub(crate) base: Arc<TensorMeta>,
    /// Whether `base` is a plain operand of a shape rule (Note [Shape rules]): found once
    /// here, so that the rules check a tensor with the base geometry by comparing it.
    pub(crate) plain_base: bool,
    pub(crate) nbytes: usize,
    /// A meta tensor with the base geometry over a meta storage of the same size (made on
    /// first use: calls whose shapes are cached never need it).
    meta: OnceLock<Tensor>,
    pub(crate) state: Mutex<StorageState>,
    /// The storage's value in the current epoch's graph, readable without `state`'s lock
    /// (Note [Cached storage values]).
    cached: CachedValue,
}

// Note [Cached storage values]
// Every capture reads the graph value of its operands, and most operands have their storage's
// base geometry, whose value is the storage's pending value or the graph input standing for
// its data (`PendingGraph::read`). Taking the storage's lock for that costs a tenth of a
// capture (measured on the CI-guarded `lazy_add_1elem` scenario: 1,048 instructions per
// capture with the cached value, 1,151 without), so the storage also keeps that value, with the epoch
// it belongs to, in two atomics: a value of an older epoch is no value. Everything that
// changes what the storage's base reads as (a new pending value, an input recorded for its
// data, materialised or failed contents) runs with the pending-graph lock held (in
// `PendingGraph`'s methods, which take `&mut self`) or on a storage nobody else holds (`new`,
// `renew`), and sets the cached value with it; the readers hold the pending-graph lock too. So the
// lock orders every access, and relaxed atomics suffice.

/// See Note [Cached storage values].
struct CachedValue {
    epoch: AtomicU64,
    /// `Value { node, output }` as `node << 32 | output`.
    value: AtomicU64,
}

impl CachedValue {
    fn new(contents: &Contents) -> CachedValue {
        let c = CachedValue {
            epoch: AtomicU64::new(u64::MAX),
            value: AtomicU64::new(0),
        };
        if let Contents::Pending { value, epoch } = *contents {
            c.set(epoch, value);
        }
        c
    }

    fn set(&self, epoch: u64, v: Value) {
        let packed = (u64::from(v.node.0) << 32) | u64::from(v.output);
        self.value.store(packed, Ordering::Relaxed);
        self.epoch.store(epoch, Ordering::Relaxed);
    }

    fn get(&self, epoch: u64) -> Option<Value> {
        if self.epoch.load(Ordering::Relaxed) != epoch {
            return None;
        }
        let packed = self.value.load(Ordering::Relaxed);
        Some(Value::new(NodeId((packed >> 32) as u32), packed as u32))
    }
}

impl std::fmt::Debug for LazyStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LazyStorage(lt_{}, {:?})", self.id, self.base)
    }
}

impl LazyStorage {
    /// A storage of `nbytes` whose base is `base`, holding `contents`.
    pub(crate) fn new(
        backend: &'static LazyBackend,
        base: Arc<TensorMeta>,
        nbytes: usize,
        contents: Contents,
    ) -> LazyStorage {
        LazyStorage {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            backend,
            plain_base: plain_geometry(&base),
            base,
            nbytes,
            meta: OnceLock::new(),
            cached: CachedValue::new(&contents),
            state: Mutex::new(StorageState {
                contents,
                input: None,
                registered_epoch: u64::MAX,
            }),
        }
    }

    /// Makes this storage, which nobody else holds, what [`new`](Self::new) would make,
    /// keeping its allocations (a spare's reuse, Note [Pending storages]), registered in
    /// `registered_epoch`.
    #[inline]
    pub(crate) fn renew(
        &mut self,
        base: Arc<TensorMeta>,
        nbytes: usize,
        contents: Contents,
        registered_epoch: u64,
    ) {
        self.id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        self.plain_base = plain_geometry(&base);
        self.base = base;
        self.nbytes = nbytes;
        self.meta.take();
        self.cached = CachedValue::new(&contents);
        let st = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        st.contents = contents;
        st.input = None;
        st.registered_epoch = registered_epoch;
    }

    /// The id the intercept log and the graph exports use (`lt_N`).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The value of this storage's base in the graph of `epoch`, if known without the lock
    /// (Note [Cached storage values]; the caller holds the pending-graph lock).
    #[inline]
    pub(crate) fn cached_value(&self, epoch: u64) -> Option<Value> {
        self.cached.get(epoch)
    }

    /// Records that this storage's base reads as `v` in the graph of `epoch` (the caller holds
    /// the pending-graph lock and has just made it so).
    pub(crate) fn cache_value(&self, epoch: u64, v: Value) {
        self.cached.set(epoch, v);
    }

    /// Forgets the cached value (the contents are no pending value any more).
    pub(crate) fn forget_cached_value(&self) {
        self.cached.epoch.store(u64::MAX, Ordering::Relaxed);
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, StorageState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The meta tensor with the base geometry (made on first use).
    pub(crate) fn meta(&self) -> Result<&Tensor> {
        if let Some(m) = self.meta.get() {
            return Ok(m);
        }
        let dtype = self.base.dtype;
        let m = TensorBuilder::new(Storage::zeros_for(Device::META, self.nbytes, dtype)?, dtype)
            .sizes(&self.base.sizes)
            .strides(&self.base.strides)
            .storage_offset(self.base.storage_offset)
            .build()?;
        Ok(self.meta.get_or_init(|| m))
    }

    /// The meta tensor standing for `t`, a tensor of this storage.
    pub(crate) fn meta_twin(&self, t: &TensorImpl) -> Result<Tensor> {
        whole(self, t)?;
        Ok(self.meta()?.clone())
    }

    /// The CPU tensor of `t` (a tensor of this storage) when the storage is materialised.
    pub(crate) fn data_of(&self, t: &TensorImpl) -> Result<Option<Tensor>> {
        whole(self, t)?;
        let state = self.lock();
        match &state.contents {
            Contents::Data(d) if d.is_cpu() => Ok(Some(d.clone())),
            // Kept by the executor (Note [Data an executor keeps] in executor.rs): fetched
            // without the storage's lock, as fetching may wait on the executor.
            Contents::Data(d) => {
                let d = d.clone();
                drop(state);
                Ok(Some(self.backend.executor().to_host(&d)?))
            }
            Contents::Failed(e) => Err(failed(e)),
            Contents::Pending { .. } => Ok(None),
        }
    }
}

impl LazyStorage {
    /// Makes the host the holder of this storage's data when an executor keeps it (Note [Data
    /// an executor keeps]): an eager call is about to run on the host copy, and may write it.
    /// The next graph reading the storage takes the host data as its input.
    pub(crate) fn bring_to_host(&self) -> Result<()> {
        let kept = match &self.lock().contents {
            Contents::Data(d) if !d.is_cpu() => d.clone(),
            _ => return Ok(()),
        };
        let host = self.backend.executor().to_host(&kept)?;
        // Lock order: pending graph, then storage (Note [Cached storage values]).
        let _ctx = self.backend.as_static().lock_pending_graph();
        let mut st = self.lock();
        if matches!(&st.contents, Contents::Data(d) if Storage::ptr_eq(d.storage(), kept.storage()))
        {
            st.contents = Contents::Data(host);
            st.input = None;
            self.forget_cached_value();
        }
        Ok(())
    }
}

/// Checks that `t`, a tensor of storage `ls`, is the storage's whole value: the only lazy
/// tensors there are (Note [Lazy values]).
#[inline]
pub(crate) fn whole(ls: &LazyStorage, t: &TensorImpl) -> Result<()> {
    if at_base(ls, t) {
        return Ok(());
    }
    Err(TensorError::invalid(format!(
        "a view of a lazy value (sizes {:?}, strides {:?}, offset {} of a value with sizes \
         {:?}, strides {:?}, offset {}): lazy values have no views; views of lazy tensors \
         are functional tensors over *_copy values",
        t.sizes(),
        t.strides(),
        t.storage_offset(),
        ls.base.sizes,
        ls.base.strides,
        ls.base.storage_offset,
    ))
    .into())
}

/// The error for a call that would make a view of a lazy value, or write through one (Note
/// [Lazy values]).
pub(crate) fn view_error(op: &str) -> switchboard_dispatcher::DispatchError {
    TensorError::invalid(format!(
        "{op} would make a view of a lazy value: lazy values have no views (below the \
         functionalization layer, a view is its *_copy operator: call it on a lazy tensor, \
         or call the *_copy operator)"
    ))
    .into()
}

pub(crate) fn failed(e: &str) -> switchboard_dispatcher::DispatchError {
    TensorError::invalid(format!(
        "this lazy tensor has no value: the graph computing it failed: {e}"
    ))
    .into()
}

/// The lazy storage of `t`, if it is a lazy tensor made by this backend.
#[inline]
pub fn lazy_storage(t: &TensorImpl) -> Option<&LazyStorage> {
    t.payload_as::<LazyStorage>()
}

/// Whether `t` is on a lazy device (`lazy`, or a device type [`install`](crate::install)ed on
/// a private-use backend).
#[inline]
pub fn is_lazy(t: &TensorImpl) -> bool {
    crate::backend::is_lazy_device_type(t.device().ty)
}

/// The error PyTorch-like code gets for a tensor on the lazy device this backend did not make.
pub(crate) fn storage_error() -> switchboard_dispatcher::DispatchError {
    TensorError::invalid(
        "a tensor on the lazy device without a lazy value (made by the tensor crate \
         directly?): create lazy tensors with a factory on device='lazy' or .to(lazy)",
    )
    .into()
}

/// The storage of a tensor on the lazy device, or [`storage_error`].
pub(crate) fn storage_of(t: &TensorImpl) -> Result<Arc<LazyStorage>> {
    t.payload()
        .and_then(|p| p.clone().downcast::<LazyStorage>().ok())
        .ok_or_else(storage_error)
}

/// A new lazy tensor of `backend`'s device with metadata `base` over a new storage of `nbytes`
/// holding `contents`, with its own version counter or `version`.
pub(crate) fn fresh_tensor(
    backend: &'static LazyBackend,
    base: Arc<TensorMeta>,
    nbytes: usize,
    contents: Contents,
    version: Option<VersionCounter>,
) -> Result<(Tensor, Arc<LazyStorage>)> {
    let ls = Arc::new(LazyStorage::new(backend, base, nbytes, contents));
    Ok((tensor_of(&ls, version)?, ls))
}

/// A new lazy tensor with the base geometry of storage `ls` (a tensor without data, Note
/// [Tensors without data] in switchboard-tensor), with its own version counter or `version`.
// Inlined into the capture's fast path (see `record_ruled`).
#[inline(always)]
pub(crate) fn tensor_of(ls: &Arc<LazyStorage>, version: Option<VersionCounter>) -> Result<Tensor> {
    let spec = DatalessTensor {
        sizes: &ls.base.sizes,
        strides: &ls.base.strides,
        storage_offset: ls.base.storage_offset,
        dtype: ls.base.dtype,
        device: ls.backend.device(),
        key_set: ls.backend.key_set,
        storage_nbytes: ls.nbytes,
        payload_tag: AT_BASE,
    };
    Ok(Tensor::without_data(&spec, Some(ls.clone()), version)?)
}

/// A meta tensor laid out as `t` over a meta storage as large as `t`'s.
pub(crate) fn meta_like(t: &TensorImpl) -> Result<Tensor> {
    Ok(TensorBuilder::new(
        Storage::zeros_for(Device::META, t.storage().nbytes(), t.dtype())?,
        t.dtype(),
    )
    .sizes(t.sizes())
    .strides(t.strides())
    .storage_offset(t.storage_offset())
    .build()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::default_backend;
    use switchboard_tensor::{RawOps, ScalarType};

    #[test]
    fn the_key_set_is_the_devices() {
        assert_eq!(Ok(default_backend().key_set), DEVICE.dense_key_set());
    }

    #[test]
    fn only_the_tensor_made_for_a_storage_is_tagged_at_base() {
        let m = meta(&[2, 3], &[3, 1], 0, ScalarType::Float);
        let (t, ls) =
            fresh_tensor(default_backend(), m, 24, Contents::Failed("x".into()), None).unwrap();
        assert_eq!(t.payload_tag(), AT_BASE);
        assert!(at_base(&ls, &t));
        // A view shares the storage, not the tag: its geometry is compared.
        let v = RawOps::as_strided(&t, &[3, 2], &[1, 3], 0).unwrap();
        assert_eq!(v.payload_tag(), 0);
        assert!(lazy_storage(&v).is_some_and(|s| std::ptr::eq(s, &*ls)));
        assert!(!at_base(&ls, &v));
        // It is no lazy value: its storage refuses it.
        let e = ls.meta_twin(&v).unwrap_err().to_string();
        assert!(e.contains("lazy values have no views"), "{e}");
        assert!(whole(&ls, &t).is_ok());
        // A view with the base geometry is at the base all the same.
        let same = RawOps::as_strided(&t, &[2, 3], &[3, 1], 0).unwrap();
        assert_eq!(same.payload_tag(), 0);
        assert!(at_base(&ls, &same));
    }

    fn meta(sizes: &[i64], strides: &[i64], offset: i64, dtype: ScalarType) -> Arc<TensorMeta> {
        Arc::new(TensorMeta {
            sizes: DimVec::from_slice(sizes),
            strides: DimVec::from_slice(strides),
            storage_offset: offset,
            dtype,
            device: DEVICE,
        })
    }

    #[test]
    fn cached_values_hold_a_value_of_one_epoch() {
        let v = Value::new(NodeId(u32::MAX - 1), 7);
        let pending = Contents::Pending { value: v, epoch: 3 };
        let m = meta(&[2], &[1], 0, ScalarType::Float);
        let mut ls = LazyStorage::new(default_backend(), m.clone(), 8, pending);
        assert_eq!(ls.cached_value(3), Some(v));
        assert_eq!(ls.cached_value(4), None);
        let w = Value::new(NodeId(5), 0);
        ls.cache_value(4, w);
        assert_eq!((ls.cached_value(3), ls.cached_value(4)), (None, Some(w)));
        ls.forget_cached_value();
        assert_eq!(ls.cached_value(4), None);
        // A renewed storage holding data has no cached value; one holding a pending value has its own.
        ls.cache_value(4, w);
        ls.renew(m.clone(), 8, Contents::Failed("x".into()), u64::MAX);
        assert_eq!(ls.cached_value(4), None);
        ls.renew(m, 8, Contents::Pending { value: w, epoch: 9 }, u64::MAX);
        assert_eq!(ls.cached_value(9), Some(w));
    }

    #[test]
    fn plain_bases() {
        let plain = |m: &TensorMeta| crate::rules::plain_geometry(m);
        assert!(plain(&meta(&[2, 3], &[3, 1], 0, ScalarType::Float)));
        assert!(plain(&meta(&[], &[], 0, ScalarType::Double)));
        assert!(!plain(&meta(&[2, 3], &[1, 2], 0, ScalarType::Float)));
        assert!(!plain(&meta(&[2, 3], &[3, 1], 1, ScalarType::Float)));
        assert!(!plain(&meta(&[2, 3], &[3, 1], 0, ScalarType::Long)));
        let ls = LazyStorage::new(
            default_backend(),
            meta(&[4], &[2], 0, ScalarType::Float),
            32,
            Contents::Failed("x".into()),
        );
        assert!(!ls.plain_base);
    }
}
