//! Neural-network operators as PyTorch decomposes them (CompositeImplicitAutograd unless
//! noted): matmul, linear, convolutions, pooling, softmax, losses, dropout, layer norm,
//! embedding.

use switchboard_dispatcher::Result;
use switchboard_tensor::{ScalarType, Tensor};

use super::{error, expand_param};
use crate::TensorOps;

/// `matmul`: PyTorch's rules by rank: dot (1-D x 1-D), matrix-vector, vector-matrix, `mm`,
/// folding a batched left operand into `mm` when the right one is a matrix or vector, and
/// `bmm` over broadcast batch dimensions otherwise.
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
        (2, 1) => crate::squeeze_dim(&crate::mm(self_, &crate::unsqueeze(other, 1)?)?, -1),
        (1, 2) => crate::squeeze_dim(&crate::mm(&crate::unsqueeze(self_, 0)?, other)?, 0),
        (2, 2) => crate::mm(self_, other),
        (_, 1 | 2) if d1 >= 3 => {
            // Fold the batch dimensions of `self` into the rows of one `mm`.
            let sizes = self_.sizes();
            let k = sizes[d1 - 1];
            let rows: i64 = sizes[..d1 - 1].iter().product();
            let folded = crate::reshape(self_, &[rows, k])?;
            let rhs = if d2 == 1 {
                crate::unsqueeze(other, 1)?
            } else {
                other.clone()
            };
            let out = crate::mm(&folded, &rhs)?;
            let mut shape = sizes[..d1 - 1].to_vec();
            if d2 == 2 {
                shape.push(other.sizes()[1]);
            }
            crate::view(&out, &shape)
        }
        _ => batched_matmul(self_, other),
    }
}

fn batched_matmul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let (d1, d2) = (a.dim(), b.dim());
    let a2 = if d1 == 1 {
        crate::unsqueeze(a, 0)?
    } else {
        a.clone()
    };
    let b2 = if d2 == 1 {
        crate::unsqueeze(b, 1)?
    } else {
        b.clone()
    };
    let (sa, sb) = (a2.sizes().to_vec(), b2.sizes().to_vec());
    let (n, m1) = (sa[sa.len() - 2], sa[sa.len() - 1]);
    let (m2, p) = (sb[sb.len() - 2], sb[sb.len() - 1]);
    if m1 != m2 {
        return Err(error(format!(
            "Expected size for first two dimensions of batch2 tensor to be: [{}, {m1}] but got: \
             [{}, {m2}].",
            sb[..sb.len() - 2].iter().product::<i64>(),
            sb[..sb.len() - 2].iter().product::<i64>(),
        )));
    }
    let batch = switchboard_tensor::infer_size(&sa[..sa.len() - 2], &sb[..sb.len() - 2])?;
    let nb: i64 = batch.iter().product();
    let mut ea = batch.to_vec();
    ea.extend([n, m1]);
    let mut eb = batch.to_vec();
    eb.extend([m2, p]);
    let a3 = crate::reshape(&crate::expand(&a2, &ea)?, &[nb, n, m1])?;
    let b3 = crate::reshape(&crate::expand(&b2, &eb)?, &[nb, m2, p])?;
    let out = crate::bmm(&a3, &b3)?;
    let mut shape = batch.to_vec();
    if d1 > 1 {
        shape.push(n);
    }
    if d2 > 1 {
        shape.push(p);
    }
    crate::view(&out, &shape)
}

/// `linear`: `addmm(bias, input, weight.t())` for a matrix input with bias, else
/// `matmul(input, weight.t())` (+ bias).
pub fn linear(input: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    let wt = crate::t(weight)?;
    match bias {
        Some(b) if input.dim() == 2 => crate::addmm(b, input, &wt),
        Some(b) => crate::add(&matmul(input, &wt)?, b),
        None => matmul(input, &wt),
    }
}

#[allow(clippy::too_many_arguments)]
fn conv_nd(
    n: usize,
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    groups: i64,
) -> Result<Tensor> {
    let stride = expand_param("stride", stride, n)?;
    let padding = expand_param("padding", padding, n)?;
    let dilation = expand_param("dilation", dilation, n)?;
    crate::convolution(
        input,
        weight,
        bias,
        &stride,
        &padding,
        &dilation,
        false,
        &vec![0; n],
        groups,
    )
}

