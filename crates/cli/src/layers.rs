//! The command-line options of the dispatch layers, shared by `switchboard call` and
//! `switchboard train`: `--autocast DTYPE` (a CPU autocast region) and, for training,
//! `--count-flops` (a FLOP-counting dispatch mode over one step).

use switchboard::autocast::AutocastGuard;
use switchboard::dispatcher::DispatchError;
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
}
