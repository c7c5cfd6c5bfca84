//! The graph cache: prepared graphs keyed by their structure, so a loop that captures the
//! same step each iteration prepares it once (one per lazy device).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use switchboard_dispatcher::Result;
use switchboard_graph::{Graph, StructuralKey};

use crate::backend::{default_backend, LazyBackend};
use crate::executor::Executable;

/// Plans kept at most; the cache is emptied when it would grow beyond (a program whose
/// graphs never repeat must not grow without bound).
const CAPACITY: usize = 1024;

type Map = HashMap<StructuralKey, Arc<dyn Executable>, foldhash::fast::RandomState>;

/// One lazy device's prepared graphs.
pub(crate) struct GraphCache(Mutex<Map>);

impl GraphCache {
    pub fn new() -> GraphCache {
        GraphCache(Mutex::new(Map::default()))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Map> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The number of cached plans.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Empties the cache.
    pub fn clear(&self) {
        self.lock().clear();
    }
}

impl LazyBackend {
    /// The executable for graphs with structure `key`: the cached one (a hit), or the
    /// executor's compilation of `graph()` (a miss, cached).
    pub(crate) fn get_or_compile(
        &self,
        key: StructuralKey,
        graph: impl FnOnce() -> Graph,
    ) -> Result<Arc<dyn Executable>> {
        if let Some(e) = self.cache.lock().get(&key) {
            self.stats.cache_hits.inc();
            return Ok(e.clone());
        }
        self.stats.cache_misses.inc();
        // The executor is user code: it runs without the cache's lock (it may use the lazy API).
        let exe = self.executor().compile(graph())?;
        let mut cache = self.cache.lock();
        if cache.len() >= CAPACITY {
            cache.clear();
        }
        cache.insert(key, exe.clone());
        Ok(exe)
    }
}

/// Empties the default lazy device's graph cache.
pub fn clear() {
    default_backend().clear_cache();
}
