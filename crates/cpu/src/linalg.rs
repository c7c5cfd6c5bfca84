//! Matrix products: `mm`, `bmm` and `addmm` (with their `out=` and in-place forms), over the
//! [`gemm`] crate for floats and a plain loop for integers; plus the raw GEMM helper
//! ([`gemm_float`]) that the convolutions reuse.

use switchboard_ops::structured::{self, MetaOutput};
use switchboard_tensor::RawOps;
use switchboard_tensor::{Device, Scalar, ScalarType, Tensor};

use crate::copy::copy_into;
use crate::error::{check_cpu, Result};
use crate::fresh_output::fresh_output;
use crate::iter::check_internal_overlap;

#[path = "linalg_gemm.rs"]
pub(crate) mod gemm_core;
use gemm_core::batched_gemm;
pub(crate) use gemm_core::{gemm_float, GemmFloat, MatPtr};

/// Whether `a` and `b` are the same view of the same storage.
fn same_view(a: &Tensor, b: &Tensor) -> bool {
    Tensor::ptr_eq(a, b)
        || (a.is_alias_of(b)
            && a.storage_offset() == b.storage_offset()
            && a.sizes() == b.sizes()
            && a.strides() == b.strides()
            && a.dtype() == b.dtype())
}

/// `result = beta*input + alpha*(m1 @ m2)` (2-d or batched 3-d), `input` already of
/// `result`'s shape (`None`: `beta` is 0). Handles aliasing between the result and the
/// operands (through a temporary), and PyTorch's `beta == 0` rule.
fn addmm_into(
    result: &Tensor,
    input: Option<&Tensor>,
    m1: &Tensor,
    m2: &Tensor,
    beta: Scalar,
    alpha: Scalar,
    op: &str,
) -> Result<()> {
    check_internal_overlap(result)?;
    let aliased = result.is_alias_of(m1)
        || result.is_alias_of(m2)
        || input.is_some_and(|s| result.is_alias_of(s) && !same_view(s, result));
    if aliased {
        let tmp = Tensor::empty_on(result.sizes(), result.dtype(), result.device())?;
        addmm_into(&tmp, input, m1, m2, beta, alpha, op)?;
        return copy_into(result, &tmp);
    }
    let beta = if input.is_some() {
        beta
    } else {
        Scalar::Int(0)
    };
    if beta.to_f64() != 0.0 {
        if let Some(s) = input.filter(|s| !same_view(s, result)) {
            copy_into(result, s)?;
        }
    }
    batched_gemm(result, m1, m2, alpha, beta, op)
}

/// A fresh output of a matrix product, which `addmm_into` writes entirely (Note [Fresh
/// outputs]).
fn product_output(shape: &[i64], dtype: ScalarType, device: Device) -> Result<Tensor> {
    // SAFETY: the tensor stays private to the op until `addmm_into` has written every element
    // (the GEMM writes all m×n elements of each batch, with `read_dst` false or after
    // `copy_into` wrote the input; an empty sum writes zeros; Half and BFloat16 copy their f32
    // result over all of it); on an error it is dropped unread.
    unsafe { fresh_output(shape, dtype, device) }
}

/// The output of a matrix product after its meta function: fresh (written entirely by
/// `addmm_into`), or the given `out` resized to it.
fn product_result(meta: MetaOutput, out: Option<&Tensor>) -> Result<Tensor> {
    match out {
        Some(o) => structured::resize_out(o, &meta),
        None => product_output(&meta.sizes, meta.dtype, meta.device),
    }
}

/// `mm` into `out` when given.
fn mm_impl(self_: &Tensor, mat2: &Tensor, out: Option<&Tensor>) -> Result<Tensor> {
    let meta = structured::mm(self_, mat2, out)?;
    check_cpu("mm", meta.device)?;
    let result = product_result(meta, out)?;
    let (beta, alpha) = (Scalar::Int(0), Scalar::Int(1));
    addmm_into(&result, None, self_, mat2, beta, alpha, "addmm_impl_cpu_")?;
    Ok(result)
}

/// `mm(Tensor self, Tensor mat2) -> Tensor`: the matrix product of an `n×m` and an `m×p`
/// matrix, any strides, every dtype but Bool (integers wrap).
///
/// ```
/// use switchboard_tensor::{RawOps, Tensor};
/// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
/// let c = switchboard_cpu::mm(&a, &a.t().unwrap()).unwrap();
/// assert_eq!(c.to_vec::<f32>().unwrap(), [5.0, 11.0, 11.0, 25.0]);
/// ```
pub fn mm(self_: &Tensor, mat2: &Tensor) -> Result<Tensor> {
    mm_impl(self_, mat2, None)
}

