//! Autograd kernels of the backward helper operators (`gelu_backward`, `_softmax_backward_data`,
//! `mse_loss_backward`, ...), so that gradients computed with `create_graph` have history and
//! second derivatives are right (derivatives.yaml's double-backward formulas).
//!
//! Note [Double backward]
//! A first-order formula calls these operators on the incoming gradient and saved tensors.
//! Under `create_graph` the engine runs formulas with grad mode on, so the call reaches the
//! Autograd key like any other: the kernels here record a node whose formula differentiates
//! the backward operator with respect to its gradient input (it is linear there: the
//! transpose of the first backward) and with respect to the saved forward tensors (the
//! second derivative of the forward operator). Inputs whose derivative is zero in PyTorch
//! (`zeros_like`), such as `self` of `threshold_backward` or `nll_loss_backward`, get zeros,
//! so that a gradient taken with create_graph has history as in PyTorch. The formulas are
//! written with
//! dispatched operators, so they are differentiable again (third order).

use switchboard_dispatcher::{
    AutoDispatchBelowADInplaceOrView as Below, DispatchKeySet, KernelFunction, Library, Result,
};
use switchboard_ops::{self as ops, redispatch as rd};
use switchboard_tensor::{ScalarType, Tensor};

use super::{rec, when};
use crate::recording::{any_rg, fresh, AFTER_AD};

type Grads = Result<Vec<Option<Tensor>>>;

/// `t` cast to `dt` when it differs.
fn cast(t: &Tensor, dt: ScalarType) -> Result<Tensor> {
    if t.dtype() == dt {
        Ok(t.clone())
    } else {
        ops::_to_copy_with(t, ops::ToCopyOptions::default().dtype(dt))
    }
}

/// `s - t`.
fn rsub(t: &Tensor, s: f64) -> Result<Tensor> {
    ops::add_scalar(&ops::neg(t)?, s)
}

/// d²/dx² gelu(x): exact `φ(x)(2 - x²)`; tanh approximation
/// `(1 - t²)(u' + x/2 (u'' - 2 t u'²))` with `u = k(x + c x³)`, `t = tanh(u)`.
fn gelu_second(x: &Tensor, tanh: bool) -> Result<Tensor> {
    if !tanh {
        let x2 = ops::mul(x, x)?;
        let pdf = ops::mul_scalar(
            &ops::exp(&ops::mul_scalar(&x2, -0.5)?)?,
            1.0 / (2.0 * std::f64::consts::PI).sqrt(),
        )?;
        return ops::mul(&pdf, &rsub(&x2, 2.0)?);
    }
    let k = (2.0 / std::f64::consts::PI).sqrt();
    let c = 0.044715;
    let x2 = ops::mul(x, x)?;
    let u = ops::mul_scalar(
        &ops::mul(x, &ops::add_scalar(&ops::mul_scalar(&x2, c)?, 1)?)?,
        k,
    )?;
    let t = ops::tanh(&u)?;
    let du = ops::mul_scalar(&ops::add_scalar(&ops::mul_scalar(&x2, 3.0 * c)?, 1)?, k)?;
    let ddu = ops::mul_scalar(x, 6.0 * k * c)?;
    let sech2 = rsub(&ops::mul(&t, &t)?, 1.0)?;
    let inner = ops::sub(
        &ddu,
        &ops::mul_scalar(&ops::mul(&t, &ops::mul(&du, &du)?)?, 2.0)?,
    )?;
    let s = ops::add(&du, &ops::mul_scalar(&ops::mul(x, &inner)?, 0.5)?)?;
    ops::mul(&sech2, &s)
}

/// The zero gradient of an input whose derivative is zero (derivatives.yaml: zeros_like),
/// without keeping the input alive.
struct Zero(Vec<i64>, ScalarType, switchboard_tensor::Device);

impl Zero {
    fn of(t: &Tensor) -> Zero {
        Zero(t.sizes().to_vec(), t.dtype(), t.device())
    }
    fn make(&self) -> Result<Tensor> {
        ops::zeros_with(
            &self.0,
            ops::ZerosOptions::default().dtype(self.1).device(self.2),
        )
    }
}

