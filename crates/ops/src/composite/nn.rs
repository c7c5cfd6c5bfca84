//! Neural-network operators as PyTorch decomposes them (CompositeImplicitAutograd unless
//! noted): matmul, linear, convolutions, pooling, softmax, losses, dropout, layer norm,
//! embedding.

use switchboard_dispatcher::Result;
use switchboard_tensor::{Scalar, ScalarType, Tensor};

use super::{error, expand_param};
use crate::TensorOps;

/// PyTorch's matmul multiplies a matrix (or folded batch) by a vector with `mv`, whose shape
/// check and message come first.
fn mv_check(rows: i64, cols: i64, len: i64) -> Result<()> {
    if cols != len {
        return Err(error(format!(
            "size mismatch, got input ({rows}), mat ({rows}x{cols}), vec ({len})"
        )));
    }
    Ok(())
}

// Note [matmul as PyTorch decomposes it]
// `matmul` and `linear` call the operators PyTorch's `_matmul_impl` and `linear` call, in the
// same order, so that a trace (switchboard-trace, like make_fx) records the same graph and
// autograd differentiates the same calls: `mm` for matrices; a batched operand folded into
// the rows of one `mm` when that needs no copy, or when the other operand requires grad (so
// that its gradient is one `mm`, not a broadcast `bmm` summed), ending with `_unsafe_view`
// (`should_fold`); otherwise `expand`, `reshape` and `bmm` over the broadcast batch, again
// ending with `_unsafe_view`. `linear` with a bias is `addmm` for a matrix input and, for a
// contiguous input of 3 or more dims, `addmm` on the input flattened to a matrix. Two
// differences remain: PyTorch calls `dot` (vector x vector) and `mv` (matrix x vector), which
// this crate does not have; `mul` + `sum` and `unsqueeze` + `mm` + `squeeze` compute the same
// values in their place.

/// The sizes and strides of `t.mT()`, without a call.
fn mt_layout(t: &Tensor) -> (Vec<i64>, Vec<i64>) {
    let (mut sizes, mut strides) = (t.sizes().to_vec(), t.strides().to_vec());
    let d = sizes.len();
    if d >= 2 {
        sizes.swap(d - 2, d - 1);
        strides.swap(d - 2, d - 1);
    }
    (sizes, strides)
}

/// PyTorch's `should_fold`: whether the batched operand of a batched-by-matrix (or vector)
/// product folds into the rows of one `mm` (Note [matmul as PyTorch decomposes it]).
fn should_fold(tensor1: &Tensor, tensor2: &Tensor) -> bool {
    let tensor1_larger = tensor1.dim() >= tensor2.dim();
    let (sizes, strides) = if tensor1_larger {
        (tensor1.sizes().to_vec(), tensor1.strides().to_vec())
    } else {
        mt_layout(tensor2)
    };
    let dim_t1 = sizes.len();
    let dim_t2 = if tensor1_larger {
        tensor2.dim()
    } else {
        tensor1.dim()
    };
    if !(dim_t1 >= 3 && dim_t2 <= 2) {
        return false;
    }
    let t2_requires_grad = if tensor1_larger {
        tensor2.requires_grad_hint()
    } else {
        tensor1.requires_grad_hint()
    };
    if t2_requires_grad {
        return true;
    }
    if tensor1.dim() == 2 {
        return false;
    }
    if sizes.iter().product::<i64>() == 0 {
        return true;
    }
    (0..dim_t1 - 2).all(|i| strides[i] == strides[i + 1] * sizes[i + 1])
}

