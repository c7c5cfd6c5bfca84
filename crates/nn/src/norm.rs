//! Normalization modules: [`BatchNorm2d`], [`GroupNorm`] and [`LayerNorm`].

use switchboard_autograd::no_grad;
use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::{Device, ScalarType, Tensor};

use crate::init::constant_parameter;
use crate::module::{moved, value_error, Module};

/// A float as Python's `repr` prints it (`1e-05`, `0.1`), for module descriptions.
pub(crate) fn py_float(v: f64) -> String {
    let a = v.abs();
    if v != 0.0 && !(1e-4..1e16).contains(&a) {
        // Python: at least two exponent digits, with a sign.
        let s = format!("{v:e}");
        let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
        let (sign, digits) = match exp.strip_prefix('-') {
            Some(d) => ('-', d),
            None => ('+', exp),
        };
        format!("{mantissa}e{sign}{digits:0>2}")
    } else if v.fract() == 0.0 && a < 1e16 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}

fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

/// `nn.BatchNorm2d`: batch normalization of `(N, C, H, W)` inputs per channel. In training
/// mode it normalizes with the batch statistics and updates the running ones (`running =
/// (1 - momentum) * running + momentum * batch`, the variance unbiased; with no momentum, a
/// cumulative average over `num_batches_tracked`); in evaluation mode it normalizes with the
/// running statistics. Parameters `weight` (ones) and `bias` (zeros) when `affine`; buffers
/// `running_mean` (zeros), `running_var` (ones) and `num_batches_tracked` (a Long 0) when
/// tracking running statistics; the names are PyTorch's.
pub struct BatchNorm2d {
    /// `[C]`, when affine.
    pub weight: Option<Tensor>,
    /// `[C]`, when affine.
    pub bias: Option<Tensor>,
    /// `[C]`, when tracking running statistics.
    pub running_mean: Option<Tensor>,
    /// `[C]`, when tracking running statistics.
    pub running_var: Option<Tensor>,
    /// A 0-dim Long count of the batches seen in training, when tracking running statistics.
    pub num_batches_tracked: Option<Tensor>,
    num_features: i64,
    eps: f64,
    momentum: Option<f64>,
    training: bool,
}

impl BatchNorm2d {
    /// `BatchNorm2d(num_features)`: eps 1e-5, momentum 0.1, affine, tracking running
    /// statistics, in training mode.
    pub fn new(num_features: i64) -> Result<BatchNorm2d> {
        BatchNorm2d::with_options(num_features, 1e-5, Some(0.1), true, true)
    }

    /// `BatchNorm2d(num_features, eps, momentum, affine, track_running_stats)`; a `momentum`
    /// of `None` averages the running statistics cumulatively.
    pub fn with_options(
        num_features: i64,
        eps: f64,
        momentum: Option<f64>,
        affine: bool,
        track_running_stats: bool,
    ) -> Result<BatchNorm2d> {
        if num_features < 0 {
            return Err(value_error(format!(
                "BatchNorm2d: num_features must be non-negative, but got {num_features}"
            )));
        }
        let c = [num_features];
        let (weight, bias) = if affine {
            (
                Some(constant_parameter(&c, 1.0)?),
                Some(constant_parameter(&c, 0.0)?),
            )
        } else {
            (None, None)
        };
        let float = ops::FullOptions::default().dtype(ScalarType::Float);
        let (running_mean, running_var, num_batches_tracked) = if track_running_stats {
            (
                Some(ops::full_with(&c, 0.0, float)?),
                Some(ops::full_with(&c, 1.0, float)?),
                Some(ops::full_with(
                    &[],
                    0,
                    ops::FullOptions::default().dtype(ScalarType::Long),
                )?),
            )
        } else {
            (None, None, None)
        };
        Ok(BatchNorm2d {
            weight,
            bias,
            running_mean,
            running_var,
            num_batches_tracked,
            num_features,
            eps,
            momentum,
            training: true,
        })
    }
}

