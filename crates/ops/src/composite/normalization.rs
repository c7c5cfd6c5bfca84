//! Batch and group normalization as PyTorch decomposes them (CompositeImplicitAutograd):
//! `batch_norm` and `group_norm` check their arguments and call the native operators.

use switchboard_dispatcher::Result;
use switchboard_tensor::{wrap_dim, Tensor};

use super::error;
use super::nn::shape_str;

/// PyTorch's `check_dims_match_num_input_features`.
fn check_features(name: &str, expected: i64, t: Option<&Tensor>) -> Result<()> {
    match t {
        Some(t) if t.numel() != expected => Err(error(format!(
            "{name} should contain {expected} elements not {}",
            t.numel()
        ))),
        _ => Ok(()),
    }
}

/// `batch_norm` (what `torch.nn.functional.batch_norm` calls): PyTorch's
/// `_batch_norm_impl_index` checks, then the output of `native_batch_norm` (training with
/// batch statistics, updating the running ones when given; evaluation with the running
/// statistics).
#[allow(clippy::too_many_arguments)]
pub fn batch_norm(
    input: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    training: bool,
    momentum: f64,
    eps: f64,
    _cudnn_enabled: bool,
) -> Result<Tensor> {
    // `input.size(1)`: "Dimension out of range" below 2 dims.
    let features = input.sizes()[wrap_dim(1, input.dim())?];
    if input.numel() == 0 {
        // PyTorch returns a new tensor (not a view, to keep the gradient chain) through the
        // parameters' first elements, without normalizing.
        let mut out = crate::clone(input)?;
        if let Some(w) = weight {
            out = crate::mul(&out, &crate::select(w, 0, 0)?)?;
        }
        if let Some(b) = bias {
            out = crate::add(&out, &crate::select(b, 0, 0)?)?;
        }
        return Ok(out);
    }
    for (name, t) in [("running_mean", running_mean), ("running_var", running_var)] {
        if t.is_none() && !training {
            return Err(error(format!("{name} must be defined in evaluation mode")));
        }
        check_features(name, features, t)?;
    }
    check_features("weight", features, weight)?;
    check_features("bias", features, bias)?;
    Ok(crate::native_batch_norm(
        input,
        weight,
        bias,
        running_mean,
        running_var,
        training,
        momentum,
        eps,
    )?
    .0)
}

/// `group_norm` (what `torch.nn.functional.group_norm` calls): the output of
/// `native_group_norm` over `(N, C, *)` with `HxW` the product of the trailing dims.
pub fn group_norm(
    input: &Tensor,
    num_groups: i64,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
    _cudnn_enabled: bool,
) -> Result<Tensor> {
    let sizes = input.sizes();
    let c = sizes[wrap_dim(1, input.dim())?];
    let n = sizes[0];
    if num_groups <= 0 {
        return Err(error(format!(
            "Expected num groups to be greater than 0, got {num_groups}"
        )));
    }
    if c % num_groups != 0 {
        return Err(error(format!(
            "Expected number of channels in input to be divisible by num_groups, but got input \
             of shape {} and num_groups={num_groups}",
            shape_str(sizes)
        )));
    }
    let hxw: i64 = sizes[2..].iter().product();
    Ok(crate::native_group_norm(
        &crate::contiguous_with(
            input,
            crate::ContiguousOptions::default().memory_format(input.suggest_memory_format()),
        )?,
        weight,
        bias,
        n,
        c,
        hxw,
        num_groups,
        eps,
    )?
    .0)
}

/// `_native_batch_norm_legit_functional` (CompositeExplicitAutograd; what functionalization
/// calls for `_native_batch_norm_legit`): the same outputs, with the updated running
/// statistics returned as new tensors instead of written into the arguments.
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub fn _native_batch_norm_legit_functional(
    input: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    running_mean: &Tensor,
    running_var: &Tensor,
    training: bool,
    momentum: f64,
    eps: f64,
) -> Result<(Tensor, Tensor, Tensor, Tensor, Tensor)> {
    let (mean_out, var_out) = (crate::clone(running_mean)?, crate::clone(running_var)?);
    let (out, save_mean, save_invstd) = crate::_native_batch_norm_legit(
        input, weight, bias, &mean_out, &var_out, training, momentum, eps,
    )?;
    Ok((out, save_mean, save_invstd, mean_out, var_out))
}
