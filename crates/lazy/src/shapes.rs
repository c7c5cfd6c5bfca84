//! The shape cache: the output metadata a Meta kernel computed, kept per operator and input
//! metadata, so that capturing the same call again does not run the Meta kernel again.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use smallvec::SmallVec;
use switchboard_dispatcher::IValue;
use switchboard_graph::TensorMeta;

// Note [Shape cache]
// A Meta kernel reads only metadata (sizes, strides, offsets, dtypes, storage sizes, which
// arguments share storage, whether a tensor is a wrapped number) and constant arguments, so
// its results are a function of them. The first capture of a call runs the Meta kernel (on
// the meta tensors standing for the lazy ones) and records, per return, the metadata and
// which argument's storage it aliases; a later call whose key is equal takes them from here.
// For a 1-element `add` the Meta kernel (a general `TensorIterator` set-up on meta tensors)
// costs ~4000 instructions, a lookup ~150. Errors are not cached: a failing call runs the
// Meta kernel every time and reports its error. Keys are compared in full, never by hash
// alone. The cache is emptied when it reaches `CAPACITY` entries.

/// The metadata of a tensor a call returns (device `lazy:0`; shared by every node and
/// storage it describes), and the size of its storage.
pub(crate) type OutMeta = (Arc<TensorMeta>, usize);

/// One return of a call, as the Meta kernel computed it.
#[derive(Clone, Debug)]
pub(crate) enum CachedReturn {
    /// A tensor; `alias`: the argument whose storage it shares.
    Tensor { meta: OutMeta, alias: Option<u32> },
    /// A list of fresh tensors.
    List(Vec<OutMeta>),
    /// Anything else (`None`).
    Value(IValue),
}

/// The returns of a call.
pub(crate) type Shapes = SmallVec<[CachedReturn; 2]>;

const CAPACITY: usize = 1 << 14;

type Map = HashMap<Box<[u64]>, Arc<Shapes>, foldhash::fast::RandomState>;

static CACHE: LazyLock<Mutex<Map>> = LazyLock::new(|| Mutex::new(Map::default()));

/// The cached returns for `key`.
pub(crate) fn lookup(key: &[u64]) -> Option<Arc<Shapes>> {
    CACHE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(key)
        .cloned()
}

/// Records the returns for `key`.
pub(crate) fn insert(key: &[u64], shapes: Arc<Shapes>) {
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if cache.len() >= CAPACITY {
        cache.clear();
    }
    cache.insert(key.into(), shapes);
}
