//! The helper formulas of `derivatives.yaml` (PyTorch's `FunctionsManual.cpp`), named as
//! PyTorch names them, and what the generated formula functions convert their results with.
//! Every helper computes with dispatched operators, so that gradients taken with
//! `create_graph` have history and can be differentiated again.

mod batch_norm;
mod convolution;
mod cumulative;
mod fft;
mod forward;
mod group_norm;
mod layer_norm;
mod linalg;
mod nn;
mod norm_jvp;
mod padding;
mod pointwise;
mod reduction;
mod scatter;
mod shape;
mod split;

pub(crate) use batch_norm::*;
pub(crate) use convolution::*;
pub(crate) use cumulative::*;
pub(crate) use fft::*;
pub(crate) use forward::*;
pub(crate) use group_norm::*;
pub(crate) use layer_norm::*;
pub(crate) use linalg::*;
pub(crate) use nn::*;
pub(crate) use norm_jvp::*;
pub(crate) use padding::*;
pub(crate) use pointwise::*;
pub(crate) use reduction::*;
pub(crate) use scatter::*;
pub(crate) use shape::*;
pub(crate) use split::*;

use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::{Scalar, ScalarType, Tensor};

use crate::node::err;

/// What a formula for one input evaluates to: a gradient, or none (`Option::None`, PyTorch's
/// undefined tensor).
pub(crate) trait IntoGrad {
    /// The gradient.
    fn into_grad(self) -> Result<Option<Tensor>>;
}

impl IntoGrad for Result<Tensor> {
    fn into_grad(self) -> Result<Option<Tensor>> {
        self.map(Some)
    }
}

impl IntoGrad for Result<Option<Tensor>> {
    fn into_grad(self) -> Result<Option<Tensor>> {
        self
    }
}

impl IntoGrad for Tensor {
    fn into_grad(self) -> Result<Option<Tensor>> {
        Ok(Some(self))
    }
}

impl IntoGrad for &Tensor {
    fn into_grad(self) -> Result<Option<Tensor>> {
        Ok(Some(self.clone()))
    }
}

impl IntoGrad for Option<Tensor> {
    fn into_grad(self) -> Result<Option<Tensor>> {
        Ok(self)
    }
}

/// The gradient of one input from its formula's value.
pub(crate) fn into_grad(g: impl IntoGrad) -> Result<Option<Tensor>> {
    g.into_grad()
}

/// What a formula for several inputs (or a tensor list) evaluates to.
pub(crate) trait IntoGrads {
    /// The gradients, in the order of the formula's inputs.
    fn into_grads(self) -> Result<Vec<Option<Tensor>>>;
}

impl IntoGrads for Result<(Tensor, Tensor)> {
    fn into_grads(self) -> Result<Vec<Option<Tensor>>> {
        let (a, b) = self?;
        Ok(vec![Some(a), Some(b)])
    }
}

impl IntoGrads for Result<(Tensor, Tensor, Tensor)> {
    fn into_grads(self) -> Result<Vec<Option<Tensor>>> {
        let (a, b, c) = self?;
        Ok(vec![Some(a), Some(b), Some(c)])
    }
}

impl IntoGrads for Result<(Option<Tensor>, Option<Tensor>)> {
    fn into_grads(self) -> Result<Vec<Option<Tensor>>> {
        let (a, b) = self?;
        Ok(vec![a, b])
    }
}

impl IntoGrads for Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
    fn into_grads(self) -> Result<Vec<Option<Tensor>>> {
        let (a, b, c) = self?;
        Ok(vec![a, b, c])
    }
}

impl IntoGrads for Result<Vec<Tensor>> {
    fn into_grads(self) -> Result<Vec<Option<Tensor>>> {
        Ok(self?.into_iter().map(Some).collect())
    }
}

impl IntoGrads for Result<Vec<Option<Tensor>>> {
    fn into_grads(self) -> Result<Vec<Option<Tensor>>> {
        self
    }
}

/// The gradients of `n` inputs from their formula's value.
pub(crate) fn into_grads(g: impl IntoGrads, n: usize) -> Result<Vec<Option<Tensor>>> {
    let v = g.into_grads()?;
    if v.len() != n {
        return Err(err(format!(
            "autograd internal error: a formula gave {} gradients for {n} inputs",
            v.len()
        )));
    }
    Ok(v)
}

/// `t * s`, skipping the multiplication by one (PyTorch's `maybe_multiply`).
pub(crate) fn maybe_multiply(t: &Tensor, s: impl Into<Scalar>) -> Result<Tensor> {
    let s = s.into();
    let one = match s {
        Scalar::Int(i) => i == 1,
        Scalar::Float(f) => f == 1.0,
        Scalar::Bool(b) => b,
    };
    if one {
        Ok(t.clone())
    } else {
        ops::mul_scalar(t, s)
    }
}

/// PyTorch's `not_implemented`: the formula of an input whose derivative is not implemented.
pub(crate) fn not_implemented(name: &str) -> Result<Tensor> {
    Err(err(format!(
        "the derivative for '{name}' is not implemented."
    )))
}

/// No gradient (PyTorch's `Tensor()`, an undefined tensor).
pub(crate) fn undefined_gradient() -> Option<Tensor> {
    None
}

/// `t.to(dtype)`: `t` itself when it has that dtype.
pub(crate) fn to_dtype(t: &Tensor, dtype: ScalarType) -> Result<Tensor> {
    if t.dtype() == dtype {
        Ok(t.clone())
    } else {
        ops::_to_copy_with(t, ops::ToCopyOptions::default().dtype(dtype))
    }
}

/// `t.sum(dim, keepdim=True)`.
pub(crate) fn sum_keepdim(t: &Tensor, dim: i64) -> Result<Tensor> {
    ops::sum_dim_int_list_with(
        t,
        Some(&[dim]),
        ops::SumDimIntListOptions::default().keepdim(true),
    )
}

/// `at::sum_to`: sums `g` down to `sizes` (the leading dimensions, and those of size 1 in
/// `sizes`), through dispatched operators so that it is differentiable.
pub fn sum_to(g: &Tensor, sizes: &[i64]) -> Result<Tensor> {
    if g.sizes() == sizes {
        return Ok(g.clone());
    }
    let lead = g.dim() - sizes.len().min(g.dim());
    let mut dims: Vec<i64> = (0..lead as i64).collect();
    for (i, &s) in sizes.iter().enumerate() {
        if s == 1 && g.sizes()[lead + i] != 1 {
            dims.push((lead + i) as i64);
        }
    }
    let r = if dims.is_empty() {
        g.clone()
    } else {
        ops::sum_dim_int_list_with(
            g,
            Some(&dims),
            ops::SumDimIntListOptions::default().keepdim(true),
        )?
    };
    if lead > 0 {
        ops::view(&r, sizes)
    } else {
        Ok(r)
    }
}

/// Zeros of `sizes` with `like`'s dtype and device (`grad.new_zeros(sizes)`).
pub(crate) fn new_zeros(like: &Tensor, sizes: &[i64]) -> Result<Tensor> {
    ops::zeros_with(
        sizes,
        ops::ZerosOptions::default()
            .dtype(like.dtype())
            .device(like.device()),
    )
}
