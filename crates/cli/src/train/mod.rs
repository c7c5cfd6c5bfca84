//! Training a small classifier end to end through the dispatcher: the job behind
//! `switchboard train`.
//!
//! An MLP (`features -> hidden -> classes`, ReLU) or a small ResNet ([`model`]) learns the UCI
//! handwritten digits (embedded, see [`data`]) or any CSV with the label in its last column: a seeded shuffled train/test
//! split, minibatches drawn with `index_select`, cross-entropy (`aten::cross_entropy_loss`),
//! backward through switchboard-autograd, and an SGD-with-momentum or Adam step made of
//! in-place operators. Every one of these goes through the dispatcher; [`summary`] counts
//! what it did. The same configuration and seed give the same numbers. The trained model's
//! state dict can be saved as safetensors (`--save`), and a run can start from one (`--load`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use switchboard_autograd::{no_grad, AutogradTensor};
use switchboard_dispatcher::{set_dispatch_trace, DispatchError};
use switchboard_nn::{load_state_dict_file, save_state_dict, Adam, Module, Optimizer, Sgd};
use switchboard_ops as ops;
use switchboard_tensor::{Device, Generator, Tensor};

// The CPU kernels must be linked for the operators to have a backend.
use switchboard_cpu as _;

pub mod data;
mod device;
mod distributed;
mod divergence;
pub mod model;
pub mod options;
pub mod summary;
pub mod transformer;

pub use data::{DataError, Dataset};
pub use model::ModelKind;
pub use summary::{DispatchStats, Recorder};

/// The optimizer used by [`train`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OptimizerKind {
    /// SGD with momentum ([`TrainConfig::momentum`]).
    #[default]
    Sgd,
    /// Adam with PyTorch's default betas and eps.
    Adam,
}

/// What [`train`] does. `Default` is `switchboard train`'s defaults.
#[derive(Debug, Clone)]
pub struct TrainConfig {
    /// A CSV file (label in the last column, optionally gzip-compressed) instead of the
    /// embedded digits.
    pub data: Option<PathBuf>,
    /// The model to train.
    pub model: ModelKind,
    /// Passes over the training set.
    pub epochs: usize,
    /// Learning rate; `None` is the optimizer's default here (SGD 0.05, Adam 0.001).
    pub lr: Option<f64>,
    /// Width of the hidden layer.
    pub hidden: usize,
    /// Samples per minibatch.
    pub batch_size: usize,
    /// Seeds the initialization, the split and the shuffling.
    pub seed: u64,
    /// Rayon threads for the kernels (`None`: rayon's default).
    pub threads: Option<usize>,
    /// The optimizer.
    pub optimizer: OptimizerKind,
    /// SGD momentum.
    pub momentum: f64,
    /// L2 weight decay of the optimizer.
    pub weight_decay: f64,
    /// Fraction of the samples held out for testing.
    pub test_fraction: f64,
    /// Prints the dispatch trace of the first training step (to stderr).
    pub trace: bool,
    /// Shows a progress bar on stderr (when it is a terminal).
    pub progress: bool,
    /// Records the dispatcher's calls for the summary.
    pub summary: bool,
    /// Where the model and the data live and the operators run (`lazy`: captured by the lazy
    /// backend; its metrics report is printed at the end).
    pub device: Device,
    /// Writes the graph of the first training step to this file (`.dot` or `.json`; needs
    /// the lazy device).
    pub graph_out: Option<PathBuf>,
    /// The dispatch layers to run the steps under (autocast, FLOP counting).
    pub layers: crate::layers::LayerOptions,
    /// At most this many bytes of CSV text are read from `data` (after decompression).
    pub max_data_bytes: u64,
    /// Trains as one rank of an MPI job (`mpirun -np N switchboard train --distributed`):
    /// `batch_size` is the global batch, the gradients are averaged over the ranks, rank 0
    /// prints (Note [Data-parallel steps equal to one process's]).
    pub distributed: bool,
    /// How long a rank waits on a collective before failing (a rank died or hangs).
    pub distributed_timeout: std::time::Duration,
    /// Writes the trained model's state dict to this safetensors file.
    pub save: Option<PathBuf>,
    /// Starts from the state dict in this safetensors file (the same model's keys and shapes)
    /// instead of a fresh initialization.
    pub load: Option<PathBuf>,
}