/// Runs `fwd` below autograd and makes its result a fresh output (not one of `inputs`).
fn below(inputs: &[&Tensor], fwd: impl FnOnce() -> Result<Tensor>) -> Result<Tensor> {
    let out = {
        let _g = Below::new();
        fwd()?
    };
    Ok(fresh(out, inputs))
}

#[inline(never)]
fn gelu_backward_recording(
    ks: DispatchKeySet,
    g: &Tensor,
    x: &Tensor,
    approximate: &str,
) -> Result<Tensor> {
    let k = ks & AFTER_AD;
    if !any_rg(&[g, x]) {
        return rd::gelu_backward(k, g, x, approximate);
    }
    let out = below(&[g, x], || rd::gelu_backward(k, g, x, approximate))?;
    rec(
        "GeluBackwardBackward0",
        &[Some(g), Some(x)],
        &[&out],
        &[g, x],
        &[],
        approximate == "tanh",
        |tanh, s, gg, _, m| -> Grads {
            let mode = if *tanh { "tanh" } else { "none" };
            Ok(vec![
                when(m[0], || {
                    ops::gelu_backward_with(
                        gg,
                        &s[1],
                        ops::GeluBackwardOptions::default().approximate(mode),
                    )
                })?,
                when(m[1], || {
                    ops::mul(&ops::mul(gg, &s[0])?, &gelu_second(&s[1], *tanh)?)
                })?,
            ])
        },
    );
    Ok(out)
}

pass_through!(
    fn gelu_backward(
        ks: DispatchKeySet,
        g: &Tensor,
        x: &Tensor,
        approximate: &str,
    ) -> Result<Tensor>;
    [g, x] => gelu_backward, else gelu_backward_recording
);

#[inline(never)]
fn silu_backward_recording(ks: DispatchKeySet, g: &Tensor, x: &Tensor) -> Result<Tensor> {
    let k = ks & AFTER_AD;
    if !any_rg(&[g, x]) {
        return rd::silu_backward(k, g, x);
    }
    let out = below(&[g, x], || rd::silu_backward(k, g, x))?;
    rec(
        "SiluBackwardBackward0",
        &[Some(g), Some(x)],
        &[&out],
        &[g, x],
        &[],
        (),
        |_, s, gg, _, m| -> Grads {
            Ok(vec![
                when(m[0], || ops::silu_backward(gg, &s[1]))?,
                when(m[1], || {
                    // silu''(x) = σ(1 - σ)(2 + x(1 - 2σ)).
                    let sg = ops::sigmoid(&s[1])?;
                    let d = ops::mul(&sg, &rsub(&sg, 1.0)?)?;
                    let e = ops::add_scalar(
                        &ops::mul(&s[1], &rsub(&ops::mul_scalar(&sg, 2)?, 1.0)?)?,
                        2,
                    )?;
                    ops::mul(&ops::mul(gg, &s[0])?, &ops::mul(&d, &e)?)
                })?,
            ])
        },
    );
    Ok(out)
}

pass_through!(
    fn silu_backward(ks: DispatchKeySet, g: &Tensor, x: &Tensor) -> Result<Tensor>;
    [g, x] => silu_backward, else silu_backward_recording
);