/// `mm.out(Tensor self, Tensor mat2, *, Tensor(a!) out) -> Tensor(a!)`: `out` must have the
/// result's dtype; it is resized to the result's shape (Note [Functional resize]).
pub fn mm_out(self_: &Tensor, mat2: &Tensor, out: &Tensor) -> Result<Tensor> {
    mm_impl(self_, mat2, Some(out))
}

/// `bmm` into `out` when given.
fn bmm_impl(self_: &Tensor, mat2: &Tensor, out: Option<&Tensor>) -> Result<Tensor> {
    let meta = structured::bmm(self_, mat2, out)?;
    check_cpu("bmm", meta.device)?;
    let result = product_result(meta, out)?;
    addmm_into(
        &result,
        None,
        self_,
        mat2,
        Scalar::Int(0),
        Scalar::Int(1),
        "bmm",
    )?;
    Ok(result)
}

/// `bmm(Tensor self, Tensor mat2) -> Tensor`: the batched matrix product of `b×n×m` and
/// `b×m×p` tensors.
pub fn bmm(self_: &Tensor, mat2: &Tensor) -> Result<Tensor> {
    bmm_impl(self_, mat2, None)
}

/// `bmm.out(Tensor self, Tensor mat2, *, Tensor(a!) out) -> Tensor(a!)`.
pub fn bmm_out(self_: &Tensor, mat2: &Tensor, out: &Tensor) -> Result<Tensor> {
    bmm_impl(self_, mat2, Some(out))
}

/// `addmm` into `out` when given (`self` itself in place).
fn addmm_impl(
    self_: &Tensor,
    mat1: &Tensor,
    mat2: &Tensor,
    beta: Scalar,
    alpha: Scalar,
    out: Option<&Tensor>,
    inplace: bool,
) -> Result<Tensor> {
    let given = if inplace { Some(self_) } else { out };
    let meta = structured::addmm(self_, mat1, mat2, beta, alpha, given)?;
    check_cpu("addmm", meta.device)?;
    let result = if inplace {
        structured::check_inplace(self_, &meta)?;
        self_.clone()
    } else {
        product_result(meta, out)?
    };
    let input = self_.expand(result.sizes())?;
    addmm_into(
        &result,
        Some(&input),
        mat1,
        mat2,
        beta,
        alpha,
        "addmm_impl_cpu_",
    )?;
    Ok(result)
}

/// `addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor`:
/// `beta*self + alpha*(mat1 @ mat2)`, `self` broadcast to the product's shape (ignored,
/// NaNs included, when `beta == 0`).
///
/// ```
/// use switchboard_tensor::{Scalar, Tensor};
/// let bias = Tensor::from_vec(vec![1.0f64, -1.0], &[2]).unwrap();
/// let x = Tensor::from_vec(vec![1.0f64, 2.0], &[1, 2]).unwrap();
/// let w = Tensor::from_vec(vec![1.0f64, 0.0, 0.0, 1.0], &[2, 2]).unwrap();
/// let y = switchboard_cpu::addmm(&bias, &x, &w, Scalar::Int(1), Scalar::Float(2.0)).unwrap();
/// assert_eq!(y.to_vec::<f64>().unwrap(), [3.0, 3.0]);
/// ```
pub fn addmm(
    self_: &Tensor,
    mat1: &Tensor,
    mat2: &Tensor,
    beta: Scalar,
    alpha: Scalar,
) -> Result<Tensor> {
    addmm_impl(self_, mat1, mat2, beta, alpha, None, false)
}

/// `addmm.out(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1,
/// Tensor(a!) out) -> Tensor(a!)`.
pub fn addmm_out(
    self_: &Tensor,
    mat1: &Tensor,
    mat2: &Tensor,
    beta: Scalar,
    alpha: Scalar,
    out: &Tensor,
) -> Result<Tensor> {
    addmm_impl(self_, mat1, mat2, beta, alpha, Some(out), false)
}

/// `addmm_(Tensor(a!) self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) ->
/// Tensor(a!)`: in place; `self` must have the product's shape.
pub fn addmm_(
    self_: &Tensor,
    mat1: &Tensor,
    mat2: &Tensor,
    beta: Scalar,
    alpha: Scalar,
) -> Result<Tensor> {
    addmm_impl(self_, mat1, mat2, beta, alpha, None, true)
}

#[cfg(test)]
#[path = "linalg_tests.rs"]
mod tests;
