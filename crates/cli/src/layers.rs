//! The command-line options of the dispatch layers, shared by `switchboard call` and
//! `switchboard train`: `--autocast DTYPE` (a CPU autocast region) and, for training,
//! `--count-flops` (a FLOP-counting dispatch mode over one step).

use std::rc::Rc;

use switchboard::autocast::AutocastGuard;
use switchboard::dispatcher::DispatchError;
use switchboard::modes::{push_mode, FlopCounterMode, ModeGuard};
use switchboard::tensor::{Device, ScalarType};

/// `--autocast` values: the lower-precision dtype of a CPU autocast region.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutocastDtype {
    /// `torch.autocast("cpu", dtype=torch.bfloat16)`, CPU's default.
    Bfloat16,
    /// `torch.autocast("cpu", dtype=torch.float16)`.
    Float16,
}

impl AutocastDtype {
    /// The dtype.
    pub fn scalar_type(self) -> ScalarType {
        match self {
            AutocastDtype::Bfloat16 => ScalarType::BFloat16,
            AutocastDtype::Float16 => ScalarType::Half,
        }
    }
}

/// A CPU autocast region of `dtype` until dropped, or nothing for `None`.
pub fn autocast_region(
    dtype: Option<AutocastDtype>,
) -> Result<Option<AutocastGuard>, DispatchError> {
    dtype
        .map(|d| AutocastGuard::new(Device::CPU, d.scalar_type()))
        .transpose()
}

/// The layer options of `switchboard train` (flattened into its arguments).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct LayerOptions {
    /// Trains in mixed precision: each forward pass (model and loss) runs in a CPU autocast
    /// region of this dtype; backward and the optimizer run after it, as PyTorch recommends.
    #[arg(long, value_enum, value_name = "DTYPE")]
    pub autocast: Option<AutocastDtype>,
    /// Counts the FLOPs of the first training step (forward, backward, optimizer) with a
    /// FLOP-counting dispatch mode and prints them per operator.
    #[arg(long)]
    pub count_flops: bool,
}

/// A FLOP counter pushed as a dispatch mode over one training step, when asked for.
pub struct StepFlops {
    counter: Rc<FlopCounterMode>,
    _mode: ModeGuard,
}

impl StepFlops {
    /// Starts counting if `options.count_flops` and this is the first step.
    pub fn start(options: &LayerOptions, step: usize) -> Option<StepFlops> {
        (options.count_flops && step == 0).then(|| {
            let counter = FlopCounterMode::new();
            StepFlops {
                _mode: push_mode(counter.clone()),
                counter,
            }
        })
    }

    /// Stops counting; the per-operator table.
    pub fn finish(self) -> String {
        let StepFlops { counter, _mode } = self;
        drop(_mode);
        format!("FLOPs of one training step:\n{}", counter.table())
    }
}
