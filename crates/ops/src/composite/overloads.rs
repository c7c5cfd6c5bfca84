//! PyTorch's other overloads of operators declared with their primary form elsewhere, as
//! composites: conversions (`to.dtype_layout`, `to.other`), `narrow.Tensor`, `dropout_`,
//! the functional forms of in-place fills and random ops (`fill.Scalar`, `zero`, `uniform`,
//! `normal_functional`, `bernoulli.p`), factories with a generator or a lower bound
//! (`rand.generator`, `randint.low`, ...) and `out=` forms of composite operators.

use switchboard_dispatcher::Result;
use switchboard_tensor::{Device, Generator, Layout, MemoryFormat, Scalar, ScalarType, Tensor};

use super::error;

/// `to.dtype_layout` (CompositeImplicitAutograd): `self` when nothing changes and no copy is
/// asked for, else `_to_copy` with the given options.
#[allow(clippy::too_many_arguments)]
pub fn to_dtype_layout(
    self_: &Tensor,
    dtype: Option<ScalarType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
    non_blocking: bool,
    copy: bool,
    memory_format: Option<MemoryFormat>,
) -> Result<Tensor> {
    let format_ok = match memory_format {
        None | Some(MemoryFormat::Preserve) => true,
        Some(f) => self_.is_contiguous_as(f),
    };
    let aliases = dtype.is_none_or(|d| d == self_.dtype())
        && layout.is_none_or(|l| l == Layout::Strided)
        && device.is_none_or(|d| d == self_.device())
        && !copy
        && format_ok;
    if aliases {
        return Ok(self_.clone());
    }
    crate::_to_copy_with(
        self_,
        crate::ToCopyOptions {
            dtype,
            layout,
            device,
            pin_memory,
            non_blocking,
            memory_format,
        },
    )
}

/// `to.other` (CompositeImplicitAutograd): to `other`'s dtype and device.
pub fn to_other(
    self_: &Tensor,
    other: &Tensor,
    non_blocking: bool,
    copy: bool,
    memory_format: Option<MemoryFormat>,
) -> Result<Tensor> {
    to_dtype_layout(
        self_,
        Some(other.dtype()),
        Some(Layout::Strided),
        Some(other.device()),
        None,
        non_blocking,
        copy,
        memory_format,
    )
}

/// `narrow.Tensor` (CompositeImplicitAutograd): `narrow` with the start given as a 0-dim
/// integer tensor.
pub fn narrow_tensor(self_: &Tensor, dim: i64, start: &Tensor, length: i64) -> Result<Tensor> {
    if start.dim() != 0 || !start.dtype().is_integral(false) {
        return Err(error("start must be an 0-dim integral Tensor."));
    }
    let start = crate::TensorOps::item(start)?.to_i64();
    crate::narrow(self_, dim, start, length)
}

/// `dropout_` (CompositeImplicitAutograd): `dropout` in place.
pub fn dropout_(self_: &Tensor, p: f64, train: bool) -> Result<Tensor> {
    if !(0.0..=1.0).contains(&p) {
        return Err(error(format!(
            "dropout probability has to be between 0 and 1, but got {p}"
        )));
    }
    if p == 0.0 || !train || self_.numel() == 0 {
        return Ok(self_.clone());
    }
    if p == 1.0 {
        return crate::mul_scalar_(self_, 0);
    }
    let noise = crate::empty_like(self_)?;
    crate::bernoulli_with_(&noise, crate::BernoulliInplaceOptions::default().p(1.0 - p))?;
    crate::div_scalar_(&noise, 1.0 - p)?;
    crate::mul_(self_, &noise)
}

/// `fill.Scalar` (CompositeExplicitAutograd): a new tensor like `self` filled with `value`.
pub fn fill_scalar(self_: &Tensor, value: Scalar) -> Result<Tensor> {
    crate::fill_(&crate::empty_like(self_)?, value)
}

