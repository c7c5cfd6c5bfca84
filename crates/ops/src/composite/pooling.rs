//! Pooling as PyTorch decomposes it (CompositeImplicitAutograd): `adaptive_avg_pool2d`,
//! `adaptive_avg_pool3d` and `max_pool3d`.

use switchboard_dispatcher::Result;
use switchboard_tensor::Tensor;

use super::error;

/// `adaptive_avg_pool2d` (what `torch.nn.functional.adaptive_avg_pool2d` calls): a mean over
/// the last two dims (kept) for a 1x1 output, as PyTorch's decomposition, else
/// `_adaptive_avg_pool2d`.
pub fn adaptive_avg_pool2d(self_: &Tensor, output_size: &[i64]) -> Result<Tensor> {
    let &[oh, ow] = output_size else {
        return Err(error("adaptive_avg_pool2d: output_size must be 2"));
    };
    if oh < 0 || ow < 0 {
        return Err(error(format!(
            "adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0 \
             but received {{{oh}, {ow}}}"
        )));
    }
    if (oh, ow) == (1, 1) {
        return crate::mean_dim_with(
            self_,
            Some(&[-1, -2]),
            crate::MeanDimOptions::default().keepdim(true),
        );
    }
    crate::_adaptive_avg_pool2d(self_, output_size)
}

/// `adaptive_avg_pool3d` (what `torch.nn.functional.adaptive_avg_pool3d` calls): a mean over
/// the last three dims (kept) for a 1x1x1 output, as PyTorch's decomposition, else
/// `_adaptive_avg_pool3d`.
pub fn adaptive_avg_pool3d(self_: &Tensor, output_size: &[i64]) -> Result<Tensor> {
    let &[ot, oh, ow] = output_size else {
        return Err(error("adaptive_avg_pool3d: output_size must be 3"));
    };
    if ot < 0 || oh < 0 || ow < 0 {
        return Err(error(format!(
            "adaptive_avg_pool3d: elements of output_size must be greater than or equal to 0 \
             but received {{{ot}, {oh},{ow}}}"
        )));
    }
    if (ot, oh, ow) == (1, 1, 1) {
        return crate::mean_dim_with(
            self_,
            Some(&[-1, -2, -3]),
            crate::MeanDimOptions::default().keepdim(true),
        );
    }
    crate::_adaptive_avg_pool3d(self_, output_size)
}

/// `max_pool3d`: the values of `max_pool3d_with_indices`.
pub fn max_pool3d(
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
) -> Result<Tensor> {
    Ok(crate::max_pool3d_with_indices_with(
        self_,
        kernel_size,
        crate::MaxPool3dWithIndicesOptions::default()
            .stride(stride)
            .padding(padding)
            .dilation(dilation)
            .ceil_mode(ceil_mode),
    )?
    .0)
}