impl Default for TrainConfig {
    fn default() -> TrainConfig {
        TrainConfig {
            data: None,
            model: ModelKind::Mlp,
            epochs: 20,
            lr: None,
            hidden: 128,
            batch_size: 32,
            seed: 0,
            threads: None,
            optimizer: OptimizerKind::Sgd,
            momentum: 0.9,
            weight_decay: 5e-4,
            test_fraction: 0.2,
            trace: false,
            progress: true,
            summary: true,
            device: Device::CPU,
            graph_out: None,
            layers: Default::default(),
            max_data_bytes: data::MAX_CSV_BYTES,
            distributed: false,
            distributed_timeout: std::time::Duration::from_secs(30 * 60),
            save: None,
            load: None,
        }
    }
}

impl TrainConfig {
    /// Checks every option (see [`options`]) and the environment's thread count, naming the
    /// option and what it accepts.
    pub fn validate(&self) -> Result<(), TrainError> {
        let named = |flag: &str, r: Result<(), String>| {
            r.map_err(|e| TrainError::Config(format!("{flag} {e}")))
        };
        named("--epochs", options::check_epochs(self.epochs))?;
        named("--batch-size", options::check_batch_size(self.batch_size))?;
        named("--hidden", options::check_hidden(self.hidden))?;
        named("--lr", options::check_lr(self.learning_rate()))?;
        named("--momentum", options::check_momentum(self.momentum))?;
        named(
            "--weight-decay",
            options::check_weight_decay(self.weight_decay),
        )?;
        named(
            "--test-fraction",
            options::check_test_fraction(self.test_fraction),
        )?;
        if let Some(n) = self.threads {
            named("--threads", options::check_threads(n))?;
        }
        if let Some(path) = &self.layers.trace_graph {
            crate::layers::trace_graph_format(path).map_err(TrainError::Config)?;
        }
        self.check_outputs_are_not_inputs()?;
        options::check_rayon_env().map_err(TrainError::Config)?;
        if self.max_data_bytes == 0 {
            return Err(TrainError::Config(
                "the data size limit must be at least 1 byte".into(),
            ));
        }
        Ok(())
    }

    /// Refuses, before anything runs, an output file that is the `--data` file or the other
    /// output (Note [Output files]; writing checks again).
    fn check_outputs_are_not_inputs(&self) -> Result<(), TrainError> {
        let outputs = [
            ("--trace-graph", self.layers.trace_graph.as_deref()),
            ("--graph-out", self.graph_out.as_deref()),
            ("--save", self.save.as_deref()),
        ];
        let outputs: Vec<(&str, &Path)> = outputs
            .into_iter()
            .filter_map(|(flag, p)| Some((flag, p?)))
            .collect();
        for (i, (flag, path)) in outputs.iter().enumerate() {
            let same = |other: &Path| {
                switchboard_tensor::is_same_file(path, other)
                    || absolute(path).is_some_and(|p| Some(p) == absolute(other))
            };
            if let Some(data) = self.data.as_deref().filter(|d| same(d)) {
                return Err(TrainError::Config(format!(
                    "{flag} {}: it is the --data file {}; refusing to overwrite an input",
                    path.display(),
                    data.display()
                )));
            }
            if let Some((other, _)) = outputs[i + 1..].iter().find(|(_, p)| same(p)) {
                return Err(TrainError::Config(format!(
                    "{flag} and {other} name the same file {}",
                    path.display()
                )));
            }
        }
        Ok(())
    }

    /// The learning rate in use.
    pub fn learning_rate(&self) -> f64 {
        self.lr.unwrap_or(match self.optimizer {
            OptimizerKind::Sgd => 0.05,
            OptimizerKind::Adam => 0.001,
        })
    }
}

/// `path` made absolute through its directory's canonical path (the file itself may not exist
/// yet), or `None` when that directory does not exist.
fn absolute(path: &Path) -> Option<PathBuf> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    Some(dir.canonicalize().ok()?.join(path.file_name()?))
}

/// One epoch's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct EpochStats {
    /// From 1.
    pub epoch: usize,
    /// Mean training loss over the epoch's minibatches (weighted by batch size).
    pub train_loss: f64,
    /// Training accuracy over the epoch (as the model was at each batch).
    pub train_accuracy: f64,
    /// Test accuracy after the epoch.
    pub test_accuracy: f64,
    /// Wall time of the epoch, evaluation included.
    pub seconds: f64,
}

