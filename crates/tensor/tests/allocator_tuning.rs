//! `tune_allocator` keeps buffers above glibc's largest mmap threshold in the heap, also for
//! threads other than the main one (Note [Allocator tuning]). Run without libtest's harness:
//! the settings must be made before any other thread allocates, as the programs that call
//! `tune_allocator` do.

fn main() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        assert!(switchboard_tensor::tune_allocator());
        // 64 MiB: above the 32 MiB cap of glibc's mmap threshold, and as large as a thread
        // arena's heap can be.
        let mapped_while_held = std::thread::spawn(|| {
            let buffer = vec![1u8; 64 << 20];
            // SAFETY: mallinfo2 only reads the allocator's statistics.
            let mapped = unsafe { libc::mallinfo2() }.hblkhd;
            assert_eq!(buffer[(64 << 20) - 1], 1);
            mapped
        })
        .join()
        .expect("the allocating thread");
        assert!(
            mapped_while_held < 64 << 20,
            "a 64 MiB buffer of a second thread was mapped on its own ({mapped_while_held} bytes mapped)"
        );
        println!("allocator_tuning: a 64 MiB buffer of a second thread stayed in the heap");
    }
}
