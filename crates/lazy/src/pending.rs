//! [`PendingStorages`]: the lazy storages waiting for a value of the pending graph, and the
//! spare storages new lazy tensors reuse (Note [Pending storages]).

use std::sync::Arc;

use switchboard_graph::TensorMeta;

use crate::backend::LazyBackend;
use crate::storage::{Contents, LazyStorage};

// Note [Pending storages]
// A sync must know which storages wait for a value of the pending graph and are still held
// by someone: those get the graph's results, the calls only dead storages needed are not
// run. The pending graph holds every storage given a pending value in the current epoch, strongly;
// one that nobody else holds any more (its strong count is 1: no tensor, view or capture
// refers to it) is dead. A dead storage has no data (its contents are a pending value), so
// keeping it until the next sync costs a few words, and it lets the backend reuse it: dead
// storages go to a list of spares, and a new lazy tensor takes a spare (its allocation and
// mutex) instead of allocating one. The list is pruned of dead storages when it has doubled
// since its last pruning (amortised constant time per capture, and bounded by twice the
// live storages plus the spares), and at every sync. The spares are at most `MAX_SPARES`.
// No weak handle to a lazy storage exists, so a spare is uniquely owned (`Arc::get_mut`).

/// Spare storages kept at most.
const MAX_SPARES: usize = 1024;

/// The most registry capacity a new epoch starts with.
const MAX_RESERVED: usize = 4096;

/// Pending storages pruned when there are at least this many (and twice as many as after the
/// last pruning).
const MIN_PRUNE: usize = 64;

/// See Note [Pending storages].
pub(crate) struct PendingStorages {
    /// The storages given a pending value in the current epoch, in order (dead ones
    /// included until pruned).
    held: Vec<Arc<LazyStorage>>,
    /// Dead storages to reuse.
    spares: Vec<Arc<LazyStorage>>,
    /// Prune when `held` reaches this length.
    prune_at: usize,
}

/// Whether nobody but the pending graph holds `ls`.
fn dead(ls: &Arc<LazyStorage>) -> bool {
    Arc::strong_count(ls) == 1
}

/// A new storage as [`PendingStorages::fresh`] makes, registered in `epoch` (no spare to reuse).
#[cold]
fn new_registered(
    backend: &'static LazyBackend,
    base: Arc<TensorMeta>,
    nbytes: usize,
    contents: Contents,
    epoch: u64,
) -> Arc<LazyStorage> {
    let mut fresh = LazyStorage::new(backend, base, nbytes, contents);
    fresh
        .state
        .get_mut()
        .unwrap_or_else(|e| e.into_inner())
        .registered_epoch = epoch;
    Arc::new(fresh)
}

impl PendingStorages {
    pub const fn new() -> PendingStorages {
        PendingStorages {
            held: Vec::new(),
            spares: Vec::new(),
            prune_at: MIN_PRUNE,
        }
    }

    /// A storage of `backend`'s device (whose pending graph this is) of `nbytes` whose base is
    /// `base`, holding `contents` (a value of epoch `epoch`), registered as waiting for it: a
    /// spare one when there is one, else a new one.
    #[inline]
    pub fn fresh(
        &mut self,
        backend: &'static LazyBackend,
        base: Arc<TensorMeta>,
        nbytes: usize,
        contents: Contents,
        epoch: u64,
    ) -> &Arc<LazyStorage> {
        // Pruning first: it is what refills the spares.
        self.prune_if_due();
        let ls = match self.spares.pop() {
            Some(mut ls) => match Arc::get_mut(&mut ls) {
                Some(slot) => {
                    slot.renew(base, nbytes, contents, epoch);
                    ls
                }
                None => new_registered(backend, base, nbytes, contents, epoch),
            },
            None => new_registered(backend, base, nbytes, contents, epoch),
        };
        self.held.push(ls);
        self.held.last().expect("just registered")
    }

    /// Registers `ls` as waiting for a value of the current epoch.
    pub fn register(&mut self, ls: Arc<LazyStorage>) {
        self.prune_if_due();
        self.held.push(ls);
    }

    /// Prunes when the registry has doubled since its last pruning (Note [Pending storages]).
    #[inline]
    fn prune_if_due(&mut self) {
        if self.held.len() >= self.prune_at {
            self.prune();
        }
    }

