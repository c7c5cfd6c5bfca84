//! Autograd kernels of matrix products and the neural-network operators.

use switchboard_dispatcher::{
    AutoDispatchBelowADInplaceOrView as Below, DispatchKeySet, KernelFunction, Library, Result,
};
use switchboard_ops::{self as ops, redispatch as rd};
use switchboard_tensor::{Scalar, Tensor};

use super::{rec, when};
use crate::recording::{any_rg, fresh, scale, sum_to, AFTER_AD};

type Grads = Result<Vec<Option<Tensor>>>;

// Note [Matrix product gradients in the operand's layout]
// The gradient of a matrix product's operand is computed in that operand's layout, as
// PyTorch's `mm_mat1_backward` / `mm_mat2_backward` do: for a column-major operand (a `t()` of
// a contiguous matrix, which is what `linear` passes as `weight.t()`), `grad_mat2 = mat1^T @ g`
// is computed as `(g^T @ mat1)^T`. The product is then a transposed view of a contiguous
// matrix, the `t()` backward makes it contiguous again, and the weight's gradient arrives in
// the weight's own layout: AccumulateGrad keeps it as it is (no copy), and the optimizer's
// elementwise updates run over dense rows. The GEMM takes either layout without copies.

/// Whether a matrix is column-major (a transposed contiguous matrix).
fn column_major(t: &Tensor) -> bool {
    let (sizes, strides) = (t.sizes(), t.strides());
    sizes.len() == 2 && strides[0] == 1 && strides[1] == sizes[0] && sizes[0] > 1
}

/// `g @ mat2^T`, the gradient of `mat1` in `mat1`'s layout (Note [Matrix product gradients in
/// the operand's layout]).
fn mm_mat1_backward(g: &Tensor, mat1: &Tensor, mat2: &Tensor) -> Result<Tensor> {
    if column_major(mat1) {
        ops::t(&ops::mm(mat2, &ops::t(g)?)?)
    } else {
        ops::mm(g, &ops::t(mat2)?)
    }
}

/// `mat1^T @ g`, the gradient of `mat2` in `mat2`'s layout (Note [Matrix product gradients in
/// the operand's layout]).
fn mm_mat2_backward(g: &Tensor, mat1: &Tensor, mat2: &Tensor) -> Result<Tensor> {
    if column_major(mat2) {
        ops::t(&ops::mm(&ops::t(g)?, mat1)?)
    } else {
        ops::mm(&ops::t(mat1)?, g)
    }
}

#[inline(never)]
fn mm_recording(ks: DispatchKeySet, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let k = ks & AFTER_AD;
    if !any_rg(&[a, b]) {
        return rd::mm(k, a, b);
    }
    let out = fresh(
        {
            let _g = Below::new();
            rd::mm(k, a, b)?
        },
        &[a, b],
    );
    rec(
        "MmBackward0",
        &[Some(a), Some(b)],
        &[&out],
        &[a, b],
        &[],
        (),
        |_, s, g, _, m| -> Grads {
            Ok(vec![
                when(m[0], || mm_mat1_backward(g, &s[0], &s[1]))?,
                when(m[1], || mm_mat2_backward(g, &s[0], &s[1]))?,
            ])
        },
    );
    Ok(out)
}

pass_through!(
    fn mm(ks: DispatchKeySet, a: &Tensor, b: &Tensor) -> Result<Tensor>;
    [a, b] => mm, else mm_recording
);

#[inline(never)]
fn bmm_recording(ks: DispatchKeySet, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let k = ks & AFTER_AD;
    if !any_rg(&[a, b]) {
        return rd::bmm(k, a, b);
    }
    let out = fresh(
        {
            let _g = Below::new();
            rd::bmm(k, a, b)?
        },
        &[a, b],
    );
    rec(
        "BmmBackward0",
        &[Some(a), Some(b)],
        &[&out],
        &[a, b],
        &[],
        (),
        |_, s, g, _, m| -> Grads {
            Ok(vec![
                when(m[0], || ops::bmm(g, &ops::transpose(&s[1], 1, 2)?))?,
                when(m[1], || ops::bmm(&ops::transpose(&s[0], 1, 2)?, g))?,
            ])
        },
    );
    Ok(out)
}

pass_through!(
    fn bmm(ks: DispatchKeySet, a: &Tensor, b: &Tensor) -> Result<Tensor>;
    [a, b] => bmm, else bmm_recording
);