/// `matmul`: PyTorch's rules by rank (Note [matmul as PyTorch decomposes it]): dot (1-D x
/// 1-D), matrix-vector, vector-matrix, `mm`, a batched operand folded into `mm`, and `bmm`
/// over broadcast batch dimensions otherwise.
pub fn matmul(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    let (d1, d2) = (self_.dim(), other.dim());
    if d1 == 0 || d2 == 0 {
        return Err(error(format!(
            "both arguments to matmul need to be at least 1D, but they are {d1}D and {d2}D"
        )));
    }
    match (d1, d2) {
        (1, 1) => {
            if self_.sizes() != other.sizes() {
                return Err(error(format!(
                    "inconsistent tensor size, expected tensor [{}] and src [{}] to have the same \
                     number of elements, but got {} and {} elements respectively",
                    self_.sizes()[0],
                    other.sizes()[0],
                    self_.sizes()[0],
                    other.sizes()[0]
                )));
            }
            crate::mul(self_, other)?.sum()
        }
        (2, 1) => {
            mv_check(self_.sizes()[0], self_.sizes()[1], other.sizes()[0])?;
            crate::squeeze_dim(&crate::mm(self_, &crate::unsqueeze(other, 1)?)?, -1)
        }
        (1, 2) => crate::squeeze_dim(&crate::mm(&crate::unsqueeze(self_, 0)?, other)?, 0),
        (2, 2) => crate::mm(self_, other),
        _ if should_fold(self_, other) => folded_matmul(self_, other),
        _ => batched_matmul(self_, other),
    }
}

/// The folded case: the batched operand (transposed when it is the right one) as the rows
/// of one `mm`.
fn folded_matmul(tensor1: &Tensor, tensor2: &Tensor) -> Result<Tensor> {
    let (d1, d2) = (tensor1.dim(), tensor2.dim());
    let transpose = d2 > d1;
    let t1 = if transpose {
        crate::transpose(tensor2, -2, -1)?
    } else {
        tensor1.clone()
    };
    let t2 = if !transpose {
        tensor2.clone()
    } else if d1 == 2 {
        crate::t(tensor1)?
    } else {
        tensor1.clone()
    };
    let sizes_1 = t1.sizes().to_vec();
    let (last, batch) = sizes_1.split_last().expect("at least 3 dims");
    let mut output_shape = batch.to_vec();
    let folded: i64 = batch.iter().product();
    let t2_is_matrix = t2.dim() == 2;
    if t2_is_matrix {
        output_shape.push(t2.sizes()[1]);
    }
    let t1_folded = crate::reshape(&t1, &[folded, *last])?;
    if t2_is_matrix {
        let output = crate::_unsafe_view(&crate::mm(&t1_folded, &t2)?, &output_shape)?;
        if transpose {
            crate::contiguous(&crate::transpose(&output, -2, -1)?)
        } else {
            Ok(output)
        }
    } else {
        // PyTorch's `mv`.
        mv_check(folded, *last, t2.sizes()[0])?;
        let mv = crate::squeeze_dim(&crate::mm(&t1_folded, &crate::unsqueeze(&t2, 1)?)?, -1)?;
        crate::_unsafe_view(&mv, &output_shape)
    }
}

fn batched_matmul(tensor1: &Tensor, tensor2: &Tensor) -> Result<Tensor> {
    let (d1, d2) = (tensor1.dim(), tensor2.dim());
    let (s1, s2) = (tensor1.sizes(), tensor2.sizes());
    let n = if d1 > 1 { s1[d1 - 2] } else { 1 };
    let m1 = s1[d1 - 1];
    let batch1 = &s1[..d1.saturating_sub(2)];
    let m2 = if d2 > 1 { s2[d2 - 2] } else { s2[0] };
    let p = if d2 > 1 { s2[d2 - 1] } else { 1 };
    let batch2 = &s2[..d2.saturating_sub(2)];
    if m1 != m2 {
        return Err(error(format!(
            "Expected size for first two dimensions of batch2 tensor to be: [{}, {m1}] but got: \
             [{}, {m2}].",
            batch2.iter().product::<i64>(),
            batch2.iter().product::<i64>(),
        )));
    }
    // A batch of one against a larger one: the batch dimension is dropped rather than
    // broadcast when that operand requires grad (its gradient needs no sum then).
    if d1 == 3 && d2 == 3 && batch1[0] != batch2[0] {
        if batch1[0] == 1 && tensor1.requires_grad_hint() {
            return matmul(&crate::squeeze_dim(tensor1, 0)?, tensor2);
        }
        if batch2[0] == 1 && tensor2.requires_grad_hint() {
            return matmul(tensor1, &crate::squeeze_dim(tensor2, 0)?);
        }
    }
    let batch = switchboard_tensor::infer_size(batch1, batch2)?;
    let nb: i64 = batch.iter().product();
    let mut e1 = batch.to_vec();
    e1.extend([n, m1]);
    let t1 = crate::reshape(&crate::expand(tensor1, &e1)?, &[nb, n, m1])?;
    let vector_rhs = d2 == 1;
    let mut e2 = batch.to_vec();
    if vector_rhs {
        e2.push(m2);
    } else {
        e2.extend([m2, p]);
    }
    let t2 = crate::expand(tensor2, &e2)?;
    let t2 = if vector_rhs {
        crate::unsqueeze(&crate::reshape(&t2, &[nb, m2])?, 2)?
    } else {
        crate::reshape(&t2, &[nb, m2, p])?
    };
    let mut shape = batch.to_vec();
    if d1 > 1 {
        shape.push(n);
    }
    if d2 > 1 {
        shape.push(p);
    }
    let out = crate::bmm(&t1, &t2)?;
    let out = if vector_rhs {
        crate::squeeze_dim(&out, -1)?
    } else {
        out
    };
    crate::_unsafe_view(&out, &shape)
}

