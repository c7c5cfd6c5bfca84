//! The meta functions of PyTorch's structured pointwise operators (`TORCH_META_FUNC` in
//! `BinaryOps.cpp`, `UnaryOps.cpp`, `Activation.cpp`): an [`Elementwise`] geometry and the
//! operator's own argument checks. Each takes the functional overload's arguments and the
//! output when one is given (Note [Structured kernels]).

use switchboard_tensor::{Scalar, ScalarType, Tensor, TensorError};

use super::{Elementwise, MetaOutput, Result};

/// PyTorch's `alpha_check`, on the common dtype of `add`/`sub`.
pub fn alpha_check(dtype: ScalarType, alpha: Scalar) -> Result<()> {
    if alpha.is_boolean() && dtype != ScalarType::Bool {
        return Err(TensorError::invalid(
            "Boolean alpha only supported for Boolean results.",
        ));
    }
    if dtype.is_integral(true) && alpha.is_floating_point() {
        return Err(TensorError::invalid(
            "For integral input tensors, argument alpha must not be a floating point number.",
        ));
    }
    Ok(())
}

/// PyTorch's `sub_check`: no subtraction of bool tensors.
pub fn sub_check(a: &Tensor, b: &Tensor) -> Result<()> {
    if a.dtype() == ScalarType::Bool && b.dtype() == ScalarType::Bool {
        return Err(TensorError::invalid(
            "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` \
             or `logical_xor()` operator instead.",
        ));
    }
    if a.dtype() == ScalarType::Bool || b.dtype() == ScalarType::Bool {
        return Err(TensorError::invalid(
            "Subtraction, the `-` operator, with a bool tensor is not supported. If you are \
             trying to invert a mask, use the `~` or `logical_not()` operator instead.",
        ));
    }
    Ok(())
}

/// `div`'s rounding mode check.
pub fn check_rounding_mode(mode: Option<&str>) -> Result<()> {
    match mode {
        None | Some("trunc") | Some("floor") => Ok(()),
        Some(m) => Err(TensorError::invalid(format!(
            "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{m}'"
        ))),
    }
}

/// `gelu`'s `approximate` check.
pub fn check_gelu_approximate(approximate: &str) -> Result<()> {
    match approximate {
        "none" | "tanh" => Ok(()),
        _ => Err(TensorError::invalid(
            "approximate argument must be either none or tanh.",
        )),
    }
}

/// `add.Tensor` (and `add_.Tensor`, `add.out`).
#[inline]
pub fn add_tensor(
    self_: &Tensor,
    other: &Tensor,
    alpha: Scalar,
    out: Option<&Tensor>,
) -> Result<MetaOutput> {
    let iter = Elementwise::new(out, [self_, other]);
    let meta = iter.compute()?;
    if !matches!(alpha, Scalar::Int(1)) {
        alpha_check(iter.common_dtype(), alpha)?;
    }
    Ok(meta)
}

/// `sub.Tensor` (and `sub_.Tensor`, `sub.out`).
pub fn sub_tensor(
    self_: &Tensor,
    other: &Tensor,
    alpha: Scalar,
    out: Option<&Tensor>,
) -> Result<MetaOutput> {
    sub_check(self_, other)?;
    let iter = Elementwise::new(out, [self_, other]);
    let meta = iter.compute()?;
    alpha_check(iter.common_dtype(), alpha)?;
    Ok(meta)
}

/// `div.Tensor_mode` (and `div_.Tensor_mode`, `div.out_mode`): true division promotes
/// integers to float, rounding modes keep the common dtype.
pub fn div_tensor_mode(
    self_: &Tensor,
    other: &Tensor,
    rounding_mode: Option<&str>,
    out: Option<&Tensor>,
) -> Result<MetaOutput> {
    check_rounding_mode(rounding_mode)?;
    let iter = Elementwise::new(out, [self_, other]);
    match rounding_mode {
        None => iter.int_to_float().compute(),
        Some(_) => iter.compute(),
    }
}

