//! Cost of the `add.Tensor` CPU kernel on tiny tensors, for instruction counting:
//!
//! ```text
//! cargo build --release -p switchboard-cpu --example add_small
//! valgrind --tool=callgrind target/release/examples/add_small 1000
//! valgrind --tool=callgrind target/release/examples/add_small 2000
//! ```
//!
//! The difference of the two totals over 1000 is the cost of one call (allocating the output,
//! the loop, and dropping the result). `add_small N --big` times N adds (and `add.out`s) of
//! 1e6-element tensors instead (and, for comparison, a zero-filled output plus `add.out`).

use std::hint::black_box;
use std::time::Instant;

use switchboard_cpu::{add_out, add_tensor};
use switchboard_tensor::{Scalar, ScalarType, Tensor};

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(1000);
    let big = args.any(|a| a == "--big");
    if big {
        let len = 1_000_000usize;
        let a = Tensor::from_vec((0..len).map(|i| i as f32).collect(), &[len as i64]).unwrap();
        let b = Tensor::from_vec(vec![0.5f32; len], &[len as i64]).unwrap();
        let out = Tensor::empty(&[len as i64], ScalarType::Float).unwrap();
        // Warm up (page faults, rayon's pool).
        for _ in 0..10 {
            drop(black_box(add_tensor(&a, &b, Scalar::Int(1)).unwrap()));
        }
        let t = Instant::now();
        for _ in 0..n {
            drop(black_box(
                add_tensor(black_box(&a), black_box(&b), Scalar::Int(1)).unwrap(),
            ));
        }
        let per = t.elapsed().as_secs_f64() * 1e6 / n as f64;
        let t = Instant::now();
        for _ in 0..n {
            black_box(add_out(black_box(&a), black_box(&b), Scalar::Int(1), &out).unwrap());
        }
        let per_out = t.elapsed().as_secs_f64() * 1e6 / n as f64;
        // What add.Tensor cost when fresh outputs were zero-filled: a zeroed output + add.out.
        let t = Instant::now();
        for _ in 0..n {
            let o = Tensor::zeros(&[len as i64], ScalarType::Float).unwrap();
            black_box(add_out(black_box(&a), black_box(&b), Scalar::Int(1), &o).unwrap());
        }
        let per_zeroed = t.elapsed().as_secs_f64() * 1e6 / n as f64;
        println!(
            "1e6 f32: add.Tensor {per:.1} us/call, add.out {per_out:.1} us/call, \
             zeros + add.out {per_zeroed:.1} us/call"
        );
        return;
    }
    let a = Tensor::from_vec(vec![1.5f32], &[1]).unwrap();
    let b = Tensor::from_vec(vec![2.0f32], &[1]).unwrap();
    for _ in 0..n {
        let r = add_tensor(black_box(&a), black_box(&b), black_box(Scalar::Int(1))).unwrap();
        drop(black_box(r));
    }
}