    /// Moves the dead storages to the spares, as many as they take (the live ones stay, in
    /// their order; the rest of the dead are dropped).
    fn prune(&mut self) {
        let mut kept = 0;
        for i in 0..self.held.len() {
            if dead(&self.held[i]) {
                continue;
            }
            self.held.swap(kept, i);
            kept += 1;
        }
        // The dead ones are now at the end: moved, not cloned, to the spares.
        let room = MAX_SPARES.saturating_sub(self.spares.len());
        let dead_ones = self.held.drain(kept..);
        self.spares.extend(dead_ones.take(room));
        self.prune_at = (2 * self.held.len()).max(MIN_PRUNE);
    }

    /// The live storages (at the sync that ends the epoch: the registry is emptied, the dead
    /// storages become spares).
    pub fn take_live(&mut self) -> Vec<Arc<LazyStorage>> {
        self.prune();
        self.prune_at = MIN_PRUNE;
        // The next epoch registers about as many storages: start it with that capacity (up to
        // a bound), not from an empty list that grows by reallocating during the captures.
        let capacity = self.held.capacity().min(MAX_RESERVED);
        std::mem::replace(&mut self.held, Vec::with_capacity(capacity))
    }

    /// The storages registered and still held by someone.
    pub fn live(&self) -> impl Iterator<Item = &Arc<LazyStorage>> {
        self.held.iter().filter(|ls| !dead(ls))
    }

    /// Storages registered (dead ones included until pruned) and spares, for tests.
    #[cfg(test)]
    pub fn counts(&self) -> (usize, usize) {
        (self.held.len(), self.spares.len())
    }
}

#[cfg(test)]
mod tests {
    use switchboard_graph::{NodeId, Value};
    use switchboard_tensor::{DimVec, ScalarType};

    use super::*;
    use crate::backend::default_backend;
    use crate::storage::DEVICE;

    /// A storage as [`PendingStorages::fresh`] makes, taken back out of the registry.
    fn unregistered(
        p: &mut PendingStorages,
        nbytes: usize,
        contents: Contents,
        epoch: u64,
    ) -> Arc<LazyStorage> {
        p.fresh(default_backend(), meta(), nbytes, contents, epoch);
        p.held.pop().expect("just registered")
    }

    fn meta() -> Arc<TensorMeta> {
        Arc::new(TensorMeta {
            sizes: DimVec::from_slice(&[1]),
            strides: DimVec::from_slice(&[1]),
            storage_offset: 0,
            dtype: ScalarType::Float,
            device: DEVICE,
        })
    }

    fn pending(i: u32) -> Contents {
        Contents::Pending {
            value: Value::new(NodeId(i), 0),
            epoch: 0,
        }
    }

    #[test]
    fn dead_storages_are_reused() {
        let mut p = PendingStorages::new();
        let mut kept = Vec::new();
        for i in 0..200 {
            // New storages (not `p.fresh`, which would take the spares back).
            let ls = Arc::new(LazyStorage::new(default_backend(), meta(), 4, pending(i)));
            p.register(ls.clone());
            if i % 2 == 0 {
                kept.push(ls); // the others die at once
            }
        }
        let (held, spares) = p.counts();
        // Pruned along the way: bounded by twice the live storages, the dead became spares.
        assert!(held <= 2 * kept.len() + MIN_PRUNE, "{held}");
        assert!(spares > 0);
        let addresses: Vec<*const LazyStorage> = p.spares.iter().map(Arc::as_ptr).collect();
        let reused = unregistered(&mut p, 8, pending(999), 0);
        assert!(addresses.contains(&Arc::as_ptr(&reused)));
        assert_eq!(reused.nbytes, 8);
        assert!(matches!(
            reused.lock().contents,
            Contents::Pending { value, .. } if value.node == NodeId(999)
        ));
        let live = p.take_live();
        assert_eq!(live.len(), kept.len());
        assert!(live.iter().zip(&kept).all(|(a, b)| Arc::ptr_eq(a, b)));
        assert_eq!(p.counts().0, 0);
    }

    #[test]
    fn reused_storages_get_new_ids() {
        let mut p = PendingStorages::new();
        let id = p.fresh(default_backend(), meta(), 4, pending(0), 0).id();
        assert!(p.take_live().is_empty());
        let again = unregistered(&mut p, 4, pending(1), 1);
        assert_eq!(again.lock().registered_epoch, 1);
        assert_ne!(again.id(), id);
    }
}
