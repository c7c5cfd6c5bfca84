//! The meta functions of the structured matrix products of `LinearAlgebra.cpp`: `mm`, `bmm`
//! and `addmm` (with `addmm_`).

use switchboard_tensor::{contiguous_strides, Device, DimVec, RawOps, Scalar, Tensor, TensorError};

use super::{same_device, MetaOutput, Result};

/// A contiguous product of `sizes` in `like`'s dtype and on `device`.
fn product(sizes: &[i64], like: &Tensor, device: Device) -> MetaOutput {
    MetaOutput {
        sizes: DimVec::from_slice(sizes),
        strides: contiguous_strides(sizes),
        dtype: like.dtype(),
        device,
    }
}

/// The message of a product of matrices whose inner sizes differ (PyTorch 2.15 names the
/// operator).
fn cannot_multiply(op: &str, a: &[i64], b: &[i64]) -> TensorError {
    TensorError::invalid(format!(
        "{op}: mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{})",
        a[0], a[1], b[0], b[1]
    ))
}

/// `op: NAME must be a matrix` for each of `matrices` that is not 2-d.
fn check_matrices(op: &str, matrices: [(&str, &Tensor); 2]) -> Result<()> {
    for (name, t) in matrices {
        if t.dim() != 2 {
            return Err(TensorError::invalid(format!(
                "{op}: {name} must be a matrix, got {}-D tensor",
                t.dim()
            )));
        }
    }
    Ok(())
}

/// `mm` (and `mm.out`): `self @ mat2`, `n×p` in `self`'s dtype.
pub fn mm(self_: &Tensor, mat2: &Tensor, _out: Option<&Tensor>) -> Result<MetaOutput> {
    let device = same_device(&[self_, mat2])?;
    check_matrices("mm", [("self", self_), ("mat2", mat2)])?;
    let (a, b) = (self_.sizes(), mat2.sizes());
    if a[1] != b[0] {
        return Err(cannot_multiply("mm", a, b));
    }
    if self_.dtype() != mat2.dtype() {
        return Err(TensorError::invalid(format!(
            "expected m1 and m2 to have the same dtype, but got: {} != {}",
            self_.dtype().type_meta_name(),
            mat2.dtype().type_meta_name()
        )));
    }
    Ok(product(&[a[0], b[1]], self_, device))
}

/// `bmm` (and `bmm.out`): the batched product of `b×n×m` and `b×m×p` tensors
/// (`common_checks_baddbmm_bmm`).
pub fn bmm(self_: &Tensor, mat2: &Tensor, _out: Option<&Tensor>) -> Result<MetaOutput> {
    let device = same_device(&[self_, mat2])?;
    if self_.dim() != 3 {
        return Err(TensorError::invalid("batch1 must be a 3D tensor"));
    }
    if mat2.dim() != 3 {
        return Err(TensorError::invalid("batch2 must be a 3D tensor"));
    }
    let (a, b) = (self_.sizes(), mat2.sizes());
    if b[0] != a[0] || b[1] != a[2] {
        return Err(TensorError::invalid(format!(
            "Expected size for first two dimensions of batch2 tensor to be: [{}, {}] but got: \
             [{}, {}].",
            a[0], a[2], b[0], b[1]
        )));
    }
    if self_.dtype() != mat2.dtype() {
        return Err(TensorError::invalid(format!(
            "expected scalar type {} but found {}",
            self_.dtype().c10_name(),
            mat2.dtype().c10_name()
        )));
    }
    Ok(product(&[a[0], a[1], b[2]], self_, device))
}

/// `addmm` (and `addmm.out`, `addmm_`): `beta * self + alpha * (mat1 @ mat2)`, `n×p` in
/// `mat1`'s dtype (`ADDMM_META`). `self` must broadcast to the product's sizes: PyTorch's
/// CPU kernel expands it, and its Meta kernel (a Python decomposition) checks the same.
pub fn addmm(
    self_: &Tensor,
    mat1: &Tensor,
    mat2: &Tensor,
    _beta: Scalar,
    _alpha: Scalar,
    _out: Option<&Tensor>,
) -> Result<MetaOutput> {
    let device = same_device(&[self_, mat1, mat2])?;
    if self_.dtype() != mat2.dtype() {
        return Err(TensorError::invalid(format!(
            "self and mat2 must have the same dtype, but got {} and {}",
            self_.dtype().c10_name(),
            mat2.dtype().c10_name()
        )));
    }
    if mat1.dtype() != mat2.dtype() {
        return Err(TensorError::invalid(format!(
            "mat1 and mat2 must have the same dtype, but got {} and {}",
            mat1.dtype().c10_name(),
            mat2.dtype().c10_name()
        )));
    }
    // PyTorch 2.15's `ADDMM_META` calls `mat1` `self` in its message.
    check_matrices("addmm", [("self", mat1), ("mat2", mat2)])?;
    let (a, b) = (mat1.sizes(), mat2.sizes());
    if a[1] != b[0] {
        return Err(cannot_multiply("addmm", a, b));
    }
    let sizes = [a[0], b[1]];
    self_.expand(&sizes)?;
    Ok(product(&sizes, mat1, device))
}
