//! The cast cache: lower-precision copies of float32 leaves that require grad (model weights),
//! kept for the life of the outermost autocast region.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use switchboard_tensor::{Tensor, TensorImpl, WeakTensor};

// Note [Autocast cast cache]
// As PyTorch (imitating Apex) does, the lower-precision cast of a float32 leaf that requires
// grad is made once per region: a weight used by several operators (or several times in an
// unrolled loop) is cast once, and autograd sees one cast node whose gradient reaches the
// weight. The key is the source's `TensorImpl` address, a stand-in for its identity that
// survives shallow copies (handle clones); the value keeps a weak handle to the source, so the
// address cannot be reused by another tensor while the entry exists, and the cast. The cache is
// process-wide (as PyTorch's) and cleared when a thread leaves its outermost region.

struct Entry {
    source: WeakTensor,
    cast: Tensor,
}

static CACHE: Mutex<Option<HashMap<usize, Entry>>> = Mutex::new(None);

fn cache() -> MutexGuard<'static, Option<HashMap<usize, Entry>>> {
    CACHE.lock().unwrap_or_else(|e| e.into_inner())
}

fn key_of(t: &Tensor) -> usize {
    &**t as *const TensorImpl as usize
}

/// The cached cast of `source`, if one was made in this region.
pub(crate) fn lookup(source: &Tensor) -> Option<Tensor> {
    let guard = cache();
    let entry = guard.as_ref()?.get(&key_of(source))?;
    // The weak handle keeps the address from being reused; check it anyway.
    let alive = entry.source.upgrade()?;
    alive.is_same(source).then(|| entry.cast.clone())
}

/// Remembers `cast` as the cast of `source`.
pub(crate) fn insert(source: &Tensor, cast: Tensor) {
    cache().get_or_insert_with(HashMap::new).insert(
        key_of(source),
        Entry {
            source: source.downgrade(),
            cast,
        },
    );
}

/// Empties the cast cache (`torch.clear_autocast_cache`): done when a thread leaves its
/// outermost autocast region.
pub fn clear_autocast_cache() {
    // Drop the entries outside the lock: dropping a cast may drop an autograd graph.
    let old = cache().take();
    drop(old);
}

/// The number of cached casts.
pub fn autocast_cache_len() -> usize {
    cache().as_ref().map_or(0, HashMap::len)
}
