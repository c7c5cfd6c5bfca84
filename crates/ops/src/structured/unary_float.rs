//! The meta functions of the float unary operators of `UnaryOps.cpp` (`sin`, `acos`, `erf`,
//! `log1p`, `reciprocal`, ...): PyTorch's `build_borrowing_unary_float_op`, whose integer
//! and bool inputs compute in the default float dtype.

use switchboard_tensor::Tensor;

use super::pointwise::unary_meta;
use super::{Elementwise, MetaOutput, Result};

unary_meta! {
    /// `acos` (and `acos_`, `acos.out`).
    acos.int_to_float();
    /// `acosh`.
    acosh.int_to_float();
    /// `asin`.
    asin.int_to_float();
    /// `asinh`.
    asinh.int_to_float();
    /// `atan`.
    atan.int_to_float();
    /// `atanh`.
    atanh.int_to_float();
    /// `cos`.
    cos.int_to_float();
    /// `cosh`.
    cosh.int_to_float();
    /// `sin`.
    sin.int_to_float();
    /// `sinh`.
    sinh.int_to_float();
    /// `tan`.
    tan.int_to_float();
    /// `erf`.
    erf.int_to_float();
    /// `expm1`.
    expm1.int_to_float();
    /// `log10`.
    log10.int_to_float();
    /// `log1p`.
    log1p.int_to_float();
    /// `log2`.
    log2.int_to_float();
    /// `reciprocal`.
    reciprocal.int_to_float();
}
