//! Written rules of the matrix family, convolution and embedding (functorch's
//! `BatchRulesLinearAlgebra.cpp`, `BatchRulesConvolution.cpp`).

use switchboard_dispatcher::{IValue, Result};
use switchboard_ops as ops;
use switchboard_tensor::{Scalar, Tensor};

use super::{batched, front, pad_to_logical_rank, tensor_arg};
use crate::batched_tensor::{front_value_or_expand, is_batched_at, make_batched};
use crate::fallback::{self, BatchedCall};

/// The logical ranks each matrix operator takes (the operator's own checks give PyTorch's
/// message on any other: the rule leaves those calls to the per-sample path).
fn expected_ranks(name: &str) -> Option<(usize, usize)> {
    match name {
        "mm" => Some((2, 2)),
        "bmm" => Some((3, 3)),
        "mv" => Some((2, 1)),
        "dot" => Some((1, 1)),
        _ => None,
    }
}

/// A logical matrix product of `a` and `b` (either batched at the call's level) as a physical
/// tensor with the batch in front: `matmul` of the physical operands, a batched vector taken
/// as a one-row (left) or one-column (right) matrix and squeezed back, batched operands padded
/// to the same logical rank so that their batches line up.
fn physical_matmul(call: &BatchedCall<'_>, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let (ra, rb) = (a.dim(), b.dim());
    let mut pa = front(call, a)?;
    let mut pb = front(call, b)?;
    let (mut squeeze_row, mut squeeze_col) = (false, false);
    if ra == 1 {
        if let Some(p) = pa.take() {
            pa = Some(ops::unsqueeze(&p, 1)?);
            squeeze_row = true;
        }
    }
    if rb == 1 {
        if let Some(p) = pb.take() {
            pb = Some(ops::unsqueeze(&p, 2)?);
            squeeze_col = true;
        }
    }
    let logical = |r: usize, batched: bool| if r == 1 && batched { 2 } else { r };
    let rank = logical(ra, pa.is_some()).max(logical(rb, pb.is_some()));
    let pa = match pa {
        Some(p) => pad_to_logical_rank(p, rank)?,
        None => a.clone(),
    };
    let pb = match pb {
        Some(p) => pad_to_logical_rank(p, rank)?,
        None => b.clone(),
    };
    let mut out = match super::shared_matmul::shared_right_matmul(&pa, &pb)? {
        Some(out) => out,
        None => ops::matmul(&pa, &pb)?,
    };
    if squeeze_col {
        out = ops::squeeze_dim(&out, -1)?;
    }
    if squeeze_row {
        // A vector on the right took the product's last dimension away.
        out = ops::squeeze_dim(&out, if rb == 1 { -1 } else { -2 })?;
    }
    Ok(out)
}

/// `mm`, `bmm`, `matmul`, `mv`, `dot`.
pub(crate) fn matmul_rule(call: &BatchedCall<'_>) -> Result<Vec<IValue>> {
    let (Some(a), Some(b)) = (tensor_arg(call, 0), tensor_arg(call, 1)) else {
        return fallback::loop_call(call);
    };
    if let Some((ra, rb)) = expected_ranks(call.op.name().base_name()) {
        if a.dim() != ra || b.dim() != rb {
            return fallback::loop_call(call);
        }
    }
    if call.op.name().base_name() == "matmul" && (a.dim() == 0 || b.dim() == 0) {
        return fallback::loop_call(call);
    }
    batched(call, physical_matmul(call, a, b)?).map(|v| vec![v])
}

fn scalar_arg(call: &BatchedCall<'_>, i: usize) -> Scalar {
    call.args
        .get(i)
        .and_then(IValue::as_scalar)
        .unwrap_or(Scalar::Int(1))
}

fn is_one(s: &Scalar) -> bool {
    match *s {
        Scalar::Int(i) => i == 1,
        Scalar::Float(d) => d == 1.0,
        Scalar::Bool(b) => b,
    }
}

fn is_zero(s: &Scalar) -> bool {
    match *s {
        Scalar::Int(i) => i == 0,
        Scalar::Float(d) => d == 0.0,
        Scalar::Bool(b) => !b,
    }
}

/// `addmm(self, mat1, mat2, beta, alpha)`: `beta * self + alpha * (mat1 @ mat2)`, the product
/// by the matrix rule and the sum by the pointwise ones (on the logical tensors).
pub(crate) fn addmm_rule(call: &BatchedCall<'_>) -> Result<Vec<IValue>> {
    let (Some(input), Some(m1), Some(m2)) = (
        tensor_arg(call, 0),
        tensor_arg(call, 1),
        tensor_arg(call, 2),
    ) else {
        return fallback::loop_call(call);
    };
    if m1.dim() != 2 || m2.dim() != 2 {
        return fallback::loop_call(call);
    }
    let (beta, alpha) = (scalar_arg(call, 3), scalar_arg(call, 4));
    let product = if is_batched_at(m1, call.level) || is_batched_at(m2, call.level) {
        make_batched(physical_matmul(call, m1, m2)?, 0, call.level)?
    } else {
        ops::mm(m1, m2)?
    };
    let product = if is_one(&alpha) {
        product
    } else {
        ops::mul_scalar(&product, alpha)?
    };
    let out = if is_zero(&beta) {
        // PyTorch ignores `self` (NaN included) when beta is 0.
        product
    } else if is_one(&beta) {
        ops::add(input, &product)?
    } else {
        ops::add(&ops::mul_scalar(input, beta)?, &product)?
    };
    Ok(vec![IValue::Tensor(out)])
}

