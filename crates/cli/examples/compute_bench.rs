//! Compute benchmark: milliseconds per training step of an MLP 784-512-512-10 (ReLU) on a
//! batch of 128 synthetic samples: forward, cross-entropy, backward and an SGD step, all
//! through the dispatcher, on 2 rayon threads. Prints one JSON object.
//!
//! The same training on the lazy backend follows, from the same initial model (its
//! `lazy` object): each step is captured, then run by the CPU executor when the loss is read,
//! with the step's plan from the graph cache after the first; `lazy_over_eager` is the ratio of
//! the median step times, `same_losses` whether every lazy step's loss equals eager's.
//!
//! `cargo run --release --example compute_bench [-- STEPS [THREADS]]`

use std::time::Instant;

use switchboard::lazy;
use switchboard_autograd::AutogradTensor;
use switchboard_cli::train::evaluate;
use switchboard_cpu as _;
use switchboard_nn::{mlp, Module, Optimizer, Sgd};
use switchboard_ops as ops;
use switchboard_tensor::{Device, Generator, ScalarType, Tensor};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let steps: usize = args.next().map_or(Ok(50), |s| s.parse())?;
    let threads: usize = args.next().map_or(Ok(2), |s| s.parse())?;
    switchboard_tensor::tune_allocator();
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()?;

    let (batch, sizes) = (128i64, [784usize, 512, 512, 10]);
    // Synthetic data: uniform inputs, labels from the generator.
    let gen = Generator::new(1);
    let x = ops::empty_with(
        &[batch, 784],
        ops::EmptyOptions::default().dtype(ScalarType::Float),
    )?;
    ops::uniform_with_(&x, ops::UniformInplaceOptions::default().generator(&gen))?;
    let y = ops::empty_with(
        &[batch],
        ops::EmptyOptions::default().dtype(ScalarType::Long),
    )?;
    ops::random_with_(
        &y,
        0,
        Some(10),
        ops::RandomInplaceOptions::default().generator(&gen),
    )?;

    let eager = run(Device::CPU, &sizes, &x, &y, steps)?;
    let (first_loss, last_loss, acc) = (
        eager.losses[0],
        *eager.losses.last().unwrap(),
        eager.accuracy,
    );
    let (mean, median, mut times) = (eager.mean(), eager.median(), eager.times.clone());
    times.sort_by(f64::total_cmp);
    lazy::reset_stats();
    let on_lazy = run(lazy::DEVICE, &sizes, &x, &y, steps)?;
    let stats = lazy::stats();
    let json = serde_json::json!({
        "bench": "mlp_train_step",
        "model": "MLP 784-512-512-10 ReLU",
        "batch": batch,
        "loss": "cross_entropy",
        "optimizer": "SGD(lr=0.01, momentum=0.9)",
        "threads": threads,
        "steps": steps,
        "ms_per_step": (mean * 1e3).round() / 1e3,
        "ms_per_step_median": (median * 1e3).round() / 1e3,
        "ms_per_step_min": (times[0] * 1e3).round() / 1e3,
        "first_loss": first_loss,
        "last_loss": last_loss,
        "train_accuracy": acc,
        "lazy": {
            "ms_per_step": (on_lazy.mean() * 1e3).round() / 1e3,
            "ms_per_step_median": (on_lazy.median() * 1e3).round() / 1e3,
            "lazy_over_eager": (on_lazy.median() / median * 1e3).round() / 1e3,
            "same_losses": on_lazy.losses == eager.losses,
            "train_accuracy": on_lazy.accuracy,
            "graph_cache_hits": stats.cache_hits,
            "graph_cache_misses": stats.cache_misses,
            "nodes_per_step": stats.nodes_captured / (steps as u64 + 5).max(1),
            "sync_ms": (stats.sync_ms * 1e3).round() / 1e3,
        },
    });
    println!("{json}");
    Ok(())
}

/// Step times (ms, after the warm-up), losses (warm-up included) and final accuracy of one
/// training run.
struct Run {
    times: Vec<f64>,
    losses: Vec<f64>,
    accuracy: f64,
}

impl Run {
    fn mean(&self) -> f64 {
        self.times.iter().sum::<f64>() / self.times.len() as f64
    }

    fn median(&self) -> f64 {
        let mut t = self.times.clone();
        t.sort_by(f64::total_cmp);
        t[t.len() / 2]
    }
}

/// Trains a fresh model (seed 0) on `device` for 5 warm-up steps and `steps` timed ones. On
/// the lazy device, reading the loss (`item`) runs the step's captured graph.
fn run(
    device: Device,
    sizes: &[usize],
    x: &Tensor,
    y: &Tensor,
    steps: usize,
) -> Result<Run, Box<dyn std::error::Error>> {
    let mut model = mlp(sizes, 0)?;
    model.to_device(device)?;
    let to = |t: &Tensor| ops::_to_copy_with(t, ops::ToCopyOptions::default().device(device));
    let (x, y) = (to(x)?, to(y)?);
    let mut opt = Sgd::new(model.parameters(), 0.01).momentum(0.9);
    let mut step = || -> Result<f64, Box<dyn std::error::Error>> {
        let loss = ops::cross_entropy_loss(&model.forward(&x)?, &y)?;
        opt.zero_grad();
        loss.backward()?;
        opt.step()?;
        Ok(loss.item()?.to_f64())
    };
    // Warm-up: first-call handle lookups, allocator, rayon pool start (and on lazy, the
    // first captures and plans).
    let mut losses = Vec::with_capacity(steps + 5);
    for _ in 0..5 {
        losses.push(step()?);
    }
    let mut times = Vec::with_capacity(steps);
    for _ in 0..steps {
        let t = Instant::now();
        losses.push(step()?);
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let accuracy = evaluate(&model, &x, &y)?;
    Ok(Run {
        times,
        losses,
        accuracy,
    })
}