#[inline(never)]
fn addmm_recording(
    ks: DispatchKeySet,
    c: &Tensor,
    a: &Tensor,
    b: &Tensor,
    beta: Scalar,
    alpha: Scalar,
) -> Result<Tensor> {
    let k = ks & AFTER_AD;
    if !any_rg(&[c, a, b]) {
        return rd::addmm(k, c, a, b, beta, alpha);
    }
    let out = fresh(
        {
            let _g = Below::new();
            rd::addmm(k, c, a, b, beta, alpha)?
        },
        &[c, a, b],
    );
    let p = (beta, alpha, c.sizes().to_vec());
    rec(
        "AddmmBackward0",
        &[Some(c), Some(a), Some(b)],
        &[&out],
        &[a, b],
        &[],
        p,
        |(beta, alpha, cs), s, g, _, m| -> Grads {
            Ok(vec![
                when(m[0], || sum_to(&scale(g, *beta)?, cs))?,
                when(m[1], || scale(&mm_mat1_backward(g, &s[0], &s[1])?, *alpha))?,
                when(m[2], || scale(&mm_mat2_backward(g, &s[0], &s[1])?, *alpha))?,
            ])
        },
    );
    Ok(out)
}

pass_through!(
    fn addmm(
        ks: DispatchKeySet,
        c: &Tensor,
        a: &Tensor,
        b: &Tensor,
        beta: Scalar,
        alpha: Scalar,
    ) -> Result<Tensor>;
    [c, a, b] => addmm, else addmm_recording
);

struct ConvP {
    bias_sizes: Option<Vec<i64>>,
    stride: Vec<i64>,
    padding: Vec<i64>,
    dilation: Vec<i64>,
    transposed: bool,
    output_padding: Vec<i64>,
    groups: i64,
}

#[allow(clippy::too_many_arguments)]
fn convolution(
    ks: DispatchKeySet,
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    transposed: bool,
    output_padding: &[i64],
    groups: i64,
) -> Result<Tensor> {
    let k = ks & AFTER_AD;
    let fwd = || {
        rd::convolution(
            k,
            input,
            weight,
            bias,
            stride,
            padding,
            dilation,
            transposed,
            output_padding,
            groups,
        )
    };
    if !(any_rg(&[input, weight]) || bias.is_some_and(|b| any_rg(&[b]))) {
        return fwd();
    }
    let out = fresh(
        {
            let _g = Below::new();
            fwd()?
        },
        &[input, weight],
    );
    let p = ConvP {
        bias_sizes: bias.map(|b| b.sizes().to_vec()),
        stride: stride.to_vec(),
        padding: padding.to_vec(),
        dilation: dilation.to_vec(),
        transposed,
        output_padding: output_padding.to_vec(),
        groups,
    };
    rec(
        "ConvolutionBackward0",
        &[Some(input), Some(weight), bias],
        &[&out],
        &[input, weight],
        &[],
        p,
        |p, s, g, _, m| -> Grads {
            let mask = [m[0], m[1], m.get(2).copied().unwrap_or(false)];
            let (gi, gw, gb) = ops::convolution_backward(
                g,
                &s[0],
                &s[1],
                p.bias_sizes.as_deref(),
                &p.stride,
                &p.padding,
                &p.dilation,
                p.transposed,
                &p.output_padding,
                p.groups,
                &mask,
            )?;
            Ok(vec![
                mask[0].then_some(gi),
                mask[1].then_some(gw),
                mask[2].then_some(gb),
            ])
        },
    );
    Ok(out)
}

type PoolP = (Vec<i64>, Vec<i64>, Vec<i64>, Vec<i64>, bool);

#[inline(never)]
fn max_pool2d_with_indices_recording(
    ks: DispatchKeySet,
    x: &Tensor,
    kernel: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil: bool,
) -> Result<(Tensor, Tensor)> {
    let k = ks & AFTER_AD;
    if !any_rg(&[x]) {
        return rd::max_pool2d_with_indices(k, x, kernel, stride, padding, dilation, ceil);
    }
    let (out, idx) = {
        let _g = Below::new();
        rd::max_pool2d_with_indices(k, x, kernel, stride, padding, dilation, ceil)?
    };
    let out = fresh(out, &[x]);
    let p: PoolP = (
        kernel.to_vec(),
        stride.to_vec(),
        padding.to_vec(),
        dilation.to_vec(),
        ceil,
    );
    rec(
        "MaxPool2DWithIndicesBackward0",
        &[Some(x)],
        &[&out],
        &[x, &idx],
        &[],
        p,
        |(k, s, p, d, c), sv, g, _, _| -> Grads {
            Ok(vec![Some(ops::max_pool2d_with_indices_backward(
                g, &sv[0], k, s, p, d, *c, &sv[1],
            )?)])
        },
    );
    Ok((out, idx))
}

