//! Throughput of the `gemm` crate on the products of the training benchmarks
//! (`examples/compute_bench` in switchboard-cli), with their operand layouts:
//!
//! ```text
//! cargo build --release -p switchboard-cpu --example gemm_shapes
//! target/release/examples/gemm_shapes [REPS [THREADS]]
//! ```
//!
//! Prints, per product, the best time of `REPS` calls and its GFLOP/s: with one thread, the
//! crate alone; with more, the crate's own parallelism, then two halves split along `n`, then
//! along `m`, each half on one thread (`rayon::join`).

use std::time::Instant;

use gemm::{gemm, Parallelism};

/// One product `m×k @ k×n` and whether each of `a` and `b` is stored transposed.
struct Case {
    name: &'static str,
    m: usize,
    n: usize,
    k: usize,
    a_t: bool,
    b_t: bool,
}

fn main() {
    let mut args = std::env::args().skip(1);
    let reps: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(50);
    let threads: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(2);
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()
        .unwrap();
    let case = |name, m, n, k, a_t, b_t| Case {
        name,
        m,
        n,
        k,
        a_t,
        b_t,
    };
    let cases = [
        case("mlp fc1 fwd  x@W1^T", 128, 512, 784, false, true),
        case("mlp fc2 fwd  h@W2^T", 128, 512, 512, false, true),
        case("mlp fc2 gx   go@W2", 128, 512, 512, false, false),
        case("mlp fc2 gW   go^T@h", 512, 512, 128, true, false),
        case("mlp fc1 gW   go^T@x", 512, 784, 128, true, false),
        case("cnn fc1 fwd  x@W^T", 64, 128, 9216, false, true),
        case("cnn fc1 gW   go^T@x", 128, 9216, 64, true, false),
        case("cnn fc1 gx   go@W", 64, 9216, 128, false, false),
        case("conv2 fwd  W@cols", 64, 576, 288, false, false),
        case("conv2 gW   go@cols^T", 64, 288, 576, false, true),
        case("conv2 gcol W^T@go", 288, 576, 64, true, false),
        case("conv2 fwd batched", 64, 36864, 288, false, false),
        // Both operands contiguous along `k` (Note [Products along the reduction] in
        // src/gemm_dot.rs), the crate's rate falling with the narrower side; and the ResNet's
        // first-stage weight gradient block with one operand stored the other way.
        case("nt 288x32x224", 288, 32, 224, false, true),
        case("nt 288x16x224", 288, 16, 224, false, true),
        case("nt 144x8x448", 144, 8, 448, false, true),
        case("rn s1 gW^T cols@go^T", 144, 16, 448, false, true),
        case("rn s1 gW go@im2row", 16, 144, 448, false, false),
        case("512^3", 512, 512, 512, false, false),
    ];
    for c in &cases {
        let a = vec![1.0f32; c.m * c.k];
        let b = vec![1.0f32; c.k * c.n];
        let mut d = vec![0.0f32; c.m * c.n];
        // Row and column strides of a row-major matrix, or of the transpose of one.
        let strides = |rows: usize, cols: usize, t: bool| {
            if t {
                (1isize, rows as isize)
            } else {
                (cols as isize, 1isize)
            }
        };
        let (ars, acs) = strides(c.m, c.k, c.a_t);
        let (brs, bcs) = strides(c.k, c.n, c.b_t);
        let flops = 2.0 * (c.m * c.n * c.k) as f64;
        let (ap, bp, dp) = (
            a.as_ptr() as usize,
            b.as_ptr() as usize,
            d.as_mut_ptr() as usize,
        );
        // SAFETY: the three buffers hold exactly the addressed elements.
        let run = |m0: usize, m1: usize, n0: usize, n1: usize, par: Parallelism| unsafe {
            gemm(
                m1 - m0,
                n1 - n0,
                c.k,
                (dp as *mut f32).add(m0 * c.n + n0),
                1,
                c.n as isize,
                false,
                (ap as *const f32).offset(m0 as isize * ars),
                acs,
                ars,
                (bp as *const f32).offset(n0 as isize * bcs),
                bcs,
                brs,
                0.0,
                1.0,
                false,
                false,
                false,
                par,
            )
        };
        let mut line = format!("{:<24} {:>5}x{:>5}x{:>5}", c.name, c.m, c.n, c.k);
        for mode in 0..3 {
            if threads == 1 && mode > 0 {
                break;
            }
            let mut best = f64::INFINITY;
            for _ in 0..reps {
                let t = Instant::now();
                match mode {
                    0 if threads == 1 => run(0, c.m, 0, c.n, Parallelism::None),
                    0 => run(0, c.m, 0, c.n, Parallelism::Rayon(threads)),
                    1 => {
                        let h = (c.n / 2).next_multiple_of(8).min(c.n);
                        rayon::join(
                            || run(0, c.m, 0, h, Parallelism::None),
                            || run(0, c.m, h, c.n, Parallelism::None),
                        );
                    }
                    _ => {
                        let h = (c.m / 2).next_multiple_of(8).min(c.m);
                        rayon::join(
                            || run(0, h, 0, c.n, Parallelism::None),
                            || run(h, c.m, 0, c.n, Parallelism::None),
                        );
                    }
                }
                best = best.min(t.elapsed().as_secs_f64());
            }
            line += &format!("  {:>7.3} ms {:>6.1}", best * 1e3, flops / best / 1e9);
        }
        println!("{line}");
    }
}
