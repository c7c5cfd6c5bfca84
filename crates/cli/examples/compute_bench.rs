//! Compute benchmark: milliseconds per training step, every operator through the dispatcher
//! and the autograd layer, on 2 rayon threads by default. One step is forward + loss +
//! backward + `SGD(lr=0.01, momentum=0.9).step()` + `zero_grad` (grads set to none). Workloads:
//! - `mlp_train_step`: MLP 784-512-512-10 (ReLU), batch 128, cross-entropy;
//! - `cnn_train_step`: PyTorch's MNIST example network without its dropouts: conv2d(1→32, 3×3),
//!   ReLU, conv2d(32→64, 3×3), ReLU, max_pool2d(2), flatten, linear(9216→128), ReLU,
//!   linear(128→10), log_softmax + nll_loss; batch 64 of 1×28×28 inputs uniform in [0, 1);
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
//!   calls in the same run; the JSON line gives both and their ratio.
//!
//! Prints one JSON object per workload. `benches/pytorch_train_step.py` runs the same steps
//! with PyTorch and prints the same lines.
//!
//! `cargo run --release --example compute_bench [-- STEPS [THREADS [BENCH...]]]`; with
//! `COMPUTE_BENCH_PROFILE=1`, also the time of each operator's kernels by dispatch key (stderr).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use switchboard_dispatcher::{add_observer, CallEvent};

use switchboard::lazy;
use switchboard_autograd::{no_grad, AutogradTensor};
use switchboard_cpu as _;
use switchboard_nn::{mlp, Linear, Module, Optimizer, Sequential, Sgd};
use switchboard_ops as ops;
use switchboard_tensor::{Device, Generator, ScalarType, Tensor};

type BoxError = Box<dyn std::error::Error>;

/// The CNN of `cnn_train_step`, initialized as PyTorch's modules are (kaiming-uniform with
/// `a = sqrt(5)`: `U(-1/sqrt(fan_in), 1/sqrt(fan_in))` for weights and biases).
struct Cnn {
    conv1: (Tensor, Tensor),
    conv2: (Tensor, Tensor),
    fc1: Linear,
    fc2: Linear,
}

impl Cnn {
    fn new(seed: u64) -> Result<Cnn, BoxError> {
        let gen = Generator::new(seed);
        let conv = |cin: i64, cout: i64| -> Result<(Tensor, Tensor), BoxError> {
            let bound = 1.0 / ((cin * 9) as f64).sqrt();
            let _g = no_grad();
            let uniform = |sizes: &[i64]| -> Result<Tensor, BoxError> {
                let t =
                    ops::empty_with(sizes, ops::EmptyOptions::default().dtype(ScalarType::Float))?;
                ops::uniform_with_(
                    &t,
                    ops::UniformInplaceOptions::default()
                        .from(-bound)
                        .to(bound)
                        .generator(&gen),
                )?;
                Ok(t.requires_grad_(true)?)
            };
            Ok((uniform(&[cout, cin, 3, 3])?, uniform(&[cout])?))
        };
        Ok(Cnn {
            conv1: conv(1, 32)?,
            conv2: conv(32, 64)?,
            fc1: Linear::new(9216, 128, true, &gen)?,
            fc2: Linear::new(128, 10, true, &gen)?,
        })
    }

    /// The log-probabilities of the classes.
    fn forward(&self, x: &Tensor) -> Result<Tensor, BoxError> {
        let conv = |x: &Tensor, (w, b): &(Tensor, Tensor)| {
            ops::conv2d_with(x, w, ops::Conv2dOptions::default().bias(b))
        };
        let x = ops::relu(&conv(x, &self.conv1)?)?;
        let x = ops::relu(&conv(&x, &self.conv2)?)?;
        let x = ops::max_pool2d(&x, &[2])?;
        let x = ops::flatten_with(&x, ops::FlattenOptions::default().start_dim(1))?;
        let x = ops::relu(&self.fc1.forward(&x)?)?;
        Ok(ops::log_softmax(&self.fc2.forward(&x)?, 1)?)
    }