#[inline(never)]
fn softmax_backward_data_recording(
    ks: DispatchKeySet,
    g: &Tensor,
    o: &Tensor,
    dim: i64,
    input_dtype: ScalarType,
) -> Result<Tensor> {
    let k = ks & AFTER_AD;
    if !any_rg(&[g, o]) {
        return rd::_softmax_backward_data(k, g, o, dim, input_dtype);
    }
    let out = below(&[g, o], || {
        rd::_softmax_backward_data(k, g, o, dim, input_dtype)
    })?;
    rec(
        "SoftmaxBackwardDataBackward0",
        &[Some(g), Some(o)],
        &[&out],
        &[g, o],
        &[],
        (dim, input_dtype),
        |(dim, dt), s, gg, _, m| -> Grads {
            let (g, o) = (&s[0], &s[1]);
            let gg = cast(gg, o.dtype())?;
            let sum = |t: &Tensor| {
                ops::sum_dim_int_list_with(
                    t,
                    Some(&[*dim]),
                    ops::SumDimIntListOptions::default().keepdim(true),
                )
            };
            Ok(vec![
                when(m[0], || ops::_softmax_backward_data(&gg, o, *dim, *dt))?,
                when(m[1], || {
                    // softmax_double_backward: gg*g - sum(o*g)*gg - g*sum(o*gg).
                    let a = ops::mul(&gg, g)?;
                    let b = ops::mul(&sum(&ops::mul(o, g)?)?, &gg)?;
                    let c = ops::mul(g, &sum(&ops::mul(o, &gg)?)?)?;
                    ops::sub(&ops::sub(&a, &b)?, &c)
                })?,
            ])
        },
    );
    Ok(out)
}

pass_through!(
    fn softmax_backward_data(
        ks: DispatchKeySet,
        g: &Tensor,
        o: &Tensor,
        dim: i64,
        input_dtype: ScalarType,
    ) -> Result<Tensor>;
    [g, o] => _softmax_backward_data, else softmax_backward_data_recording
);

#[inline(never)]
fn log_softmax_backward_data_recording(
    ks: DispatchKeySet,
    g: &Tensor,
    o: &Tensor,
    dim: i64,
    input_dtype: ScalarType,
) -> Result<Tensor> {
    let k = ks & AFTER_AD;
    if !any_rg(&[g, o]) {
        return rd::_log_softmax_backward_data(k, g, o, dim, input_dtype);
    }
    let out = below(&[g, o], || {
        rd::_log_softmax_backward_data(k, g, o, dim, input_dtype)
    })?;
    rec(
        "LogSoftmaxBackwardDataBackward0",
        &[Some(g), Some(o)],
        &[&out],
        &[g, o],
        &[],
        dim,
        |dim, s, gg, _, m| -> Grads {
            let (g, o) = (&s[0], &s[1]);
            let gg = cast(gg, o.dtype())?;
            let sum = |t: &Tensor| {
                ops::sum_dim_int_list_with(
                    t,
                    Some(&[*dim]),
                    ops::SumDimIntListOptions::default().keepdim(true),
                )
            };
            let eo = ops::exp(o)?;
            Ok(vec![
                // gg - sum(gg * exp(o)).
                when(m[0], || ops::sub(&gg, &sum(&ops::mul(&gg, &eo)?)?))?,
                // -gg * exp(o) * sum(g).
                when(m[1], || {
                    ops::neg(&ops::mul(&ops::mul(&gg, &eo)?, &sum(g)?)?)
                })?,
            ])
        },
    );
    Ok(out)
}

pass_through!(
    fn log_softmax_backward_data(
        ks: DispatchKeySet,
        g: &Tensor,
        o: &Tensor,
        dim: i64,
        input_dtype: ScalarType,
    ) -> Result<Tensor>;
    [g, o] => _log_softmax_backward_data, else log_softmax_backward_data_recording
);

#[inline(never)]
fn mse_loss_backward_recording(
    ks: DispatchKeySet,
    g: &Tensor,
    x: &Tensor,
    t: &Tensor,
    reduction: i64,
) -> Result<Tensor> {
    let k = ks & AFTER_AD;
    if !any_rg(&[g, x, t]) {
        return rd::mse_loss_backward(k, g, x, t, reduction);
    }
    let out = below(&[g, x, t], || rd::mse_loss_backward(k, g, x, t, reduction))?;
    // mse_loss_backward = norm * (x - t) * g with norm = 2 (/ numel for 'mean').
    let norm = if reduction == 1 {
        2.0 / x.numel() as f64
    } else {
        2.0
    };
    rec(
        "MseLossBackwardBackward0",
        &[Some(g), Some(x), Some(t)],
        &[&out],
        &[g, x, t],
        &[],
        (reduction, norm),
        |(red, norm), s, gg, _, m| -> Grads {
            let (g, x, t) = (&s[0], &s[1], &s[2]);
            let gx = when(m[1] || m[2], || ops::mul_scalar(&ops::mul(gg, g)?, *norm))?;
            Ok(vec![
                when(m[0], || {
                    let v = ops::mul_scalar(&ops::mul(gg, &ops::sub(x, t)?)?, *norm)?;
                    if *red == 0 {
                        Ok(v)
                    } else {
                        ops::sum(&v)
                    }
                })?,
                if m[1] { gx.clone() } else { None },
                match (m[2], gx) {
                    (true, Some(gx)) => Some(ops::neg(&gx)?),
                    _ => None,
                },
            ])
        },
    );
    Ok(out)
}

