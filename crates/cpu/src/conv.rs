//! Convolutions: `convolution` and `convolution_backward` for 1-d and 2-d inputs (batched or
//! not), with groups, stride, padding and dilation, via im2col + GEMM
//! ([`gemm_float`](crate::linalg)). Transposed convolutions are not implemented.

use switchboard_tensor::RawOps;
use switchboard_tensor::{CheckedSize, Device, ScalarType, Tensor};

use crate::copy::cast;
use crate::error::{check_cpu_or_meta, invalid, not_implemented, same_device, shape_str, Result};
use crate::fresh_output::{fresh_output, FreshData};

#[path = "conv_kernels.rs"]
mod kernels;
use kernels::{backward_impl, forward_impl, Geom};

/// PyTorch's `expand_param_if_needed`: a one-element list applies to every spatial dim.
fn expand_param(name: &str, p: &[i64], dim: usize) -> Result<Vec<i64>> {
    if p.len() == 1 {
        Ok(vec![p[0]; dim])
    } else if p.len() != dim {
        Err(invalid(format!(
            "expected {name} to be a single integer value or a list of {dim} values to match \
             the convolution dimensions, but got {name}={}",
            shape_str(p)
        )))
    } else {
        Ok(p.to_vec())
    }
}

/// The checked arguments of a convolution.
struct Conv {
    /// The input with a batch dimension.
    input: Tensor,
    /// Whether the caller's input had no batch dimension.
    unbatched: bool,
    geom: Geom,
    /// The output's shape (with the batch dimension).
    out_shape: Vec<i64>,
    device: Device,
}

