//! The meta functions of the clamp family (`TensorCompare.cpp`): `clamp` and `clamp.Tensor`,
//! `clamp_min` and `clamp_max` with a Scalar or a Tensor bound, each for its functional,
//! in-place and `out=` forms.

use switchboard_tensor::{ResultTypeState, Scalar, ScalarType, Tensor, TensorError};

use super::{Elementwise, MetaOutput, Result};

// Note [Clamp's result type]
// A Tensor bound is an operand like any other: `clamp.Tensor` promotes `self` with its bounds
// and casts to a given output when that is safe (`build_borrowing_binary_op`'s rules, the
// output's layout following the operands'). A Scalar bound promotes by hand, since the meta
// function runs the iterator on `self` alone (`build_unary_op(out, self.to(result_type))`): a
// floating `self` keeps its dtype (a half tensor clamped by 2.5 stays half), any other
// promotes with the bounds (an int tensor clamped by 0.5 gives float, a bool tensor clamped
// by 0 gives long). An in-place call may not promote ("result type Float can't be cast to the
// desired output type long int", `self`'s dtype by its C++ name), and a given output must have
// the result type exactly ("Found dtype Double but expected Float"): the unary iterator
// checks that every operand has one dtype.

/// The message of a clamp called with neither bound.
const NO_BOUND: &str = "torch.clamp: At least one of 'min' or 'max' must not be None";

/// PyTorch's `check_for_unsupported_clamp_dtypes`.
pub fn check_clamp_dtype(dtype: ScalarType) -> Result<()> {
    if dtype.is_complex() {
        return Err(TensorError::invalid(
            "clamp is not supported for complex types",
        ));
    }
    Ok(())
}

/// The dtype a clamp by Scalar bounds computes in and returns (Note [Clamp's result type]),
/// with the checks that go with it: no complex `self`, no promotion in place.
fn clamp_scalar_result_type(
    self_: &Tensor,
    bounds: [Option<Scalar>; 2],
    out: Option<&Tensor>,
) -> Result<ScalarType> {
    let dtype = self_.dtype();
    check_clamp_dtype(dtype)?;
    if dtype.is_floating_point() {
        return Ok(dtype);
    }
    let mut state = ResultTypeState::default();
    state.update_tensor(self_);
    for bound in bounds.into_iter().flatten() {
        state.update_scalar(bound);
    }
    let result = state.result().unwrap_or(dtype);
    if result != dtype && out.is_some_and(|o| o.is_same(self_)) {
        return Err(TensorError::invalid(format!(
            "result type {} can't be cast to the desired output type {}",
            result.c10_name(),
            dtype.type_meta_name()
        )));
    }
    Ok(result)
}

/// The geometry of a clamp by Scalar bounds: `self`'s, in the result type.
fn clamp_scalar_geometry(
    self_: &Tensor,
    bounds: [Option<Scalar>; 2],
    out: Option<&Tensor>,
) -> Result<MetaOutput> {
    let dtype = clamp_scalar_result_type(self_, bounds, out)?;
    Elementwise::new(out, [self_])
        .compute_in(dtype)
        .all_same_dtype()
        .compute()
}

/// `clamp` (and `clamp_`, `clamp.out`): at least one bound (Note [Clamp's result type]).
pub fn clamp(
    self_: &Tensor,
    min: Option<Scalar>,
    max: Option<Scalar>,
    out: Option<&Tensor>,
) -> Result<MetaOutput> {
    if min.is_none() && max.is_none() {
        return Err(TensorError::invalid(NO_BOUND));
    }
    clamp_scalar_geometry(self_, [min, max], out)
}

/// `clamp_min` (and `clamp_min_`, `clamp_min.out`).
pub fn clamp_min(self_: &Tensor, min: Scalar, out: Option<&Tensor>) -> Result<MetaOutput> {
    clamp_scalar_geometry(self_, [Some(min), None], out)
}

/// `clamp_max` (and `clamp_max_`, `clamp_max.out`).
pub fn clamp_max(self_: &Tensor, max: Scalar, out: Option<&Tensor>) -> Result<MetaOutput> {
    clamp_scalar_geometry(self_, [None, Some(max)], out)
}

/// `clamp.Tensor`'s argument checks: at least one bound, no complex `self`.
pub fn check_clamp_tensor(
    self_: &Tensor,
    min: Option<&Tensor>,
    max: Option<&Tensor>,
) -> Result<()> {
    if min.is_none() && max.is_none() {
        return Err(TensorError::invalid(NO_BOUND));
    }
    check_clamp_dtype(self_.dtype())
}

/// `clamp.Tensor` (and `clamp_.Tensor`, `clamp.Tensor_out`): `self` and the bounds given
/// broadcast and promote together.
pub fn clamp_tensor(
    self_: &Tensor,
    min: Option<&Tensor>,
    max: Option<&Tensor>,
    out: Option<&Tensor>,
) -> Result<MetaOutput> {
    check_clamp_tensor(self_, min, max)?;
    match (min, max) {
        (Some(lo), Some(hi)) => Elementwise::new(out, [self_, lo, hi]).compute(),
        _ => {
            let bound = min.or(max).ok_or_else(|| TensorError::invalid(NO_BOUND))?;
            Elementwise::new(out, [self_, bound]).compute()
        }
    }
}

/// `clamp_min.Tensor` (and `clamp_min_.Tensor`, `clamp_min.Tensor_out`): a binary operator's
/// geometry (no dtype check: its kernel is `maximum`'s).
pub fn clamp_min_tensor(self_: &Tensor, min: &Tensor, out: Option<&Tensor>) -> Result<MetaOutput> {
    Elementwise::new(out, [self_, min]).compute()
}

/// `clamp_max.Tensor` (and `clamp_max_.Tensor`, `clamp_max.Tensor_out`): its kernel is
/// `minimum`'s.
pub fn clamp_max_tensor(self_: &Tensor, max: &Tensor, out: Option<&Tensor>) -> Result<MetaOutput> {
    Elementwise::new(out, [self_, max]).compute()
}