pass_through!(
    fn mse_loss_backward(
        ks: DispatchKeySet,
        g: &Tensor,
        x: &Tensor,
        t: &Tensor,
        reduction: i64,
    ) -> Result<Tensor>;
    [g, x, t] => mse_loss_backward, else mse_loss_backward_recording
);

#[allow(clippy::too_many_arguments)]
fn nll_loss_backward(
    ks: DispatchKeySet,
    g: &Tensor,
    x: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    ignore_index: i64,
    total_weight: &Tensor,
) -> Result<Tensor> {
    let k = ks & AFTER_AD;
    let fwd = || {
        rd::nll_loss_backward(
            k,
            g,
            x,
            target,
            weight,
            reduction,
            ignore_index,
            total_weight,
        )
    };
    if !any_rg(&[g, x]) {
        return fwd();
    }
    let out = below(&[g, x], fwd)?;
    let mut saved = vec![target];
    saved.extend(weight);
    rec(
        "NllLossBackwardBackward0",
        &[Some(g), Some(x)],
        &[&out],
        &saved,
        &[],
        (reduction, ignore_index, Zero::of(x)),
        |(red, ii, z), s, gg, _, m| -> Grads {
            Ok(vec![
                // Linear in grad_output: its transpose is nll_loss itself.
                when(m[0], || {
                    ops::nll_loss_with(
                        gg,
                        &s[0],
                        ops::NllLossOptions {
                            weight: s.get(1),
                            reduction: *red,
                            ignore_index: *ii,
                        },
                    )
                })?,
                when(m[1], || z.make())?,
            ])
        },
    );
    Ok(out)
}

#[inline(never)]
fn native_dropout_backward_recording(
    ks: DispatchKeySet,
    g: &Tensor,
    mask: &Tensor,
    scale: f64,
) -> Result<Tensor> {
    let k = ks & AFTER_AD;
    if !any_rg(&[g]) {
        return rd::native_dropout_backward(k, g, mask, scale);
    }
    let out = below(&[g], || rd::native_dropout_backward(k, g, mask, scale))?;
    rec(
        "NativeDropoutBackwardBackward0",
        &[Some(g)],
        &[&out],
        &[mask],
        &[],
        scale,
        |scale, s, gg, _, _| -> Grads {
            Ok(vec![Some(ops::native_dropout_backward(gg, &s[0], *scale)?)])
        },
    );
    Ok(out)
}

pass_through!(
    fn native_dropout_backward(
        ks: DispatchKeySet,
        g: &Tensor,
        mask: &Tensor,
        scale: f64,
    ) -> Result<Tensor>;
    [g] => native_dropout_backward, else native_dropout_backward_recording
);