/// `linear` (Note [matmul as PyTorch decomposes it]): `addmm(bias, input, weight.t())` for a
/// matrix input with bias; for a contiguous input of 3 or more dims with bias, the same on the
/// input flattened to a matrix, viewed back (`_unsafe_view`); else `matmul(input, weight.t())`
/// (+ bias).
pub fn linear(input: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    match bias {
        Some(b) if input.dim() == 2 => crate::addmm(b, input, &crate::t(weight)?),
        Some(b) if input.dim() >= 3 && input.is_contiguous() => {
            let sizes = input.sizes();
            let (last, batch) = sizes.split_last().expect("at least 3 dims");
            let rows: i64 = batch.iter().product();
            let flat = crate::reshape(input, &[rows, *last])?;
            let result = crate::addmm(b, &flat, &crate::t(weight)?)?;
            let mut shape = batch.to_vec();
            shape.push(result.sizes()[1]);
            crate::_unsafe_view(&result, &shape)
        }
        Some(b) => crate::add(&matmul(input, &crate::t(weight)?)?, b),
        None => matmul(input, &crate::t(weight)?),
    }
}

/// PyTorch's `batchify`: `conv1d`/`conv2d` take a batched input (`num_spatial + 2` dims) or
/// an unbatched one (`num_spatial + 1` dims, given a batch dimension of 1); the flag says
/// whether the input was batched.
fn batchify(input: &Tensor, num_spatial: usize, op: &str) -> Result<(Tensor, bool)> {
    let (unbatched, batched) = (num_spatial + 1, num_spatial + 2);
    match input.dim() {
        d if d == batched => Ok((input.clone(), true)),
        d if d == unbatched => Ok((crate::unsqueeze(input, 0)?, false)),
        _ => Err(error(format!(
            "Expected {unbatched}D (unbatched) or {batched}D (batched) input to {op}, but got \
             input of size: {}",
            shape_str(input.sizes())
        ))),
    }
}

/// `[2, 3]`: a size as PyTorch prints an `IntArrayRef`.
pub(super) fn shape_str(sizes: &[i64]) -> String {
    let parts: Vec<String> = sizes.iter().map(i64::to_string).collect();
    format!("[{}]", parts.join(", "))
}

/// Drops the batch dimension `batchify` added.
fn unbatchify(output: Tensor, batched: bool) -> Result<Tensor> {
    if batched {
        Ok(output)
    } else {
        crate::squeeze_dim(&output, 0)
    }
}