/// PyTorch's `_convolution` argument checks (`check_shape_forward`,
/// `check_input_same_type_as_parameters`) and the output geometry.
#[allow(clippy::too_many_arguments)]
fn prepare(
    op: &str,
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    transposed: bool,
    output_padding: &[i64],
    groups: i64,
) -> Result<Conv> {
    let mut all = vec![input, weight];
    all.extend(bias);
    let device = same_device(&all)?;
    check_cpu_or_meta(op, device)?;
    let k = weight.dim();
    if k < 3 {
        return Err(invalid("weight should have at least three dimensions"));
    }
    if groups <= 0 {
        return Err(invalid("non-positive groups is not supported"));
    }
    let dim = k - 2;
    let stride = expand_param("stride", stride, dim)?;
    let padding = expand_param("padding", padding, dim)?;
    let dilation = expand_param("dilation", dilation, dim)?;
    let output_padding = expand_param("output_padding", output_padding, dim)?;
    if padding.iter().any(|&p| p < 0) {
        return Err(invalid("negative padding is not supported"));
    }
    if output_padding.iter().any(|&p| p < 0) {
        return Err(invalid("negative output_padding is not supported"));
    }
    if stride.iter().any(|&s| s <= 0) {
        return Err(invalid("non-positive stride is not supported"));
    }
    if dilation.iter().any(|&d| d < 1) {
        return Err(invalid("dilation should be greater than zero"));
    }
    // Unbatched input (as `conv1d`/`conv2d` accept): add the batch dimension.
    let unbatched = input.dim() + 1 == k;
    let input = if unbatched {
        input.unsqueeze(0)?
    } else {
        input.clone()
    };
    let ws = weight.sizes();
    let wstr = shape_str(ws);
    if input.dim() != k {
        return Err(invalid(format!(
            "Expected {k}-dimensional input for {k}-dimensional weight {wstr}, but got {}-dimensional input of size {} instead",
            input.dim(),
            shape_str(input.sizes())
        )));
    }
    if ws[0] < groups {
        return Err(invalid(format!(
            "Given groups={groups}, expected weight to be at least {groups} at dimension 0, but \
             got weight of size {wstr} instead"
        )));
    }
    if ws[0] % groups != 0 {
        return Err(invalid(format!(
            "Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, \
             but got weight of size [{wstr}] instead"
        )));
    }
    if transposed {
        return Err(invalid(format!(
            "{op}: transposed convolution is not implemented by the CPU kernels"
        )));
    }
    let is = input.sizes();
    let channels = (CheckedSize::new(ws[1]) * groups)
        .get(|| format!("{op}: the input channels of weight {wstr} with groups={groups}"))?;
    if is[1] != channels {
        return Err(invalid(format!(
            "Given groups={groups}, weight of size {wstr}, expected input{} to have {channels} \
             channels, but got {} channels instead",
            shape_str(is),
            is[1]
        )));
    }
    if let Some(b) = bias {
        if b.dim() != 1 || b.sizes()[0] != ws[0] {
            return Err(invalid(format!(
                "Given weight of size {wstr}, expected bias to be 1-dimensional with {} \
                 elements, but got bias of size {} instead",
                ws[0],
                shape_str(b.sizes())
            )));
        }
    }
    // Sizes from user input: checked (Note [Checked size arithmetic]).
    let padded = (0..dim)
        .map(|i| {
            (CheckedSize::new(is[i + 2]) + CheckedSize::new(padding[i]) * 2).get(|| {
                format!(
                    "{op}: the padded input size ({} + 2 * padding {})",
                    is[i + 2],
                    padding[i]
                )
            })
        })
        .collect::<Result<Vec<i64>>>()?;
    let kernel = (0..dim)
        .map(|i| {
            (CheckedSize::new(dilation[i]) * (CheckedSize::new(ws[i + 2]) - 1) + 1).get(|| {
                format!(
                    "{op}: the dilated kernel size (dilation {} * ({} - 1) + 1)",
                    dilation[i],
                    ws[i + 2]
                )
            })
        })
        .collect::<Result<Vec<i64>>>()?;
    if padded.iter().zip(&kernel).any(|(p, k)| p < k) {
        let join = |v: &[i64]| {
            v.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(" x ")
        };
        return Err(invalid(format!(
            "Calculated padded input size per channel: ({}). Kernel size: ({}). Kernel size \
             can't be greater than actual input size",
            join(&padded),
            join(&kernel)
        )));
    }
    // PyTorch's CPU convolution reads the bias check's dtypes by their TypeMeta names and
    // meets a weight of another dtype only in its kernel, as a typed read of the weight.
    if let Some(b) = bias.filter(|b| b.dtype() != input.dtype()) {
        return Err(invalid(format!(
            "Input type ({}) and bias type ({}) should be the same",
            input.dtype().type_meta_name(),
            b.dtype().type_meta_name()
        )));
    }
    if input.dtype() != weight.dtype() {
        return Err(invalid(format!(
            "expected scalar type {} but found {}",
            input.dtype().c10_name(),
            weight.dtype().c10_name()
        )));
    }
    if !input.dtype().is_floating_point() {
        return Err(not_implemented("slow_conv2d_cpu", input.dtype()));
    }
    if dim > 2 {
        return Err(invalid(format!(
            "{op}: only 1-d and 2-d convolutions are implemented by the CPU kernels, got a \
             {dim}-d one"
        )));
    }
    // In range: padded >= kernel >= 1 and stride >= 1.
    let out_sp: Vec<i64> = (0..dim)
        .map(|i| (padded[i] - kernel[i]) / stride[i] + 1)
        .collect();
    let mut out_shape = vec![is[0], ws[0]];
    out_shape.extend(&out_sp);
    // The im2col buffer of one image and group (`K x L`, Note [Convolution as im2col +
    // GEMM]) is sized by the user's shapes: its size must fit, and it is allocated fallibly.
    let cols = CheckedSize::product(
        std::iter::once(ws[1])
            .chain(ws[2..].iter().copied())
            .chain(out_sp.iter().copied()),
    )
    .get(|| format!("{op}: the im2col buffer size"))?;
    // A 1-d convolution is a 2-d one of height 1 (Note [Convolution as im2col + GEMM]).
    let two = |v: &[i64], one: i64| -> [usize; 2] {
        if dim == 1 {
            [one as usize, v[0] as usize]
        } else {
            [v[0] as usize, v[1] as usize]
        }
    };
    let [h, w] = two(&is[2..], 1);
    let [kh, kw] = two(&ws[2..], 1);
    let [sh, sw] = two(&stride, 1);
    let [ph, pw] = two(&padding, 0);
    let [dh, dw] = two(&dilation, 1);
    let [oh, ow] = two(&out_sp, 1);
    let geom = Geom {
        n: is[0] as usize,
        c_in: is[1] as usize,
        h,
        w,
        c_out: ws[0] as usize,
        kh,
        kw,
        sh,
        sw,
        ph,
        pw,
        dh,
        dw,
        oh,
        ow,
        groups: groups as usize,
        cols: cols as usize,
    };
    Ok(Conv {
        input,
        unbatched,
        geom,
        out_shape,
        device,
    })
}

