//! The graph cache: prepared graphs keyed by their structure, so a loop that captures the
//! same step each iteration prepares it once.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use switchboard_dispatcher::Result;
use switchboard_graph::{Graph, StructuralKey};

use crate::executor::{current, Executable};
use crate::stats::STATS;

/// Plans kept at most; the cache is emptied when it would grow beyond (a program whose
/// graphs never repeat must not grow without bound).
const CAPACITY: usize = 1024;

type Map = HashMap<StructuralKey, Arc<dyn Executable>, foldhash::fast::RandomState>;

static CACHE: LazyLock<Mutex<Map>> = LazyLock::new(|| Mutex::new(Map::default()));

/// The executable for graphs with structure `key`: the cached one (a hit), or the current
/// executor's compilation of `graph()` (a miss, cached).
pub(crate) fn get_or_compile(
    key: StructuralKey,
    graph: impl FnOnce() -> Graph,
) -> Result<Arc<dyn Executable>> {
    if let Some(e) = CACHE.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        STATS.cache_hits.inc();
        return Ok(e.clone());
    }
    STATS.cache_misses.inc();
    // The executor is user code: it runs without the cache's lock (it may use the lazy API).
    let exe = current().compile(graph())?;
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if cache.len() >= CAPACITY {
        cache.clear();
    }
    cache.insert(key, exe.clone());
    Ok(exe)
}

/// The number of cached plans.
pub(crate) fn len() -> usize {
    CACHE.lock().unwrap_or_else(|e| e.into_inner()).len()
}

/// Empties the graph cache.
pub fn clear() {
    CACHE.lock().unwrap_or_else(|e| e.into_inner()).clear();
}
