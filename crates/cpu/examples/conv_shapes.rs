//! Time of the convolutions of `resnet_train_step` (`examples/compute_bench` in
//! switchboard-cli), forward and backward, at its batch of 32:
//!
//! ```text
//! cargo build --release -p switchboard-cpu --example conv_shapes
//! target/release/examples/conv_shapes [REPS [THREADS]]
//! ```
//!
//! Prints, per convolution shape, the best time of `REPS` calls of `convolution` and of
//! `convolution_backward` (input and weight gradients, as the ResNet's bias-free convolutions
//! ask, then each alone), and the totals weighted by how often the ResNet runs each shape.
//! `benches/conv_shapes.py` times PyTorch's on the same shapes.

mod timing;

use switchboard_cpu::{convolution, convolution_backward};
use timing::{best, values};

/// One convolution of the ResNet: input channels, output channels, input size, kernel,
/// stride, padding, and how many of it one step runs.
struct Case {
    name: &'static str,
    c_in: i64,
    c_out: i64,
    size: i64,
    kernel: i64,
    stride: i64,
    padding: i64,
    count: u32,
}

fn main() {
    let (reps, _, _) = timing::start(20, 1);
    let case = |name, c_in, c_out, size, kernel, stride, padding, count| Case {
        name,
        c_in,
        c_out,
        size,
        kernel,
        stride,
        padding,
        count,
    };
    let cases = [
        case("stem 3->16 3x3", 3, 16, 32, 3, 1, 1, 1),
        case("stage1 16->16 3x3", 16, 16, 32, 3, 1, 1, 4),
        case("stage2 16->32 3x3 s2", 16, 32, 32, 3, 2, 1, 1),
        case("stage2 16->32 1x1 s2", 16, 32, 32, 1, 2, 0, 1),
        case("stage2 32->32 3x3", 32, 32, 16, 3, 1, 1, 3),
        case("stage3 32->64 3x3 s2", 32, 64, 16, 3, 2, 1, 1),
        case("stage3 32->64 1x1 s2", 32, 64, 16, 1, 2, 0, 1),
        case("stage3 64->64 3x3", 64, 64, 8, 3, 1, 1, 3),
    ];
    let (mut total_fwd, mut total_bwd) = (0.0, 0.0);
    for c in &cases {
        let x = values(&[32, c.c_in, c.size, c.size]);
        let w = values(&[c.c_out, c.c_in, c.kernel, c.kernel]);
        let (s, p) = ([c.stride], [c.padding]);
        let conv = || convolution(&x, &w, None, &s, &p, &[1], false, &[0], 1).expect("conv");
        let y = conv();
        let go = values(y.sizes());
        // The stem's input needs no gradient.
        let mask = [c.c_in != 3, true, false];
        let fwd = best(reps, || {
            conv();
        });
        let bwd = best(reps, || {
            convolution_backward(&go, &x, &w, None, &s, &p, &[1], false, &[0], 1, &mask)
                .expect("conv backward");
        });
        let bwd_part = |mask: [bool; 3]| {
            best(reps, || {
                convolution_backward(&go, &x, &w, None, &s, &p, &[1], false, &[0], 1, &mask)
                    .expect("conv backward");
            })
        };
        let (gx, gw) = (
            bwd_part([mask[0], false, false]),
            bwd_part([false, true, false]),
        );
        total_fwd += fwd * f64::from(c.count);
        total_bwd += bwd * f64::from(c.count);
        println!(
            "{:<22} x{}  forward {fwd:>7.3} ms  backward {bwd:>7.3} ms (input {gx:.3}, weight {gw:.3})",
            c.name, c.count
        );
    }
    println!("per step: forward {total_fwd:.3} ms, backward {total_bwd:.3} ms");
}