impl Module for BatchNorm2d {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        if input.dim() != 4 {
            return Err(value_error(format!(
                "expected 4D input (got {}D input)",
                input.dim()
            )));
        }
        let mut factor = self.momentum.unwrap_or(0.0);
        if self.training {
            if let Some(count) = &self.num_batches_tracked {
                let _guard = no_grad();
                ops::add_scalar_(count, 1)?;
                if self.momentum.is_none() {
                    factor = 1.0 / count.item()?.to_f64();
                }
            }
            // torch.nn.functional.batch_norm's `_verify_batch_size`.
            let s = input.sizes();
            if s[0] * s[2] * s[3] == 1 {
                return Err(value_error(format!(
                    "Expected more than 1 value per channel when training, got input size \
                     torch.Size([{}])",
                    s.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
                )));
            }
        }
        let use_batch_stats =
            self.training || (self.running_mean.is_none() && self.running_var.is_none());
        ops::batch_norm(
            input,
            self.weight.as_ref(),
            self.bias.as_ref(),
            self.running_mean.as_ref(),
            self.running_var.as_ref(),
            use_batch_stats,
            factor,
            self.eps,
            true,
        )
    }

    fn parameters(&self) -> Vec<Tensor> {
        self.weight.iter().chain(&self.bias).cloned().collect()
    }

    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        [("weight", &self.weight), ("bias", &self.bias)]
            .into_iter()
            .filter_map(|(n, t)| t.clone().map(|t| (n.to_string(), t)))
            .collect()
    }

    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        [
            ("running_mean", &self.running_mean),
            ("running_var", &self.running_var),
            ("num_batches_tracked", &self.num_batches_tracked),
        ]
        .into_iter()
        .filter_map(|(n, t)| t.clone().map(|t| (n.to_string(), t)))
        .collect()
    }

    fn to_device(&mut self, device: Device) -> Result<()> {
        for v in [
            &mut self.weight,
            &mut self.bias,
            &mut self.running_mean,
            &mut self.running_var,
            &mut self.num_batches_tracked,
        ]
        .into_iter()
        .flatten()
        {
            *v = moved(v, device)?;
        }
        Ok(())
    }

    fn train(&mut self, mode: bool) {
        self.training = mode;
    }

    fn is_training(&self) -> bool {
        self.training
    }

    fn describe(&self) -> String {
        format!(
            "BatchNorm2d({}, eps={}, momentum={}, affine={}, bias={}, track_running_stats={})",
            self.num_features,
            py_float(self.eps),
            self.momentum.map_or("None".to_string(), py_float),
            py_bool(self.weight.is_some()),
            py_bool(self.bias.is_some()),
            py_bool(self.running_mean.is_some())
        )
    }
}

/// `nn.GroupNorm`: normalizes each group of `num_channels / num_groups` channels of each
/// sample over those channels and the spatial dims, then scales and shifts per channel
/// (`weight` ones and `bias` zeros when `affine`). The same in training and evaluation.
pub struct GroupNorm {
    /// `[C]`, when affine.
    pub weight: Option<Tensor>,
    /// `[C]`, when affine.
    pub bias: Option<Tensor>,
    num_groups: i64,
    num_channels: i64,
    eps: f64,
}

impl GroupNorm {
    /// `GroupNorm(num_groups, num_channels)`: eps 1e-5, affine.
    pub fn new(num_groups: i64, num_channels: i64) -> Result<GroupNorm> {
        GroupNorm::with_options(num_groups, num_channels, 1e-5, true)
    }

    /// `GroupNorm(num_groups, num_channels, eps, affine)`.
    pub fn with_options(
        num_groups: i64,
        num_channels: i64,
        eps: f64,
        affine: bool,
    ) -> Result<GroupNorm> {
        if num_groups <= 0 || num_channels < 0 || num_channels % num_groups != 0 {
            return Err(value_error(format!(
                "num_channels ({num_channels}) must be divisible by num_groups ({num_groups})"
            )));
        }
        let (weight, bias) = if affine {
            let c = [num_channels];
            (
                Some(constant_parameter(&c, 1.0)?),
                Some(constant_parameter(&c, 0.0)?),
            )
        } else {
            (None, None)
        };
        Ok(GroupNorm {
            weight,
            bias,
            num_groups,
            num_channels,
            eps,
        })
    }
}