pass_through!(
    fn max_pool2d_with_indices(
        ks: DispatchKeySet,
        x: &Tensor,
        kernel: &[i64],
        stride: &[i64],
        padding: &[i64],
        dilation: &[i64],
        ceil: bool,
    ) -> Result<(Tensor, Tensor)>;
    [x] => max_pool2d_with_indices, else max_pool2d_with_indices_recording
);

macro_rules! softmax_like {
    ($f:ident, $rd:ident, $back:ident, $name:literal) => {
        pass_through!([x] => $rd;
        fn $f(ks: DispatchKeySet, x: &Tensor, dim: i64, half_to_float: bool) -> Result<Tensor> {
            let k = ks & AFTER_AD;
            if !any_rg(&[x]) {
                return rd::$rd(k, x, dim, half_to_float);
            }
            let out = fresh(
                {
                    let _g = Below::new();
                    rd::$rd(k, x, dim, half_to_float)?
                },
                &[x],
            );
            rec(
                $name,
                &[Some(x)],
                &[&out],
                &[],
                &[(&out, 0)],
                (dim, x.dtype()),
                |(dim, dt), s, g, _, _| -> Grads {
                    Ok(vec![Some(ops::$back(g, &s[0], *dim, *dt)?)])
                },
            );
            Ok(out)
        });
    };
}
softmax_like!(
    softmax,
    _softmax,
    _softmax_backward_data,
    "SoftmaxBackward0"
);
softmax_like!(
    log_softmax,
    _log_softmax,
    _log_softmax_backward_data,
    "LogSoftmaxBackward0"
);

#[inline(never)]
fn nll_loss_forward_recording(
    ks: DispatchKeySet,
    x: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    ignore_index: i64,
) -> Result<(Tensor, Tensor)> {
    let k = ks & AFTER_AD;
    if !any_rg(&[x]) {
        return rd::nll_loss_forward(k, x, target, weight, reduction, ignore_index);
    }
    let (out, tw) = {
        let _g = Below::new();
        rd::nll_loss_forward(k, x, target, weight, reduction, ignore_index)?
    };
    let out = fresh(out, &[x]);
    let mut saved = vec![x, target, &tw];
    saved.extend(weight);
    rec(
        "NllLossBackward0",
        &[Some(x)],
        &[&out],
        &saved,
        &[],
        (reduction, ignore_index),
        |(red, ii), s, g, _, _| -> Grads {
            Ok(vec![Some(ops::nll_loss_backward(
                g,
                &s[0],
                &s[1],
                s.get(3),
                *red,
                *ii,
                &s[2],
            )?)])
        },
    );
    Ok((out, tw))
}

pass_through!(
    fn nll_loss_forward(
        ks: DispatchKeySet,
        x: &Tensor,
        target: &Tensor,
        weight: Option<&Tensor>,
        reduction: i64,
        ignore_index: i64,
    ) -> Result<(Tensor, Tensor)>;
    [x] => nll_loss_forward, else nll_loss_forward_recording
);

#[inline(never)]
fn native_dropout_recording(
    ks: DispatchKeySet,
    x: &Tensor,
    p: f64,
    train: Option<bool>,
) -> Result<(Tensor, Tensor)> {
    let k = ks & AFTER_AD;
    if !any_rg(&[x]) {
        return rd::native_dropout(k, x, p, train);
    }
    let (out, mask) = {
        let _g = Below::new();
        rd::native_dropout(k, x, p, train)?
    };
    let out = fresh(out, &[x]);
    let scale = if train == Some(false) {
        1.0
    } else if p == 1.0 {
        0.0
    } else {
        1.0 / (1.0 - p)
    };
    rec(
        "NativeDropoutBackward0",
        &[Some(x)],
        &[&out],
        &[&mask],
        &[],
        scale,
        |scale, s, g, _, _| -> Grads {
            // infinitely_differentiable_native_dropout_backward: grad * mask * scale.
            let m = ops::_to_copy_with(&s[0], ops::ToCopyOptions::default().dtype(g.dtype()))?;
            Ok(vec![Some(ops::mul_scalar(&ops::mul(g, &m)?, *scale)?)])
        },
    );
    Ok((out, mask))
}

