//! Autograd kernels of `convolution_backward` and `native_layer_norm_backward` (their double
//! backward), see Note [Double backward].

use switchboard_dispatcher::{
    AutoDispatchBelowADInplaceOrView as Below, DispatchKeySet, KernelFunction, Library, Result,
};
use switchboard_ops::{self as ops, redispatch as rd};
use switchboard_tensor::Tensor;

use super::rec_multi;
use crate::node::err;
use crate::recording::{any_rg, fresh, AFTER_AD};

type Grads = Result<Vec<Option<Tensor>>>;

/// `a + b` over optional terms.
fn acc(a: Option<Tensor>, b: Tensor) -> Result<Option<Tensor>> {
    Ok(Some(match a {
        Some(a) => ops::add(&a, &b)?,
        None => b,
    }))
}

struct ConvP {
    stride: Vec<i64>,
    padding: Vec<i64>,
    dilation: Vec<i64>,
    transposed: bool,
    output_padding: Vec<i64>,
    groups: i64,
    /// Which outputs were computed (and recorded).
    outputs: [bool; 3],
}

impl ConvP {
    fn conv(&self, x: &Tensor, w: &Tensor) -> Result<Tensor> {
        ops::convolution(
            x,
            w,
            None,
            &self.stride,
            &self.padding,
            &self.dilation,
            self.transposed,
            &self.output_padding,
            self.groups,
        )
    }

    fn backward(&self, go: &Tensor, x: &Tensor, w: &Tensor, mask: [bool; 3]) -> Result<Tensor> {
        let (gi, gw, _) = ops::convolution_backward(
            go,
            x,
            w,
            None,
            &self.stride,
            &self.padding,
            &self.dilation,
            self.transposed,
            &self.output_padding,
            self.groups,
            &mask,
        )?;
        Ok(if mask[0] { gi } else { gw })
    }
}

// Note [Convolution double backward]
// The convolution is bilinear: out = B(input, weight) + bias. Its backward gives
// gI = B(., weight)^T gO, gW = B(input, .)^T gO and gb = sum(gO). For the gradients ggI, ggW,
// ggb of those (`_convolution_double_backward`):
//   d/d gO     = B(ggI, weight) + B(input, ggW) + ggb (broadcast over the channel dim),
//   d/d weight = the weight gradient of B(ggI, weight) for the output gradient gO,
//   d/d input  = the input gradient of B(input, ggW) for the output gradient gO,
// all through dispatched convolution / convolution_backward calls, so differentiable again.
#[allow(clippy::too_many_arguments)]
fn convolution_backward(
    ks: DispatchKeySet,
    go: &Tensor,
    x: &Tensor,
    w: &Tensor,
    bias_sizes: Option<&[i64]>,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    transposed: bool,
    output_padding: &[i64],
    groups: i64,
    mask: &[bool],
) -> Result<(Tensor, Tensor, Tensor)> {
    let k = ks & AFTER_AD;
    let fwd = || {
        rd::convolution_backward(
            k,
            go,
            x,
            w,
            bias_sizes,
            stride,
            padding,
            dilation,
            transposed,
            output_padding,
            groups,
            mask,
        )
    };
    if !any_rg(&[go, x, w]) {
        return fwd();
    }
    let (gi, gw, gb) = {
        let _g = Below::new();
        fwd()?
    };
    let ins = [go, x, w];
    let (gi, gw, gb) = (fresh(gi, &ins), fresh(gw, &ins), fresh(gb, &ins));
    let m = |i: usize| mask.get(i).copied().unwrap_or(false);
    let p = ConvP {
        stride: stride.to_vec(),
        padding: padding.to_vec(),
        dilation: dilation.to_vec(),
        transposed,
        output_padding: output_padding.to_vec(),
        groups,
        outputs: [m(0), m(1), m(2)],
    };
    rec_multi(
        "ConvolutionBackwardBackward0",
        &[Some(go), Some(x), Some(w)],
        &[
            m(0).then_some(&gi),
            m(1).then_some(&gw),
            m(2).then_some(&gb),
        ],
        &[go, x, w],
        p,
        |p, s, grads, need| -> Grads {
            let (go, x, w) = (&s[0], &s[1], &s[2]);
            let gg = |i: usize| {
                p.outputs[i]
                    .then(|| grads.get(i).cloned().flatten())
                    .flatten()
            };
            let (ggi, ggw, ggb) = (gg(0), gg(1), gg(2));
            let mut d_go = None;
            if need[0] {
                if let Some(ggi) = &ggi {
                    d_go = acc(d_go, p.conv(ggi, w)?)?;
                }
                if let Some(ggw) = &ggw {
                    d_go = acc(d_go, p.conv(x, ggw)?)?;
                }
                if let Some(ggb) = &ggb {
                    // The channel dim: 1, or 0 for an unbatched call.
                    let c = usize::from(go.dim() == w.dim());
                    let mut shape = vec![1i64; go.dim()];
                    if let Some(s) = shape.get_mut(c) {
                        *s = -1;
                    }
                    let b = ops::reshape(ggb, &shape)?;
                    d_go = acc(d_go, ops::expand(&b, go.sizes())?)?;
                }
            }
            let d_x = match (&ggw, need[1]) {
                (Some(ggw), true) => Some(p.backward(go, x, ggw, [true, false, false])?),
                _ => None,
            };
            let d_w = match (&ggi, need[2]) {
                (Some(ggi), true) => Some(p.backward(go, ggi, w, [false, true, false])?),
                _ => None,
            };
            Ok(vec![d_go, d_x, d_w])
        },
    );
    Ok((gi, gw, gb))
}

