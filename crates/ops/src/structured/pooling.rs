//! The meta functions of the structured 2-d poolings of `DilatedMaxPool2d.cpp` and
//! `AveragePool2d.cpp`: `max_pool2d_with_indices` (values and `Long` indices), `avg_pool2d`
//! and their backwards; and the window geometry (`pool2d_shape_check`) the CPU kernels and
//! the non-structured poolings share.

use switchboard_tensor::{
    wrap_dim, CheckedSize, Device, DimVec, MemoryFormat, ScalarType, Tensor, TensorError,
};

use super::{pool_window_args, same_device, MetaOutput, Result};

fn invalid(msg: impl Into<String>) -> TensorError {
    TensorError::invalid(msg)
}

/// The parsed pooling window (PyTorch's `TORCH_META_FUNC(max_pool2d_with_indices)`).
#[derive(Clone, Copy, Debug)]
pub struct Window {
    /// Kernel height.
    pub kh: i64,
    /// Kernel width.
    pub kw: i64,
    /// Stride along the height.
    pub sh: i64,
    /// Stride along the width.
    pub sw: i64,
    /// Padding of the height.
    pub ph: i64,
    /// Padding of the width.
    pub pw: i64,
    /// Dilation along the height.
    pub dh: i64,
    /// Dilation along the width.
    pub dw: i64,
}

/// Reads the `int[2]` arguments (one value applies to both dims; empty stride = kernel) of
/// the pooling operator `op` (named in the messages): [`pool_window_args`].
pub fn parse_window(
    op: &str,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
) -> Result<Window> {
    let window = [kernel_size, stride, padding];
    let [[kh, kw], [sh, sw], [ph, pw], [dh, dw]] =
        pool_window_args(op, "either ", window, Some(dilation))?;
    Ok(Window {
        kh,
        kw,
        sh,
        sw,
        ph,
        pw,
        dh,
        dw,
    })
}

/// PyTorch's `pooling_output_shape`: the number of windows along one dim.
pub fn pooling_output_shape(
    op: &str,
    size: i64,
    k: i64,
    pad: i64,
    s: i64,
    d: i64,
    ceil: bool,
) -> Result<i64> {
    if s == 0 {
        return Err(invalid("stride should not be zero"));
    }
    if pad < 0 {
        return Err(invalid(format!(
            "pad must be non-negative, but got pad: {pad}"
        )));
    }
    if pad > ((k - 1) * d + 1) / 2 {
        return Err(invalid(format!(
            "pad should be at most half of effective kernel size, but got pad={pad}, \
             kernel_size={k} and dilation={d}"
        )));
    }
    let size = CheckedSize::new(size);
    let extra = if ceil { s - 1 } else { 0 };
    let what = || format!("{op}: the output size");
    let mut out = ((size + pad * 2 - (CheckedSize::new(k) - 1) * d - 1 + extra).div_floor(s) + 1)
        .get(what)?;
    // The last window must start inside the input (or its left padding).
    if ceil && (CheckedSize::new(out - 1) * s).get(what)? >= (size + pad).get(what)? {
        out -= 1;
    }
    Ok(out)
}

/// The checked geometry of one pooling: planes (`N*C`), input and output plane sizes, and
/// the output shape.
pub struct Pool {
    /// The window.
    pub win: Window,
    /// Input (and output) planes: `N * C`.
    pub planes: usize,
    /// Elements of an input and an output plane (exact whenever there is a plane: a tensor
    /// with elements has a numel that fits; saturated otherwise, as they are then unused).
    pub plane_in: usize,
    /// Elements of an output plane (as `plane_in`).
    pub plane_out: usize,
    /// Input height.
    pub h: i64,
    /// Input width.
    pub w: i64,
    /// Output height.
    pub oh: i64,
    /// Output width.
    pub ow: i64,
    /// The output's sizes.
    pub out_shape: Vec<i64>,
    /// The device of the tensors.
    pub device: Device,
}

