//! `mlp_train_step` and its lazy and remote variants (`lazy_mlp_train_step`,
//! `remote_mlp_train_step`).

use std::time::Instant;

use switchboard::lazy;
use switchboard_autograd::AutogradTensor;
use switchboard_nn::{mlp, Module, Optimizer, Sequential, Sgd};
use switchboard_ops as ops;
use switchboard_tensor::{Device, Tensor};

use crate::measure::{data, measure, median, profile, profile_wanted, round3, BoxError, Phases};

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

pub fn mlp_train_step(steps: usize, threads: usize) -> Result<(), BoxError> {
    let mut s = MlpStep::new(Device::CPU)?;
    measure("mlp_train_step", mlp_describe(), steps, threads, |ph| {
        s.step(ph)
    })
}

/// `mlp_train_step` on the lazy backend, its steps alternating with eager ones (after 5
/// warm-up steps of each): the JSON line has the lazy step's figures, the eager step's median
/// and their ratio, and the lazy backend's counters over the timed steps.
pub fn lazy_mlp_train_step(steps: usize, threads: usize) -> Result<(), BoxError> {
    let on_lazy = MlpStep::new(lazy::DEVICE)?;
    lazy_step_on("lazy_mlp_train_step", on_lazy, steps, threads)
}

/// `lazy_mlp_train_step` on `remote_accelerator:0`, whose graphs a worker this process starts
/// runs over loopback (tarpc over TCP on 127.0.0.1): the line adds the round trips and bytes
/// per timed step.
pub fn remote_mlp_train_step(steps: usize, threads: usize) -> Result<(), BoxError> {
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