/// What [`train`] returns.
#[derive(Debug, Clone)]
pub struct TrainReport {
    /// Per epoch.
    pub epochs: Vec<EpochStats>,
    /// Test accuracy of the final model.
    pub test_accuracy: f64,
    /// Training samples.
    pub n_train: usize,
    /// Test samples.
    pub n_test: usize,
    /// Optimizer steps taken.
    pub steps: usize,
    /// The dispatcher's counts over the whole run (when [`TrainConfig::summary`]).
    pub dispatch: Option<DispatchStats>,
    /// Wall time of the training loop.
    pub seconds: f64,
    /// The lazy backend's statistics over the run (on the lazy device).
    pub lazy: Option<switchboard::lazy::LazyStats>,
}

/// A failure of [`train`].
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// Loading the data.
    #[error(transparent)]
    Data(#[from] DataError),
    /// An operator call.
    #[error("{0}")]
    Dispatch(#[from] DispatchError),
    /// A bad option.
    #[error("{0}")]
    Config(String),
    /// Writing the report.
    #[error("cannot write the output: {0}")]
    Io(#[from] std::io::Error),
    /// Joining the MPI job or a collective (a rank that died, a timeout, no MPI in the build).
    #[error("distributed: {0}")]
    Distributed(String),
}

impl From<switchboard_tensor::TensorError> for TrainError {
    fn from(e: switchboard_tensor::TensorError) -> TrainError {
        TrainError::Dispatch(e.into())
    }
}

/// Trains as `cfg` says, writing per-epoch lines (and the summary) to `out`.
///
/// The run happens on one of the kernel threads (`with_num_threads(cfg.threads, ..)`: the
/// calling thread when it is in a pool of that size, else a pool of `cfg.threads` threads or of
/// rayon's default count), so that the kernels' loops share their work without the caller
/// sleeping through each one (Note [The caller is one of the kernel threads] in
/// switchboard-cpu).
pub fn train(cfg: &TrainConfig, out: &mut (dyn Write + Send)) -> Result<TrainReport, TrainError> {
    cfg.validate()?;
    switchboard_cpu::threads::with_num_threads(cfg.threads, || run(cfg, out))
        .map_err(|e| TrainError::Config(e.to_string()))?
}

/// Inputs and labels as tensors (taking the vectors over, no copy): the inputs as rows of
/// features, or as one-channel `side x side` images.
fn tensors(d: Dataset, image_side: Option<usize>) -> Result<(Tensor, Tensor), TrainError> {
    let n = d.len() as i64;
    let x = match image_side {
        None => Tensor::from_vec(d.features, &[n, d.n_features as i64])?,
        Some(side) => Tensor::from_vec(d.features, &[n, 1, side as i64, side as i64])?,
    };
    let y = Tensor::from_vec(d.labels, &[n])?;
    Ok((x, y))
}

/// Number of rows of `logits` whose argmax is the label.
fn correct(logits: &Tensor, labels: &Tensor) -> Result<i64, TrainError> {
    let _g = no_grad();
    let pred = ops::argmax_with(&logits.detach(), ops::ArgmaxOptions::default().dim(1))?;
    Ok(ops::sum(&ops::eq(&pred, labels)?)?.item()?.to_i64())
}

/// Accuracy of `model` on `(x, y)` in evaluation mode (batch norm's running statistics),
/// without recording a graph; the model is back in its mode afterwards.
pub fn evaluate(model: &mut dyn Module, x: &Tensor, y: &Tensor) -> Result<f64, TrainError> {
    let _g = no_grad();
    let n = y.numel().max(1);
    let training = model.is_training();
    model.eval();
    let logits = model.forward(x);
    model.train(training);
    Ok(correct(&logits?, y)? as f64 / n as f64)
}

fn run(cfg: &TrainConfig, out: &mut (dyn Write + Send)) -> Result<TrainReport, TrainError> {
    if cfg.model == ModelKind::Transformer {
        return transformer::run(cfg, out);
    }
    let tensor_device = cfg.device.tensor_device();
    if cfg.distributed && tensor_device != Device::CPU && !crate::device::is_lazy(tensor_device) {
        return Err(TrainError::Config(format!(
            "--distributed trains on cpu or lazy, not on {}",
            cfg.device
        )));
    }
    let inputs: Vec<&Path> = cfg.data.as_deref().into_iter().collect();
    let placement = device::Placement::new(cfg.device, cfg.graph_out.as_deref(), &inputs)?;
    crate::layers::check_autocast_device(cfg.layers.autocast, cfg.device)
        .map_err(TrainError::Config)?;
    let mut data = match &cfg.data {
        Some(p) => Dataset::from_path(p, cfg.max_data_bytes)?,
        None => Dataset::digits()?,
    };
    // Classes are the labels present, whatever their values: all 0s and all 1s alike are one.
    if data.distinct_labels_up_to_two() < 2 {
        return Err(TrainError::Config(format!(
            "the data needs at least two classes, but every label is {}",
            data.labels.first().copied().unwrap_or_default()
        )));
    }
    data.normalize_max_abs();
    let (train_set, test_set) = data.split(cfg.test_fraction, cfg.seed)?;
    let (n_features, n_classes, n_samples) = (data.n_features, data.n_classes, data.len());
    let image_side = cfg.model.image_side(n_features)?;
    drop(data);
    let n_train = train_set.len();
    let n_test = test_set.len();
    let (x_train, y_train) = tensors(train_set, image_side)?;
    let (x_test, y_test) = tensors(test_set, image_side)?;
    let (x_test, y_test) = (placement.to_device(&x_test)?, placement.to_device(&y_test)?);

    let mut model = cfg
        .model
        .build(n_features, cfg.hidden, n_classes, cfg.seed)?;
    model.to_device(placement.device())?;
    if let Some(path) = &cfg.load {
        load_state_dict_file(model.as_ref(), path)
            .map_err(|e| TrainError::Config(format!("--load {}: {e}", path.display())))?;
    }
    let parallel =
        distributed::Parallel::start(cfg.distributed, cfg.distributed_timeout, model.as_ref())?;
    // Only rank 0 prints.
    let mut quiet = std::io::sink();
    let out: &mut (dyn Write + Send) = if parallel.prints() { out } else { &mut quiet };
    let lr = cfg.learning_rate();
    let mut opt: Box<dyn Optimizer> = match cfg.optimizer {
        OptimizerKind::Sgd => Box::new(
            Sgd::new(model.parameters(), lr)
                .momentum(cfg.momentum)
                .weight_decay(cfg.weight_decay),
        ),
        OptimizerKind::Adam => {
            Box::new(Adam::new(model.parameters(), lr).weight_decay(cfg.weight_decay))
        }
    };
    let opt_name = match cfg.optimizer {
        OptimizerKind::Sgd => format!("SGD(lr={lr}, momentum={})", cfg.momentum),
        OptimizerKind::Adam => format!("Adam(lr={lr})"),
    };
    writeln!(
        out,
        "data: {} samples x {} features, {} classes ({}); train {}, test {} (seed {})",
        n_samples,
        n_features,
        n_classes,
        cfg.data
            .as_ref()
            .map_or("embedded UCI digits".to_string(), |p| p
                .display()
                .to_string()),
        n_train,
        n_test,
        cfg.seed
    )?;
    if let (_, size @ 2..) = parallel.rank_and_size() {
        writeln!(
            out,
            "distributed: {size} ranks, global batch {} split among them",
            cfg.batch_size
        )?;
    }
    writeln!(
        out,
        "model: {}, {} parameters on {}; {opt_name}, batch {}, {} epochs, {} threads",
        cfg.model.summary(n_features, cfg.hidden, n_classes),
        model.parameters().iter().map(|p| p.numel()).sum::<i64>(),
        placement.device(),
        cfg.batch_size,
        cfg.epochs,
        rayon::current_num_threads(),
    )?;

    let batches_per_epoch = n_train.div_ceil(cfg.batch_size);
    let bar = progress_bar(cfg, batches_per_epoch);
    let shuffle = Generator::new(cfg.seed.wrapping_add(0x5eed));
    let recorder = cfg.summary.then(Recorder::start);
    let start = Instant::now();
    // Grows with the epochs actually run: nothing is allocated in proportion to a count the
    // user gave.
    let mut epochs = Vec::new();
    let mut steps = 0;
    for epoch in 1..=cfg.epochs {
        let t0 = Instant::now();
        bar.set_message(format!("epoch {epoch}/{}", cfg.epochs));
        bar.reset();
        let perm = data::permutation(n_train, &shuffle)?;
        let (mut loss_sum, mut hits) = (0.0, 0i64);
        for global_batch in perm.chunks(cfg.batch_size) {
            let batch = parallel.shard(global_batch);
            let idx = Tensor::from_vec(
                batch.iter().map(|&i| i as i64).collect(),
                &[batch.len() as i64],
            )?;
            let xb = placement.to_device(&ops::index_select(&x_train, 0, &idx)?)?;
            let yb = placement.to_device(&ops::index_select(&y_train, 0, &idx)?)?;
            let tracing = cfg.trace && steps == 0;
            if tracing {
                bar.suspend(|| {
                    let _ = writeln!(
                        std::io::stderr(),
                        "dispatch trace of the first training step:"
                    );
                });
                set_dispatch_trace(true);
            }
            let flops = crate::layers::StepFlops::start(&cfg.layers, steps);
            let step = (|| -> Result<Tensor, TrainError> {
                let params = model.parameters();
                let traced = crate::layers::StepTrace::start(
                    &cfg.layers,
                    steps,
                    &params,
                    &[&xb, &yb],
                    &inputs,
                )?;
                let functional = crate::layers::FunctionalStep::start(&cfg.layers);
                let region = crate::layers::autocast_region(cfg.layers.autocast, cfg.device)?;
                let logits = model.forward(&xb)?;
                let loss = parallel.loss(&logits, &yb, global_batch.len())?;
                drop(region);
                opt.zero_grad();
                if functional.is_some() {
                    crate::layers::FunctionalStep::backward(&loss)?;
                } else {
                    loss.backward()?;
                }
                parallel.synchronize_gradients()?;
                opt.step()?;
                if let Some(functional) = functional {
                    functional.finish()?;
                }
                let logits = switchboard::functionalize::from_functionalized(&logits)?;
                let loss = switchboard::functionalize::from_functionalized(&loss)?;
                if let Some(traced) = traced {
                    let written = traced.finish(&loss, &params)?;
                    bar.suspend(|| write!(out, "{written}"))?;
                }
                let note = placement.step_captured(steps)?;
                if !note.is_empty() {
                    bar.suspend(|| write!(out, "{note}"))?;
                }
                hits += correct(&logits, &yb)?;
                Ok(loss)
            })();
            if tracing {
                set_dispatch_trace(false);
            }
            if let Some(flops) = flops {
                let table = flops.finish();
                bar.suspend(|| write!(out, "{table}"))?;
            }
            let loss = step?.item()?.to_f64();
            if !loss.is_finite() {
                return Err(TrainError::Config(divergence::divergence_message(
                    cfg, loss, epoch,
                )));
            }
            loss_sum += parallel.summed_loss(loss, global_batch.len());
            steps += 1;
            bar.inc(1);
        }
        let (loss_sum, hits) = parallel.epoch_totals(loss_sum, hits)?;
        let test_accuracy = evaluate(model.as_mut(), &x_test, &y_test)?;
        let e = EpochStats {
            epoch,
            train_loss: loss_sum / n_train as f64,
            train_accuracy: hits as f64 / n_train as f64,
            test_accuracy,
            seconds: t0.elapsed().as_secs_f64(),
        };
        bar.suspend(|| {
            writeln!(
                out,
                "epoch {:>3}/{}  loss {:.4}  train acc {:.4}  test acc {:.4}  ({:.2} s)",
                e.epoch, cfg.epochs, e.train_loss, e.train_accuracy, e.test_accuracy, e.seconds
            )
        })?;
        epochs.push(e);
    }
    bar.finish_and_clear();
    let seconds = start.elapsed().as_secs_f64();
    let dispatch = recorder.map(Recorder::finish);
    let test_accuracy = evaluate(model.as_mut(), &x_test, &y_test)?;
    writeln!(
        out,
        "final test accuracy: {test_accuracy:.4} ({}/{n_test}), {steps} steps in {seconds:.2} s ({:.2} ms/step)",
        (test_accuracy * n_test as f64).round() as i64,
        1e3 * seconds / steps.max(1) as f64
    )?;
    if let Some(path) = cfg.save.as_ref().filter(|_| parallel.prints()) {
        save_state_dict(model.as_ref(), path)
            .map_err(|e| TrainError::Config(format!("--save {}: {e}", path.display())))?;
        writeln!(
            out,
            "saved the state dict ({} tensors, PyTorch's names) to {}",
            model.named_parameters().len() + model.named_buffers().len(),
            path.display()
        )?;
    }
    if let Some(d) = &dispatch {
        writeln!(out)?;
        write!(out, "{}", d.render(12))?;
    }
    let lazy = placement.report(out)?;
    Ok(TrainReport {
        epochs,
        test_accuracy,
        n_train,
        n_test,
        steps,
        dispatch,
        seconds,
        lazy,
    })
}

fn progress_bar(cfg: &TrainConfig, len: usize) -> indicatif::ProgressBar {
    if !cfg.progress {
        return indicatif::ProgressBar::hidden();
    }
    // Draws only when stderr is a terminal.
    let bar = indicatif::ProgressBar::new(len as u64);
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} batches {per_sec}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}