/// The checked geometry of a 2-d pooling of `input` by operator `op` (PyTorch's
/// `pool2d_shape_check` and its argument parsing), on the device of `tensors`.
#[allow(clippy::too_many_arguments)]
pub fn pool2d_geometry(
    op: &str,
    tensors: &[&Tensor],
    input: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
) -> Result<Pool> {
    let device = same_device(tensors)?;
    let win = parse_window(op, kernel_size, stride, padding, dilation)?;
    let nd = input.dim();
    if nd != 3 && nd != 4 {
        return Err(invalid(
            "non-empty 3D or 4D (batch mode) tensor expected for input",
        ));
    }
    let s = input.sizes();
    let (c, h, w) = (s[nd - 3], s[nd - 2], s[nd - 1]);
    let n = if nd == 4 { s[0] } else { 1 };
    let oh = pooling_output_shape(op, h, win.kh, win.ph, win.sh, win.dh, ceil_mode)?;
    let ow = pooling_output_shape(op, w, win.kw, win.pw, win.sw, win.dw, ceil_mode)?;
    // pool2d_shape_check.
    if win.kw <= 0 || win.kh <= 0 {
        return Err(invalid(format!(
            "kernel size should be greater than zero, but got kH: {} kW: {}",
            win.kh, win.kw
        )));
    }
    if win.sw <= 0 || win.sh <= 0 {
        return Err(invalid(format!(
            "stride should be greater than zero, but got dH: {} dW: {}",
            win.sh, win.sw
        )));
    }
    if win.dh <= 0 || win.dw <= 0 {
        return Err(invalid(format!(
            "dilation should be greater than zero, but got dilationH: {} dilationW: {}",
            win.dh, win.dw
        )));
    }
    let valid_dims = s[1] != 0 && s[2] != 0;
    if !((nd == 3 && s[0] != 0 && valid_dims) || (nd == 4 && valid_dims && s[3] != 0)) {
        return Err(invalid(format!(
            "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, \
             but got:{s:?}"
        )));
    }
    if win.kw / 2 < win.pw || win.kh / 2 < win.ph {
        return Err(invalid(format!(
            "pad should be smaller than or equal to half of kernel size, but got padW = {}, \
             padH = {}, kW = {}, kH = {}",
            win.pw, win.ph, win.kw, win.kh
        )));
    }
    if ow < 1 || oh < 1 {
        return Err(invalid(format!(
            "Given input size: ({c}x{h}x{w}). Calculated output size: ({c}x{oh}x{ow}). Output \
             size is too small"
        )));
    }
    let mut out_shape = s[..nd - 2].to_vec();
    out_shape.extend([oh, ow]);
    Ok(Pool {
        win,
        planes: saturated_usize(n.saturating_mul(c)),
        plane_in: saturated_usize(h.saturating_mul(w)),
        plane_out: saturated_usize(oh.saturating_mul(ow)),
        h,
        w,
        oh,
        ow,
        out_shape,
        device,
    })
}

/// `v` as a `usize`, saturated (a negative value gives `usize::MAX`).
pub fn saturated_usize(v: i64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

/// PyTorch's `check_dim_size`.
pub fn check_dim_size(t: &Tensor, dim: usize, at: usize, size: i64) -> Result<()> {
    if t.dim() != dim || t.sizes()[at] != size {
        let got = t.sizes().get(at).copied().unwrap_or(-1);
        return Err(invalid(format!(
            "Expected a tensor of dimension {dim} and tensor.size[{at}] == {size} but got: \
             dimension {} and tensor.size[{at}] = {got}",
            t.dim()
        )));
    }
    Ok(())
}

/// The memory format of a 2-d pooling's outputs: channels-last when a 4-d input suggests it
/// (PyTorch's `input.suggest_memory_format()`), else contiguous.
pub fn pool_output_format(input: &Tensor) -> MemoryFormat {
    if input.dim() == 4 && input.suggest_memory_format() == MemoryFormat::ChannelsLast {
        MemoryFormat::ChannelsLast
    } else {
        MemoryFormat::Contiguous
    }
}

/// An output of `sizes` in `format`.
fn pooled(
    sizes: &[i64],
    dtype: ScalarType,
    device: Device,
    format: MemoryFormat,
) -> Result<MetaOutput> {
    Ok(MetaOutput {
        strides: format.strides(sizes)?,
        sizes: DimVec::from_slice(sizes),
        dtype,
        device,
    })
}

/// `max_pool2d_with_indices` (and `max_pool2d_with_indices.out`): the maxima and their
/// `Long` indices, `(N,) C, OH, OW`, in the input's memory format, with the checked window
/// geometry the CPU kernel reuses (Note [Precomputed values]).
pub fn max_pool2d_with_indices(
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
    _outputs: Option<[&Tensor; 2]>,
) -> Result<([MetaOutput; 2], Pool)> {
    let p = pool2d_geometry(
        "max_pool2d",
        &[self_],
        self_,
        kernel_size,
        stride,
        padding,
        dilation,
        ceil_mode,
    )?;
    let format = pool_output_format(self_);
    let values = pooled(&p.out_shape, self_.dtype(), p.device, format)?;
    let indices = pooled(&p.out_shape, ScalarType::Long, p.device, format)?;
    Ok(([values, indices], p))
}

/// A pooling backward's `grad_output` must have `self`'s dtype (the 2-d and 3-d kernels'
/// `check_dim_size`-style check, PyTorch's message).
pub fn check_grad_output_dtype(grad_output: &Tensor, self_: &Tensor) -> Result<()> {
    if grad_output.dtype() != self_.dtype() {
        return Err(invalid(format!(
            "expected dtype {} for `gradOutput` but got dtype {}",
            self_.dtype().type_meta_name(),
            grad_output.dtype().type_meta_name()
        )));
    }
    Ok(())
}

/// `grad_output` (and `indices`, when given) against the pooled sizes of `self_`
/// (`max_pool2d_backward_shape_check`, `avg_pool2d_backward_shape_check`).
fn check_backward_sizes(p: &Pool, self_: &Tensor, grads: &[&Tensor]) -> Result<()> {
    let nd = self_.dim();
    let s = self_.sizes();
    for t in grads {
        if nd == 4 {
            check_dim_size(t, nd, 0, s[0])?;
        }
        check_dim_size(t, nd, nd - 3, s[nd - 3])?;
        check_dim_size(t, nd, nd - 2, p.oh)?;
        check_dim_size(t, nd, nd - 1, p.ow)?;
    }
    Ok(())
}

/// `max_pool2d_with_indices_backward` (and `.grad_input`): `self`'s sizes in its memory
/// format, with the checked window geometry (Note [Precomputed values]).
#[allow(clippy::too_many_arguments)]
pub fn max_pool2d_with_indices_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
    indices: &Tensor,
    _grad_input: Option<&Tensor>,
) -> Result<(MetaOutput, Pool)> {
    let p = pool2d_geometry(
        "max_pool2d",
        &[grad_output, self_, indices],
        self_,
        kernel_size,
        stride,
        padding,
        dilation,
        ceil_mode,
    )?;
    check_grad_output_dtype(grad_output, self_)?;
    check_backward_sizes(&p, self_, &[grad_output, indices])?;
    let output = pooled(
        self_.sizes(),
        self_.dtype(),
        p.device,
        pool_output_format(self_),
    )?;
    Ok((output, p))
}

