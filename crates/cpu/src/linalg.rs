//! Matrix products: `mm`, `bmm` and `addmm` (with their `out=` and in-place forms), over the
//! [`gemm`] crate for floats and a plain loop for integers; plus the raw GEMM helper
//! ([`gemm_float`]) that the convolutions reuse.

use switchboard_tensor::RawOps;
use switchboard_tensor::{Device, Scalar, ScalarType, Tensor};

use crate::copy::copy_into;
use crate::error::{check_cpu_or_meta, invalid, same_device, shape_str, Result};
use crate::fresh_output::fresh_output;
use crate::iter::check_internal_overlap;

#[path = "linalg_gemm.rs"]
mod gemm_core;
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
/// `result`'s shape (`None`: `beta` is 0). Handles meta tensors (no-op), aliasing between the
/// result and the operands (through a temporary), and PyTorch's `beta == 0` rule.
fn addmm_into(
    result: &Tensor,
    input: Option<&Tensor>,
    m1: &Tensor,
    m2: &Tensor,
    beta: Scalar,
    alpha: Scalar,
    op: &str,
) -> Result<()> {
    if !result.has_data() {
        return Ok(());
    }
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

/// The name caffe2's `TypeMeta` prints for a dtype (`float`, `long int`): PyTorch's messages
/// that print `tensor.dtype()` use it.
pub(crate) fn type_meta_name(dtype: ScalarType) -> &'static str {
    dtype.type_meta_name()
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

/// The device of a matrix op (every tensor on one device, CPU or meta).
fn op_device(op: &str, tensors: &[&Tensor]) -> Result<Device> {
    let device = same_device(tensors)?;
    check_cpu_or_meta(op, device)?;
    Ok(device)
}

/// A user's `out` for a result of `sizes` and `dtype`: its dtype must be the result's; it is
/// resized to `sizes` when its shape differs (`resize_output`, Note [Functional resize]), and
/// the resized tensor is the one to write and return.
fn out_for(out: &Tensor, sizes: &[i64], dtype: ScalarType) -> Result<Tensor> {
    if out.dtype() != dtype {
        return Err(invalid(format!(
            "Expected out tensor to have dtype {}, but got {} instead",
            type_meta_name(dtype),
            type_meta_name(out.dtype())
        )));
    }
    out.resize_output(sizes)
}

/// `mm`'s checks (PyTorch's `TORCH_META_FUNC(mm)` and `addmm_impl_cpu_`); returns the
/// result's shape.
fn mm_check(self_: &Tensor, mat2: &Tensor) -> Result<[i64; 2]> {
    // PyTorch 2.15's messages name the operator.
    for (name, t) in [("self", self_), ("mat2", mat2)] {
        if t.dim() != 2 {
            return Err(invalid(format!(
                "mm: {name} must be a matrix, got {}-D tensor",
                t.dim()
            )));
        }
    }
    let (a, b) = (self_.sizes(), mat2.sizes());
    if a[1] != b[0] {
        return Err(invalid(format!(
            "mm: mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{})",
            a[0], a[1], b[0], b[1]
        )));
    }
    if self_.dtype() != mat2.dtype() {
        return Err(invalid(format!(
            "expected m1 and m2 to have the same dtype, but got: {} != {}",
            type_meta_name(self_.dtype()),
            type_meta_name(mat2.dtype())
        )));
    }
    Ok([a[0], b[1]])
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
    let device = op_device("mm", &[self_, mat2])?;
    let shape = mm_check(self_, mat2)?;
    let out = product_output(&shape, self_.dtype(), device)?;
    addmm_into(
        &out,
        None,
        self_,
        mat2,
        Scalar::Int(0),
        Scalar::Int(1),
        "addmm_impl_cpu_",
    )?;
    Ok(out)
}

/// `mm.out(Tensor self, Tensor mat2, *, Tensor(a!) out) -> Tensor(a!)`: `out` must have the
/// result's dtype; it is resized to the result's shape (Note [Functional resize]).
pub fn mm_out(self_: &Tensor, mat2: &Tensor, out: &Tensor) -> Result<Tensor> {
    op_device("mm", &[self_, mat2, out])?;
    let shape = mm_check(self_, mat2)?;
    let out = out_for(out, &shape, self_.dtype())?;
    addmm_into(
        &out,
        None,
        self_,
        mat2,
        Scalar::Int(0),
        Scalar::Int(1),
        "addmm_impl_cpu_",
    )?;
    Ok(out)
}

/// `bmm`'s checks (`common_checks_baddbmm_bmm`); returns the result's shape.
fn bmm_check(self_: &Tensor, mat2: &Tensor) -> Result<[i64; 3]> {
    if self_.dim() != 3 {
        return Err(invalid("batch1 must be a 3D tensor"));
    }
    if mat2.dim() != 3 {
        return Err(invalid("batch2 must be a 3D tensor"));
    }
    let (a, b) = (self_.sizes(), mat2.sizes());
    if b[0] != a[0] || b[1] != a[2] {
        return Err(invalid(format!(
            "Expected size for first two dimensions of batch2 tensor to be: [{}, {}] but got: \
             [{}, {}].",
            a[0], a[2], b[0], b[1]
        )));
    }
    if self_.dtype() != mat2.dtype() {
        return Err(invalid(format!(
            "expected scalar type {} but found {}",
            self_.dtype().c10_name(),
            mat2.dtype().c10_name()
        )));
    }
    Ok([a[0], a[1], b[2]])
}

/// `bmm(Tensor self, Tensor mat2) -> Tensor`: the batched matrix product of `b×n×m` and
/// `b×m×p` tensors.
pub fn bmm(self_: &Tensor, mat2: &Tensor) -> Result<Tensor> {
    let device = op_device("bmm", &[self_, mat2])?;
    let shape = bmm_check(self_, mat2)?;
    let out = product_output(&shape, self_.dtype(), device)?;
    addmm_into(
        &out,
        None,
        self_,
        mat2,
        Scalar::Int(0),
        Scalar::Int(1),
        "bmm",
    )?;
    Ok(out)
}

/// `bmm.out(Tensor self, Tensor mat2, *, Tensor(a!) out) -> Tensor(a!)`.
pub fn bmm_out(self_: &Tensor, mat2: &Tensor, out: &Tensor) -> Result<Tensor> {
    op_device("bmm", &[self_, mat2, out])?;
    let shape = bmm_check(self_, mat2)?;
    let out = out_for(out, &shape, self_.dtype())?;
    addmm_into(
        &out,
        None,
        self_,
        mat2,
        Scalar::Int(0),
        Scalar::Int(1),
        "bmm",
    )?;
    Ok(out)
}

/// `addmm`'s checks (PyTorch's `ADDMM_META`); returns the result's shape.
fn addmm_check(self_: &Tensor, mat1: &Tensor, mat2: &Tensor) -> Result<[i64; 2]> {
    if self_.dtype() != mat2.dtype() {
        return Err(invalid(format!(
            "self and mat2 must have the same dtype, but got {} and {}",
            self_.dtype().c10_name(),
            mat2.dtype().c10_name()
        )));
    }
    if mat1.dtype() != mat2.dtype() {
        return Err(invalid(format!(
            "mat1 and mat2 must have the same dtype, but got {} and {}",
            mat1.dtype().c10_name(),
            mat2.dtype().c10_name()
        )));
    }
    // PyTorch 2.15's messages (its ADDMM_META calls mat1 `self`).
    for (name, t) in [("self", mat1), ("mat2", mat2)] {
        if t.dim() != 2 {
            return Err(invalid(format!(
                "addmm: {name} must be a matrix, got {}-D tensor",
                t.dim()
            )));
        }
    }
    let (a, b) = (mat1.sizes(), mat2.sizes());
    if a[1] != b[0] {
        return Err(invalid(format!(
            "addmm: mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{})",
            a[0], a[1], b[0], b[1]
        )));
    }
    Ok([a[0], b[1]])
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
    let device = op_device("addmm", &[self_, mat1, mat2])?;
    let shape = addmm_check(self_, mat1, mat2)?;
    let input = self_.expand(&shape)?;
    let out = product_output(&shape, mat1.dtype(), device)?;
    addmm_into(
        &out,
        Some(&input),
        mat1,
        mat2,
        beta,
        alpha,
        "addmm_impl_cpu_",
    )?;
    Ok(out)
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
    op_device("addmm", &[self_, mat1, mat2, out])?;
    let shape = addmm_check(self_, mat1, mat2)?;
    let out = out_for(out, &shape, mat1.dtype())?;
    let input = self_.expand(&shape)?;
    addmm_into(
        &out,
        Some(&input),
        mat1,
        mat2,
        beta,
        alpha,
        "addmm_impl_cpu_",
    )?;
    Ok(out)
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
    op_device("addmm_", &[self_, mat1, mat2])?;
    let shape = addmm_check(self_, mat1, mat2)?;
    if self_.sizes() != shape {
        return Err(invalid(format!(
            "Bad in-place call: input tensor size {} and output tensor size {} should match",
            shape_str(self_.sizes()),
            shape_str(&shape)
        )));
    }
    addmm_into(
        self_,
        Some(self_),
        mat1,
        mat2,
        beta,
        alpha,
        "addmm_impl_cpu_",
    )?;
    Ok(self_.clone())
}

#[cfg(test)]
#[path = "linalg_tests.rs"]
mod tests;