/// `conv1d`: `convolution` with one spatial dimension.
pub fn conv1d(
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    groups: i64,
) -> Result<Tensor> {
    conv_nd(1, input, weight, bias, stride, padding, dilation, groups)
}

/// `conv2d`: `convolution` with two spatial dimensions.
pub fn conv2d(
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    groups: i64,
) -> Result<Tensor> {
    conv_nd(2, input, weight, bias, stride, padding, dilation, groups)
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

/// `nll_loss`: the output of `nll_loss_forward`.
pub fn nll_loss(
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    ignore_index: i64,
) -> Result<Tensor> {
    Ok(crate::nll_loss_forward(self_, target, weight, reduction, ignore_index)?.0)
}

const REDUCTION_NONE: i64 = 0;
const REDUCTION_MEAN: i64 = 1;

fn reduce(t: &Tensor, reduction: i64) -> Result<Tensor> {
    match reduction {
        REDUCTION_NONE => Ok(t.clone()),
        REDUCTION_MEAN => t.mean(),
        _ => t.sum(),
    }
}

/// `cross_entropy_loss`: `nll_loss(log_softmax(self, class_dim))` for class-index targets,
/// `-(target * log_softmax).sum(class_dim)` reduced for class-probability targets (a
/// floating target of the input's shape), with PyTorch's label smoothing.
pub fn cross_entropy_loss(
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    ignore_index: i64,
    label_smoothing: f64,
) -> Result<Tensor> {
    if !(0.0..=1.0).contains(&label_smoothing) {
        return Err(error(format!(
            "label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}"
        )));
    }
    let class_dim = if self_.dim() == 1 { 0 } else { 1 };
    let logp = log_softmax(self_, class_dim, None)?;
    let n_classes = self_.sizes().get(class_dim as usize).copied().unwrap_or(1);
    if target.dtype().is_floating_point() && target.sizes() == self_.sizes() {
        // Class probabilities.
        let mut tgt = target.clone();
        if label_smoothing > 0.0 {
            tgt = crate::add_scalar(
                &crate::mul_scalar(target, 1.0 - label_smoothing)?,
                label_smoothing / n_classes as f64,
            )?;
        }
        let mut prod = crate::mul(&logp, &tgt)?;
        if let Some(w) = weight {
            let mut shape = vec![1i64; self_.dim()];
            shape[class_dim as usize] = n_classes;
            prod = crate::mul(&prod, &crate::view(w, &shape)?)?;
        }
        let per = crate::neg(&crate::sum_dim_int_list(&prod, Some(&[class_dim]))?)?;
        return match reduction {
            REDUCTION_MEAN => {
                let n = (self_.numel() / n_classes.max(1)).max(1);
                crate::div_scalar(&per.sum()?, n)
            }
            r => reduce(&per, r),
        };
    }
    let nll = crate::nll_loss_with(
        &logp,
        target,
        crate::NllLossOptions {
            weight,
            reduction,
            ignore_index,
        },
    )?;
    if label_smoothing <= 0.0 {
        return Ok(nll);
    }
    // Smoothing term: -sum over classes of log p (weighted), ignoring ignore_index targets.
    let mut lp = logp.clone();
    if let Some(w) = weight {
        let mut shape = vec![1i64; self_.dim()];
        shape[class_dim as usize] = n_classes;
        lp = crate::mul(&lp, &crate::view(w, &shape)?)?;
    }
    let smooth = crate::neg(&crate::sum_dim_int_list(&lp, Some(&[class_dim]))?)?;
    let ignore = crate::eq_scalar(target, ignore_index)?;
    let smooth = crate::masked_fill(&smooth, &ignore, 0)?;
    let smooth = match reduction {
        REDUCTION_MEAN => match weight {
            Some(w) => {
                let safe_target = crate::masked_fill(target, &ignore, 0)?;
                let wsum = crate::masked_fill(
                    &crate::index_select(w, 0, &crate::reshape(&safe_target, &[-1])?)?,
                    &crate::reshape(&ignore, &[-1])?,
                    0,
                )?
                .sum()?;
                crate::div(&smooth.sum()?, &wsum)?
            }
            None => {
                let kept = crate::ne_scalar(target, ignore_index)?.sum()?;
                crate::div(&smooth.sum()?, &kept)?
            }
        },
        r => reduce(&smooth, r)?,
    };
    crate::add(
        &crate::mul_scalar(&nll, 1.0 - label_smoothing)?,
        &crate::mul_scalar(&smooth, label_smoothing / n_classes as f64)?,
    )
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
