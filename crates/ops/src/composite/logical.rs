//! Boolean operators PyTorch writes as CompositeExplicitAutograd kernels: `isinf`, and the
//! functional and in-place forms of `logical_not`, `logical_and`, `logical_or` and
//! `logical_xor` over their `out=` kernels (PyTorch's `comparison_op`).

use switchboard_dispatcher::Result;
use switchboard_tensor::{ScalarType, Tensor};

/// `isinf`: integers and bools are never infinite (a `False` tensor of `self`'s layout);
/// floats compare `|self|` with infinity, as PyTorch's kernel does.
pub fn isinf(self_: &Tensor) -> Result<Tensor> {
    if self_.dtype().is_integral(true) {
        return crate::zeros_like_with(
            self_,
            crate::ZerosLikeOptions::default().dtype(ScalarType::Bool),
        );
    }
    crate::eq_scalar(&crate::abs(self_)?, f64::INFINITY)
}

/// `logical_not`: `logical_not.out` into a fresh bool tensor.
pub fn logical_not(self_: &Tensor) -> Result<Tensor> {
    let out = crate::empty_with(
        &[0],
        crate::EmptyOptions::default()
            .dtype(ScalarType::Bool)
            .device(self_.device()),
    )?;
    crate::logical_not_out(self_, &out)
}

/// `logical_not_`: `logical_not.out` into `self` (which keeps its dtype).
pub fn logical_not_(self_: &Tensor) -> Result<Tensor> {
    crate::logical_not_out(self_, self_)
}

/// PyTorch's `comparison_op`: `OP.out` into a fresh bool tensor.
fn into_fresh_bool(
    self_: &Tensor,
    other: &Tensor,
    out_op: fn(&Tensor, &Tensor, &Tensor) -> Result<Tensor>,
) -> Result<Tensor> {
    let out = crate::empty_with(
        &[0],
        crate::EmptyOptions::default()
            .dtype(ScalarType::Bool)
            .device(self_.device()),
    )?;
    out_op(self_, other, &out)
}

/// `logical_and`: `logical_and.out` into a fresh bool tensor.
pub fn logical_and(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    into_fresh_bool(self_, other, crate::logical_and_out)
}

/// `logical_and_`: `logical_and.out` into `self` (which keeps its dtype).
pub fn logical_and_(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    crate::logical_and_out(self_, other, self_)
}

/// `logical_or`.
pub fn logical_or(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    into_fresh_bool(self_, other, crate::logical_or_out)
}

/// `logical_or_`.
pub fn logical_or_(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    crate::logical_or_out(self_, other, self_)
}

/// `logical_xor`.
pub fn logical_xor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    into_fresh_bool(self_, other, crate::logical_xor_out)
}

/// `logical_xor_`.
pub fn logical_xor_(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    crate::logical_xor_out(self_, other, self_)
}