#[allow(clippy::too_many_arguments)]
fn conv_nd(
    n: usize,
    op: &str,
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    groups: i64,
) -> Result<Tensor> {
    if let Some(b) = bias {
        if b.dtype() != input.dtype() {
            return Err(error(format!(
                "Input type ({}) and bias type ({}) should be the same",
                input.dtype().type_meta_name(),
                b.dtype().type_meta_name()
            )));
        }
    }
    let (input, batched) = batchify(input, n, op)?;
    let stride = expand_param("stride", stride, n)?;
    let padding = expand_param("padding", padding, n)?;
    let dilation = expand_param("dilation", dilation, n)?;
    let out = crate::convolution(
        &input,
        weight,
        bias,
        &stride,
        &padding,
        &dilation,
        false,
        &vec![0; n],
        groups,
    )?;
    unbatchify(out, batched)
}

/// `conv1d`: `convolution` with one spatial dimension (input `(N, C, L)` or `(C, L)`).
pub fn conv1d(
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    groups: i64,
) -> Result<Tensor> {
    conv_nd(
        1, "conv1d", input, weight, bias, stride, padding, dilation, groups,
    )
}

/// `conv2d`: `convolution` with two spatial dimensions (input `(N, C, H, W)` or `(C, H, W)`).
pub fn conv2d(
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    groups: i64,
) -> Result<Tensor> {
    conv_nd(
        2, "conv2d", input, weight, bias, stride, padding, dilation, groups,
    )
}

/// `conv1d.padding`: `conv1d` with `padding="same"` or `"valid"` (see `_convolution_mode`).
pub fn conv1d_padding(
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: &[i64],
    padding: &str,
    dilation: &[i64],
    groups: i64,
) -> Result<Tensor> {
    let (input, batched) = batchify(input, 1, "conv1d")?;
    let out = _convolution_mode(&input, weight, bias, stride, padding, dilation, groups)?;
    unbatchify(out, batched)
}

/// `conv2d.padding`: `conv2d` with `padding="same"` or `"valid"` (see `_convolution_mode`).
pub fn conv2d_padding(
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: &[i64],
    padding: &str,
    dilation: &[i64],
    groups: i64,
) -> Result<Tensor> {
    let (input, batched) = batchify(input, 2, "conv2d")?;
    let out = _convolution_mode(&input, weight, bias, stride, padding, dilation, groups)?;
    unbatchify(out, batched)
}

/// `_convolution_mode`: a convolution whose padding is named. `"valid"` is no padding;
/// `"same"` pads so that the output has the input's spatial size (stride 1 only).
pub fn _convolution_mode(
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: &[i64],
    padding: &str,
    dilation: &[i64],
    groups: i64,
) -> Result<Tensor> {
    match padding {
        "same" => convolution_same(input, weight, bias, stride, dilation, groups),
        "valid" => crate::convolution(
            input,
            weight,
            bias,
            stride,
            &[0],
            dilation,
            false,
            &[0],
            groups,
        ),
        other => Err(error(format!("Invalid padding string: '{other}'"))),
    }
}

// Note [padding='same']
// A convolution of stride 1 keeps a spatial size L when the dimension gets
// `total = dilation * (kernel - 1)` zeros in all: `total / 2` on the left and the rest on the
// right (PyTorch's `pooling_same_mode_padding_lr`). When `total` is odd (an even kernel with
// odd dilation) the two sides differ by one, which `convolution` cannot express: as PyTorch
// does, the input gets the extra zero on its right first (PyTorch pads with
// `constant_pad_nd`; here a `cat` with zeros, differentiable without a formula of its own) and
// the convolution pads both sides by `total / 2`.
fn convolution_same(
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: &[i64],
    dilation: &[i64],
    groups: i64,
) -> Result<Tensor> {
    let k = weight.dim();
    if k <= 2 {
        return Err(error("weight should have at least three dimensions"));
    }
    if groups <= 0 {
        return Err(error("non-positive groups is not supported"));
    }
    let dim = k - 2;
    if k != input.dim() {
        return Err(error(format!(
            "Expected {k}-dimensional input for {k}-dimensional weight{}, but got {}-dimensional \
             input of size {} instead",
            shape_str(weight.sizes()),
            input.dim(),
            shape_str(input.sizes())
        )));
    }
    if stride.len() != dim && stride.len() != 1 {
        return Err(error(format!(
            "stride cannot broadcast to {dim} dimensions"
        )));
    }
    if dilation.len() != dim && dilation.len() != 1 {
        return Err(error(format!(
            "dilation cannot broadcast to {dim} dimensions"
        )));
    }
    if stride.iter().any(|&s| s != 1) {
        return Err(error(
            "padding='same' is not supported for strided convolutions",
        ));
    }
    let mut padded = input.clone();
    let mut padding = Vec::with_capacity(dim);
    for i in 0..dim {
        let d = if dilation.len() == 1 {
            dilation[0]
        } else {
            dilation[i]
        };
        let total = d
            .checked_mul(weight.sizes()[i + 2] - 1)
            .ok_or_else(|| error("padding='same': the padding overflows"))?;
        let left = total / 2;
        let right = total - left;
        if right > left {
            padded = pad_end(&padded, i + 2, right - left)?;
        }
        padding.push(left);
    }
    crate::convolution(
        &padded,
        weight,
        bias,
        stride,
        &padding,
        dilation,
        false,
        &vec![0; dim],
        groups,
    )
}

