//! The meta functions of the binary math operators of `BinaryOps.cpp` beyond arithmetic:
//! `atan2` (PyTorch's `build_borrowing_binary_float_op`: integers compute in float) and the
//! remainders `fmod` and `remainder` (`build_borrowing_binary_op`); `pow` in its three
//! forms (`Pow.cpp`).

use switchboard_tensor::{
    contiguous_strides, result_type, Scalar, ScalarType, Tensor, TensorError,
};

use super::pointwise::binary_meta;
use super::{Elementwise, MetaOutput, Result};

binary_meta! {
    /// `atan2` (and `atan2_`, `atan2.out`).
    atan2(self_, other).int_to_float();
    /// `fmod.Tensor` (and `fmod_.Tensor`, `fmod.Tensor_out`).
    fmod_tensor(self_, other);
    /// `remainder.Tensor` (and `remainder_.Tensor`, `remainder.Tensor_out`).
    remainder_tensor(self_, other);
    /// `pow.Tensor_Tensor` (and `pow_.Tensor`, `pow.Tensor_Tensor_out`).
    pow_tensor_tensor(self_, exponent);
}

/// `pow.Tensor_Scalar` (and `pow_.Scalar`, `pow.Tensor_Scalar_out`): no negative integer
/// power of integers; an exponent the result's integer dtype cannot hold is refused (the
/// kernel's checked conversion, float and double results take it as a double); `self`'s
/// geometry in the dtype `self` and the exponent promote to.
pub fn pow_tensor_scalar(
    self_: &Tensor,
    exponent: Scalar,
    out: Option<&Tensor>,
) -> Result<MetaOutput> {
    if self_.dtype().is_integral(true) && exponent.is_integral(false) && exponent.to_i64() < 0 {
        return Err(TensorError::invalid(
            "Integers to negative integer powers are not allowed.",
        ));
    }
    let dtype = result_type(&[self_], &[exponent]).unwrap_or(self_.dtype());
    if !matches!(dtype, ScalarType::Float | ScalarType::Double) {
        exponent.check_fits(dtype)?;
    }
    let exponent = Tensor::wrapped_scalar(exponent);
    Elementwise::new(out, [self_, &exponent]).compute()
}

/// `pow.Scalar` (and `pow.Scalar_out`): a contiguous result of `exponent`'s sizes (PyTorch's
/// meta function does not follow the exponent's layout), in `out`'s dtype or the promoted one.
pub fn pow_scalar(self_: Scalar, exponent: &Tensor, out: Option<&Tensor>) -> Result<MetaOutput> {
    let dtype = match out {
        Some(o) => o.dtype(),
        None => result_type(&[exponent], &[self_]).unwrap_or(exponent.dtype()),
    };
    // A given output of the right sizes keeps its strides (torchgen's `resize_out`).
    let strides = match out {
        Some(o) if o.sizes() == exponent.sizes() => o.strides().into(),
        _ => contiguous_strides(exponent.sizes()),
    };
    Ok(MetaOutput {
        strides,
        sizes: exponent.sizes().into(),
        dtype,
        device: exponent.device(),
    })
}
