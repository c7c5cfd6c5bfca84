//! Group norm's backward, differentiable again when a graph is being built.

use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

use crate::is_grad_enabled;

// Note [Group norm backward with create_graph]
// `native_group_norm_backward` has no derivative (as in PyTorch). When the backward itself is
// recorded (grad mode on: `create_graph`), PyTorch computes the gradients with
// `infinitely_differentiable_native_group_norm_backward`, from differentiable operators. Here
// too: over the input viewed as `[N, G, D]` (D = C/G * HxW), the statistics are recomputed
// from the input (so that their dependence on it is in the graph; the saved ones are outputs
// whose gradients this formula does not take), `x̂ = (x - mean)·rstd`, `a = gO·γ`, and
//   gI = rstd·(a - mean_D(a) - x̂·mean_D(a·x̂)),  gγ = Σ_{N, HxW} gO·x̂,  gβ = Σ_{N, HxW} gO.
// Otherwise the kernel computes them in one pass.

/// `native_group_norm`'s gradients of (input, weight, bias) (Note [Group norm backward with
/// create_graph]).
#[allow(clippy::too_many_arguments)] // PyTorch's signature
pub(crate) fn native_group_norm_backward_formula(
    grad: &Tensor,
    input: &Tensor,
    mean: &Tensor,
    rstd: &Tensor,
    weight: Option<&Tensor>,
    n: i64,
    c: i64,
    hxw: i64,
    group: i64,
    eps: f64,
    output_mask: [bool; 3],
) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
    if !is_grad_enabled() {
        let (gi, gw, gb) = ops::native_group_norm_backward(
            grad,
            input,
            mean,
            rstd,
            weight,
            n,
            c,
            hxw,
            group,
            &output_mask,
        )?;
        let pick = |want: bool, t: Tensor| want.then_some(t);
        return Ok((
            pick(output_mask[0], gi),
            pick(output_mask[1], gw),
            pick(output_mask[2], gb),
        ));
    }
    let grouped = [n, group, -1];
    let per_channel = [n, c, -1];
    let d_dims = [2i64];
    let x = ops::reshape(input, &grouped)?;
    let mean_d = |t: &Tensor| {
        ops::mean_dim_with(
            t,
            Some(&d_dims),
            ops::MeanDimOptions::default().keepdim(true),
        )
    };
    let mu = mean_d(&x)?;
    let centered = ops::sub(&x, &mu)?;
    let var = mean_d(&ops::mul(&centered, &centered)?)?;
    let rs = ops::rsqrt(&ops::add_scalar(&var, eps)?)?;
    let xhat = ops::mul(&centered, &rs)?;
    let go = ops::reshape(grad, &per_channel)?;
    let gamma = weight.map(|w| ops::reshape(w, &[1, c, 1])).transpose()?;
    let sum_nhw = |t: &Tensor| ops::sum_dim_int_list(t, Some(&[0, 2]));
    let mut gi = None;
    if output_mask[0] {
        let a = match &gamma {
            Some(g) => ops::mul(&go, g)?,
            None => go.clone(),
        };
        let a = ops::reshape(&a, &grouped)?;
        let t = ops::sub(&a, &mean_d(&a)?)?;
        let t = ops::sub(&t, &ops::mul(&xhat, &mean_d(&ops::mul(&a, &xhat)?)?)?)?;
        gi = Some(ops::reshape(&ops::mul(&rs, &t)?, input.sizes())?);
    }
    let gw = if output_mask[1] {
        let xhat_c = ops::reshape(&xhat, &per_channel)?;
        Some(sum_nhw(&ops::mul(&go, &xhat_c)?)?)
    } else {
        None
    };
    let gb = if output_mask[2] {
        Some(sum_nhw(&go)?)
    } else {
        None
    };
    Ok((gi, gw, gb))
}
