//! PyTorch 2.15's autocast policies for the operators switchboard-ops has, written here
//! independently of the crate's tables so that the tests check the tables against them.
#![allow(dead_code)] // each target uses its own subset

use switchboard_autocast::CastPolicy::{self, Fp32, Fp32SetOptDtype, LowerPrecisionFp, Promote};

/// `AutocastCPU` (the `KERNEL_CPU` lines of `aten/src/ATen/autocast_mode.cpp`), each kind
/// confirmed by running the operator in a `torch.autocast("cpu", torch.bfloat16)` region of
/// torch 2.15: float32 inputs give bfloat16 (lower_precision_fp); bfloat16 inputs give float32
/// (fp32); bfloat16 inputs stay bfloat16 but bfloat16 with float32 give float32 (promote).
pub const CPU: &[(&str, CastPolicy)] = &[
    ("conv1d", LowerPrecisionFp),
    ("conv2d", LowerPrecisionFp),
    ("conv1d.padding", LowerPrecisionFp),
    ("conv2d.padding", LowerPrecisionFp),
    ("bmm", LowerPrecisionFp),
    ("mm", LowerPrecisionFp),
    ("addmm", LowerPrecisionFp),
    ("linear", LowerPrecisionFp),
    ("matmul", LowerPrecisionFp),
    ("scaled_dot_product_attention", LowerPrecisionFp),
    ("mse_loss", Fp32),
    ("nll_loss", Fp32),
    ("nll_loss2d", Fp32),
    ("cross_entropy_loss", Fp32),
    ("reflection_pad1d", Fp32),
    ("reflection_pad2d", Fp32),
    ("replication_pad2d", Fp32),
    ("replication_pad3d", Fp32),
    ("avg_pool3d", Fp32),
    ("adaptive_avg_pool3d", Fp32),
    ("max_pool3d", Fp32),
    ("cdist", Fp32),
    ("grid_sampler", Fp32),
    ("grid_sampler_2d", Fp32),
    ("prod", Fp32),
    ("prod.dim_int", Fp32),
    ("fft_fft", Fp32),
    ("fft_ifft", Fp32),
    ("fft_rfft", Fp32),
    ("fft_irfft", Fp32),
    ("fft_rfftn", Fp32),
    ("fft_irfftn", Fp32),
    ("view_as_complex", Fp32),
    ("stack", Promote),
    ("cat", Promote),
];

/// `AutocastCUDA`: the `AT_FORALL_LOWER_PRECISION_FP`, `AT_FORALL_FP32`,
/// `AT_FORALL_FP32_SET_OPT_DTYPE` and `AT_FORALL_PROMOTE` lists of torch 2.15's
/// `ATen/autocast_mode.h` (the CUDA registrations expand them).
pub const CUDA: &[(&str, CastPolicy)] = &[
    ("conv1d", LowerPrecisionFp),
    ("conv2d", LowerPrecisionFp),
    ("convolution", LowerPrecisionFp),
    ("addmm", LowerPrecisionFp),
    ("matmul", LowerPrecisionFp),
    ("mm", LowerPrecisionFp),
    ("linear", LowerPrecisionFp),
    ("bmm", LowerPrecisionFp),
    ("einsum", LowerPrecisionFp),
    ("scaled_dot_product_attention", LowerPrecisionFp),
    ("exp", Fp32),
    ("log", Fp32),
    ("rsqrt", Fp32),
    ("pow.Tensor_Scalar", Fp32),
    ("pow.Tensor_Tensor", Fp32),
    ("pow.Scalar", Fp32),
    ("layer_norm", Fp32),
    ("native_layer_norm", Fp32),
    ("group_norm", Fp32),
    ("nll_loss", Fp32),
    ("nll_loss2d", Fp32),
    ("mse_loss", Fp32),
    ("acos", Fp32),
    ("asin", Fp32),
    ("cosh", Fp32),
    ("expm1", Fp32),
    ("log10", Fp32),
    ("log2", Fp32),
    ("log1p", Fp32),
    ("reciprocal", Fp32),
    ("sinh", Fp32),
    ("tan", Fp32),
    ("upsample_nearest2d", Fp32),
    ("upsample_bilinear2d", Fp32),
    ("pdist", Fp32),
    ("cdist", Fp32),
    ("grid_sampler", Fp32),
    ("softmax.int", Fp32SetOptDtype),
    ("log_softmax.int", Fp32SetOptDtype),
    ("sum", Fp32SetOptDtype),
    ("sum.dim_IntList", Fp32SetOptDtype),
    ("prod", Fp32SetOptDtype),
    ("prod.dim_int", Fp32SetOptDtype),
    ("cumsum", Fp32SetOptDtype),
    ("addcdiv", Promote),
    ("addcmul", Promote),
    ("scatter_add", Promote),
    ("index_put", Promote),
    ("atan2", Promote),
];

/// The policy `list` gives operator `name` (`name.overload`), if any.
pub fn policy_in(list: &[(&str, CastPolicy)], name: &str) -> Option<CastPolicy> {
    list.iter().find(|(n, _)| *n == name).map(|(_, p)| *p)
}
