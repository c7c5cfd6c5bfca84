//! Compute benchmark: milliseconds per training step, every operator through the dispatcher
//! and the autograd layer, on 2 rayon threads by default. One step is forward + loss +
//! backward + optimizer step + `zero_grad` (grads set to none). Workloads (one file per
//! family):
//! - `mlp_train_step`: MLP 784-512-512-10 (ReLU), batch 128, cross-entropy,
//!   SGD(lr=0.01, momentum=0.9);
//! - `cnn_train_step`: PyTorch's MNIST example network without its dropouts: conv2d(1→32, 3×3),
//!   ReLU, conv2d(32→64, 3×3), ReLU, max_pool2d(2), flatten, linear(9216→128), ReLU,
//!   linear(128→10), log_softmax + nll_loss; batch 64 of 1×28×28 inputs uniform in [0, 1);
//!   SGD(lr=0.01, momentum=0.9);
//! - `resnet_train_step`: a small ResNet (stem conv3x3 3→16 + batch norm + ReLU, three stages
//!   of two basic blocks of widths 16, 32, 64, adaptive average pooling, linear 64→10) in
//!   training mode, batch 32 of 3×32×32, cross-entropy, SGD(lr=0.1, momentum=0.9,
//!   weight_decay=5e-4);
//! - `transformer_train_step`: a decoder-only transformer (vocabulary 512, d_model 256, 2
//!   pre-norm blocks of 4 causal heads and a GELU MLP of 1024, final layer norm, untied head),
//!   batch 16 of 128 tokens, cross-entropy over every position, AdamW(lr=3e-4,
//!   weight_decay=0.01);
//! - `lazy_mlp_train_step`: `mlp_train_step` on the lazy backend (parameters and data on
//!   `lazy`, each step captured then run by `lazy::mark_step()`, its prepared plan taken from
//!   the graph cache from the second step on), its steps alternating with eager steps of the
//!   same model so that both see the same machine; the JSON line gives both and their ratio;
//! - `remote_mlp_train_step`: `lazy_mlp_train_step` on `remote_accelerator:0`, its graphs run
//!   by a worker the bench starts in-process and reaches over loopback TCP, the batch sent
//!   with every step (as a data loader's would be); the line adds round trips and bytes per
//!   step;
//! - `per_sample_grads`: the per-sample gradients of the MLP 784-512-512-10's cross-entropy at
//!   batch 64, `vmap(grad(loss))` (`torch.func`) against a loop of 64 single-sample `grad`
//!   calls whose results are stacked per parameter (the tutorial's loop), in the same run; the
//!   JSON line gives both and their ratio.
//!
//! Prints one JSON object per workload. `benches/pytorch_train_step.py` runs the same steps
//! with PyTorch and prints the same lines.
//!
//! `cargo run --release --example compute_bench [-- STEPS [THREADS [BENCH...]]]`; with
//! `COMPUTE_BENCH_PROFILE=1`, also the time of each operator's kernels by dispatch key (stderr);
//! with `COMPUTE_BENCH_MATH_SDPA=1`, attention runs the math path instead of the flash kernel
//! (`torch.backends.cuda.enable_flash_sdp(False)`), to compare the two.

use switchboard_cpu as _;

mod cnn;
mod measure;
mod mlp;
mod per_sample;
mod resnet;
mod transformer;

use measure::BoxError;

fn main() -> Result<(), BoxError> {
    let mut args = std::env::args().skip(1);
    let steps: usize = args.next().map_or(Ok(50), |s| s.parse())?;
    let threads: usize = args.next().map_or(Ok(2), |s| s.parse())?;
    let benches: Vec<String> = args.collect();
    switchboard_tensor::tune_allocator();
    // The global pool serves the threads outside any pool: the in-process remote worker's.
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()?;
    let all = [
        "mlp_train_step",
        "cnn_train_step",
        "resnet_train_step",
        "transformer_train_step",
        "lazy_mlp_train_step",
        "remote_mlp_train_step",
        "per_sample_grads",
    ];
    let chosen: Vec<&str> = if benches.is_empty() {
        all.to_vec()
    } else {
        benches.iter().map(String::as_str).collect()
    };
    // The steps run on one of `threads` kernel threads, as PyTorch's main thread is one of its
    // OpenMP threads (Note [The caller is one of the kernel threads] in switchboard-cpu).
    switchboard_cpu::threads::with_num_threads(Some(threads), || {
        chosen
            .iter()
            .try_for_each(|bench| run(bench, steps, threads, &all).map_err(|e| e.to_string()))
    })??;
    Ok(())
}

/// Runs one workload.
fn run(bench: &str, steps: usize, threads: usize, all: &[&str]) -> Result<(), BoxError> {
    match bench {
        "mlp_train_step" => mlp::mlp_train_step(steps, threads),
        "cnn_train_step" => cnn::cnn_train_step(steps, threads),
        "resnet_train_step" => resnet::resnet_train_step(steps, threads),
        "transformer_train_step" => transformer::transformer_train_step(steps, threads),
        "lazy_mlp_train_step" => mlp::lazy_mlp_train_step(steps, threads),
        "remote_mlp_train_step" => mlp::remote_mlp_train_step(steps, threads),
        "per_sample_grads" => per_sample::per_sample_grads(steps, threads),
        other => Err(format!("unknown bench {other}; one of {all:?}").into()),
    }
}
