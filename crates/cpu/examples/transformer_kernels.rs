//! The transformer benchmark's kernels other than the matrix products and attention
//! (`transformer_train_step` in switchboard-cli's `compute_bench`: batch 16, 128 tokens,
//! d_model 256, 4 heads, vocabulary 512, f32), at the shapes the step runs them:
//!
//! - `_log_softmax` and its backward over the `[2048, 512]` logits;
//! - `native_layer_norm` and its backward over `[2048, 256]` rows;
//! - `sum.dim_IntList` over dim 0 of `[2048, N]` (the bias gradients of the linears);
//! - `cat` of the three `[16, 4, 128, 64]` attention gradients laid out `[B, L, H, E]` (the
//!   `stack` in `unbind`'s backward), and `clone` of that stack permuted back.
//!
//! ```text
//! cargo build --release -p switchboard-cpu --example transformer_kernels
//! target/release/examples/transformer_kernels [REPS [THREADS [FILTER]]]
//! ```
//!
//! Prints the best time of `REPS` runs of each (of those whose name contains `FILTER`), in
//! milliseconds.

mod timing;

use switchboard_cpu as cpu;
use switchboard_tensor::{MemoryFormat, RawOps, ScalarType};
use timing::{best, values};

const ROWS: i64 = 16 * 128;

fn main() {
    let (reps, _, mut args) = timing::start(20, 1);
    let filter = args.next().unwrap_or_default();
    let time = |name: &str, f: &mut dyn FnMut()| {
        if name.contains(&filter) {
            println!("{name:<40} {:8.3} ms", best(reps, f));
        }
    };

    let logits = values(&[ROWS, 512]);
    let logp = cpu::_log_softmax(&logits, 1, false).unwrap();
    let grad = values(&[ROWS, 512]);
    time("_log_softmax [2048, 512]", &mut || {
        cpu::_log_softmax(&logits, 1, false).unwrap();
    });
    time("_log_softmax_backward_data [2048, 512]", &mut || {
        cpu::_log_softmax_backward_data(&grad, &logp, 1, ScalarType::Float).unwrap();
    });

    let x = values(&[ROWS, 256]);
    let w = values(&[256]);
    let b = values(&[256]);
    let (_, mean, rstd) = cpu::native_layer_norm(&x, &[256], Some(&w), Some(&b), 1e-5).unwrap();
    let dy = values(&[ROWS, 256]);
    time("native_layer_norm [2048, 256]", &mut || {
        cpu::native_layer_norm(&x, &[256], Some(&w), Some(&b), 1e-5).unwrap();
    });
    time("native_layer_norm_backward [2048, 256]", &mut || {
        cpu::native_layer_norm_backward(
            &dy,
            &x,
            &[256],
            &mean,
            &rstd,
            Some(&w),
            Some(&b),
            &[true, true, true],
        )
        .unwrap();
    });

    for n in [256, 512, 768, 1024] {
        let g = values(&[ROWS, n]);
        time(&format!("sum.dim_IntList dim 0 [2048, {n}]"), &mut || {
            cpu::sum_dim_int_list(&g, Some(&[0]), false, None).unwrap();
        });
    }

    // The attention gradients: sizes [B, H, L, E], memory [B, L, H, E].
    let blhe = || values(&[16, 128, 4, 64]).permute(&[0, 2, 1, 3]).unwrap();
    let grads = [blhe(), blhe(), blhe()];
    time("cat 3 x [16, 4, 128, 64] (BLHE) dim 0", &mut || {
        cpu::cat(&grads, 0).unwrap();
    });
    let stacked = values(&[3, 16, 4, 128, 64])
        .permute(&[1, 3, 0, 2, 4])
        .unwrap();
    time("clone [16, 128, 3, 4, 64] permuted", &mut || {
        cpu::clone(&stacked, Some(MemoryFormat::Contiguous)).unwrap();
    });
}
