//! `switchboard train`: trains an MLP or a ResNet on the embedded UCI handwritten digits (or a
//! CSV file)
//! through the dispatcher and prints per-epoch loss and accuracy, the final test accuracy and
//! a summary of the dispatcher's work. The job itself is [`switchboard_cli::train`].

use std::path::PathBuf;

use switchboard_cli::train::{self, options, ModelKind, OptimizerKind, TrainConfig};

// Note [Command-line numbers]
// Every numeric option takes negative numbers as values (`--lr -1` is the value -1, refused by
// the option's check, not an unknown flag `-1`), is read by its type (an integer option reads
// any integer literal, so `-1` or `1e3` gets a message about the value, not about a digit), and
// is checked by the option's own check of `switchboard_cli::train::options`, the same one
// `TrainConfig::validate` runs. clap prints the message as `error: invalid value '-1' for
// '--lr <LR>': must be a positive finite number, got -1` and exits with status 2.

/// Reads an integer option: any integer literal is read, then converted to `T` and checked.
fn int_option<T: TryFrom<i128> + Copy + 'static>(
    check: fn(T) -> Result<(), String>,
) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static {
    move |text: &str| {
        let v: i128 = text
            .trim()
            .parse()
            .map_err(|_| format!("expected a whole number, got {text:?}"))?;
        let t = T::try_from(v).map_err(|_| {
            if v < 0 {
                format!("must not be negative, got {v}")
            } else {
                format!("is too large, got {v}")
            }
        })?;
        check(t).map(|()| t)
    }
}

/// Reads a float option and checks it.
fn float_option(
    check: fn(f64) -> Result<(), String>,
) -> impl Fn(&str) -> Result<f64, String> + Clone + Send + Sync + 'static {
    move |text: &str| {
        let v: f64 = text
            .trim()
            .parse()
            .map_err(|_| format!("expected a number, got {text:?}"))?;
        check(v).map(|()| v)
    }
}

/// A seed: any integer from 0 to 2^64 - 1.
fn seed_option(text: &str) -> Result<u64, String> {
    int_option::<u64>(|_| Ok(()))(text)
        .map_err(|e| format!("{e} (a seed is from 0 to {})", u64::MAX))
}

/// The options of `switchboard train` (Note [Command-line numbers]).
#[derive(clap::Args, Debug)]
pub struct TrainArgs {
    /// A CSV file to learn instead of the embedded digits: numeric features, the integer
    /// class label in the last column, optional header row; may be gzip-compressed.
    #[arg(long, value_name = "FILE.csv")]
    pub data: Option<PathBuf>,
    /// At most this many MiB of CSV text are read from --data (after decompression).
    #[arg(long, default_value_t = 1024, value_name = "MIB", allow_negative_numbers = true,
          value_parser = int_option::<u64>(options::check_max_data_mib))]
    pub max_data_mib: u64,
    /// The model: an MLP (features -> --hidden -> classes), or a ResNet of basic blocks
    /// (stages of 16, 32 and 64 channels, batch norm) over square one-channel images such as
    /// the 8x8 digits, or a decoder-only transformer (AdamW, cosine schedule, clipping) that
    /// learns to reverse generated digit sequences.
    #[arg(long, value_enum, default_value_t = Model::Mlp)]
    pub model: Model,
    /// Passes over the training set [default: 20 for mlp, 8 for resnet, 5 for transformer].
    #[arg(long, allow_negative_numbers = true,
          value_parser = int_option::<usize>(options::check_epochs))]
    pub epochs: Option<usize>,
    /// Learning rate [default: 0.05 for SGD, 0.001 for Adam].
    #[arg(long, allow_negative_numbers = true, value_parser = float_option(options::check_lr))]
    pub lr: Option<f64>,
    /// Width of the hidden layer.
    #[arg(long, default_value_t = 128, allow_negative_numbers = true,
          value_parser = int_option::<usize>(options::check_hidden))]
    pub hidden: usize,
    /// Samples per minibatch.
    #[arg(long, default_value_t = 32, allow_negative_numbers = true,
          value_parser = int_option::<usize>(options::check_batch_size))]
    pub batch_size: usize,
    /// Seeds the initialization, the train/test split and the shuffling.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true, value_parser = seed_option)]
    pub seed: u64,
    /// Threads of the kernels (rayon's global pool), at most 1024 [default: all cores].
    #[arg(long, allow_negative_numbers = true,
          value_parser = int_option::<usize>(options::check_threads))]
    pub threads: Option<usize>,
    /// The optimizer.
    #[arg(long, value_enum, default_value_t = Opt::Sgd)]
    pub optimizer: Opt,
    /// SGD momentum, in [0, 1).
    #[arg(long, default_value_t = 0.9, allow_negative_numbers = true,
          value_parser = float_option(options::check_momentum))]
    pub momentum: f64,
    /// L2 weight decay, at least 0.
    #[arg(long, default_value_t = 5e-4, allow_negative_numbers = true,
          value_parser = float_option(options::check_weight_decay))]
    pub weight_decay: f64,
    /// Fraction of the samples held out as the test set, between 0 and 1.
    #[arg(long, default_value_t = 0.2, allow_negative_numbers = true,
          value_parser = float_option(options::check_test_fraction))]
    pub test_fraction: f64,
    /// Print the dispatch trace of the first training step (every operator call with its
    /// key set, chosen key and kernel) to stderr.
    #[arg(long)]
    pub trace: bool,
    /// No progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// No dispatch summary (and no observer overhead).
    #[arg(long)]
    pub no_summary: bool,
    /// Where to train: cpu, lazy (the lazy backend captures every step and runs it; its metrics
    /// report is printed at the end), remote_accelerator (captured as on lazy, run by the
    /// worker of --worker), or an out-of-tree backend this build links (npu with --features
    /// npu).
    #[arg(long, value_name = "DEVICE", default_value = "cpu", value_parser = switchboard_cli::device::parse_train_device)]
    pub device: switchboard_tensor::Device,
    /// The worker (`HOST:PORT`, started with `switchboard worker`) that runs the steps of
    /// --device remote_accelerator; default: SWITCHBOARD_WORKER. Its token is read from
    /// SWITCHBOARD_WORKER_TOKEN, the CA of a TLS worker from SWITCHBOARD_WORKER_CA.
    #[arg(long, value_name = "HOST:PORT")]
    pub worker: Option<String>,
    /// Writes the graph of the first training step (needs --device lazy): Graphviz DOT for
    /// a .dot file, JSON for .json.
    #[arg(long, value_name = "FILE.dot|FILE.json")]
    pub graph_out: Option<PathBuf>,
    #[command(flatten)]
    pub layers: switchboard_cli::layers::LayerOptions,
    /// Train as one rank of an MPI job (`mpirun -np N switchboard train --distributed`, a
    /// build with --features mpi): --batch-size is the global batch, split among the ranks;
    /// gradients are averaged over them; rank 0 prints.
    #[arg(long)]
    pub distributed: bool,
    /// Seconds a rank waits on a collective before failing with an error (a rank died, hangs
    /// or called another collective).
    #[arg(long, default_value_t = 1800, value_name = "SECS", allow_negative_numbers = true,
          value_parser = int_option::<u64>(options::check_distributed_timeout))]
    pub distributed_timeout: u64,
    /// Writes the trained model's state dict to this safetensors file, with PyTorch's names
    /// (`safetensors.torch.load_file` reads it into the same model written in PyTorch).
    #[arg(long, value_name = "FILE.safetensors")]
    pub save: Option<PathBuf>,
    /// Starts from the state dict in this safetensors file (written by --save or by
    /// `safetensors.torch.save_file(model.state_dict(), ...)` for the same model) instead of a
    /// fresh initialization.
    #[arg(long, value_name = "FILE.safetensors")]
    pub load: Option<PathBuf>,
}

