//! Reductions PyTorch defines by decomposition (CompositeImplicitAutograd).

use switchboard_dispatcher::Result;
use switchboard_tensor::Tensor;

/// `var`: `var.correction` over every dimension, with correction 1 when `unbiased`.
pub fn var(self_: &Tensor, unbiased: bool) -> Result<Tensor> {
    crate::var_correction_with(
        self_,
        crate::VarCorrectionOptions::default().correction(i64::from(unbiased)),
    )
}

/// `var.dim`: `var.correction` over `dim`, with correction 1 when `unbiased`.
pub fn var_dim(
    self_: &Tensor,
    dim: Option<&[i64]>,
    unbiased: bool,
    keepdim: bool,
) -> Result<Tensor> {
    crate::var_correction_with(
        self_,
        crate::VarCorrectionOptions {
            dim,
            correction: Some(i64::from(unbiased).into()),
            keepdim,
        },
    )
}