/// `fill.Tensor` (CompositeExplicitAutograd).
pub fn fill_tensor(self_: &Tensor, value: &Tensor) -> Result<Tensor> {
    crate::fill_tensor_(&crate::empty_like(self_)?, value)
}

/// `zero` (CompositeExplicitAutograd): zeros like `self`.
pub fn zero(self_: &Tensor) -> Result<Tensor> {
    crate::zero_(&crate::empty_like(self_)?)
}

/// `uniform` (CompositeExplicitAutograd): a tensor like `self`, uniform on `[from, to)`.
pub fn uniform(
    self_: &Tensor,
    from: f64,
    to: f64,
    generator: Option<&Generator>,
) -> Result<Tensor> {
    crate::uniform_with_(
        &crate::empty_like(self_)?,
        crate::UniformInplaceOptions {
            from,
            to,
            generator,
        },
    )
}

/// `normal_functional` (CompositeExplicitAutograd): a tensor like `self`, normal with `mean`
/// and `std`.
pub fn normal_functional(
    self_: &Tensor,
    mean: f64,
    std: f64,
    generator: Option<&Generator>,
) -> Result<Tensor> {
    crate::normal_with_(
        &crate::empty_like(self_)?,
        crate::NormalInplaceOptions {
            mean,
            std,
            generator,
        },
    )
}

/// `bernoulli.p` (CompositeExplicitAutograd): a tensor like `self` of 0/1 draws with
/// probability `p`.
pub fn bernoulli_p(self_: &Tensor, p: f64, generator: Option<&Generator>) -> Result<Tensor> {
    // PyTorch's: a contiguous result (LEGACY_CONTIGUOUS_MEMORY_FORMAT), whatever `self`'s layout.
    let contiguous = crate::EmptyLikeOptions::default().memory_format(MemoryFormat::Contiguous);
    crate::bernoulli_with_(
        &crate::empty_like_with(self_, contiguous)?,
        crate::BernoulliInplaceOptions { p, generator },
    )
}

/// `bernoulli` (CompositeExplicitAutograd): 0/1 draws with the probabilities in `self`
/// (contiguous, `self`'s dtype).
pub fn bernoulli_default(self_: &Tensor, generator: Option<&Generator>) -> Result<Tensor> {
    let contiguous = crate::EmptyLikeOptions::default().memory_format(MemoryFormat::Contiguous);
    crate::bernoulli_tensor_with_(
        &crate::empty_like_with(self_, contiguous)?,
        self_,
        crate::BernoulliTensorInplaceOptions { generator },
    )
}

/// `bernoulli.Tensor` (CompositeExplicitAutograd, generated from `bernoulli_.Tensor` as in
/// PyTorch): a copy of `self` with each element set to 1 with the probability in `p`, else 0.
pub fn bernoulli_tensor(
    self_: &Tensor,
    p: &Tensor,
    generator: Option<&Generator>,
) -> Result<Tensor> {
    crate::bernoulli_tensor_with_(
        &crate::clone(self_)?,
        p,
        crate::BernoulliTensorInplaceOptions { generator },
    )
}