    fn parameters(&self) -> Vec<Tensor> {
        let (c1, c2) = (&self.conv1, &self.conv2);
        [&c1.0, &c1.1, &c2.0, &c2.1]
            .into_iter()
            .cloned()
            .chain(self.fc1.parameters())
            .chain(self.fc2.parameters())
            .collect()
    }
}

/// Synthetic data: `batch` inputs of `shape` uniform in [0, 1) and labels in 0..10.
fn data(batch: i64, shape: &[i64]) -> Result<(Tensor, Tensor), BoxError> {
    let gen = Generator::new(1);
    let sizes: Vec<i64> = std::iter::once(batch)
        .chain(shape.iter().copied())
        .collect();
    let x = ops::empty_with(
        &sizes,
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
    Ok((x, y))
}

/// The phases of a step, in milliseconds: forward (with the loss), backward, optimizer (with
/// `zero_grad`), and on the lazy backend the sync (`mark_step`) that runs the captured step.
#[derive(Default)]
struct Phases {
    start: Option<Instant>,
    ms: [Vec<f64>; 4],
}

impl Phases {
    const NAMES: [&'static str; 4] = ["forward", "backward", "optimizer", "sync"];

    fn start(&mut self) {
        self.start = Some(Instant::now());
    }

    /// Ends phase `i` and starts the next.
    fn end(&mut self, i: usize) {
        let now = Instant::now();
        if let Some(s) = self.start.replace(now) {
            self.ms[i].push((now - s).as_secs_f64() * 1e3);
        }
    }

    /// The median of each phase that was timed, in milliseconds.
    fn medians(&mut self) -> serde_json::Map<String, serde_json::Value> {
        Phases::NAMES
            .iter()
            .zip(&mut self.ms)
            .filter(|(_, v)| !v.is_empty())
            .map(|(n, v)| (n.to_string(), serde_json::json!(round3(median(v)))))
            .collect()
    }
}

/// Whether `COMPUTE_BENCH_PROFILE` asks for the per-key profile (a boolean flag, read as
/// every flag of the project is).
fn profile_wanted() -> Result<bool, BoxError> {
    Ok(switchboard_dispatcher::env_flag("COMPUTE_BENCH_PROFILE")?.unwrap_or(false))
}

fn round3(x: f64) -> f64 {
    (x * 1e3).round() / 1e3
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// With `COMPUTE_BENCH_PROFILE=1`: the time of each operator's kernel by dispatch key over
/// `steps` more steps, printed to stderr per step (the kernels of one key nest in those of
/// the keys above it: Autograd includes CPU).
fn profile(
    bench: &str,
    steps: usize,
    step: &mut impl FnMut(&mut Phases) -> Result<f64, BoxError>,
) -> Result<(), BoxError> {
    type Totals = HashMap<(String, String), (f64, usize)>;
    let totals: Arc<Mutex<Totals>> = Arc::default();
    let sink = totals.clone();
    thread_local! {
        static OPEN: std::cell::RefCell<Vec<Instant>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let guard = add_observer(move |e: &CallEvent<'_>| {
        if e.before {
            OPEN.with(|o| o.borrow_mut().push(Instant::now()));
            return;
        }
        let Some(t) = OPEN.with(|o| o.borrow_mut().pop()) else {
            return;
        };
        let ms = t.elapsed().as_secs_f64() * 1e3;
        let mut m = sink.lock().unwrap_or_else(|e| e.into_inner());
        let entry = m
            .entry((e.op.name().to_string(), format!("{:?}", e.key)))
            .or_default();
        entry.0 += ms;
        entry.1 += 1;
    });
    let mut phases = Phases::default();
    let t = Instant::now();
    for _ in 0..steps {
        step(&mut phases)?;
    }
    let per_step = t.elapsed().as_secs_f64() * 1e3 / steps as f64;
    drop(guard);
    let mut rows: Vec<_> = totals
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .drain()
        .collect();
    rows.sort_by(|a, b| b.1 .0.total_cmp(&a.1 .0));
    eprintln!("{bench}: {per_step:.3} ms per observed step; ms per step by operator and key:");
    for ((op, key), (ms, n)) in rows.iter().take(40) {
        eprintln!(
            "  {:>8.3} ms {:>5} calls  {op} [{key}]",
            ms / steps as f64,
            n / steps
        );
    }
    Ok(())
}

/// Times `steps` training steps after 5 warm-up steps (first-call handle lookups, allocator,
/// rayon pool start) and prints the JSON line of `bench`.
fn measure(
    bench: &str,
    describe: serde_json::Value,
    steps: usize,
    threads: usize,
    mut step: impl FnMut(&mut Phases) -> Result<f64, BoxError>,
) -> Result<(), BoxError> {
    let mut phases = Phases::default();
    let first_loss = step(&mut phases)?;
    for _ in 0..4 {
        step(&mut phases)?;
    }
    let mut phases = Phases::default();
    let mut times = Vec::with_capacity(steps);
    let mut last_loss = first_loss;
    for _ in 0..steps {
        let t = Instant::now();
        last_loss = step(&mut phases)?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let phase_ms = phases.medians();
    let mean = times.iter().sum::<f64>() / times.len().max(1) as f64;
    times.sort_by(f64::total_cmp);
    let round = round3;
    let mut json = serde_json::json!({
        "bench": bench,
        "impl": "switchboard",
        "threads": threads,
        "steps": steps,
        "ms_per_step": round(mean),
        "ms_per_step_median": round(times.get(times.len() / 2).copied().unwrap_or(f64::NAN)),
        "ms_per_step_min": round(times.first().copied().unwrap_or(f64::NAN)),
        "first_loss": first_loss,
        "last_loss": last_loss,
        "phases_ms_median": phase_ms,
    });
    if let (Some(obj), serde_json::Value::Object(extra)) = (json.as_object_mut(), describe) {
        obj.extend(extra);
    }
    println!("{json}");
    if profile_wanted()? {
        profile(bench, steps, &mut step)?;
    }
    Ok(())
}

/// The MLP of `mlp_train_step` with its optimizer and data, on `device`.
struct MlpStep {
    model: Sequential,
    opt: Sgd,
    x: Tensor,
    y: Tensor,
    device: Device,
    /// The host batch, moved to the device at every step (else `x` and `y` stay there).
    host_batch: Option<(Tensor, Tensor)>,
}

impl MlpStep {
    fn new(device: Device) -> Result<MlpStep, BoxError> {
        let mut model = mlp(&[784, 512, 512, 10], 0)?;
        model.to_device(device)?;
        let opt = Sgd::new(model.parameters(), 0.01).momentum(0.9);
        let (x, y) = data(128, &[784])?;
        let to = |t: &Tensor| ops::_to_copy_with(t, ops::ToCopyOptions::default().device(device));
        let (x, y) = if device.is_cpu() {
            (x, y)
        } else {
            (to(&x)?, to(&y)?)
        };
        Ok(MlpStep {
            model,
            opt,
            x,
            y,
            device,
            host_batch: None,
        })
    }

    /// The same step, its batch moved from the host at every step.
    fn with_fresh_batches(mut self) -> Result<MlpStep, BoxError> {
        self.host_batch = Some(data(128, &[784])?);
        Ok(self)
    }

    /// One training step; returns the loss. On the lazy device the step is captured, then
    /// `mark_step` runs it (phase 3).
    fn step(&mut self, ph: &mut Phases) -> Result<f64, BoxError> {
        ph.start();
        if let Some((x, y)) = &self.host_batch {
            let to = |t: &Tensor| {
                ops::_to_copy_with(t, ops::ToCopyOptions::default().device(self.device))
            };
            (self.x, self.y) = (to(x)?, to(y)?);
        }
        let loss = ops::cross_entropy_loss(&self.model.forward(&self.x)?, &self.y)?;
        ph.end(0);
        loss.backward()?;
        ph.end(1);
        self.opt.step()?;
        self.opt.zero_grad();
        ph.end(2);
        if lazy::is_lazy_device_type(self.device.ty) {
            lazy::backend(self.device)?.mark_step()?;
            ph.end(3);
        }
        Ok(loss.item()?.to_f64())
    }
}

const MLP_DESCRIPTION: &str = "MLP 784-512-512-10 ReLU";

fn mlp_describe() -> serde_json::Value {
    serde_json::json!({
        "model": MLP_DESCRIPTION,
        "batch": 128,
        "loss": "cross_entropy",
        "optimizer": "SGD(lr=0.01, momentum=0.9)",
    })
}

fn mlp_train_step(steps: usize, threads: usize) -> Result<(), BoxError> {
    let mut s = MlpStep::new(Device::CPU)?;
    measure("mlp_train_step", mlp_describe(), steps, threads, |ph| {
        s.step(ph)
    })
}

/// `mlp_train_step` on the lazy backend, its steps alternating with eager ones (after 5
/// warm-up steps of each): the JSON line has the lazy step's figures, the eager step's median
/// and their ratio, and the lazy backend's counters over the timed steps.
fn lazy_mlp_train_step(steps: usize, threads: usize) -> Result<(), BoxError> {
    let on_lazy = MlpStep::new(lazy::DEVICE)?;
    lazy_step_on("lazy_mlp_train_step", on_lazy, steps, threads)
}

/// `lazy_mlp_train_step` on `remote_accelerator:0`, whose graphs a worker this process starts
/// runs over loopback (tarpc over TCP on 127.0.0.1): the line adds the round trips and bytes
/// per timed step.
fn remote_mlp_train_step(steps: usize, threads: usize) -> Result<(), BoxError> {
    let worker = switchboard_remote::Worker::bind(switchboard_remote::WorkerConfig::default())?;
    let device = switchboard_remote::connect(
        0,
        &worker.local_addr().to_string(),
        switchboard_remote::ClientConfig::default(),
    )?;
    let on_worker = MlpStep::new(device)?.with_fresh_batches()?;
    lazy_step_on("remote_mlp_train_step", on_worker, steps, threads)
}

/// The figures of `lazy_mlp_train_step` for `on_lazy`, a step on a lazy device.
fn lazy_step_on(
    bench: &str,
    mut on_lazy: MlpStep,
    steps: usize,
    threads: usize,
) -> Result<(), BoxError> {
    let device = on_lazy.device;
    let backend = lazy::backend(device)?;
    let mut eager = MlpStep::new(Device::CPU)?;
    let (mut eager_phases, mut lazy_phases) = (Phases::default(), Phases::default());
    let first_loss = on_lazy.step(&mut lazy_phases)?;
    for _ in 0..5 {
        eager.step(&mut eager_phases)?;
        on_lazy.step(&mut lazy_phases)?;
    }
    let (mut eager_phases, mut lazy_phases) = (Phases::default(), Phases::default());
    let (mut eager_ms, mut lazy_ms) = (Vec::new(), Vec::new());
    let mut last_loss = first_loss;
    backend.reset_stats();
    let remote_before = remote_counters(backend);
    for _ in 0..steps {
        let t = Instant::now();
        eager.step(&mut eager_phases)?;
        eager_ms.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        last_loss = on_lazy.step(&mut lazy_phases)?;
        lazy_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let stats = backend.stats();
    let remote_after = remote_counters(backend);
    let mean = lazy_ms.iter().sum::<f64>() / lazy_ms.len().max(1) as f64;
    let (lazy_median, eager_median) = (median(&mut lazy_ms), median(&mut eager_ms));
    let mut json = serde_json::json!({
        "bench": bench,
        "impl": "switchboard",
        "device": device.to_string(),
        "threads": threads,
        "steps": steps,
        "ms_per_step": round3(mean),
        "ms_per_step_median": round3(lazy_median),
        "ms_per_step_min": round3(lazy_ms.first().copied().unwrap_or(f64::NAN)),
        "eager_ms_per_step_median": round3(eager_median),
        "ratio_to_eager": round3(lazy_median / eager_median),
        "first_loss": first_loss,
        "last_loss": last_loss,
        "phases_ms_median": lazy_phases.medians(),
        "eager_phases_ms_median": eager_phases.medians(),
        "nodes_per_step": stats.nodes_captured / steps.max(1) as u64,
        "cache_hits": stats.cache_hits,
        "cache_misses": stats.cache_misses,
    });
    if let (Some(obj), serde_json::Value::Object(extra)) = (json.as_object_mut(), mlp_describe()) {
        obj.extend(extra);
    }
    if let (Some(obj), Some(before), Some(after)) =
        (json.as_object_mut(), remote_before, remote_after)
    {
        let per_step = |i: usize| (after[i] - before[i]) as f64 / steps.max(1) as f64;
        obj.insert("round_trips_per_step".into(), round3(per_step(0)).into());
        obj.insert("bytes_sent_per_step".into(), round3(per_step(1)).into());
        obj.insert("bytes_received_per_step".into(), round3(per_step(2)).into());
    }
    println!("{json}");
    if profile_wanted()? {
        profile(bench, steps, &mut |ph| on_lazy.step(ph))?;
    }
    Ok(())
}

/// A remote device's round trips, bytes sent and bytes received, read from its metrics report
/// (none on a device whose executor is local).
fn remote_counters(backend: &lazy::LazyBackend) -> Option<[u64; 3]> {
    let report = backend.executor().report();
    let value = |name: &str| -> Option<u64> {
        let mut lines = report
            .lines()
            .skip_while(|l| *l != format!("Counter: {name}"));
        lines.nth(1)?.trim().strip_prefix("Value: ")?.parse().ok()
    };
    Some([
        value("RemoteRoundTrips")?,
        value("RemoteBytesSent")?,
        value("RemoteBytesReceived")?,
    ])
}

fn cnn_train_step(steps: usize, threads: usize) -> Result<(), BoxError> {
    let model = Cnn::new(0)?;
    let mut opt = Sgd::new(model.parameters(), 0.01).momentum(0.9);
    let (x, y) = data(64, &[1, 28, 28])?;
    let describe = serde_json::json!({
        "model": "MNIST CNN conv32-conv64-maxpool-fc128-fc10 (no dropout)",
        "batch": 64,
        "loss": "log_softmax + nll_loss",
        "optimizer": "SGD(lr=0.01, momentum=0.9)",
    });
    measure("cnn_train_step", describe, steps, threads, |ph| {
        ph.start();
        let loss = ops::nll_loss(&model.forward(&x)?, &y)?;
        ph.end(0);
        loss.backward()?;
        ph.end(1);
        opt.step()?;
        opt.zero_grad();
        ph.end(2);
        Ok(loss.item()?.to_f64())
    })
}

/// One sample's loss of the MLP 784-512-512-10 (`params`: w1, b1, w2, b2, w3, b3, then the
/// sample and its label), on a batch of one as the `torch.func` tutorial's `functional_call`.
fn sample_loss(args: &[Tensor]) -> Result<Tensor, switchboard_dispatcher::DispatchError> {
    let (params, x, y) = (&args[..6], &args[6], &args[7]);
    let mut h = ops::unsqueeze(x, 0)?;
    for (i, layer) in params.chunks(2).enumerate() {
        h = ops::add(&ops::linear(&h, &layer[0])?, &layer[1])?;
        if i < 2 {
            h = ops::relu(&h)?;
        }
    }
    ops::cross_entropy_loss(&h, &ops::unsqueeze(y, 0)?)
}

fn per_sample_grads(steps: usize, threads: usize) -> Result<(), BoxError> {
    use switchboard::func::{grad, Dims, Tree, Vmap};
    let model = mlp(&[784, 512, 512, 10], 0)?;
    let params: Vec<Tensor> = model.parameters().iter().map(|p| p.detach()).collect();
    let (x, y) = data(64, &[784])?;
    let argnums = [0, 1, 2, 3, 4, 5];
    let mut in_dims = vec![Dims::Dim(None); 6];
    in_dims.extend([Dims::Dim(Some(0)), Dims::Dim(Some(0))]);
    let mut args: Vec<Tree> = params.iter().cloned().map(Tree::Tensor).collect();
    args.extend([Tree::Tensor(x.clone()), Tree::Tensor(y.clone())]);
    let vmapped = || -> Result<(), BoxError> {
        Vmap::new().in_dims(Dims::List(in_dims.clone())).call(
            |xs| {
                let ts: Vec<Tensor> = xs.iter().filter_map(|t| t.as_tensor().cloned()).collect();
                let gs = grad(sample_loss, &ts, &argnums)?;
                Ok(Tree::List(gs.into_iter().map(Tree::Tensor).collect()))
            },
            &args,
        )?;
        Ok(())
    };
    let looped = || -> Result<(), BoxError> {
        for b in 0..x.sizes()[0] {
            let mut one = params.clone();
            one.push(ops::select(&x, 0, b)?);
            one.push(ops::select(&y, 0, b)?);
            grad(sample_loss, &one, &argnums)?;
        }
        Ok(())
    };
    let time = |f: &dyn Fn() -> Result<(), BoxError>, n: usize| -> Result<Vec<f64>, BoxError> {
        f()?;
        let mut times = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            f()?;
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        times.sort_by(f64::total_cmp);
        Ok(times)
    };
    let vmap_ms = time(&vmapped, steps.max(1))?;
    let loop_ms = time(&looped, (steps / 5).max(3))?;
    let (v, l) = (vmap_ms[vmap_ms.len() / 2], loop_ms[loop_ms.len() / 2]);
    println!(
        "{}",
        serde_json::json!({
            "bench": "per_sample_grads",
            "impl": "switchboard",
            "model": "MLP 784-512-512-10 (ReLU), cross-entropy per sample",
            "batch": 64,
            "threads": threads,
            "steps": vmap_ms.len(),
            "ms_per_step_median": round3(v),
            "ms_per_step_min": round3(vmap_ms[0]),
            "loop_ms_median": round3(l),
            "loop_steps": loop_ms.len(),
            "speedup_vs_loop": round3(l / v),
        })
    );
    Ok(())
}

fn main() -> Result<(), BoxError> {
    let mut args = std::env::args().skip(1);
    let steps: usize = args.next().map_or(Ok(50), |s| s.parse())?;
    let threads: usize = args.next().map_or(Ok(2), |s| s.parse())?;
    let benches: Vec<String> = args.collect();
    switchboard_tensor::tune_allocator();
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()?;
    let all = [
        "mlp_train_step",
        "cnn_train_step",
        "lazy_mlp_train_step",
        "remote_mlp_train_step",
        "per_sample_grads",
    ];
    let chosen: Vec<&str> = if benches.is_empty() {
        all.to_vec()
    } else {
        benches.iter().map(String::as_str).collect()
    };
    for bench in chosen {
        match bench {
            "mlp_train_step" => mlp_train_step(steps, threads)?,
            "cnn_train_step" => cnn_train_step(steps, threads)?,
            "lazy_mlp_train_step" => lazy_mlp_train_step(steps, threads)?,
            "remote_mlp_train_step" => remote_mlp_train_step(steps, threads)?,
            "per_sample_grads" => per_sample_grads(steps, threads)?,
            other => return Err(format!("unknown bench {other}; one of {all:?}").into()),
        }
    }
    Ok(())
}