struct LnP {
    /// The normalized dims (the last `normalized_shape.len()`).
    norm_dims: Vec<i64>,
    /// The leading (batch) dims.
    batch_dims: Vec<i64>,
    n: f64,
    has_weight: bool,
    outputs: [bool; 3],
}

// Note [Layer norm double backward]
// Per normalized row of N elements, with σ = rstd, x̂ = (x - mean)σ, a = gO·γ and
// P(v) = σ(v - mean(v) - x̂·mean(v·x̂)) (the Jacobian of x̂ in x, self-adjoint), the first
// backward is gI = P(a), gW = Σ_rows gO·x̂, gb = Σ_rows gO. For the gradients ggI, ggW, ggb
// of those (`layer_norm_double_backward`):
//   d/d gO = γ·P(ggI) + ggW·x̂ + ggb,
//   d/d γ  = Σ_rows gO·P(ggI),
//   d/d x  = -(σ/N)·Σ(ggI·gI)·x̂ + P(q + ggW·gO),  q = -σ(mean(a·x̂)·ggI + mean(ggI·x̂)·a),
// where the first term of d/d x comes from σ's dependence on x (dσ = -σ²·mean(x̂·dx)) and
// P(q) from x̂'s, mean and rstd being functions of x. The saved mean and rstd themselves
// take no gradient (derivatives.yaml: not_implemented).
#[allow(clippy::too_many_arguments)]
fn native_layer_norm_backward(
    ks: DispatchKeySet,
    go: &Tensor,
    x: &Tensor,
    shape: &[i64],
    mean: &Tensor,
    rstd: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    mask: &[bool],
) -> Result<(Tensor, Tensor, Tensor)> {
    let k = ks & AFTER_AD;
    let fwd = || rd::native_layer_norm_backward(k, go, x, shape, mean, rstd, weight, bias, mask);
    let stats_rg = any_rg(&[mean, rstd]);
    if !(any_rg(&[go, x]) || weight.is_some_and(|w| any_rg(&[w])) || stats_rg) {
        return fwd();
    }
    let (gi, gw, gb) = {
        let _g = Below::new();
        fwd()?
    };
    let mut ins = vec![go, x, mean, rstd];
    ins.extend(weight);
    let (gi, gw, gb) = (fresh(gi, &ins), fresh(gw, &ins), fresh(gb, &ins));
    let m = |i: usize| mask.get(i).copied().unwrap_or(false);
    let nd = x.dim() as i64;
    let axis = nd - shape.len() as i64;
    let p = LnP {
        norm_dims: (axis..nd).collect(),
        batch_dims: (0..axis).collect(),
        n: shape.iter().product::<i64>() as f64,
        has_weight: weight.is_some(),
        outputs: [m(0), m(1) && weight.is_some(), m(2) && bias.is_some()],
    };
    let mut saved = vec![go, x, mean, rstd];
    saved.extend(weight);
    rec_multi(
        "NativeLayerNormBackwardBackward0",
        &[Some(go), Some(x), Some(mean), Some(rstd), weight],
        &[
            p.outputs[0].then_some(&gi),
            p.outputs[1].then_some(&gw),
            p.outputs[2].then_some(&gb),
        ],
        &saved,
        p,
        ln_double_backward,
    );
    Ok((gi, gw, gb))
}

