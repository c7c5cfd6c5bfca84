//! Factories (CompositeExplicitAutograd): they allocate through `empty.memory_format` /
//! `empty_strided`, whose BackendSelect kernels pick the backend from `device`, then fill
//! in place through dispatched operators.

use switchboard_dispatcher::Result;
use switchboard_tensor::{
    Device, Generator, Layout, MemoryFormat, Scalar, ScalarType, Tensor, DEFAULT_DTYPE,
};

use super::error;

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

/// `zeros`.
pub fn zeros(
    size: &[i64],
    dtype: Option<ScalarType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Tensor> {
    // PyTorch 2.15's zeros checks first, with a message of its own.
    if size.iter().any(|&s| s < 0) {
        return Err(error("zeros: Dimension size must be non-negative."));
    }
    crate::zero_(&empty(size, dtype, layout, device, pin_memory)?)
}

/// `ones`.
pub fn ones(
    size: &[i64],
    dtype: Option<ScalarType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Tensor> {
    crate::fill_(&empty(size, dtype, layout, device, pin_memory)?, 1)
}

/// The dtype PyTorch infers for `full` from its fill value.
fn scalar_dtype(s: Scalar) -> ScalarType {
    match s {
        Scalar::Bool(_) => ScalarType::Bool,
        Scalar::Int(_) => ScalarType::Long,
        Scalar::Float(_) => DEFAULT_DTYPE,
    }
}

/// `full`: the dtype defaults to the fill value's (bool, int64 or the default float).
pub fn full(
    size: &[i64],
    fill_value: Scalar,
    dtype: Option<ScalarType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Tensor> {
    let dtype = dtype.unwrap_or(scalar_dtype(fill_value));
    crate::fill_(
        &empty(size, Some(dtype), layout, device, pin_memory)?,
        fill_value,
    )
}

/// `arange`: `arange.start_step(0, end, 1)`.
pub fn arange(
    end: Scalar,
    dtype: Option<ScalarType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Tensor> {
    arange_start_step(
        Scalar::Int(0),
        end,
        Scalar::Int(1),
        dtype,
        layout,
        device,
        pin_memory,
    )
}

/// `arange.start_step`: the dtype defaults to int64 when start, end and step are all
/// integers, else to the default float; the values come from `arange.start_out`.
pub fn arange_start_step(
    start: Scalar,
    end: Scalar,
    step: Scalar,
    dtype: Option<ScalarType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Tensor> {
    let integral = [start, end, step]
        .iter()
        .all(|s| matches!(s, Scalar::Int(_) | Scalar::Bool(_)));
    let dtype = dtype.unwrap_or(if integral {
        ScalarType::Long
    } else {
        DEFAULT_DTYPE
    });
    let out = empty(&[0], Some(dtype), layout, device, pin_memory)?;
    crate::arange_start_out_with(
        start,
        end,
        &out,
        crate::ArangeStartOutOptions::default().step(step),
    )
}

/// `arange.start`: `arange.start_step(start, end, 1)`.
pub fn arange_start(
    start: Scalar,
    end: Scalar,
    dtype: Option<ScalarType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Tensor> {
    arange_start_step(
        start,
        end,
        Scalar::Int(1),
        dtype,
        layout,
        device,
        pin_memory,
    )
}

/// `arange.out`: `arange.start_out(0, end, 1, out)`.
pub fn arange_out(end: Scalar, out: &Tensor) -> Result<Tensor> {
    crate::arange_start_out(Scalar::Int(0), end, out)
}

/// `rand`: uniform on [0, 1).
pub fn rand(
    size: &[i64],
    dtype: Option<ScalarType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Tensor> {
    crate::uniform_(&empty(size, dtype, layout, device, pin_memory)?)
}

/// `randn`: standard normal.
pub fn randn(
    size: &[i64],
    dtype: Option<ScalarType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Tensor> {
    crate::normal_(&empty(size, dtype, layout, device, pin_memory)?)
}

/// `randint`: integers uniform on [0, high).
pub fn randint(
    high: i64,
    size: &[i64],
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
    crate::random_(&t, 0, Some(high))
}

/// `new_empty_strided`: an uninitialised tensor of `size` and `stride`, with `self`'s dtype
/// and device unless given (`Tensor.new_empty_strided`).
pub fn new_empty_strided(
    self_: &Tensor,
    size: &[i64],
    stride: &[i64],
    dtype: Option<ScalarType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Tensor> {
    crate::empty_strided_with(
        size,
        stride,
        crate::EmptyStridedOptions {
            dtype: Some(dtype.unwrap_or(self_.dtype())),
            layout,
            device: Some(device.unwrap_or(self_.device())),
            pin_memory,
        },
    )
}

/// `empty_like`: the same sizes; with the preserve format (the default), the same strides
/// when `self` is non-overlapping and dense, else its suggested memory format.
pub fn empty_like(
    self_: &Tensor,
    dtype: Option<ScalarType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
    memory_format: Option<MemoryFormat>,
) -> Result<Tensor> {
    if layout.is_some_and(|l| l != Layout::Strided) {
        return Err(error(format!(
            "empty_like: only the strided layout is supported, got {}",
            layout.unwrap_or_default()
        )));
    }
    let dtype = Some(dtype.unwrap_or(self_.dtype()));
    let device = Some(device.unwrap_or(self_.device()));
    match memory_format.unwrap_or(MemoryFormat::Preserve) {
        MemoryFormat::Preserve if self_.is_non_overlapping_and_dense() => {
            crate::empty_strided_with(
                self_.sizes(),
                self_.strides(),
                crate::EmptyStridedOptions {
                    dtype,
                    layout,
                    device,
                    pin_memory,
                },
            )
        }
        MemoryFormat::Preserve => crate::empty_with(
            self_.sizes(),
            crate::EmptyOptions {
                dtype,
                layout,
                device,
                pin_memory,
                memory_format: Some(self_.suggest_memory_format()),
            },
        ),
        f => crate::empty_with(
            self_.sizes(),
            crate::EmptyOptions {
                dtype,
                layout,
                device,
                pin_memory,
                memory_format: Some(f),
            },
        ),
    }
}

/// `zeros_like`.
pub fn zeros_like(
    self_: &Tensor,
    dtype: Option<ScalarType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
    memory_format: Option<MemoryFormat>,
) -> Result<Tensor> {
    crate::zero_(&empty_like(
        self_,
        dtype,
        layout,
        device,
        pin_memory,
        memory_format,
    )?)
}

/// `ones_like`.
pub fn ones_like(
    self_: &Tensor,
    dtype: Option<ScalarType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
    memory_format: Option<MemoryFormat>,
) -> Result<Tensor> {
    crate::fill_(
        &empty_like(self_, dtype, layout, device, pin_memory, memory_format)?,
        1,
    )
}

/// `scalar_tensor`: a 0-dim tensor holding `s`, float32 unless `dtype` says otherwise
/// (unlike `full`, the dtype is not inferred from the value).
pub fn scalar_tensor(
    s: Scalar,
    dtype: Option<ScalarType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Tensor> {
    let dtype = Some(dtype.unwrap_or(DEFAULT_DTYPE));
    crate::fill_(&empty(&[], dtype, layout, device, pin_memory)?, s)
}

/// `full_like`: `empty_like` (its memory-format rules), filled with `fill_value`; the dtype
/// is `self`'s unless given.
pub fn full_like(
    self_: &Tensor,
    fill_value: Scalar,
    dtype: Option<ScalarType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
    memory_format: Option<MemoryFormat>,
) -> Result<Tensor> {
    crate::fill_(
        &empty_like(self_, dtype, layout, device, pin_memory, memory_format)?,
        fill_value,
    )
}

/// `randperm.generator`: an empty tensor of `n` elements (int64 by default) filled by
/// `randperm.generator_out`, the backend's shuffle.
pub fn randperm_generator(
    n: i64,
    generator: Option<&Generator>,
    dtype: Option<ScalarType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Tensor> {
    let dtype = Some(dtype.unwrap_or(ScalarType::Long));
    let out = empty(&[n], dtype, layout, device, pin_memory)?;
    crate::randperm_generator_out(n, generator, &out)
}

/// `randperm`: `randperm.generator` with the default generator.
pub fn randperm(
    n: i64,
    dtype: Option<ScalarType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
) -> Result<Tensor> {
    randperm_generator(n, None, dtype, layout, device, pin_memory)
}

/// `randperm.out`: `randperm.generator_out` with the default generator.
pub fn randperm_out(n: i64, out: &Tensor) -> Result<Tensor> {
    crate::randperm_generator_out(n, None, out)
}