fn empty(
    size: &[i64],
    dtype: Option<ScalarType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Tensor> {
    crate::empty_with(
        size,
        crate::EmptyOptions {
            dtype,
            layout,
            device,
            pin_memory,
            ..Default::default()
        },
    )
}

/// `rand.generator` (CompositeExplicitAutograd): `rand` drawing from `generator`.
pub fn rand_generator(
    size: &[i64],
    generator: Option<&Generator>,
    dtype: Option<ScalarType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Tensor> {
    crate::uniform_with_(
        &empty(size, dtype, layout, device, pin_memory)?,
        crate::UniformInplaceOptions {
            generator,
            ..Default::default()
        },
    )
}

/// `randn.generator` (CompositeExplicitAutograd): `randn` drawing from `generator`.
pub fn randn_generator(
    size: &[i64],
    generator: Option<&Generator>,
    dtype: Option<ScalarType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Tensor> {
    crate::normal_with_(
        &empty(size, dtype, layout, device, pin_memory)?,
        crate::NormalInplaceOptions {
            generator,
            ..Default::default()
        },
    )
}

/// `randint.low_generator` (CompositeExplicitAutograd): integers uniform on `[low, high)`
/// (int64 by default), drawn from `generator`.
#[allow(clippy::too_many_arguments)]
pub fn randint_low_generator(
    low: i64,
    high: i64,
    size: &[i64],
    generator: Option<&Generator>,
    dtype: Option<ScalarType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Tensor> {
    let t = empty(
        size,
        Some(dtype.unwrap_or(ScalarType::Long)),
        layout,
        device,
        pin_memory,
    )?;
    crate::random_with_(
        &t,
        low,
        Some(high),
        crate::RandomInplaceOptions { generator },
    )
}

/// `randint.low` (CompositeExplicitAutograd): integers uniform on `[low, high)`.
pub fn randint_low(
    low: i64,
    high: i64,
    size: &[i64],
    dtype: Option<ScalarType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Tensor> {
    randint_low_generator(low, high, size, None, dtype, layout, device, pin_memory)
}

/// `randint.generator` (CompositeExplicitAutograd): integers uniform on `[0, high)`, drawn
/// from `generator`.
pub fn randint_generator(
    high: i64,
    size: &[i64],
    generator: Option<&Generator>,
    dtype: Option<ScalarType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Tensor> {
    randint_low_generator(0, high, size, generator, dtype, layout, device, pin_memory)
}

/// `softmax.int_out` (CompositeExplicitAutograd): `_softmax.out` after casting to `dtype`.
pub fn softmax_int_out(
    self_: &Tensor,
    dim: i64,
    dtype: Option<ScalarType>,
    out: &Tensor,
) -> Result<Tensor> {
    let input = match dtype {
        Some(d) if d != self_.dtype() => crate::to(self_, d)?,
        _ => self_.clone(),
    };
    crate::_softmax_out(&input, dim, false, out)
}

/// `log_softmax.int_out` (CompositeExplicitAutograd): `_log_softmax.out` after casting to
/// `dtype`.
pub fn log_softmax_int_out(
    self_: &Tensor,
    dim: i64,
    dtype: Option<ScalarType>,
    out: &Tensor,
) -> Result<Tensor> {
    let input = match dtype {
        Some(d) if d != self_.dtype() => crate::to(self_, d)?,
        _ => self_.clone(),
    };
    crate::_log_softmax_out(&input, dim, false, out)
}

/// `nll_loss.out` (CompositeImplicitAutograd): the output of `nll_loss_forward.output`.
pub fn nll_loss_out(
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    ignore_index: i64,
    out: &Tensor,
) -> Result<Tensor> {
    let total_weight = crate::empty_with(
        &[0],
        crate::EmptyOptions {
            dtype: Some(self_.dtype()),
            device: Some(self_.device()),
            ..Default::default()
        },
    )?;
    Ok(crate::nll_loss_forward_output(
        self_,
        target,
        weight,
        reduction,
        ignore_index,
        out,
        &total_weight,
    )?
    .0)
}

/// `nll_loss2d.out` (CompositeImplicitAutograd): the output of `nll_loss2d_forward.output`.
pub fn nll_loss2d_out(
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    ignore_index: i64,
    out: &Tensor,
) -> Result<Tensor> {
    let total_weight = crate::empty_with(
        &[0],
        crate::EmptyOptions {
            dtype: Some(self_.dtype()),
            device: Some(self_.device()),
            ..Default::default()
        },
    )?;
    Ok(crate::nll_loss2d_forward_output(
        self_,
        target,
        weight,
        reduction,
        ignore_index,
        out,
        &total_weight,
    )?
    .0)
}
