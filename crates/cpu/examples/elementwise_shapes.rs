//! Time of the elementwise kernels of a ResNet step on its activation shapes (batch 32):
//!
//! ```text
//! cargo build --release -p switchboard-cpu --example elementwise_shapes
//! target/release/examples/elementwise_shapes [REPS [THREADS]]
//! ```
//!
//! Prints, per shape, the best time of `REPS` calls of `relu`, `threshold_backward` (relu's
//! backward) and `add` of two tensors (the residual), float32, on values in no predictable
//! order. `benches/elementwise_shapes.py` is PyTorch's side.

mod timing;

use switchboard_cpu::{relu, threshold_backward};
use switchboard_ops as ops;
use switchboard_tensor::Scalar;
use timing::{best, noise};

fn main() {
    let (reps, _, _) = timing::start(50, 1);
    for sizes in [[32, 16, 32, 32], [32, 32, 16, 16], [32, 64, 8, 8]] {
        let x = noise(&sizes);
        let g = ops::neg(&x).expect("valid");
        let relu_ms = best(reps, || {
            relu(&x).expect("valid");
        });
        let backward_ms = best(reps, || {
            threshold_backward(&g, &x, Scalar::Int(0)).expect("valid");
        });
        let add_ms = best(reps, || {
            ops::add(&x, &g).expect("valid");
        });
        let name = format!("{sizes:?}");
        println!(
            "{name:<18} relu {relu_ms:7.3} ms   threshold_backward {backward_ms:7.3} ms   add {add_ms:7.3} ms"
        );
    }
}