/// `neg` (and `neg_`, `neg.out`).
pub fn neg(self_: &Tensor, out: Option<&Tensor>) -> Result<MetaOutput> {
    if self_.dtype() == ScalarType::Bool {
        return Err(TensorError::invalid(
            "Negation, the `-` operator, on a bool tensor is not supported. If you are trying \
             to invert a mask, use the `~` or `logical_not()` operator instead.",
        ));
    }
    Elementwise::new(out, [self_]).all_same_dtype().compute()
}

/// `gelu` (and `gelu_`, `gelu.out`).
pub fn gelu(self_: &Tensor, approximate: &str, out: Option<&Tensor>) -> Result<MetaOutput> {
    check_gelu_approximate(approximate)?;
    Elementwise::new(out, [self_]).all_same_dtype().compute()
}

/// `gelu_backward` (and `gelu_backward.grad_input`).
pub fn gelu_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    approximate: &str,
    grad_input: Option<&Tensor>,
) -> Result<MetaOutput> {
    check_gelu_approximate(approximate)?;
    Elementwise::new(grad_input, [grad_output, self_]).compute()
}

/// `threshold_backward` (and `threshold_backward.grad_input`): over `self` and `grad_output`,
/// in that order (the output's layout follows `self`).
pub fn threshold_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    _threshold: Scalar,
    grad_input: Option<&Tensor>,
) -> Result<MetaOutput> {
    Elementwise::new(grad_input, [self_, grad_output]).compute()
}

/// Binary operators whose meta function is the elementwise geometry alone.
macro_rules! binary_meta {
    ($($(#[$doc:meta])* $name:ident($a:ident, $b:ident) $(.$rule:ident($($arg:expr)?))*;)*) => {$(
        $(#[$doc])*
        #[inline]
        pub fn $name($a: &Tensor, $b: &Tensor, out: Option<&Tensor>) -> Result<MetaOutput> {
            Elementwise::new(out, [$a, $b])$(.$rule($($arg)?))*.compute()
        }
    )*};
}

pub(super) use binary_meta;

binary_meta! {
    /// `mul.Tensor` (and `mul_.Tensor`, `mul.out`).
    mul_tensor(self_, other);
    /// `div.Tensor` (and `div_.Tensor`, `div.out`): true division.
    div_tensor(self_, other).int_to_float();
    /// `maximum` (and `maximum.out`).
    maximum(self_, other);
    /// `minimum` (and `minimum.out`).
    minimum(self_, other);
    /// `sigmoid_backward` (and `sigmoid_backward.grad_input`).
    sigmoid_backward(grad_output, output);
    /// `tanh_backward` (and `tanh_backward.grad_input`).
    tanh_backward(grad_output, output);
    /// `silu_backward` (and `silu_backward.grad_input`).
    silu_backward(grad_output, self_);
    /// `eq.Tensor` (and `eq_.Tensor`, `eq.Tensor_out`): a `Bool` result.
    eq_tensor(self_, other).out_dtype(ScalarType::Bool);
    /// `ne.Tensor`.
    ne_tensor(self_, other).out_dtype(ScalarType::Bool);
    /// `lt.Tensor`.
    lt_tensor(self_, other).out_dtype(ScalarType::Bool);
    /// `le.Tensor`.
    le_tensor(self_, other).out_dtype(ScalarType::Bool);
    /// `gt.Tensor`.
    gt_tensor(self_, other).out_dtype(ScalarType::Bool);
    /// `ge.Tensor`.
    ge_tensor(self_, other).out_dtype(ScalarType::Bool);
}

/// Comparisons with a number: the number is a wrapped scalar operand.
macro_rules! comparison_scalar_meta {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        pub fn $name(self_: &Tensor, other: Scalar, out: Option<&Tensor>) -> Result<MetaOutput> {
            let other = Tensor::wrapped_scalar(other);
            Elementwise::new(out, [self_, &other]).out_dtype(ScalarType::Bool).compute()
        }
    )*};
}

comparison_scalar_meta! {
    /// `eq.Scalar` (and `eq_.Scalar`, `eq.Scalar_out`): a `Bool` result.
    eq_scalar;
    /// `ne.Scalar`.
    ne_scalar;
    /// `lt.Scalar`.
    lt_scalar;
    /// `le.Scalar`.
    le_scalar;
    /// `gt.Scalar`.
    gt_scalar;
    /// `ge.Scalar`.
    ge_scalar;
}

