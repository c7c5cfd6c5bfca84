//! Batch norm's double backward.

use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

use crate::node::err;

/// `a + b` over optional terms.
fn accumulate(a: Option<Tensor>, b: Tensor) -> Result<Option<Tensor>> {
    Ok(Some(match a {
        Some(a) => ops::add(&a, &b)?,
        None => b,
    }))
}

/// A per-channel `[C]` tensor viewed as `[1, C, 1, ...]` against `input`.
fn per_channel(t: &Tensor, input: &Tensor) -> Result<Tensor> {
    let mut shape = vec![1i64; input.dim()];
    shape[1] = input.sizes()[1];
    ops::reshape(
        &ops::_to_copy_with(t, ops::ToCopyOptions::default().dtype(input.dtype()))?,
        &shape,
    )
}

fn required<'a>(t: Option<&'a Tensor>, name: &str) -> Result<&'a Tensor> {
    t.ok_or_else(|| err(format!("batchnorm_double_backward: {name} must be defined")))
}

// Note [Batch norm double backward]
// In training, batch norm is layer norm per channel over the N*H*W elements of the channel
// (dims 0 and 2..), with a weight γ constant over each of those sets. With σ = invstd,
// x̂ = (x - mean)σ, a = gO·γ and P(v) = σ(v - mean(v) - x̂·mean(v·x̂)) (means over the
// channel's elements), the first backward is gI = P(a), gW = Σ gO·x̂, gb = Σ gO, and Note
// [Layer norm double backward]'s formulas hold with the sums taken per channel:
//   d/d gO = γ·P(ggI) + ggW·x̂ + ggb,
//   d/d γ  = Σ gO·P(ggI),
//   d/d x  = -(σ/M)·Σ(ggI·gI)·x̂ + P(q + ggW·gO),  q = -σ(mean(a·x̂)·ggI + mean(ggI·x̂)·a).
// In evaluation the statistics are the running ones, constants: gI = gO·γσ is linear in gO
// and does not depend on x, so d/d gO = ggI·γσ + ggW·x̂ + ggb, d/d γ = Σ ggI·gO·σ and
// d/d x = ggW·gO·σ (through gW alone). gW and gb are computed without a weight too, so
// their gradients count then (PyTorch's formula drops them without one).

/// `native_batch_norm_backward`'s gradients of (input, weight, grad_out) from the gradients
/// of its three outputs (Note [Batch norm double backward]).
#[allow(clippy::too_many_arguments)] // PyTorch's signature
pub(crate) fn batchnorm_double_backward(
    input: &Tensor,
    gamma: Option<&Tensor>,
    ggi: Option<&Tensor>,
    ggw: Option<&Tensor>,
    ggb: Option<&Tensor>,
    go: &Tensor,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    training: bool,
    eps: f64,
    save_mean: Option<&Tensor>,
    save_invstd: Option<&Tensor>,
    output_mask: [bool; 3],
) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
    let nd = input.dim() as i64;
    let dims: Vec<i64> = std::iter::once(0).chain(2..nd).collect();
    let m = input.numel() as f64 / input.sizes()[1].max(1) as f64;
    let (mean, sigma) = if training {
        (
            per_channel(required(save_mean, "save_mean")?, input)?,
            per_channel(required(save_invstd, "save_invstd")?, input)?,
        )
    } else {
        let var = ops::add_scalar(required(running_var, "running_var")?, eps)?;
        (
            per_channel(required(running_mean, "running_mean")?, input)?,
            per_channel(&ops::rsqrt(&var)?, input)?,
        )
    };
    let sum_c = |t: &Tensor, keepdim: bool| {
        ops::sum_dim_int_list_with(
            t,
            Some(&dims),
            ops::SumDimIntListOptions::default().keepdim(keepdim),
        )
    };
    let mean_c = |t: &Tensor| -> Result<Tensor> { ops::mul_scalar(&sum_c(t, true)?, 1.0 / m) };
    let gamma_e = gamma.map(|g| per_channel(g, input)).transpose()?;
    let times_gamma = |t: Tensor| -> Result<Tensor> {
        match &gamma_e {
            Some(g) => ops::mul(&t, g),
            None => Ok(t),
        }
    };
    let xhat = ops::mul(&ops::sub(input, &mean)?, &sigma)?;
    let proj = |v: &Tensor| -> Result<Tensor> {
        let c = ops::sub(v, &mean_c(v)?)?;
        let c = ops::sub(&c, &ops::mul(&xhat, &mean_c(&ops::mul(v, &xhat)?)?)?)?;
        ops::mul(&sigma, &c)
    };
    let [need_input, need_weight, need_go] = output_mask;
    let (mut d_go, mut d_x, mut d_w) = (None, None, None);
    if let Some(ggi) = ggi {
        // The first backward's input gradient is linear in gO: L(v) = P(v) in training,
        // v·σ in evaluation (times γ).
        let lin = |v: &Tensor| -> Result<Tensor> {
            if training {
                proj(v)
            } else {
                ops::mul(v, &sigma)
            }
        };
        let l_ggi = lin(ggi)?;
        if need_go {
            d_go = accumulate(d_go, times_gamma(l_ggi.clone())?)?;
        }
        if need_weight && gamma.is_some() {
            d_w = Some(sum_c(&ops::mul(go, &l_ggi)?, false)?);
        }
        if need_input && training {
            let a = times_gamma(go.clone())?;
            let gi = proj(&a)?;
            let s1 = sum_c(&ops::mul(ggi, &gi)?, true)?;
            let t1 = ops::mul(&ops::mul_scalar(&ops::mul(&sigma, &s1)?, -1.0 / m)?, &xhat)?;
            let q = ops::add(
                &ops::mul(&mean_c(&ops::mul(&a, &xhat)?)?, ggi)?,
                &ops::mul(&mean_c(&ops::mul(ggi, &xhat)?)?, &a)?,
            )?;
            let q = ops::neg(&ops::mul(&sigma, &q)?)?;
            d_x = accumulate(d_x, ops::add(&t1, &proj(&q)?)?)?;
        }
    }
    if let Some(ggw) = ggw {
        let ggw = per_channel(ggw, input)?;
        if need_go {
            d_go = accumulate(d_go, ops::mul(&ggw, &xhat)?)?;
        }
        if need_input {
            let v = ops::mul(&ggw, go)?;
            let term = if training {
                proj(&v)?
            } else {
                ops::mul(&v, &sigma)?
            };
            d_x = accumulate(d_x, term)?;
        }
    }
    if let (Some(ggb), true) = (ggb, need_go) {
        d_go = accumulate(d_go, ops::expand(&per_channel(ggb, input)?, go.sizes())?)?;
    }
    Ok((d_x, d_w, d_go))
}