fn ln_double_backward(p: &LnP, s: &[Tensor], grads: &[Option<Tensor>], need: &[bool]) -> Grads {
    if need[2] || need[3] {
        let which = if need[2] { "mean" } else { "rstd" };
        return Err(err(format!(
            "the derivative for '{which}' is not implemented."
        )));
    }
    let (go, x, mean, rstd) = (&s[0], &s[1], &s[2], &s[3]);
    let w = p.has_weight.then(|| &s[4]);
    let gg = |i: usize| {
        p.outputs[i]
            .then(|| grads.get(i).cloned().flatten())
            .flatten()
    };
    let (ggi, ggw, ggb) = (gg(0), gg(1), gg(2));
    let nd = &p.norm_dims;
    let mean_r =
        |t: &Tensor| ops::mean_dim_with(t, Some(nd), ops::MeanDimOptions::default().keepdim(true));
    let sum_r = |t: &Tensor| {
        ops::sum_dim_int_list_with(
            t,
            Some(nd),
            ops::SumDimIntListOptions::default().keepdim(true),
        )
    };
    let sum_b = |t: &Tensor| -> Result<Tensor> {
        if p.batch_dims.is_empty() {
            Ok(t.clone())
        } else {
            ops::sum_dim_int_list(t, Some(&p.batch_dims))
        }
    };
    let xhat = ops::mul(&ops::sub(x, mean)?, rstd)?;
    // P(v) = σ(v - mean(v) - x̂ mean(v x̂)).
    let proj = |v: &Tensor| -> Result<Tensor> {
        let c = ops::sub(v, &mean_r(v)?)?;
        let c = ops::sub(&c, &ops::mul(&xhat, &mean_r(&ops::mul(v, &xhat)?)?)?)?;
        ops::mul(rstd, &c)
    };
    let a = match w {
        Some(w) => ops::mul(go, w)?,
        None => go.clone(),
    };
    let (mut d_go, mut d_x, mut d_w) = (None, None, None);
    if let Some(ggi) = &ggi {
        let p_ggi = proj(ggi)?;
        if need[0] {
            d_go = acc(
                d_go,
                match w {
                    Some(w) => ops::mul(&p_ggi, w)?,
                    None => p_ggi.clone(),
                },
            )?;
        }
        if need[4] {
            d_w = Some(sum_b(&ops::mul(go, &p_ggi)?)?);
        }
        if need[1] {
            let gi = proj(&a)?;
            let s1 = sum_r(&ops::mul(ggi, &gi)?)?;
            let t1 = ops::mul(&ops::mul_scalar(&ops::mul(rstd, &s1)?, -1.0 / p.n)?, &xhat)?;
            let q = ops::add(
                &ops::mul(&mean_r(&ops::mul(&a, &xhat)?)?, ggi)?,
                &ops::mul(&mean_r(&ops::mul(ggi, &xhat)?)?, &a)?,
            )?;
            let q = ops::neg(&ops::mul(rstd, &q)?)?;
            d_x = acc(d_x, ops::add(&t1, &proj(&q)?)?)?;
        }
    }
    if let Some(ggw) = &ggw {
        if need[0] {
            d_go = acc(d_go, ops::mul(ggw, &xhat)?)?;
        }
        if need[1] {
            d_x = acc(d_x, proj(&ops::mul(ggw, go)?)?)?;
        }
    }
    if let (Some(ggb), true) = (&ggb, need[0]) {
        d_go = acc(d_go, ops::expand(ggb, go.sizes())?)?;
    }
    Ok(vec![d_go, d_x, None, None, d_w])
}

/// Registers this file's kernels.
pub(crate) fn register(lib: &mut Library) -> Result<()> {
    macro_rules! reg {
        ($($name:literal => $f:ident),* $(,)?) => {
            $(lib.impl_with_static_debug($name, None, KernelFunction::from_fn_with_keys($f), concat!("switchboard_autograd::", stringify!($f), " [Autograd]"))?;)*
        };
    }
    reg! {
        "convolution_backward" => convolution_backward,
        "native_layer_norm_backward" => native_layer_norm_backward,
    }
    Ok(())
}
