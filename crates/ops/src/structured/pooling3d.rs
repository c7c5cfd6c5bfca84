//! The window geometry of the 3-d poolings (`Pool.h`'s `pool3d_shape_check` and the output
//! sizes of `AveragePool3d.cpp` and `DilatedMaxPool3d.cpp`), which the CPU kernels and their
//! Meta paths share, and the meta functions of the structured `avg_pool3d` and its backward
//! (`TORCH_META_FUNC(avg_pool3d)`, `TORCH_META_FUNC(avg_pool3d_backward)`); the per-dim
//! window arithmetic is the 2-d poolings' ([`pooling_output_shape`],
//! [`first_inside`](super::first_inside), [`avg_pool_window`](super::avg_pool_window)).

use switchboard_tensor::{Device, DimVec, MemoryFormat, Tensor, TensorError};

use super::{
    check_dim_size, pool_window_args, pooling_output_shape, same_device, saturated_usize,
    MetaOutput, Result,
};

fn invalid(msg: impl Into<String>) -> TensorError {
    TensorError::invalid(msg)
}

/// The checked geometry of a 3-d pooling: the window, the input and output `(T, H, W)`, the
/// output shape and the device.
#[derive(Clone, Debug)]
pub struct Pool3d {
    /// Kernel `(T, H, W)`.
    pub kernel: [i64; 3],
    /// Stride `(T, H, W)`.
    pub stride: [i64; 3],
    /// Padding `(T, H, W)`.
    pub padding: [i64; 3],
    /// Dilation `(T, H, W)`.
    pub dilation: [i64; 3],
    /// Input `(T, H, W)`.
    pub input: [i64; 3],
    /// Output `(T, H, W)`.
    pub output: [i64; 3],
    /// The output's sizes.
    pub out_shape: Vec<i64>,
    /// The device of the tensors.
    pub device: Device,
}

impl Pool3d {
    /// Elements of an input plane (saturated: only used when the input has elements).
    pub fn plane_in(&self) -> usize {
        saturated_usize(self.input.iter().product())
    }

    /// Elements of an output plane (as [`Pool3d::plane_in`]).
    pub fn plane_out(&self) -> usize {
        saturated_usize(self.output.iter().product())
    }
}

/// The `kernel_size`, `stride`, `padding` and `dilation` of 3-d pooling `op`
/// ([`pool_window_args`]), then PyTorch's check that `input` is 4-d or 5-d.
pub fn pool3d_window(
    op: &str,
    either: &str,
    input: &Tensor,
    window: [&[i64]; 3],
    dilation: Option<&[i64]>,
) -> Result<[[i64; 3]; 4]> {
    let window = pool_window_args(op, either, window, dilation)?;
    let nd = input.dim();
    if nd != 4 && nd != 5 {
        return Err(invalid(
            "non-empty 4D or 5D (batch mode) tensor expected for input",
        ));
    }
    Ok(window)
}

/// The checked geometry of a 3-d pooling of a 4-d or 5-d `input` on `device` with the parsed
/// window: the output sizes computed (`pooling_output_shape` of `op`) unless given (a
/// backward reads them from its gradient), then `pool3d_shape_check` (named `check_op` in its
/// messages; `check_input_size` for average pooling, whose input may not be smaller than its
/// kernel).
#[allow(clippy::too_many_arguments)]
pub fn pool3d_geometry(
    op: &str,
    check_op: &str,
    input: &Tensor,
    device: Device,
    [kernel, stride, padding, dilation]: [[i64; 3]; 4],
    ceil_mode: bool,
    output: Option<[i64; 3]>,
    check_input_size: bool,
) -> Result<Pool3d> {
    let s = input.sizes();
    let nd = s.len();
    let spatial = [s[nd - 3], s[nd - 2], s[nd - 1]];
    let output = match output {
        Some(o) => o,
        None => {
            let mut o = [0; 3];
            for d in 0..3 {
                o[d] = pooling_output_shape(
                    op,
                    spatial[d],
                    kernel[d],
                    padding[d],
                    stride[d],
                    dilation[d],
                    ceil_mode,
                )?;
            }
            o
        }
    };
    let mut out_shape = s[..nd - 3].to_vec();
    out_shape.extend(output);
    let g = Pool3d {
        kernel,
        stride,
        padding,
        dilation,
        input: spatial,
        output,
        out_shape,
        device,
    };
    pool3d_shape_check(check_op, input, &g, check_input_size)?;
    Ok(g)
}

