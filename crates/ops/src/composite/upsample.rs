//! Upsampling as PyTorch decomposes it (CompositeImplicitAutograd): the `.vec` overloads of
//! `upsample_nearest2d` and `upsample_bilinear2d`, which take either the output size or scale
//! factors and call the sized operators.

use switchboard_dispatcher::Result;
use switchboard_tensor::Tensor;

use super::error;

/// PyTorch's `TORCH_CHECK(cond)` message without a text of its own.
fn unexplained_check(cond: &str) -> String {
    format!(
        "Expected {cond} to be true, but got false.  (Could this error message be improved?  \
         If so, please report an enhancement request to PyTorch.)"
    )
}

/// PyTorch's `compute_output_size`: the output's spatial sizes from exactly one of
/// `output_size` (one per spatial dim) and `scale_factors` (each spatial size times its
/// factor, floored).
pub(crate) fn upsample_output_size(
    input: &Tensor,
    output_size: Option<&[i64]>,
    scale_factors: Option<&[f64]>,
) -> Result<Vec<i64>> {
    let spatial = input.dim().saturating_sub(2);
    match (output_size, scale_factors) {
        (Some(size), None) => {
            if size.len() != spatial {
                return Err(error(unexplained_check(
                    "static_cast<int64_t>(output_size->size()) == spatial_dimensions",
                )));
            }
            Ok(size.to_vec())
        }
        (None, Some(scales)) => {
            if scales.len() != spatial {
                return Err(error(unexplained_check(
                    "static_cast<int64_t>(scale_factors->size()) == spatial_dimensions",
                )));
            }
            scales
                .iter()
                .zip(&input.sizes()[2..])
                .map(|(&f, &s)| {
                    let v = (s as f64 * f).floor();
                    // `as` saturates: a non-finite or huge size fails the operator's checks.
                    if v.is_finite() {
                        Ok(v as i64)
                    } else {
                        Err(error(format!(
                            "upsample: the scale factor {f} gives no finite output size for an \
                             input size of {s}"
                        )))
                    }
                })
                .collect()
        }
        _ => Err(error(
            "Must specify exactly one of output_size and scale_factors",
        )),
    }
}

/// `upsample_nearest2d.vec(Tensor input, SymInt[]? output_size, float[]? scale_factors)`:
/// `upsample_nearest2d` at the computed size, with the scale factors (when given) as its
/// scales.
pub fn upsample_nearest2d_vec(
    input: &Tensor,
    output_size: Option<&[i64]>,
    scale_factors: Option<&[f64]>,
) -> Result<Tensor> {
    let osize = upsample_output_size(input, output_size, scale_factors)?;
    let scale = |i: usize| scale_factors.map(|s| s[i]);
    crate::upsample_nearest2d_with(
        input,
        &osize,
        crate::UpsampleNearest2dOptions {
            scales_h: scale(0),
            scales_w: scale(1),
        },
    )
}

/// `upsample_bilinear2d.vec(Tensor input, SymInt[]? output_size, bool align_corners,
/// float[]? scale_factors)`: `upsample_bilinear2d` at the computed size, with the scale
/// factors (when given) as its scales.
pub fn upsample_bilinear2d_vec(
    input: &Tensor,
    output_size: Option<&[i64]>,
    align_corners: bool,
    scale_factors: Option<&[f64]>,
) -> Result<Tensor> {
    let osize = upsample_output_size(input, output_size, scale_factors)?;
    let scale = |i: usize| scale_factors.map(|s| s[i]);
    crate::upsample_bilinear2d_with(
        input,
        &osize,
        align_corners,
        crate::UpsampleBilinear2dOptions {
            scales_h: scale(0),
            scales_w: scale(1),
        },
    )
}