/// Drops the batch dimension added for an unbatched input.
fn unbatch(t: Tensor, unbatched: bool) -> Result<Tensor> {
    if unbatched {
        t.squeeze_dim(0)
    } else {
        Ok(t)
    }
}

/// `convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding,
/// SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor`:
/// 1-d (`(N, C, W)`) and 2-d (`(N, C, H, W)`) convolutions, also of unbatched inputs
/// (`(C, W)`, `(C, H, W)`, as `conv1d`/`conv2d` accept), floating dtypes (Half and BFloat16
/// compute in f32). `transposed=true` fails as not implemented.
///
/// ```
/// use switchboard_tensor::Tensor;
/// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[1, 1, 4]).unwrap();
/// let w = Tensor::from_vec(vec![1.0f32, -1.0], &[1, 1, 2]).unwrap();
/// let y = switchboard_cpu::convolution(&x, &w, None, &[1], &[0], &[1], false, &[0], 1).unwrap();
/// assert_eq!(y.to_vec::<f32>().unwrap(), [-1.0, -1.0, -1.0]);
/// ```
#[allow(clippy::too_many_arguments)]
pub fn convolution(
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
    let conv = prepare(
        "convolution",
        input,
        weight,
        bias,
        stride,
        padding,
        dilation,
        transposed,
        output_padding,
        groups,
    )?;
    let dtype = input.dtype();
    if conv.device.is_meta() {
        let out = Tensor::empty_on(&conv.out_shape, dtype, conv.device)?;
        return unbatch(out, conv.unbatched);
    }
    let compute = if dtype == ScalarType::Double {
        ScalarType::Double
    } else {
        ScalarType::Float
    };
    let x = cast(&conv.input, compute)?.contiguous()?;
    let wt = cast(weight, compute)?.contiguous()?;
    let b = bias.map(|b| cast(b, compute)).transpose()?;
    // SAFETY: `forward_impl` writes every element (bias rows filled, or GEMMs that do not
    // read their destination, over every image, group and output channel); on an error the
    // tensor is dropped unread (Note [Fresh outputs]).
    let out_c = unsafe { fresh_output(&conv.out_shape, compute, conv.device)? };
    macro_rules! run {
        ($t:ty) => {{
            let (xs, ws) = (x.data::<$t>()?, wt.data::<$t>()?);
            let bv = b.as_ref().map(|b| b.to_vec::<$t>()).transpose()?;
            // SAFETY: a fresh output; only initialised values are stored through it.
            let mut os = unsafe { FreshData::<$t>::new(&out_c)? };
            forward_impl::<$t>(&xs, &ws, bv.as_deref(), &mut os, &conv.geom)?;
        }};
    }
    if compute == ScalarType::Double {
        run!(f64)
    } else {
        run!(f32)
    }
    let out = if compute == dtype {
        out_c
    } else {
        cast(&out_c, dtype)?
    };
    unbatch(out, conv.unbatched)
}

