//! Layer norm's double backward.

use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

/// `a + b` over optional terms.
fn accumulate(a: Option<Tensor>, b: Tensor) -> Result<Option<Tensor>> {
    Ok(Some(match a {
        Some(a) => ops::add(&a, &b)?,
        None => b,
    }))
}

// Note [Layer norm double backward]
// Per normalized row of N elements, with σ = rstd, x̂ = (x - mean)σ, a = gO·γ and
// P(v) = σ(v - mean(v) - x̂·mean(v·x̂)) (the Jacobian of x̂ in x, self-adjoint), the first
// backward is gI = P(a), gW = Σ_rows gO·x̂, gb = Σ_rows gO. For the gradients ggI, ggW, ggb
// of those (PyTorch's `layer_norm_double_backward`):
//   d/d gO = γ·P(ggI) + ggW·x̂ + ggb,
//   d/d γ  = Σ_rows gO·P(ggI),
//   d/d x  = -(σ/N)·Σ(ggI·gI)·x̂ + P(q + ggW·gO),  q = -σ(mean(a·x̂)·ggI + mean(ggI·x̂)·a),
// where the first term of d/d x comes from σ's dependence on x (dσ = -σ²·mean(x̂·dx)) and
// P(q) from x̂'s, mean and rstd being functions of x. The saved mean and rstd themselves
// take no gradient (derivatives.yaml: not_implemented).

/// `native_layer_norm_backward`'s gradients of (input, weight, grad_out) from the gradients of
/// its three outputs (Note [Layer norm double backward]).
#[allow(clippy::too_many_arguments)] // PyTorch's signature
pub(crate) fn layer_norm_double_backward(
    input: &Tensor,
    gamma: Option<&Tensor>,
    ggi: Option<&Tensor>,
    ggw: Option<&Tensor>,
    ggb: Option<&Tensor>,
    go: &Tensor,
    mean: &Tensor,
    rstd: &Tensor,
    normalized_shape: &[i64],
    output_mask: [bool; 3],
) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
    let nd = input.dim() as i64;
    let axis = nd - normalized_shape.len() as i64;
    let norm_dims: Vec<i64> = (axis..nd).collect();
    let batch_dims: Vec<i64> = (0..axis).collect();
    let n = normalized_shape.iter().product::<i64>() as f64;
    let mean_r = |t: &Tensor| {
        ops::mean_dim_with(
            t,
            Some(&norm_dims),
            ops::MeanDimOptions::default().keepdim(true),
        )
    };
    let sum_r = |t: &Tensor| {
        ops::sum_dim_int_list_with(
            t,
            Some(&norm_dims),
            ops::SumDimIntListOptions::default().keepdim(true),
        )
    };
    let sum_b = |t: &Tensor| -> Result<Tensor> {
        if batch_dims.is_empty() {
            Ok(t.clone())
        } else {
            ops::sum_dim_int_list(t, Some(&batch_dims))
        }
    };
    let xhat = ops::mul(&ops::sub(input, mean)?, rstd)?;
    // P(v) = σ(v - mean(v) - x̂ mean(v x̂)).
    let proj = |v: &Tensor| -> Result<Tensor> {
        let c = ops::sub(v, &mean_r(v)?)?;
        let c = ops::sub(&c, &ops::mul(&xhat, &mean_r(&ops::mul(v, &xhat)?)?)?)?;
        ops::mul(rstd, &c)
    };
    let a = match gamma {
        Some(w) => ops::mul(go, w)?,
        None => go.clone(),
    };
    let [need_input, need_weight, need_go] = output_mask;
    let (mut d_go, mut d_x, mut d_w) = (None, None, None);
    if let Some(ggi) = ggi {
        let p_ggi = proj(ggi)?;
        if need_go {
            d_go = accumulate(
                d_go,
                match gamma {
                    Some(w) => ops::mul(&p_ggi, w)?,
                    None => p_ggi.clone(),
                },
            )?;
        }
        if need_weight {
            d_w = Some(sum_b(&ops::mul(go, &p_ggi)?)?);
        }
        if need_input {
            let gi = proj(&a)?;
            let s1 = sum_r(&ops::mul(ggi, &gi)?)?;
            let t1 = ops::mul(&ops::mul_scalar(&ops::mul(rstd, &s1)?, -1.0 / n)?, &xhat)?;
            let q = ops::add(
                &ops::mul(&mean_r(&ops::mul(&a, &xhat)?)?, ggi)?,
                &ops::mul(&mean_r(&ops::mul(ggi, &xhat)?)?, &a)?,
            )?;
            let q = ops::neg(&ops::mul(rstd, &q)?)?;
            d_x = accumulate(d_x, ops::add(&t1, &proj(&q)?)?)?;
        }
    }
    if let Some(ggw) = ggw {
        if need_go {
            d_go = accumulate(d_go, ops::mul(ggw, &xhat)?)?;
        }
        if need_input {
            d_x = accumulate(d_x, proj(&ops::mul(ggw, go)?)?)?;
        }
    }
    if let (Some(ggb), true) = (ggb, need_go) {
        d_go = accumulate(d_go, ops::expand(ggb, go.sizes())?)?;
    }
    Ok((d_x, d_w, d_go))
}
