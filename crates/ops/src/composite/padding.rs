//! `pad` (PadNd.cpp, CompositeImplicitAutograd): the padding modes over their operators.

use switchboard_dispatcher::Result;
use switchboard_tensor::Tensor;

use super::error;

/// `pad(Tensor self, SymInt[] pad, str mode="constant", float? value=None)`: `constant`
/// pads with `value` (0 when `None`) through `constant_pad_nd`; `reflect` and `replicate`
/// call the `reflection_pad{1,2,3}d` / `replication_pad{2,3}d` operator matching the number of
/// padded dimensions, and take no value.
pub fn pad(self_: &Tensor, pad: &[i64], mode: &str, value: Option<f64>) -> Result<Tensor> {
    if !matches!(mode, "reflect" | "constant" | "replicate" | "circular") {
        return Err(error(format!("Unrecognised padding mode {mode}")));
    }
    let input_dim = self_.dim();
    if !pad.len().is_multiple_of(2) {
        return Err(error("Padding length must be divisible by 2"));
    }
    if pad.len() > input_dim * 2 {
        return Err(error(format!(
            "Padding length should be less than or equal to two times the input dimension but \
             got padding length {} and input of dimension {input_dim}",
            pad.len()
        )));
    }
    if mode == "constant" {
        return crate::constant_pad_nd_with(
            self_,
            pad,
            crate::ConstantPadNdOptions::default().value(value.unwrap_or(0.0)),
        );
    }
    if value.is_some_and(|v| v != 0.0) {
        return Err(error(format!(
            "Padding mode \"{mode}\" doesn't take in value argument"
        )));
    }
    match (mode, pad.len() / 2, input_dim) {
        ("reflect", 1, 2 | 3) => crate::reflection_pad1d(self_, pad),
        ("reflect", 2, 3 | 4) => crate::reflection_pad2d(self_, pad),
        ("reflect", 3, 4 | 5) => crate::reflection_pad3d(self_, pad),
        ("replicate", 2, 3 | 4) => crate::replication_pad2d(self_, pad),
        ("replicate", 3, 4 | 5) => crate::replication_pad3d(self_, pad),
        ("replicate", 1, 2 | 3) | ("circular", _, _) => Err(error(format!(
            "pad: mode \"{mode}\" with {} padded dimensions needs an operator Switchboard does \
             not have yet (replication_pad1d, _pad_circular)",
            pad.len() / 2
        ))),
        _ => Err(error(
            "Only 2D, 3D, 4D, 5D padding with non-constant padding are supported for now",
        )),
    }
}