impl Module for GroupNorm {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        ops::group_norm_with(
            input,
            self.num_groups,
            ops::GroupNormOptions {
                weight: self.weight.as_ref(),
                bias: self.bias.as_ref(),
                eps: self.eps,
                cudnn_enabled: true,
            },
        )
    }

    fn parameters(&self) -> Vec<Tensor> {
        self.weight.iter().chain(&self.bias).cloned().collect()
    }

    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        [("weight", &self.weight), ("bias", &self.bias)]
            .into_iter()
            .filter_map(|(n, t)| t.clone().map(|t| (n.to_string(), t)))
            .collect()
    }

    fn to_device(&mut self, device: Device) -> Result<()> {
        for v in [&mut self.weight, &mut self.bias].into_iter().flatten() {
            *v = moved(v, device)?;
        }
        Ok(())
    }

    fn describe(&self) -> String {
        format!(
            "GroupNorm({}, {}, eps={}, affine={}, bias={})",
            self.num_groups,
            self.num_channels,
            py_float(self.eps),
            py_bool(self.weight.is_some()),
            py_bool(self.bias.is_some())
        )
    }
}

/// `nn.LayerNorm`: normalizes each sample over its last dims (`normalized_shape`), then
/// scales and shifts elementwise (`weight` ones and `bias` zeros of `normalized_shape`, when
/// `elementwise_affine`; the bias can be left out). The same in training and evaluation.
pub struct LayerNorm {
    /// `normalized_shape`, when elementwise affine.
    pub weight: Option<Tensor>,
    /// `normalized_shape`, when elementwise affine with a bias.
    pub bias: Option<Tensor>,
    normalized_shape: Vec<i64>,
    eps: f64,
}

impl LayerNorm {
    /// `LayerNorm(normalized_shape)`: eps 1e-5, elementwise affine with a bias.
    pub fn new(normalized_shape: &[i64]) -> Result<LayerNorm> {
        LayerNorm::with_options(normalized_shape, 1e-5, true, true)
    }

    /// `LayerNorm(normalized_shape, eps, elementwise_affine, bias)`.
    pub fn with_options(
        normalized_shape: &[i64],
        eps: f64,
        elementwise_affine: bool,
        bias: bool,
    ) -> Result<LayerNorm> {
        let (weight, bias) = if elementwise_affine {
            let weight = constant_parameter(normalized_shape, 1.0)?;
            let bias = bias
                .then(|| constant_parameter(normalized_shape, 0.0))
                .transpose()?;
            (Some(weight), bias)
        } else {
            (None, None)
        };
        Ok(LayerNorm {
            weight,
            bias,
            normalized_shape: normalized_shape.to_vec(),
            eps,
        })
    }
}

impl Module for LayerNorm {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        ops::layer_norm_with(
            input,
            &self.normalized_shape,
            ops::LayerNormOptions {
                weight: self.weight.as_ref(),
                bias: self.bias.as_ref(),
                eps: self.eps,
                cudnn_enable: true,
            },
        )
    }

    fn parameters(&self) -> Vec<Tensor> {
        self.weight.iter().chain(&self.bias).cloned().collect()
    }

    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        [("weight", &self.weight), ("bias", &self.bias)]
            .into_iter()
            .filter_map(|(n, t)| t.clone().map(|t| (n.to_string(), t)))
            .collect()
    }

    fn to_device(&mut self, device: Device) -> Result<()> {
        for v in [&mut self.weight, &mut self.bias].into_iter().flatten() {
            *v = moved(v, device)?;
        }
        Ok(())
    }

    fn describe(&self) -> String {
        // A Python tuple: `(8,)`, `(4, 8)`.
        let shape = match &self.normalized_shape[..] {
            [one] => format!("({one},)"),
            s => format!(
                "({})",
                s.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
            ),
        };
        format!(
            "LayerNorm({shape}, eps={}, elementwise_affine={}, bias={})",
            py_float(self.eps),
            py_bool(self.weight.is_some()),
            py_bool(self.bias.is_some())
        )
    }
}
