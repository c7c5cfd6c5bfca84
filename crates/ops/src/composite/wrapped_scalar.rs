//! Scalar overloads PyTorch writes as CompositeExplicitAutograd kernels over their Tensor
//! overload, the number wrapped as a 0-dim tensor that promotes as a Python number does
//! (`wrapped_scalar_tensor`): `fmod.Scalar`, `remainder.Scalar`, `bitwise_and.Scalar`,
//! `bitwise_or.Scalar`, `bitwise_xor.Scalar`, with their `out=` and in-place forms.

use switchboard_dispatcher::Result;
use switchboard_tensor::{Scalar, Tensor};

macro_rules! wrapped_scalar_overloads {
    ($name:literal, $scalar:ident, $scalar_out:ident, $scalar_:ident =>
     $tensor:ident, $tensor_out:ident, $tensor_:ident) => {
        #[doc = concat!("`", $name, ".Scalar`: `", $name, ".Tensor` with `other` wrapped.")]
        pub fn $scalar(self_: &Tensor, other: Scalar) -> Result<Tensor> {
            crate::$tensor(self_, &Tensor::wrapped_scalar(other))
        }
        #[doc = concat!("`", $name, ".Scalar_out`: `", $name, ".Tensor_out` with `other` wrapped.")]
        pub fn $scalar_out(self_: &Tensor, other: Scalar, out: &Tensor) -> Result<Tensor> {
            crate::$tensor_out(self_, &Tensor::wrapped_scalar(other), out)
        }
        #[doc = concat!("`", $name, "_.Scalar`: `", $name, "_.Tensor` with `other` wrapped.")]
        pub fn $scalar_(self_: &Tensor, other: Scalar) -> Result<Tensor> {
            crate::$tensor_(self_, &Tensor::wrapped_scalar(other))
        }
    };
}

wrapped_scalar_overloads!("fmod", fmod_scalar, fmod_scalar_out, fmod_scalar_ =>
    fmod_tensor, fmod_tensor_out, fmod_tensor_);
wrapped_scalar_overloads!("remainder", remainder_scalar, remainder_scalar_out, remainder_scalar_ =>
    remainder_tensor, remainder_tensor_out, remainder_tensor_);
wrapped_scalar_overloads!("bitwise_and", bitwise_and_scalar, bitwise_and_scalar_out, bitwise_and_scalar_ =>
    bitwise_and, bitwise_and_tensor_out, bitwise_and_);
wrapped_scalar_overloads!("bitwise_or", bitwise_or_scalar, bitwise_or_scalar_out, bitwise_or_scalar_ =>
    bitwise_or, bitwise_or_tensor_out, bitwise_or_);
wrapped_scalar_overloads!("bitwise_xor", bitwise_xor_scalar, bitwise_xor_scalar_out, bitwise_xor_scalar_ =>
    bitwise_xor, bitwise_xor_tensor_out, bitwise_xor_);
