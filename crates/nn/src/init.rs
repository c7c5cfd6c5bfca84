//! Parameter initialization, after `torch.nn.init`: the draws the modules' `reset_parameters`
//! make, from a seeded [`Generator`] so that a model is reproducible.

use switchboard_autograd::{no_grad, AutogradTensor};
use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::{Generator, ScalarType, Tensor, TensorError};

/// A module size argument as a tensor dimension: it must fit an int64 (not wrap to a negative
/// size). `what` names the argument in the error.
pub(crate) fn dimension(what: &str, n: usize) -> Result<i64> {
    i64::try_from(n).map_err(|_| {
        TensorError::invalid(format!(
            "{what} {n}: value cannot be converted to type int64_t without overflow"
        ))
        .into()
    })
}

/// The bound of `kaiming_uniform_(w, a=sqrt(5))` for a weight of `fan_in` inputs per output,
/// which is also the bound of the bias PyTorch's `Linear` and `Conv*d` draw.
///
/// Note [Default init bound]
/// kaiming_uniform_ with a = sqrt(5): gain = sqrt(2 / (1 + a^2)) = sqrt(1/3),
/// std = gain / sqrt(fan_in), bound = sqrt(3) * std = 1 / sqrt(fan_in). PyTorch's chain of
/// doubles can differ from 1 / sqrt(fan_in) in the last bit, which the float32 draw rounds
/// away. The bias uses the same bound, or 0 when fan_in is 0.
pub(crate) fn default_bound(fan_in: i64) -> f64 {
    if fan_in > 0 {
        1.0 / (fan_in as f64).sqrt()
    } else {
        0.0
    }
}

/// A float32 leaf of `sizes` drawn from `U(-bound, bound)` that requires grad (`uniform_`).
pub(crate) fn uniform_parameter(
    sizes: &[i64],
    bound: f64,
    generator: &Generator,
) -> Result<Tensor> {
    let _guard = no_grad();
    let t = ops::empty_with(sizes, ops::EmptyOptions::default().dtype(ScalarType::Float))?;
    ops::uniform_with_(
        &t,
        ops::UniformInplaceOptions::default()
            .from(-bound)
            .to(bound)
            .generator(generator),
    )?;
    t.requires_grad_(true)
}

/// A float32 leaf of `sizes` drawn from `N(0, 1)` that requires grad (`normal_`).
pub(crate) fn normal_parameter(sizes: &[i64], generator: &Generator) -> Result<Tensor> {
    let _guard = no_grad();
    let t = ops::empty_with(sizes, ops::EmptyOptions::default().dtype(ScalarType::Float))?;
    ops::normal_with_(
        &t,
        ops::NormalInplaceOptions {
            mean: 0.0,
            std: 1.0,
            generator: Some(generator),
        },
    )?;
    t.requires_grad_(true)
}

/// A float32 leaf of `sizes` filled with `value` that requires grad (an affine parameter).
pub(crate) fn constant_parameter(sizes: &[i64], value: f64) -> Result<Tensor> {
    let _guard = no_grad();
    ops::full_with(
        sizes,
        value,
        ops::FullOptions::default().dtype(ScalarType::Float),
    )?
    .requires_grad_(true)
}