/// `t` with `extra` zeros appended along `dim`.
fn pad_end(t: &Tensor, dim: usize, extra: i64) -> Result<Tensor> {
    let mut shape = t.sizes().to_vec();
    shape[dim] = extra;
    let zeros = crate::zeros_with(
        &shape,
        crate::ZerosOptions {
            dtype: Some(t.dtype()),
            device: Some(t.device()),
            ..Default::default()
        },
    )?;
    crate::cat_with(
        &[t.clone(), zeros],
        crate::CatOptions::default().dim(dim as i64),
    )
}

/// `max_pool2d`: the values of `max_pool2d_with_indices`.
pub fn max_pool2d(
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
) -> Result<Tensor> {
    Ok(crate::max_pool2d_with_indices_with(
        self_,
        kernel_size,
        crate::MaxPool2dWithIndicesOptions::default()
            .stride(stride)
            .padding(padding)
            .dilation(dilation)
            .ceil_mode(ceil_mode),
    )?
    .0)
}

fn cast_for_softmax(self_: &Tensor, dtype: Option<ScalarType>) -> Result<Tensor> {
    match dtype {
        Some(d) if d != self_.dtype() => crate::to(self_, d),
        _ => Ok(self_.clone()),
    }
}

/// `softmax.int`: `_softmax` after casting to `dtype` when given.
pub fn softmax(self_: &Tensor, dim: i64, dtype: Option<ScalarType>) -> Result<Tensor> {
    crate::_softmax(&cast_for_softmax(self_, dtype)?, dim, false)
}

/// `log_softmax.int`: `_log_softmax` after casting to `dtype` when given.
pub fn log_softmax(self_: &Tensor, dim: i64, dtype: Option<ScalarType>) -> Result<Tensor> {
    crate::_log_softmax(&cast_for_softmax(self_, dtype)?, dim, false)
}

/// `nll_loss`: the output of `nll_loss_forward` (1-d or 2-d input; `nll_loss_nd` takes the
/// spatial ones).
pub fn nll_loss(
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    ignore_index: i64,
) -> Result<Tensor> {
    Ok(crate::nll_loss_forward(self_, target, weight, reduction, ignore_index)?.0)
}

// Note [Spatial nll_loss]
// PyTorch's `nll_loss2d` is the output of `nll_loss2d_forward`, whose gradient is a formula
// of its own (`nll_loss2d_backward`). Until the autograd layer has that formula, `nll_loss2d`
// here takes the route of the same numbers through differentiable operators: the class
// dimension moved last (`permute`) and the pixels flattened into the batch of a 2-d
// `nll_loss_forward` (`reshape`), whose reductions, total weight and `ignore_index` are the
// 2-d kernel's per pixel. The `nll_loss2d_forward` / `nll_loss2d_backward` operators exist
// with CPU and Meta kernels for direct calls; once their derivatives are registered,
// `nll_loss2d` can call `nll_loss2d_forward` as PyTorch does.

