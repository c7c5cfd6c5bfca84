//! Heap memory for CPU storages (PyTorch's `c10::alloc_cpu`).

use std::alloc::{self, Layout};
use std::ptr::NonNull;

use crate::error::{Result, TensorError};
use crate::storage::STORAGE_ALIGNMENT;

/// Buffers of at least this many bytes are aligned to it and backed by transparent huge pages
/// (Note [Huge pages for large buffers]).
pub const HUGE_PAGE_BYTES: usize = 2 << 20;

// Note [Huge pages for large buffers]
// A fresh buffer of megabytes (a batch of activations, per-sample gradients under `vmap`) is
// mapped by the C allocator straight from the kernel, and every 4 KiB page of it faults on
// first touch. Buffers of `HUGE_PAGE_BYTES` or more are therefore aligned to 2 MiB and advised
// as huge pages before anything touches them, so they fault 512 times less. PyTorch's
// `c10::alloc_cpu` does the same, with the same threshold and alignment, when its THP switch
// is set in the environment; here it is always on. Where the kernel serves huge pages only on
// request (`madvise` mode, the common default) the advice is what enables them, and elsewhere
// it is harmless. It complements Note [Allocator tuning], which keeps freed buffers in the
// heap for reuse, where they fault no more.

/// A heap allocation of `nbytes` (> 0) for a storage's bytes, zeroed when `zeroed` (else
/// uninitialised), with the layout to free it with: aligned to [`STORAGE_ALIGNMENT`], or to
/// [`HUGE_PAGE_BYTES`] and advised as huge pages from that size on (Note [Huge pages for large
/// buffers]). Fails with PyTorch's "DefaultCPUAllocator: not enough memory" message.
pub(crate) fn alloc_cpu(nbytes: usize, zeroed: bool) -> Result<(NonNull<u8>, Layout)> {
    debug_assert!(nbytes > 0);
    let huge = nbytes >= HUGE_PAGE_BYTES;
    let align = if huge {
        HUGE_PAGE_BYTES
    } else {
        STORAGE_ALIGNMENT
    };
    let layout = Layout::from_size_align(nbytes, align).map_err(|_| {
        TensorError::invalid(format!(
            "Trying to create tensor with {nbytes} bytes: too large"
        ))
    })?;
    // SAFETY: `layout` has a non-zero size (callers pass nbytes > 0).
    let ptr = unsafe {
        if zeroed && !huge {
            alloc::alloc_zeroed(layout)
        } else {
            alloc::alloc(layout)
        }
    };
    let ptr = NonNull::new(ptr).ok_or_else(|| {
        TensorError::invalid(format!(
            "DefaultCPUAllocator: not enough memory: you tried to allocate {nbytes} bytes."
        ))
    })?;
    if huge {
        advise_huge_pages(ptr, nbytes);
        if zeroed {
            // SAFETY: `ptr` is a fresh allocation of `nbytes` bytes that nothing else sees.
            unsafe { ptr.as_ptr().write_bytes(0, nbytes) };
        }
    }
    Ok((ptr, layout))
}

/// Asks the kernel to back the fresh allocation at `ptr` (aligned to [`HUGE_PAGE_BYTES`]) with
/// huge pages, before its first touch. Advice only: a kernel without them ignores it.
#[cfg(all(target_os = "linux", not(miri)))]
fn advise_huge_pages(ptr: NonNull<u8>, nbytes: usize) {
    // SAFETY: the range is one live allocation of ours, page-aligned (2 MiB); MADV_HUGEPAGE
    // changes how its pages are backed, never their contents or the mapping's validity.
    unsafe {
        libc::madvise(ptr.as_ptr().cast(), nbytes, libc::MADV_HUGEPAGE);
    }
}

#[cfg(not(all(target_os = "linux", not(miri))))]
fn advise_huge_pages(_ptr: NonNull<u8>, _nbytes: usize) {}
