//! [`tune_allocator`]: malloc settings for tensor workloads.

// Note [Allocator tuning]
// Tensor programs free and reallocate the same large buffers every step (activations,
// gradients: hundreds of KiB to MiB each). glibc serves such sizes with mmap and returns them
// with munmap, so every step pays page faults and the kernel's page zeroing again (about a
// tenth of an MLP training step here). PyTorch's CPU allocator has the same problem and
// users fix it the same way (jemalloc/tcmalloc or mallopt). Raising the mmap and trim
// thresholds keeps freed buffers in the heap for reuse. glibc caps the mmap threshold at
// 32 MiB, so buffers above it (per-sample gradients under `vmap`: 100 MiB for one weight) are
// kept too by turning mmap off for chunks (`M_MMAP_MAX` 0) and by one arena for all threads
// (`M_ARENA_MAX` 1): a thread's own arena maps whatever does not fit its 64 MiB heaps anyway,
// and the buffers of the autograd engine's threads are the large ones. Reusing them spares
// the kernel's zeroing of every page: `clear_page` falls from about 40% of the samples of
// the `per_sample_grads` example to 4%. One arena serialises malloc between threads; the
// kernels allocate their outputs before they fan out, so it costs nothing measurable here.
// It is opt-in, process-wide and only done on glibc; programs that train (the `switchboard
// train` job, the benches) call it at start-up, before they start threads.

/// Keeps large freed buffers in the process heap instead of returning them to the OS (see
/// Note [Allocator tuning]). Call once at start-up; a no-op where the C library is not
/// glibc. Returns whether the settings were applied.
pub fn tune_allocator() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // glibc's mallopt parameters (malloc.h).
        const M_TRIM_THRESHOLD: libc::c_int = -1;
        const M_TOP_PAD: libc::c_int = -2;
        const M_MMAP_THRESHOLD: libc::c_int = -3;
        const M_MMAP_MAX: libc::c_int = -4;
        const M_ARENA_MAX: libc::c_int = -8;
        // SAFETY: mallopt only changes allocator parameters; it is thread-safe in glibc and
        // the values are within the documented ranges (the mmap threshold's maximum is
        // HEAP_MAX/2 = 32 MiB on 64-bit; `M_MMAP_MAX` 0 and `M_ARENA_MAX` 1 keep larger buffers
        // in the heap too).
        unsafe {
            libc::mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1
                && libc::mallopt(M_MMAP_MAX, 0) == 1
                && libc::mallopt(M_ARENA_MAX, 1) == 1
                && libc::mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1
                && libc::mallopt(M_TOP_PAD, 64 << 20) == 1
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn tuning_applies_on_glibc() {
        let applied = super::tune_allocator();
        assert_eq!(applied, cfg!(all(target_os = "linux", target_env = "gnu")));
        // Allocation still works afterwards.
        let v = vec![1u8; 4 << 20];
        assert_eq!(v.len(), 4 << 20);
    }
}
