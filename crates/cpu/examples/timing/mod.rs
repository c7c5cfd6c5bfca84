//! What the cpu crate's timing examples share: the best of repeated calls, and deterministic
//! inputs.

// Each example compiles its own copy of this module and uses only some of it.
#![allow(dead_code)]

use std::time::Instant;

use switchboard_tensor::Tensor;

/// The best time of `reps` calls of `f`, in milliseconds.
pub fn best(reps: usize, mut f: impl FnMut()) -> f64 {
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .fold(f64::INFINITY, f64::min)
}

/// A tensor of `sizes` with deterministic values in [-1, 1).
pub fn values(sizes: &[i64]) -> Tensor {
    let n: i64 = sizes.iter().product();
    let v: Vec<f32> = (0..n)
        .map(|i| ((i * 7919) % 2000) as f32 / 1000.0 - 1.0)
        .collect();
    Tensor::from_vec(v, sizes).expect("sizes match")
}

/// A tensor of `sizes` with deterministic values in [-1, 1) in no predictable order (a hash
/// of the index), for kernels whose speed depends on the data, as comparisons do.
pub fn noise(sizes: &[i64]) -> Tensor {
    let n: i64 = sizes.iter().product();
    let v: Vec<f32> = (0..n as u64)
        .map(|i| {
            let h = (i.wrapping_add(1)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let h = (h ^ (h >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            (h >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect();
    Tensor::from_vec(v, sizes).expect("sizes match")
}

/// Reads `[REPS [THREADS]]` from the command line (`default_reps` and `default_threads` when
/// absent), tunes the allocator as the training benchmarks do (Note [Allocator tuning] in
/// switchboard-tensor: outputs reuse freed heap memory instead of fresh pages), builds the
/// global pool with THREADS threads and returns both with the arguments that follow them.
pub fn start(
    default_reps: usize,
    default_threads: usize,
) -> (usize, usize, impl Iterator<Item = String>) {
    let mut args = std::env::args().skip(1);
    let reps = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default_reps);
    let threads = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default_threads);
    switchboard_tensor::tune_allocator();
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()
        .expect("the global pool is built once");
    (reps, threads, args)
}
