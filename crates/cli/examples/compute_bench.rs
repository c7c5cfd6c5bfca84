//! Compute benchmark: milliseconds per training step of an MLP 784-512-512-10 (ReLU) on a
//! batch of 128 synthetic samples: forward, cross-entropy, backward and an SGD step, all
//! through the dispatcher, on 2 rayon threads. Prints one JSON object.
//!
//! `cargo run --release --example compute_bench [-- STEPS [THREADS]]`

use std::time::Instant;

use switchboard_autograd::AutogradTensor;
use switchboard_cli::train::evaluate;
use switchboard_cpu as _;
use switchboard_nn::{mlp, Module, Optimizer, Sgd};
use switchboard_ops as ops;
use switchboard_tensor::{Generator, ScalarType};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let steps: usize = args.next().map_or(Ok(50), |s| s.parse())?;
    let threads: usize = args.next().map_or(Ok(2), |s| s.parse())?;
    switchboard_tensor::tune_allocator();
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()?;

    let (batch, sizes) = (128i64, [784usize, 512, 512, 10]);
    let model = mlp(&sizes, 0)?;
    let mut opt = Sgd::new(model.parameters(), 0.01).momentum(0.9);
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

    let step = |opt: &mut Sgd| -> Result<f64, Box<dyn std::error::Error>> {
        let loss = ops::cross_entropy_loss(&model.forward(&x)?, &y)?;
        opt.zero_grad();
        loss.backward()?;
        opt.step()?;
        Ok(loss.item()?.to_f64())
    };
    // Warm-up: first-call handle lookups, allocator, rayon pool start.
    let first_loss = step(&mut opt)?;
    for _ in 0..4 {
        step(&mut opt)?;
    }
    let mut times = Vec::with_capacity(steps);
    let mut last_loss = first_loss;
    for _ in 0..steps {
        let t = Instant::now();
        last_loss = step(&mut opt)?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let mean = times.iter().sum::<f64>() / times.len() as f64;
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    let acc = evaluate(&model, &x, &y)?;
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
    });
    println!("{json}");
    Ok(())
}