/// `nll_loss2d`: the loss of `(N, C, H, W)` log-probabilities at `(N, H, W)` class indices
/// (see Note [Spatial nll_loss]).
pub fn nll_loss2d(
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    ignore_index: i64,
) -> Result<Tensor> {
    if target.dim() != 3 {
        return Err(error(format!(
            "only batches of spatial targets supported (3D tensors) but got targets of \
             dimension: {}",
            target.dim()
        )));
    }
    if self_.dim() != 4 {
        return Err(error(format!(
            "only batches of spatial inputs supported (4D tensors), but got input of dimension: \
             {}",
            self_.dim()
        )));
    }
    let (i, t) = (self_.sizes(), target.sizes());
    if weight.is_some_and(|w| w.numel() != i[1]) {
        return Err(error(
            "weight tensor should be defined either for all or no classes",
        ));
    }
    if i[0] != t[0] || i[2] != t[1] || i[3] != t[2] {
        return Err(error(format!(
            "size mismatch (got input: {} , target: {}",
            shape_str(i),
            shape_str(t)
        )));
    }
    // `nll_loss2d_forward` reads the target as int64 only (`nll_loss_forward`, which computes
    // it here, also takes uint8 and checks the other dtypes).
    if target.dtype() == ScalarType::Byte {
        return Err(error("expected scalar type Long but found Byte"));
    }
    let rows = crate::reshape(&crate::permute(self_, &[0, 2, 3, 1])?, &[-1, i[1]])?;
    let out = crate::nll_loss_forward(
        &rows,
        &crate::reshape(target, &[-1])?,
        weight,
        reduction,
        ignore_index,
    )?
    .0;
    if reduction == REDUCTION_NONE {
        return crate::reshape(&out, t);
    }
    Ok(out)
}

/// `nll_loss_nd`: `nll_loss` for input `(C)` or `(N, C)`, `nll_loss2d` for `(N, C, H, W)`,
/// and for `(N, C, d1, ...)` of other ranks `nll_loss2d` over the spatial dimensions
/// flattened into one (`(N, C, 1, d1 * ...)`), its unreduced output shaped `(N, d1, ...)`.
pub fn nll_loss_nd(
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    ignore_index: i64,
) -> Result<Tensor> {
    if self_.dim() < 1 {
        return Err(error(format!(
            "Expected 1 or more dimensions (got {})",
            self_.dim()
        )));
    }
    let target_batch = target.sizes().first().copied();
    if self_.dim() != 1 && Some(self_.sizes()[0]) != target_batch {
        return Err(error(format!(
            "Expected input batch_size ({}) to match target batch_size ({}).",
            self_.sizes()[0],
            // A 0-d target has no batch size: PyTorch reads past its sizes.
            target_batch.map_or_else(|| "?".to_owned(), |b| b.to_string())
        )));
    }
    match self_.dim() {
        1 | 2 => return nll_loss(self_, target, weight, reduction, ignore_index),
        4 => return nll_loss2d(self_, target, weight, reduction, ignore_index),
        _ => {}
    }
    let (n, c) = (self_.sizes()[0], self_.sizes()[1]);
    let mut out_size = vec![n];
    out_size.extend_from_slice(&self_.sizes()[2..]);
    if target.sizes()[1..] != self_.sizes()[2..] {
        return Err(error(format!(
            "Expected target size {}, got {}",
            shape_str(&out_size),
            shape_str(target.sizes())
        )));
    }
    let input = if self_.numel() > 0 {
        crate::reshape(self_, &[n, c, 1, -1])?
    } else {
        crate::reshape(self_, &[n, c, 0, 0])?
    };
    let target = if target.numel() > 0 {
        crate::reshape(target, &[n, 1, -1])?
    } else {
        crate::reshape(target, &[n, 0, 0])?
    };
    let out = nll_loss2d(&input, &target, weight, reduction, ignore_index)?;
    if reduction == REDUCTION_NONE {
        return crate::reshape(&out, &out_size);
    }
    Ok(out)
}

const REDUCTION_NONE: i64 = 0;
const REDUCTION_MEAN: i64 = 1;
const REDUCTION_SUM: i64 = 2;

