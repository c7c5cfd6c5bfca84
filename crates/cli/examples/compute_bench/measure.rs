//! Timing shared by the workloads: the phases of a step, the JSON line of a measured run,
//! the per-operator profile (`COMPUTE_BENCH_PROFILE=1`) and the synthetic data.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use switchboard_dispatcher::{add_observer, CallEvent};
use switchboard_ops as ops;
use switchboard_tensor::{Generator, ScalarType, Tensor};

pub type BoxError = Box<dyn std::error::Error>;

/// Synthetic data: `batch` inputs of `shape` uniform in [0, 1) and labels in 0..10.
pub fn data(batch: i64, shape: &[i64]) -> Result<(Tensor, Tensor), BoxError> {
    let gen = Generator::new(1);
    let sizes: Vec<i64> = std::iter::once(batch)
        .chain(shape.iter().copied())
        .collect();
    let x = ops::empty_with(
        &sizes,
        ops::EmptyOptions::default().dtype(ScalarType::Float),
    )?;
    ops::uniform_with_(&x, ops::UniformInplaceOptions::default().generator(&gen))?;
    Ok((x, random_labels(&[batch], 10, &gen)?))
}

/// `sizes` integers (Long) uniform in `0..high`, as `torch.randint(0, high, sizes)`.
pub fn random_labels(sizes: &[i64], high: i64, gen: &Generator) -> Result<Tensor, BoxError> {
    let y = ops::empty_with(sizes, ops::EmptyOptions::default().dtype(ScalarType::Long))?;
    ops::random_with_(
        &y,
        0,
        Some(high),
        ops::RandomInplaceOptions::default().generator(gen),
    )?;
    Ok(y)
}

/// The phases of a step, in milliseconds: forward (with the loss), backward, optimizer (with
/// `zero_grad`), and on the lazy backend the sync (`mark_step`) that runs the captured step.
#[derive(Default)]
pub struct Phases {
    start: Option<Instant>,
    ms: [Vec<f64>; 4],
}

impl Phases {
    const NAMES: [&'static str; 4] = ["forward", "backward", "optimizer", "sync"];

    pub fn start(&mut self) {
        self.start = Some(Instant::now());
    }

    /// Ends phase `i` and starts the next.
    pub fn end(&mut self, i: usize) {
        let now = Instant::now();
        if let Some(s) = self.start.replace(now) {
            self.ms[i].push((now - s).as_secs_f64() * 1e3);
        }
    }

    /// The median of each phase that was timed, in milliseconds.
    pub fn medians(&mut self) -> serde_json::Map<String, serde_json::Value> {
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
pub fn profile_wanted() -> Result<bool, BoxError> {
    Ok(switchboard_dispatcher::env_flag("COMPUTE_BENCH_PROFILE")?.unwrap_or(false))
}

pub fn round3(x: f64) -> f64 {
    (x * 1e3).round() / 1e3
}

pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// With `COMPUTE_BENCH_PROFILE=1`: the time of each operator's kernel by dispatch key over
/// `steps` more steps, printed to stderr per step (the kernels of one key nest in those of
/// the keys above it: Autograd includes CPU).
pub fn profile(
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
pub fn measure(
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