/// `convolution_backward(Tensor grad_output, Tensor input, Tensor weight, SymInt[]?
/// bias_sizes, SymInt[] stride, SymInt[] padding, SymInt[] dilation, bool transposed,
/// SymInt[] output_padding, SymInt groups, bool[3] output_mask) -> (Tensor, Tensor, Tensor)`:
/// the gradients with respect to the input, the weight and the bias (shape `[C_out]`) of
/// [`convolution`]. Where PyTorch returns an undefined tensor for an output that
/// `output_mask` does not ask for, this returns an empty (0-element, shape `[0]`) tensor of
/// the input's dtype. `bias_sizes` is only checked against the output channels.
#[allow(clippy::too_many_arguments)]
pub fn convolution_backward(
    grad_output: &Tensor,
    input: &Tensor,
    weight: &Tensor,
    bias_sizes: Option<&[i64]>,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    transposed: bool,
    output_padding: &[i64],
    groups: i64,
    output_mask: &[bool],
) -> Result<(Tensor, Tensor, Tensor)> {
    let op = "convolution_backward";
    same_device(&[grad_output, input, weight])?;
    if output_mask.len() != 3 {
        return Err(invalid(format!(
            "{op}: expected output_mask to have 3 elements, got {}",
            output_mask.len()
        )));
    }
    let conv = prepare(
        op,
        input,
        weight,
        None,
        stride,
        padding,
        dilation,
        transposed,
        output_padding,
        groups,
    )?;
    let go = if conv.unbatched && grad_output.dim() + 1 == conv.out_shape.len() {
        grad_output.unsqueeze(0)?
    } else {
        grad_output.clone()
    };
    if go.sizes() != conv.out_shape.as_slice() {
        return Err(invalid(format!(
            "{op}: expected grad_output of size {} (the convolution's output), but got {}",
            shape_str(&conv.out_shape),
            shape_str(grad_output.sizes())
        )));
    }
    if go.dtype() != input.dtype() {
        return Err(invalid(format!(
            "{op}: expected grad_output to have dtype {}, but got {}",
            input.dtype().c10_name(),
            go.dtype().c10_name()
        )));
    }
    let c_out = weight.sizes()[0];
    if let Some(bs) = bias_sizes.filter(|bs| *bs != [c_out]) {
        return Err(invalid(format!(
            "{op}: expected bias_sizes to be [{c_out}], got {}",
            shape_str(bs)
        )));
    }
    let (dtype, device) = (input.dtype(), conv.device);
    let make = |want: bool, shape: &[i64]| -> Result<Tensor> {
        if want {
            Tensor::zeros_on(shape, dtype, device)
        } else {
            Tensor::empty_on(&[0], dtype, device)
        }
    };
    let compute = if dtype == ScalarType::Double {
        ScalarType::Double
    } else {
        ScalarType::Float
    };
    // The input gradient is written in full by `backward_impl` (each image zeroed where it
    // is accumulated, while in cache), so it starts uninitialised when the kernel writes it
    // directly (Note [Fresh outputs]); Half and BFloat16 copy an f32 result into it.
    let gx = if !output_mask[0] {
        make(false, &[0])?
    } else if compute == dtype && !device.is_meta() {
        // SAFETY: `backward_impl` writes every element of `gx` (below: the mask asks for it
        // and the tensor is passed as the input gradient); on an error it is dropped unread.
        unsafe { fresh_output(conv.input.sizes(), dtype, device)? }
    } else {
        make(true, conv.input.sizes())?
    };
    let gw = make(output_mask[1], weight.sizes())?;
    let gb = make(output_mask[2], &[c_out])?;
    if !device.is_meta() && output_mask.iter().any(|&m| m) {
        let conv_to = |t: &Tensor| -> Result<Tensor> { cast(t, compute)?.contiguous() };
        let (go_c, x_c, w_c) = (conv_to(&go)?, conv_to(&conv.input)?, conv_to(weight)?);
        let outs: Vec<Tensor> = [&gx, &gw, &gb]
            .iter()
            .map(|t| {
                if compute == dtype {
                    Ok((*t).clone())
                } else {
                    Tensor::zeros_on(t.sizes(), compute, device)
                }
            })
            .collect::<Result<_>>()?;
        macro_rules! run {
            ($t:ty) => {{
                let (gos, xs, ws) = (go_c.data::<$t>()?, x_c.data::<$t>()?, w_c.data::<$t>()?);
                // SAFETY: `outs[0]` is the fresh `gx` or a zeroed f32 buffer; only initialised
                // values are stored through it.
                let mut gxs = unsafe { FreshData::<$t>::new(&outs[0])? };
                let mut gws = outs[1].data_mut::<$t>()?;
                let mut gbs = outs[2].data_mut::<$t>()?;
                backward_impl::<$t>(
                    &gos,
                    &xs,
                    &ws,
                    output_mask[0].then_some(&mut *gxs),
                    output_mask[1].then_some(&mut *gws),
                    output_mask[2].then_some(&mut *gbs),
                    &conv.geom,
                )?;
            }};
        }
        if compute == ScalarType::Double {
            run!(f64)
        } else {
            run!(f32)
        }
        if compute != dtype {
            for (dst, src) in [&gx, &gw, &gb].iter().zip(&outs) {
                if dst.numel() > 0 {
                    crate::copy::copy_into(dst, src)?;
                }
            }
        }
    }
    Ok((unbatch(gx, conv.unbatched && output_mask[0])?, gw, gb))
}

#[cfg(test)]
#[path = "conv_tests.rs"]
mod tests;
