//! Time of the pooling kernels on CNN-sized inputs, forward and backward:
//!
//! ```text
//! cargo build --release -p switchboard-cpu --example pool_shapes
//! target/release/examples/pool_shapes [REPS [THREADS]]
//! ```
//!
//! Prints, per case, the best time of `REPS` calls of the forward and of the backward
//! (`avg_pool2d`, `avg_pool3d` and `max_pool2d_with_indices`, float32).

mod timing;

use switchboard_cpu::{
    avg_pool2d, avg_pool2d_backward, avg_pool3d, avg_pool3d_backward, max_pool2d_with_indices,
    max_pool2d_with_indices_backward,
};
use timing::{best, noise, values};

/// One `avg_pool2d` case: the input's sizes and the window (one value for both dims).
struct Case2d {
    name: &'static str,
    sizes: [i64; 4],
    kernel: i64,
    stride: i64,
    padding: i64,
    count_include_pad: bool,
}

fn report(name: &str, fwd: f64, bwd: f64) {
    println!("{name:<40} forward {fwd:8.3} ms   backward {bwd:8.3} ms");
}

fn main() {
    let (reps, _, _) = timing::start(20, 1);
    let cases_2d = [
        Case2d {
            name: "avg_pool2d 32x64x32x32 k2 s2",
            sizes: [32, 64, 32, 32],
            kernel: 2,
            stride: 2,
            padding: 0,
            count_include_pad: true,
        },
        Case2d {
            name: "avg_pool2d 32x32x16x16 k3 s1 p1 excl",
            sizes: [32, 32, 16, 16],
            kernel: 3,
            stride: 1,
            padding: 1,
            count_include_pad: false,
        },
        Case2d {
            name: "avg_pool2d 32x64x8x8 k8 (global)",
            sizes: [32, 64, 8, 8],
            kernel: 8,
            stride: 8,
            padding: 0,
            count_include_pad: true,
        },
    ];
    for case in cases_2d {
        let Case2d {
            name,
            sizes,
            kernel: k,
            stride: s,
            padding: p,
            count_include_pad: include,
        } = case;
        let x = values(&sizes);
        let y = avg_pool2d(&x, &[k], &[s], &[p], false, include, None).expect("valid");
        let go = values(y.sizes());
        let fwd = best(reps, || {
            avg_pool2d(&x, &[k], &[s], &[p], false, include, None).expect("valid");
        });
        let bwd = best(reps, || {
            avg_pool2d_backward(&go, &x, &[k], &[s], &[p], false, include, None).expect("valid");
        });
        report(name, fwd, bwd);
    }
    let x = values(&[8, 16, 8, 16, 16]);
    let y = avg_pool3d(&x, &[2], &[2], &[0], false, true, None).expect("valid");
    let go = values(y.sizes());
    let fwd = best(reps, || {
        avg_pool3d(&x, &[2], &[2], &[0], false, true, None).expect("valid");
    });
    let bwd = best(reps, || {
        avg_pool3d_backward(&go, &x, &[2], &[2], &[0], false, true, None).expect("valid");
    });
    report("avg_pool3d 8x16x8x16x16 k2 s2", fwd, bwd);
    // The MNIST CNN's max pooling (batch 64, 64 channels of 24x24), on values in no
    // predictable order, as activations are (Note [Branchless window maxima]).
    let x = noise(&[64, 64, 24, 24]);
    let (y, idx) = max_pool2d_with_indices(&x, &[2], &[], &[0], &[1], false).expect("valid");
    let go = values(y.sizes());
    let fwd = best(reps, || {
        max_pool2d_with_indices(&x, &[2], &[], &[0], &[1], false).expect("valid");
    });
    let bwd = best(reps, || {
        max_pool2d_with_indices_backward(&go, &x, &[2], &[], &[0], &[1], false, &idx)
            .expect("valid");
    });
    report("max_pool2d 64x64x24x24 k2", fwd, bwd);
}