/// Unary operators whose meta function is the elementwise geometry alone.
macro_rules! unary_meta {
    ($($(#[$doc:meta])* $name:ident $(.$rule:ident())*;)*) => {$(
        $(#[$doc])*
        #[inline]
        pub fn $name(self_: &Tensor, out: Option<&Tensor>) -> Result<MetaOutput> {
            Elementwise::new(out, [self_])$(.$rule())*.compute()
        }
    )*};
}

pub(super) use unary_meta;

unary_meta! {
    /// `exp` (and `exp_`, `exp.out`): integers compute in float.
    exp.int_to_float();
    /// `log`.
    log.int_to_float();
    /// `sqrt`.
    sqrt.int_to_float();
    /// `rsqrt`.
    rsqrt.int_to_float();
    /// `sigmoid`.
    sigmoid.int_to_float();
    /// `tanh`.
    tanh.int_to_float();
    /// `silu`: a plain unary op (`build_unary_op`), so a given output has `self`'s dtype.
    silu.all_same_dtype();
}

/// `lerp`'s dtype checks: `end` has `self`'s dtype, and so has `weight` unless it is
/// 0-dimensional (then it takes part in type promotion).
pub fn lerp_same_dtypes(self_: &Tensor, end: &Tensor, weight: Option<&Tensor>) -> Result<()> {
    let check = |other: &Tensor, name: &str| {
        if self_.dtype() == other.dtype() {
            return Ok(());
        }
        Err(TensorError::invalid(format!(
            "expected dtype {} for `{name}` but got dtype {}",
            self_.dtype().type_meta_name(),
            other.dtype().type_meta_name()
        )))
    };
    check(end, "end")?;
    match weight {
        Some(w) if w.dim() != 0 => check(w, "weight"),
        _ => Ok(()),
    }
}

/// `lerp.Scalar` (and `lerp_.Scalar`, `lerp.Scalar_out`).
pub fn lerp_scalar(
    self_: &Tensor,
    end: &Tensor,
    _weight: Scalar,
    out: Option<&Tensor>,
) -> Result<MetaOutput> {
    lerp_same_dtypes(self_, end, None)?;
    Elementwise::new(out, [self_, end]).compute()
}

/// `lerp.Tensor` (and `lerp_.Tensor`, `lerp.Tensor_out`).
pub fn lerp_tensor(
    self_: &Tensor,
    end: &Tensor,
    weight: &Tensor,
    out: Option<&Tensor>,
) -> Result<MetaOutput> {
    lerp_same_dtypes(self_, end, Some(weight))?;
    Elementwise::new(out, [self_, end, weight]).compute()
}

/// `addcmul` (and `addcmul_`, `addcmul.out`).
pub fn addcmul(
    self_: &Tensor,
    tensor1: &Tensor,
    tensor2: &Tensor,
    _value: Scalar,
    out: Option<&Tensor>,
) -> Result<MetaOutput> {
    Elementwise::new(out, [self_, tensor1, tensor2]).compute()
}

/// `addcdiv`'s refusal of integer division (two integer or bool operands).
pub fn addcdiv_check(tensor1: &Tensor, tensor2: &Tensor) -> Result<()> {
    if tensor1.dtype().is_integral(true) && tensor2.dtype().is_integral(true) {
        return Err(TensorError::invalid(
            "Integer division with addcdiv is no longer supported, and in a future  release \
             addcdiv will perform a true division of tensor1 and tensor2. The historic addcdiv \
             behavior can be implemented as (input + value * torch.trunc(tensor1 / tensor2)).\
             to(input.dtype) for integer inputs and as (input + value * tensor1 / tensor2) for \
             float inputs. The future addcdiv behavior is just the latter implementation: \
             (input + value * tensor1 / tensor2), for all dtypes.",
        ));
    }
    Ok(())
}

/// `addcdiv` (and `addcdiv_`, `addcdiv.out`).
pub fn addcdiv(
    self_: &Tensor,
    tensor1: &Tensor,
    tensor2: &Tensor,
    _value: Scalar,
    out: Option<&Tensor>,
) -> Result<MetaOutput> {
    addcdiv_check(tensor1, tensor2)?;
    Elementwise::new(out, [self_, tensor1, tensor2]).compute()
}