/// PyTorch's `pool3d_shape_check`: the window, the input's sizes (the input no smaller than
/// the kernel with `check_input_size`), the padding and the output.
fn pool3d_shape_check(op: &str, input: &Tensor, g: &Pool3d, check_input_size: bool) -> Result<()> {
    let slices = input.sizes()[input.dim() - 4];
    let [kt, kh, kw] = g.kernel;
    let [dt, dh, dw] = g.stride;
    let [pt, ph, pw] = g.padding;
    let [it, ih, iw] = g.input;
    let [ot, oh, ow] = g.output;
    if kt <= 0 || kw <= 0 || kh <= 0 {
        return Err(invalid(format!(
            "kernel size should be greater than zero, but got kT: {kt} kH: {kh} kW: {kw}"
        )));
    }
    if dt <= 0 || dw <= 0 || dh <= 0 {
        return Err(invalid(format!(
            "stride should be greater than zero, but got dT: {dt} dH: {dh} dW: {dw}"
        )));
    }
    let [lt, lh, lw] = g.dilation;
    if lt <= 0 || lw <= 0 || lh <= 0 {
        return Err(invalid(format!(
            "dilation should be greater than zero, but got dilationT: {lt} dilationH: {lh} \
             dilationW: {lw}"
        )));
    }
    let nd = input.dim();
    let s = input.sizes();
    for (i, &size) in s.iter().enumerate() {
        if nd == 5 && i == 0 {
            continue;
        }
        if size == 0 {
            return Err(invalid(format!(
                "{op}: Expected input to have non-zero size for non-batch dimensions, but input \
                 has sizes {s:?} with dimension {i} being empty"
            )));
        }
    }
    if check_input_size && (it < kt || ih < kh || iw < kw) {
        return Err(invalid(format!(
            "input image (T: {it} H: {ih} W: {iw}) smaller than kernel size (kT: {kt} kH: {kh} \
             kW: {kw})"
        )));
    }
    if kt / 2 < pt || kw / 2 < pw || kh / 2 < ph {
        return Err(invalid(format!(
            "pad should be smaller than or equal to half of kernel size, but got kT: {kt} kW: \
             {kw} kH: {kh} padT: {pt} padW: {pw} padH: {ph}"
        )));
    }
    if ot < 1 || ow < 1 || oh < 1 {
        return Err(invalid(format!(
            "Given input size: ({slices}x{it}x{ih}x{iw}). Calculated output size: \
             ({slices}x{ot}x{oh}x{ow}). Output size is too small"
        )));
    }
    Ok(())
}

/// The argument checks `avg_pool3d` and its backward share (`TORCH_META_FUNC(avg_pool3d)`,
/// named `check_op` in the `pool3d_shape_check` messages): the checked geometry.
#[allow(clippy::too_many_arguments)]
fn avg_pool3d_geometry(
    check_op: &str,
    tensors: &[&Tensor],
    input: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    ceil_mode: bool,
    divisor_override: Option<i64>,
) -> Result<Pool3d> {
    let device = same_device(tensors)?;
    let window = pool3d_window(
        "avg_pool3d",
        "",
        input,
        [kernel_size, stride, padding],
        None,
    )?;
    if divisor_override == Some(0) {
        return Err(invalid("divisor must be not zero"));
    }
    pool3d_geometry(
        "avg_pool3d",
        check_op,
        input,
        device,
        window,
        ceil_mode,
        None,
        true,
    )
}

/// A contiguous output of `sizes`: PyTorch's 3-d average pooling gives one whatever the
/// input's layout (`set_output_raw_strided` with no strides, a channels-last-3d input
/// included).
fn contiguous(sizes: &[i64], input: &Tensor, device: Device) -> Result<MetaOutput> {
    Ok(MetaOutput {
        strides: MemoryFormat::Contiguous.strides(sizes)?,
        sizes: DimVec::from_slice(sizes),
        dtype: input.dtype(),
        device,
    })
}

/// `avg_pool3d` (and `avg_pool3d.out`): `(N,) C, OT, OH, OW`, contiguous, with the checked
/// window geometry the CPU kernel reuses (Note [Precomputed values]).
#[allow(clippy::too_many_arguments)]
pub fn avg_pool3d(
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    ceil_mode: bool,
    _count_include_pad: bool,
    divisor_override: Option<i64>,
    _out: Option<&Tensor>,
) -> Result<(MetaOutput, Pool3d)> {
    let g = avg_pool3d_geometry(
        "avg_pool3d()",
        &[self_],
        self_,
        kernel_size,
        stride,
        padding,
        ceil_mode,
        divisor_override,
    )?;
    Ok((contiguous(&g.out_shape, self_, g.device)?, g))
}

/// `avg_pool3d_backward` (and `.grad_input`): `self`'s sizes, contiguous, once `grad_output`
/// has the pooled sizes (`avg_pool3d_backward_shape_check`: the batch size is not checked),
/// with the checked window geometry (Note [Precomputed values]).
#[allow(clippy::too_many_arguments)]
pub fn avg_pool3d_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    ceil_mode: bool,
    _count_include_pad: bool,
    divisor_override: Option<i64>,
    _grad_input: Option<&Tensor>,
) -> Result<(MetaOutput, Pool3d)> {
    let g = avg_pool3d_geometry(
        "avg_pool3d_backward()",
        &[grad_output, self_],
        self_,
        kernel_size,
        stride,
        padding,
        ceil_mode,
        divisor_override,
    )?;
    let nd = self_.dim();
    check_dim_size(grad_output, nd, nd - 4, self_.sizes()[nd - 4])?;
    for (d, &size) in g.output.iter().enumerate() {
        check_dim_size(grad_output, nd, nd - 3 + d, size)?;
    }
    Ok((contiguous(self_.sizes(), self_, g.device)?, g))
}