fn embedding_dense_backward(
    ks: DispatchKeySet,
    g: &Tensor,
    idx: &Tensor,
    num_weights: i64,
    padding_idx: i64,
    scale_grad_by_freq: bool,
) -> Result<Tensor> {
    let k = ks & AFTER_AD;
    let fwd =
        || rd::embedding_dense_backward(k, g, idx, num_weights, padding_idx, scale_grad_by_freq);
    if !any_rg(&[g]) {
        return fwd();
    }
    let out = below(&[g], fwd)?;
    rec(
        "EmbeddingDenseBackwardBackward0",
        &[Some(g)],
        &[&out],
        &[idx],
        &[],
        (num_weights, padding_idx, scale_grad_by_freq),
        |(n, pi, freq), s, gg, _, _| -> Grads {
            // The transpose of the row scatter: gather the rows back, zero the padding
            // positions and, with scale_grad_by_freq, divide by each index's count (PyTorch's
            // embedding_dense_double_backward leaves that scaling out).
            let flat = ops::reshape(&s[0], &[-1])?;
            let mut r = ops::index_select(gg, 0, &flat)?;
            if *pi >= 0 {
                let pad = ops::unsqueeze(&ops::eq_scalar(&flat, *pi)?, 1)?;
                r = ops::masked_fill(&r, &pad, 0)?;
            }
            if *freq {
                let ones =
                    ops::ones_like_with(&flat, ops::OnesLikeOptions::default().dtype(gg.dtype()))?;
                let zeros = ops::zeros_with(
                    &[*n],
                    ops::ZerosOptions::default()
                        .dtype(gg.dtype())
                        .device(gg.device()),
                )?;
                let counts = ops::index_add(&zeros, 0, &flat, &ones)?;
                let per = ops::unsqueeze(&ops::index_select(&counts, 0, &flat)?, 1)?;
                r = ops::div(&r, &per)?;
            }
            let mut shape = s[0].sizes().to_vec();
            shape.push(gg.sizes().get(1).copied().unwrap_or(1));
            Ok(vec![Some(ops::reshape(&r, &shape)?)])
        },
    );
    Ok(out)
}

/// `t` with its last two dims flattened.
fn flatten_last2(t: &Tensor) -> Result<Tensor> {
    let n = t.dim();
    let mut s = t.sizes()[..n.saturating_sub(2)].to_vec();
    s.push(-1);
    ops::reshape(t, &s)
}

#[allow(clippy::too_many_arguments)]
fn max_pool2d_with_indices_backward(
    ks: DispatchKeySet,
    g: &Tensor,
    x: &Tensor,
    kernel: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil: bool,
    idx: &Tensor,
) -> Result<Tensor> {
    let k = ks & AFTER_AD;
    let fwd = || {
        rd::max_pool2d_with_indices_backward(k, g, x, kernel, stride, padding, dilation, ceil, idx)
    };
    if !any_rg(&[g, x]) {
        return fwd();
    }
    let out = below(&[g, x], fwd)?;
    rec(
        "MaxPool2DWithIndicesBackwardBackward0",
        &[Some(g), Some(x)],
        &[&out],
        &[idx],
        &[],
        Zero::of(x),
        |z, s, gg, _, m| -> Grads {
            Ok(vec![
                // max_pool_double_backward: read gg back at the argmax positions.
                when(m[0], || {
                    let r = ops::gather(&flatten_last2(gg)?, -1, &flatten_last2(&s[0])?)?;
                    ops::reshape(&r, s[0].sizes())
                })?,
                when(m[1], || z.make())?,
            ])
        },
    );
    Ok(out)
}

/// Registers this file's kernels.
pub(crate) fn register(lib: &mut Library) -> Result<()> {
    macro_rules! reg {
        ($($name:literal => $f:ident),* $(,)?) => {
            $(lib.impl_with_static_debug($name, None, KernelFunction::from_fn_with_keys($f), concat!("switchboard_autograd::", stringify!($f), " [Autograd]"))?;)*
        };
    }
    reg! {
        "gelu_backward" => gelu_backward, "silu_backward" => silu_backward,
        "_softmax_backward_data" => softmax_backward_data,
        "_log_softmax_backward_data" => log_softmax_backward_data,
        "mse_loss_backward" => mse_loss_backward, "nll_loss_backward" => nll_loss_backward,
        "native_dropout_backward" => native_dropout_backward,
        "embedding_dense_backward" => embedding_dense_backward,
        "max_pool2d_with_indices_backward" => max_pool2d_with_indices_backward,
    }
    Ok(())
}