/// `convolution` (not transposed): a batched input folds its batch into the convolution's
/// batch; a batched weight becomes groups of the convolution (one group set per sample).
pub(crate) fn convolution_rule(call: &BatchedCall<'_>) -> Result<Vec<IValue>> {
    let (Some(input), Some(weight)) = (tensor_arg(call, 0), tensor_arg(call, 1)) else {
        return fallback::loop_call(call);
    };
    let bias = tensor_arg(call, 2);
    let (
        Some(IValue::IntList(stride)),
        Some(IValue::IntList(padding)),
        Some(IValue::IntList(dilation)),
        Some(IValue::Bool(transposed)),
        Some(IValue::IntList(output_padding)),
        Some(IValue::Int(groups)),
    ) = (
        call.args.get(3),
        call.args.get(4),
        call.args.get(5),
        call.args.get(6),
        call.args.get(7),
        call.args.get(8),
    )
    else {
        return fallback::loop_call(call);
    };
    let level = call.level;
    let b = call.batch_size;
    if *transposed || input.dim() < 3 {
        return fallback::loop_call(call);
    }
    let weight_batched = is_batched_at(weight, level);
    let bias_batched = bias.is_some_and(|t| is_batched_at(t, level));
    if !weight_batched && !bias_batched {
        // [B, N, C, ...] -> [B * N, C, ...]: one convolution.
        let p = front(call, input)?.expect("the input is batched");
        let mut folded = vec![b * input.sizes()[0]];
        folded.extend_from_slice(&input.sizes()[1..]);
        let x = ops::reshape(&p, &folded)?;
        let out = ops::convolution(
            &x,
            weight,
            bias,
            stride,
            padding,
            dilation,
            false,
            output_padding,
            *groups,
        )?;
        let mut unfolded = vec![b, input.sizes()[0]];
        unfolded.extend_from_slice(&out.sizes()[1..]);
        return batched(call, ops::reshape(&out, &unfolded)?).map(|v| vec![v]);
    }
    // [N, B * C, ...] against [B * O, C / g, ...] in B * g groups.
    let n = input.sizes()[0];
    let x = front_value_or_expand(input, level, b)?; // [B, N, C, ...]
    let x = ops::transpose(&x, 0, 1)?; // [N, B, C, ...]
    let mut grouped = vec![n, b * input.sizes()[1]];
    grouped.extend_from_slice(&input.sizes()[2..]);
    let x = ops::reshape(&x, &grouped)?;
    let w = front_value_or_expand(weight, level, b)?;
    let out_channels = weight.sizes()[0];
    let mut w_sizes = vec![b * out_channels];
    w_sizes.extend_from_slice(&weight.sizes()[1..]);
    let w = ops::reshape(&w, &w_sizes)?;
    let bias = bias
        .map(|t| -> Result<Tensor> {
            let p = front_value_or_expand(t, level, b)?;
            ops::reshape(&p, &[b * out_channels])
        })
        .transpose()?;
    let out = ops::convolution(
        &x,
        &w,
        bias.as_ref(),
        stride,
        padding,
        dilation,
        false,
        output_padding,
        *groups * b,
    )?;
    let mut split = vec![n, b, out_channels];
    split.extend_from_slice(&out.sizes()[2..]);
    let out = ops::reshape(&out, &split)?;
    Ok(vec![IValue::Tensor(make_batched(out, 1, level)?)])
}

/// `embedding(weight, indices)` with batched indices and a shared table: one lookup.
pub(crate) fn embedding_rule(call: &BatchedCall<'_>) -> Result<Vec<IValue>> {
    let (Some(weight), Some(indices)) = (tensor_arg(call, 0), tensor_arg(call, 1)) else {
        return fallback::loop_call(call);
    };
    if is_batched_at(weight, call.level) {
        return fallback::loop_call(call);
    }
    let Some(p) = front(call, indices)? else {
        return fallback::loop_call(call);
    };
    let mut stack = call.args.clone();
    stack[1] = IValue::Tensor(p);
    call.op.call_boxed(&mut stack)?;
    super::batch_returns(call, stack)
}

/// `_fused_sdp_choice` (functorch's `fused_sdp_choice_batch_rule`): the choice for the
/// physical query, key and value with the batch folded into their first dimension (and the
/// mask's, when batched); an int, the same for every sample.
pub(crate) fn fused_sdp_choice_rule(call: &BatchedCall<'_>) -> Result<Vec<IValue>> {
    let mut stack = call.args.clone();
    for (i, arg) in stack.iter_mut().enumerate().take(4) {
        let Some(t) = arg.as_tensor() else {
            continue;
        };
        // The mask is folded only when batched; query, key and value always are.
        if i == 3 && !is_batched_at(t, call.level) {
            continue;
        }
        let physical = front_value_or_expand(t, call.level, call.batch_size)?;
        let folded = ops::flatten_with(
            &physical,
            ops::FlattenOptions {
                start_dim: 0,
                end_dim: 1,
            },
        )?;
        *arg = IValue::Tensor(folded);
    }
    call.op.call_boxed(&mut stack)?;
    Ok(stack)
}