fn invalid_reduction(reduction: i64) -> switchboard_dispatcher::DispatchError {
    error(format!(
        "Invalid reduction type encountered in cross_entropy: {reduction}"
    ))
}

/// `weight` viewed to broadcast along `class_dim` of a `rank`-dimensional tensor.
fn class_weight_view(w: &Tensor, rank: usize, class_dim: usize) -> Result<Tensor> {
    if rank <= 1 {
        return Ok(w.clone());
    }
    let mut shape = vec![1i64; rank];
    shape[class_dim] = w.sizes().first().copied().unwrap_or(1);
    crate::view(w, &shape)
}

fn check_label_smoothing(label_smoothing: f64) -> Result<()> {
    if label_smoothing > 1.0 {
        return Err(error(format!(
            "label_smoothing must be between 0.0 and 1.0. Got: {}",
            Scalar::Float(label_smoothing)
        )));
    }
    Ok(())
}

/// `cross_entropy_loss`, as PyTorch's: class probabilities when `target` has the input's
/// shape, else class indices through `nll_loss_nd(log_softmax(self, class_dim))`, with label
/// smoothing mixing in the mean of `-log p` over the classes. Inputs `(C)`, `(N, C)` and
/// `(N, C, d1, ...)`.
pub fn cross_entropy_loss(
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    ignore_index: i64,
    label_smoothing: f64,
) -> Result<Tensor> {
    let class_dim = if self_.dim() == 1 { 0 } else { 1 };
    if self_.sizes() == target.sizes() {
        if !target.dtype().is_floating_point() {
            return Err(error(format!(
                "Expected floating point type for target with class probabilities, got {}",
                target.dtype().c10_name()
            )));
        }
        if ignore_index >= 0 {
            return Err(error(
                "ignore_index is not supported for floating point target",
            ));
        }
        return cross_entropy_prob_target(self_, target, weight, reduction, label_smoothing);
    }
    let logp = log_softmax(self_, class_dim as i64, Some(self_.dtype()))?;
    // A NaN `label_smoothing` means no smoothing, as PyTorch's `label_smoothing > 0.0` test
    // decides.
    if label_smoothing.is_nan() || label_smoothing <= 0.0 {
        return nll_loss_nd(&logp, target, weight, reduction, ignore_index);
    }
    check_label_smoothing(label_smoothing)?;
    let nll = nll_loss_nd(&logp, target, weight, reduction, ignore_index)?;
    let n_classes = logp.sizes()[class_dim];
    let weighted = match weight {
        Some(w) => crate::mul(&logp, &class_weight_view(w, logp.dim(), class_dim)?)?,
        None => logp.clone(),
    };
    let smooth = crate::neg(&crate::sum_dim_int_list(
        &weighted,
        Some(&[class_dim as i64]),
    )?)?;
    let ignore = crate::eq_scalar(target, ignore_index)?;
    let smooth = crate::masked_fill(&smooth, &ignore, 0.0)?;
    let smooth = match reduction {
        REDUCTION_MEAN => {
            let denominator = match weight {
                // The weights of the targets that count, as `nll_loss_nd`'s mean divides by.
                Some(w) => {
                    let kept = crate::masked_fill(target, &ignore, 0)?;
                    let picked = crate::index_select(w, 0, &crate::reshape(&kept, &[-1])?)?;
                    crate::masked_fill(&picked, &crate::reshape(&ignore, &[-1])?, 0)?.sum()?
                }
                None => crate::ne_scalar(target, ignore_index)?.sum()?,
            };
            crate::div(&smooth.sum()?, &denominator)?
        }
        REDUCTION_SUM => smooth.sum()?,
        REDUCTION_NONE => smooth,
        r => return Err(invalid_reduction(r)),
    };
    crate::add(
        &crate::mul_scalar(&nll, 1.0 - label_smoothing)?,
        &crate::mul_scalar(&smooth, label_smoothing / n_classes as f64)?,
    )
}