/// `--model` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Model {
    /// A multi-layer perceptron.
    Mlp,
    /// A small ResNet.
    Resnet,
    /// A small decoder-only transformer that learns to reverse digit sequences.
    Transformer,
}

/// `--optimizer` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Opt {
    /// SGD with momentum.
    Sgd,
    /// Adam.
    Adam,
}

impl TrainArgs {
    /// The library's configuration.
    pub fn config(&self) -> TrainConfig {
        let model = match self.model {
            Model::Mlp => ModelKind::Mlp,
            Model::Resnet => ModelKind::Resnet,
            Model::Transformer => ModelKind::Transformer,
        };
        TrainConfig {
            data: self.data.clone(),
            model,
            epochs: self.epochs.unwrap_or(model.default_epochs()),
            lr: self.lr,
            hidden: self.hidden,
            batch_size: self.batch_size,
            seed: self.seed,
            threads: self.threads,
            optimizer: match self.optimizer {
                Opt::Sgd => OptimizerKind::Sgd,
                Opt::Adam => OptimizerKind::Adam,
            },
            momentum: self.momentum,
            weight_decay: self.weight_decay,
            test_fraction: self.test_fraction,
            trace: self.trace,
            progress: !self.no_progress,
            summary: !self.no_summary,
            device: self.device,
            graph_out: self.graph_out.clone(),
            layers: self.layers.clone(),
            max_data_bytes: self.max_data_mib << 20,
            distributed: self.distributed,
            distributed_timeout: std::time::Duration::from_secs(self.distributed_timeout),
            save: self.save.clone(),
            load: self.load.clone(),
        }
    }
}

/// Runs the subcommand; the exit status (2 on error, printed as one `error:` line).
pub fn main(args: &TrainArgs) -> i32 {
    use std::io::Write;
    let result = switchboard_cli::device::connect_remote(args.device, args.worker.as_deref())
        .map_err(train::TrainError::Config)
        .and_then(|_| train::train(&args.config(), &mut std::io::stdout()))
        .and_then(|_| Ok(std::io::stdout().flush()?));
    match result {
        Ok(()) => {
            // Every rank ends the job together (MPI_Finalize). After an error a rank exits
            // without it, so that mpirun ends the other ranks instead of letting them wait.
            if args.distributed {
                switchboard_distributed::destroy_process_group();
            }
            0
        }
        // `switchboard train | head` closing the pipe early is not an error.
        Err(train::TrainError::Io(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            super::report_error(&e);
            2
        }
    }
}
