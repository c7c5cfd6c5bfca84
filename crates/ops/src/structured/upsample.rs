//! The meta functions of the structured 2-d upsamplings of `UpSampleNearest2d.cpp` and
//! `UpSampleBilinear2d.cpp`: `upsample_nearest2d`, `upsample_bilinear2d` and their
//! backwards, with the geometry checks (`upsample_2d_common_check`) their CPU kernels share.

use switchboard_tensor::{Tensor, TensorError};

use super::{pool_output_format, MetaOutput, Result};

fn invalid(msg: impl Into<String>) -> TensorError {
    TensorError::invalid(msg)
}

/// The checked geometry of a 2-d upsampling: input and output sizes.
pub struct Upsample2d {
    /// `[N, C, H, W]` of the input.
    pub input: [i64; 4],
    /// `[N, C, OH, OW]` of the output.
    pub output: [i64; 4],
}

impl Upsample2d {
    /// Elements of an input plane.
    pub fn plane_in(&self) -> usize {
        (self.input[2] * self.input[3]) as usize
    }
    /// Elements of an output plane.
    pub fn plane_out(&self) -> usize {
        (self.output[2] * self.output[3]) as usize
    }
}

/// PyTorch's `upsample_2d_common_check`: two output sizes, four input sizes, all spatial sizes
/// positive.
fn common_check(input_size: &[i64], output_size: &[i64]) -> Result<Upsample2d> {
    if output_size.len() != 2 {
        return Err(invalid(format!(
            "It is expected output_size equals to 2, but got size {}",
            output_size.len()
        )));
    }
    let &[n, c, h, w] = input_size else {
        return Err(invalid(format!(
            "It is expected input_size equals to 4, but got size {}",
            input_size.len()
        )));
    };
    let (oh, ow) = (output_size[0], output_size[1]);
    if h <= 0 || w <= 0 || oh <= 0 || ow <= 0 {
        return Err(invalid(format!(
            "Input and output sizes should be greater than 0, but got input (H: {h}, W: {w}) \
             output (H: {oh}, W: {ow})"
        )));
    }
    if n < 0 || c < 0 {
        return Err(invalid(format!(
            "upsample: input_size must not be negative, but got {input_size:?}"
        )));
    }
    Ok(Upsample2d {
        input: [n, c, h, w],
        output: [n, c, oh, ow],
    })
}

/// The forward's checks (PyTorch's meta function): the common check, then a non-empty
/// `(C, H, W)`.
pub fn upsample2d_geometry(input: &Tensor, output_size: &[i64]) -> Result<Upsample2d> {
    let g = common_check(input.sizes(), output_size)?;
    if input.numel() == 0 && input.sizes()[1..].iter().product::<i64>() == 0 {
        return Err(invalid(format!(
            "Non-empty 4D data tensor expected but got a tensor with sizes {:?}",
            input.sizes()
        )));
    }
    Ok(g)
}

/// The backward's checks (PyTorch's meta function): the common check, then `grad_output`
/// shaped as the forward's output.
pub fn upsample2d_backward_geometry(
    grad_output: &Tensor,
    output_size: &[i64],
    input_size: &[i64],
) -> Result<Upsample2d> {
    let g = common_check(input_size, output_size)?;
    if grad_output.dim() != 4 {
        return Err(invalid(format!(
            "Expected grad_output to be a tensor of dimension 4 but got: dimension {}",
            grad_output.dim()
        )));
    }
    for (i, (&want, &got)) in g.output.iter().zip(grad_output.sizes()).enumerate() {
        if want != got {
            return Err(invalid(format!(
                "Expected grad_output to have the same shape as output; output.size({i}) = \
                 {want} but got grad_output.size({i}) = {got}"
            )));
        }
    }
    Ok(g)
}

/// An output of `sizes` in the memory format `like` suggests (channels-last for a
/// channels-last input).
fn upsampled(sizes: &[i64; 4], like: &Tensor) -> Result<MetaOutput> {
    Ok(MetaOutput {
        strides: pool_output_format(like).strides(sizes)?,
        sizes: sizes[..].into(),
        dtype: like.dtype(),
        device: like.device(),
    })
}

/// `upsample_nearest2d` (and `.out`).
pub fn upsample_nearest2d(
    self_: &Tensor,
    output_size: &[i64],
    _scales_h: Option<f64>,
    _scales_w: Option<f64>,
    _out: Option<&Tensor>,
) -> Result<MetaOutput> {
    upsampled(&upsample2d_geometry(self_, output_size)?.output, self_)
}

/// `upsample_nearest2d_backward` (and `.grad_input`).
pub fn upsample_nearest2d_backward(
    grad_output: &Tensor,
    output_size: &[i64],
    input_size: &[i64],
    _scales_h: Option<f64>,
    _scales_w: Option<f64>,
    _grad_input: Option<&Tensor>,
) -> Result<MetaOutput> {
    let g = upsample2d_backward_geometry(grad_output, output_size, input_size)?;
    upsampled(&g.input, grad_output)
}

/// `upsample_bilinear2d` (and `.out`).
pub fn upsample_bilinear2d(
    self_: &Tensor,
    output_size: &[i64],
    _align_corners: bool,
    _scales_h: Option<f64>,
    _scales_w: Option<f64>,
    _out: Option<&Tensor>,
) -> Result<MetaOutput> {
    upsampled(&upsample2d_geometry(self_, output_size)?.output, self_)
}

/// `upsample_bilinear2d_backward` (and `.grad_input`).
pub fn upsample_bilinear2d_backward(
    grad_output: &Tensor,
    output_size: &[i64],
    input_size: &[i64],
    _align_corners: bool,
    _scales_h: Option<f64>,
    _scales_w: Option<f64>,
    _grad_input: Option<&Tensor>,
) -> Result<MetaOutput> {
    let g = upsample2d_backward_geometry(grad_output, output_size, input_size)?;
    upsampled(&g.input, grad_output)
}
