//! `switchboard train`: trains an MLP on the embedded UCI handwritten digits (or a CSV file)
//! through the dispatcher and prints per-epoch loss and accuracy, the final test accuracy and
//! a summary of the dispatcher's work. The job itself is [`switchboard_cli::train`].

use std::path::PathBuf;

use switchboard_cli::train::{self, OptimizerKind, TrainConfig};

/// The options of `switchboard train`.
#[derive(clap::Args, Debug)]
pub struct TrainArgs {
    /// A CSV file to learn instead of the embedded digits: numeric features, the integer
    /// class label in the last column, optional header row; may be gzip-compressed.
    #[arg(long, value_name = "FILE.csv")]
    pub data: Option<PathBuf>,
    /// Passes over the training set.
    #[arg(long, default_value_t = 20)]
    pub epochs: usize,
    /// Learning rate [default: 0.05 for SGD, 0.001 for Adam].
    #[arg(long)]
    pub lr: Option<f64>,
    /// Width of the hidden layer.
    #[arg(long, default_value_t = 128)]
    pub hidden: usize,
    /// Samples per minibatch.
    #[arg(long, default_value_t = 32)]
    pub batch_size: usize,
    /// Seeds the initialization, the train/test split and the shuffling.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Threads of the kernels (rayon's global pool) [default: all cores].
    #[arg(long)]
    pub threads: Option<usize>,
    /// The optimizer.
    #[arg(long, value_enum, default_value_t = Opt::Sgd)]
    pub optimizer: Opt,
    /// SGD momentum.
    #[arg(long, default_value_t = 0.9)]
    pub momentum: f64,
    /// L2 weight decay.
    #[arg(long, default_value_t = 5e-4)]
    pub weight_decay: f64,
    /// Fraction of the samples held out as the test set.
    #[arg(long, default_value_t = 0.2)]
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
    #[command(flatten)]
    pub layers: switchboard_cli::layers::LayerOptions,
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
        TrainConfig {
            data: self.data.clone(),
            epochs: self.epochs,
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
            layers: self.layers.clone(),
        }
    }
}

/// Runs the subcommand; the exit status (2 on error, printed as one `error:` line).
pub fn main(args: &TrainArgs) -> i32 {
    match train::train(&args.config(), &mut std::io::stdout()) {
        Ok(_) => 0,
        Err(e) => {
            eprintln!("error: {e}");
            2
        }
    }
}