/// The argument checks `avg_pool2d` and its backward share: the checked geometry.
#[allow(clippy::too_many_arguments)]
pub fn avg_pool2d_geometry(
    tensors: &[&Tensor],
    input: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    ceil_mode: bool,
    divisor_override: Option<i64>,
) -> Result<Pool> {
    // `input.size(-3)`: "Dimension out of range" below 3 dims.
    wrap_dim(-3, input.dim())?;
    if divisor_override == Some(0) {
        return Err(invalid("divisor must be not zero"));
    }
    if kernel_size.is_empty() {
        return Err(invalid(
            "avg_pool2d: kernel_size must either be a single int, or a tuple of two ints",
        ));
    }
    pool2d_geometry(
        "avg_pool2d",
        tensors,
        input,
        kernel_size,
        stride,
        padding,
        &[1],
        ceil_mode,
    )
}

/// `avg_pool2d` (and `avg_pool2d.out`): `(N,) C, OH, OW` in the input's memory format, with
/// the checked window geometry the CPU kernel reuses (PyTorch's `precomputed:` values, Note
/// [Precomputed values]).
#[allow(clippy::too_many_arguments)]
pub fn avg_pool2d(
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    ceil_mode: bool,
    _count_include_pad: bool,
    divisor_override: Option<i64>,
    _out: Option<&Tensor>,
) -> Result<(MetaOutput, Pool)> {
    let p = avg_pool2d_geometry(
        &[self_],
        self_,
        kernel_size,
        stride,
        padding,
        ceil_mode,
        divisor_override,
    )?;
    let output = pooled(
        &p.out_shape,
        self_.dtype(),
        p.device,
        pool_output_format(self_),
    )?;
    Ok((output, p))
}

/// `avg_pool2d_backward` (and `.grad_input`): `self`'s sizes in its memory format, with the
/// checked window geometry (Note [Precomputed values]).
#[allow(clippy::too_many_arguments)]
pub fn avg_pool2d_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    ceil_mode: bool,
    _count_include_pad: bool,
    divisor_override: Option<i64>,
    _grad_input: Option<&Tensor>,
) -> Result<(MetaOutput, Pool)> {
    let p = avg_pool2d_geometry(
        &[grad_output, self_],
        self_,
        kernel_size,
        stride,
        padding,
        ceil_mode,
        divisor_override,
    )?;
    check_backward_sizes(&p, self_, &[grad_output])?;
    let output = pooled(
        self_.sizes(),
        self_.dtype(),
        p.device,
        pool_output_format(self_),
    )?;
    Ok((output, p))
}