pass_through!(
    fn native_dropout(
        ks: DispatchKeySet,
        x: &Tensor,
        p: f64,
        train: Option<bool>,
    ) -> Result<(Tensor, Tensor)>;
    [x] => native_dropout, else native_dropout_recording
);

fn native_layer_norm(
    ks: DispatchKeySet,
    x: &Tensor,
    shape: &[i64],
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Result<(Tensor, Tensor, Tensor)> {
    let k = ks & AFTER_AD;
    let rg =
        any_rg(&[x]) || weight.is_some_and(|w| any_rg(&[w])) || bias.is_some_and(|b| any_rg(&[b]));
    if !rg {
        return rd::native_layer_norm(k, x, shape, weight, bias, eps);
    }
    let (out, mean, rstd) = {
        let _g = Below::new();
        rd::native_layer_norm(k, x, shape, weight, bias, eps)?
    };
    let out = fresh(out, &[x]);
    let mut saved = vec![x, &mean, &rstd];
    saved.extend(weight);
    saved.extend(bias);
    let p = (shape.to_vec(), weight.is_some(), bias.is_some());
    rec(
        "NativeLayerNormBackward0",
        &[Some(x), weight, bias],
        &[&out],
        &saved,
        &[],
        p,
        |(shape, hw, hb), s, g, _, m| -> Grads {
            let w = hw.then(|| &s[3]);
            let b = hb.then(|| &s[if *hw { 4 } else { 3 }]);
            let mask = [m[0], m[1], m[2]];
            let (gi, gw, gb) =
                ops::native_layer_norm_backward(g, &s[0], shape, &s[1], &s[2], w, b, &mask)?;
            Ok(vec![
                mask[0].then_some(gi),
                mask[1].then_some(gw),
                mask[2].then_some(gb),
            ])
        },
    );
    Ok((out, mean, rstd))
}

#[inline(never)]
fn embedding_recording(
    ks: DispatchKeySet,
    w: &Tensor,
    idx: &Tensor,
    padding_idx: i64,
    scale_grad_by_freq: bool,
    sparse: bool,
) -> Result<Tensor> {
    let k = ks & AFTER_AD;
    if !any_rg(&[w]) {
        return rd::embedding(k, w, idx, padding_idx, scale_grad_by_freq, sparse);
    }
    let out = fresh(
        {
            let _g = Below::new();
            rd::embedding(k, w, idx, padding_idx, scale_grad_by_freq, sparse)?
        },
        &[w],
    );
    let p = (w.sizes()[0], padding_idx, scale_grad_by_freq);
    rec(
        "EmbeddingBackward0",
        &[Some(w)],
        &[&out],
        &[idx],
        &[],
        p,
        |(n, pi, sg), s, g, _, _| -> Grads {
            Ok(vec![Some(ops::embedding_dense_backward(
                g, &s[0], *n, *pi, *sg,
            )?)])
        },
    );
    Ok(out)
}

pass_through!(
    fn embedding(
        ks: DispatchKeySet,
        w: &Tensor,
        idx: &Tensor,
        padding_idx: i64,
        scale_grad_by_freq: bool,
        sparse: bool,
    ) -> Result<Tensor>;
    [w] => embedding, else embedding_recording
);

/// Registers this file's kernels.
pub(crate) fn register(lib: &mut Library) -> Result<()> {
    macro_rules! reg {
        ($($name:literal => $f:ident),* $(,)?) => {
            $(lib.impl_with_static_debug($name, None, KernelFunction::from_fn_with_keys($f), concat!("switchboard_autograd::", stringify!($f), " [Autograd]"))?;)*
        };
    }
    reg! {
        "mm" => mm, "bmm" => bmm, "addmm" => addmm, "convolution" => convolution,
        "max_pool2d_with_indices" => max_pool2d_with_indices, "_softmax" => softmax,
        "_log_softmax" => log_softmax, "nll_loss_forward" => nll_loss_forward,
        "native_dropout" => native_dropout, "native_layer_norm" => native_layer_norm,
        "embedding" => embedding,
    }
    Ok(())
}