/// PyTorch's `cross_entropy_loss_prob_target`: `-(log_softmax(self) * target * weight)`
/// summed over the classes and reduced, the mean taken over the samples (`numel / C`).
fn cross_entropy_prob_target(
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    label_smoothing: f64,
) -> Result<Tensor> {
    let class_dim = if self_.dim() == 1 { 0 } else { 1 };
    let n_classes = self_.sizes()[class_dim];
    if let Some(w) = weight {
        if w.dim() != 1 || w.numel() != n_classes {
            return Err(error(format!(
                "cross_entropy: weight tensor should be defined either for all {n_classes} \
                 classes or no classes but got weight tensor of shape: {}",
                shape_str(w.sizes())
            )));
        }
    }
    let logp = log_softmax(self_, class_dim as i64, Some(self_.dtype()))?;
    let target = if label_smoothing > 0.0 {
        check_label_smoothing(label_smoothing)?;
        crate::add_scalar(
            &crate::mul_scalar(target, 1.0 - label_smoothing)?,
            label_smoothing / n_classes as f64,
        )?
    } else {
        target.clone()
    };
    let mut prod = crate::mul(&logp, &target)?;
    if let Some(w) = weight {
        prod = crate::mul(&prod, &class_weight_view(w, logp.dim(), class_dim)?)?;
    }
    match reduction {
        REDUCTION_MEAN => {
            let total = crate::neg(&prod.sum()?)?;
            if logp.numel() == 0 {
                return crate::fill_(&total, f64::NAN);
            }
            crate::div_scalar(&total, logp.numel() / n_classes)
        }
        REDUCTION_SUM => crate::neg(&prod.sum()?),
        REDUCTION_NONE => crate::neg(&crate::sum_dim_int_list(&prod, Some(&[class_dim as i64]))?),
        r => Err(invalid_reduction(r)),
    }
}

/// `dropout`: as PyTorch's CPU path (`_dropout_impl`): the input itself when not training
/// or `p == 0`, else `input * bernoulli(1 - p) / (1 - p)`.
pub fn dropout(input: &Tensor, p: f64, train: bool) -> Result<Tensor> {
    if !(0.0..=1.0).contains(&p) {
        return Err(error(format!(
            "dropout probability has to be between 0 and 1, but got {p}"
        )));
    }
    if p == 0.0 || !train || input.numel() == 0 {
        return Ok(input.clone());
    }
    if p == 1.0 {
        return crate::mul(input, &crate::zeros_like(input)?);
    }
    let noise = crate::empty_like(input)?;
    crate::bernoulli_with_(&noise, crate::BernoulliInplaceOptions::default().p(1.0 - p))?;
    crate::div_scalar_(&noise, 1.0 - p)?;
    crate::mul(input, &noise)
}

/// `layer_norm`: the output of `native_layer_norm`.
pub fn layer_norm(
    input: &Tensor,
    normalized_shape: &[i64],
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
    _cudnn_enable: bool,
) -> Result<Tensor> {
    Ok(crate::native_layer_norm(input, normalized_shape, weight, bias, eps)?.0)
}

/// `embedding` (CompositeExplicitAutograd): rows of `weight` picked by `indices`, shaped
/// `indices.shape + [embedding_dim]`.
pub fn embedding(
    weight: &Tensor,
    indices: &Tensor,
    _padding_idx: i64,
    _scale_grad_by_freq: bool,
    _sparse: bool,
) -> Result<Tensor> {
    if weight.dim() != 2 {
        return Err(error("'weight' must be 2-D"));
    }
    if !matches!(indices.dtype(), ScalarType::Long | ScalarType::Int) {
        return Err(error(format!(
            "Expected tensor for argument #1 'indices' to have one of the following scalar \
             types: Long, Int; but got {} instead (while checking arguments for embedding)",
            indices.type_string()
        )));
    }
    if indices.dim() == 1 {
        return crate::index_select(weight, 0, indices);
    }
    let mut shape = indices.sizes().to_vec();
    shape.push(weight.sizes()[1]);
    let flat = crate::reshape(indices, &[-1])?;
    crate::view(&crate::index_select(weight, 0, &flat)?, &shape)
}
