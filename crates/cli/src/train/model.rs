//! The models `switchboard train --model` builds: the MLP (the default) and a small ResNet,
//! each with its own default epochs and learning rate, and the shape its input takes.

use switchboard_nn::{mlp, Module, ResNet};

use super::TrainError;

/// `--model`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ModelKind {
    /// `features -> hidden -> classes` with ReLU.
    #[default]
    Mlp,
    /// A ResNet of basic blocks over square one-channel images (the digits are 8x8):
    /// [`RESNET_WIDTHS`], one block per stage.
    Resnet,
    /// A decoder-only transformer on a generated task (see [`super::transformer`]).
    Transformer,
}

/// The ResNet's stage widths: a 16-channel stem and stage at full resolution, then 32 and 64
/// channels at half and a quarter of it (8x8, 4x4, 2x2 for the digits).
pub const RESNET_WIDTHS: [i64; 3] = [16, 32, 64];

impl ModelKind {
    /// The name `--model` takes.
    pub fn name(self) -> &'static str {
        match self {
            ModelKind::Mlp => "mlp",
            ModelKind::Resnet => "resnet",
            ModelKind::Transformer => "transformer",
        }
    }

    /// Passes over the training set when `--epochs` is not given.
    pub fn default_epochs(self) -> usize {
        match self {
            ModelKind::Mlp => 20,
            ModelKind::Resnet => 8,
            ModelKind::Transformer => 5,
        }
    }

    /// The side of the square images of `n_features` pixels, for the ResNet (an error naming
    /// the feature count otherwise); `None` for the MLP, which takes the features as they are.
    pub fn image_side(self, n_features: usize) -> Result<Option<usize>, TrainError> {
        if self != ModelKind::Resnet {
            return Ok(None);
        }
        let side = n_features.isqrt();
        if side == 0 || side * side != n_features {
            return Err(TrainError::Config(format!(
                "--model resnet takes square one-channel images (side x side features), but the \
                 data has {n_features} features"
            )));
        }
        Ok(Some(side))
    }

    /// The model, initialized from `seed`.
    pub fn build(
        self,
        n_features: usize,
        hidden: usize,
        n_classes: usize,
        seed: u64,
    ) -> Result<Box<dyn Module>, TrainError> {
        Ok(match self {
            ModelKind::Mlp | ModelKind::Transformer => {
                Box::new(mlp(&[n_features, hidden, n_classes], seed)?)
            }
            ModelKind::Resnet => {
                self.image_side(n_features)?;
                Box::new(ResNet::new(1, n_classes, &RESNET_WIDTHS, &[1, 1, 1], seed)?)
            }
        })
    }

    /// The model as the `model:` line describes it.
    pub fn summary(self, n_features: usize, hidden: usize, n_classes: usize) -> String {
        match self {
            ModelKind::Mlp | ModelKind::Transformer => {
                format!("MLP {n_features} -> {hidden} -> {n_classes} (ReLU)")
            }
            ModelKind::Resnet => {
                let side = n_features.isqrt();
                format!(
                    "ResNet 1x{side}x{side} -> stages {RESNET_WIDTHS:?} of 1 basic block -> \
                     {n_classes} (batch norm, residual adds, average pooling)"
                )
            }
        }
    }
}
