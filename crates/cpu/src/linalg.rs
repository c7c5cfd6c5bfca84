//! Matrix products: `mm`, `bmm` and `addmm` (with their `out=` and in-place forms), over the
//! [`gemm`] crate for floats and a plain loop for integers; plus the raw GEMM helper
//! ([`gemm_float`]) that the convolutions reuse.

use gemm::Parallelism;
use switchboard_tensor::RawOps;
use switchboard_tensor::{Access, Device, Element, Scalar, ScalarType, Tensor};

use crate::copy::{cast, copy_into};
use crate::dispatch_dtype::{CpuElement, Float, Num};
use crate::dispatch_integral_types;
use crate::error::{check_cpu_or_meta, invalid, not_implemented, same_device, shape_str, Result};
use crate::iter::check_internal_overlap;
use crate::loops::{in_parallel_region, parallel_for};
use crate::scalar_acc;

// Note [GEMM through the gemm crate]
// `gemm::gemm` takes each operand as a pointer plus row and column strides in elements, so
// transposed, sliced and expanded (stride-0) operands go straight in, without the copies a
// BLAS needs for non-unit inner strides. Its convention is `dst = a*dst + b*lhs*rhs`, with
// `dst` read only when `read_dst` is set; we keep PyTorch's `beta*self + alpha*(m1@m2)`
// naming everywhere and swap the two scalars at the one call site. PyTorch ignores `self`
// when `beta == 0` (so NaNs in it do not propagate): that is `read_dst = false`.
// Float and Double call the crate directly; Half and BFloat16 compute in f32 (PyTorch's
// opmath type) by converting the operands; the integer types use a row loop in wrapping
// arithmetic. Above `PAR_FLOPS` multiply-adds a product runs on all rayon threads
// (`Parallelism::Rayon`); inside a parallel region (a batch of small products, a batch of
// convolutions) it stays on the calling thread.

/// Multiply-adds (`m*n*k`) from which a single product uses every rayon thread.
const PAR_FLOPS: usize = 1 << 17;

/// A strided matrix operand: the address of its `(0, 0)` element and its row and column
/// strides, in elements.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MatPtr {
    /// Address of element `(0, 0)`.
    pub ptr: usize,
    /// Row stride in elements.
    pub rs: isize,
    /// Column stride in elements.
    pub cs: isize,
}

impl MatPtr {
    /// The last two dimensions of `t` (batch `b` of a 3-d tensor when `batched`).
    fn of(t: &Tensor, b: i64) -> MatPtr {
        let nd = t.dim();
        let base = t.data_ptr() as usize;
        let off = if nd == 3 { b * t.strides()[0] } else { 0 };
        MatPtr {
            ptr: base.wrapping_add((off as usize).wrapping_mul(t.element_size())),
            rs: t.strides()[nd - 2] as isize,
            cs: t.strides()[nd - 1] as isize,
        }
    }

    /// A contiguous row-major matrix with `cols` columns starting at `ptr`.
    pub(crate) fn row_major<T>(ptr: *const T, cols: usize) -> MatPtr {
        MatPtr {
            ptr: ptr as usize,
            rs: cols as isize,
            cs: 1,
        }
    }

    /// The transpose (same memory, strides swapped).
    pub(crate) fn t(self) -> MatPtr {
        MatPtr {
            ptr: self.ptr,
            rs: self.cs,
            cs: self.rs,
        }
    }
}

/// The floating types the `gemm` crate computes directly.
pub(crate) trait GemmFloat: Float + Element {}
impl GemmFloat for f32 {}
impl GemmFloat for f64 {}

/// The parallelism for one `m×k @ k×n` product (Note [GEMM through the gemm crate]).
fn parallelism(m: usize, n: usize, k: usize) -> Parallelism {
    let threads = rayon::current_num_threads();
    if threads <= 1 || in_parallel_region() || m.saturating_mul(n).saturating_mul(k) < PAR_FLOPS {
        Parallelism::None
    } else {
        Parallelism::Rayon(threads)
    }
}

/// `dst = beta*dst + alpha*(a @ b)` for an `m×k` matrix `a` and a `k×n` matrix `b`; `dst` is
/// read only when `read_dst` (else it is overwritten, NaNs included).
///
/// # Safety
/// Every element the strides address (`i < m`, `j < n`, `p < k`) must be in bounds of live
/// allocations the caller holds (reads shared, `dst` exclusively); `dst` must not overlap `a`
/// or `b` and must not address one element twice.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm_float<T: GemmFloat>(
    m: usize,
    n: usize,
    k: usize,
    dst: MatPtr,
    a: MatPtr,
    b: MatPtr,
    alpha: T,
    beta: T,
    read_dst: bool,
) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        // An empty sum: the crate's kernels assume k > 0 (as PyTorch's BLAS path does).
        for i in 0..m as isize {
            for j in 0..n as isize {
                let p = (dst.ptr as *mut T).offset(i * dst.rs + j * dst.cs);
                *p = if read_dst {
                    (*p).mul(beta)
                } else {
                    <T as Num>::ZERO
                };
            }
        }
        return;
    }
    gemm::gemm(
        m,
        n,
        k,
        dst.ptr as *mut T,
        dst.cs,
        dst.rs,
        read_dst,
        a.ptr as *const T,
        a.cs,
        a.rs,
        b.ptr as *const T,
        b.cs,
        b.rs,
        beta,
        alpha,
        false,
        false,
        false,
        parallelism(m, n, k),
    );
}

/// The integer GEMM: the same contract as [`gemm_float`], in `T`'s wrapping arithmetic, rows
/// in parallel.
///
/// # Safety
/// As for [`gemm_float`].
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_loop<T: CpuElement>(
    m: usize,
    n: usize,
    k: usize,
    dst: MatPtr,
    a: MatPtr,
    b: MatPtr,
    alpha: T::Acc,
    beta: T::Acc,
    read_dst: bool,
) {
    let grain = (crate::loops::GRAIN_SIZE / (n * k.max(1)).max(1)).max(1);
    parallel_for(m, grain, |start, end| {
        let mut acc = vec![<T::Acc as Num>::ZERO; n];
        for i in start as isize..end as isize {
            acc.iter_mut().for_each(|x| *x = <T::Acc as Num>::ZERO);
            for p in 0..k as isize {
                // SAFETY: (i, p) and (p, j) are in range; the caller guarantees bounds.
                let aip = unsafe { *(a.ptr as *const T).offset(i * a.rs + p * a.cs) }.to_acc();
                let brow = (b.ptr as *const T).wrapping_offset(p * b.rs);
                for (j, x) in acc.iter_mut().enumerate() {
                    // SAFETY: as above.
                    let bpj = unsafe { *brow.offset(j as isize * b.cs) }.to_acc();
                    *x = x.add(aip.mul(bpj));
                }
            }
            for (j, x) in acc.iter().enumerate() {
                let p = (dst.ptr as *mut T).wrapping_offset(i * dst.rs + j as isize * dst.cs);
                // SAFETY: (i, j) is in range, written by this chunk only (rows are disjoint
                // and `dst` addresses no element twice).
                unsafe {
                    let old = if read_dst {
                        (*p).to_acc().mul(beta)
                    } else {
                        <T::Acc as Num>::ZERO
                    };
                    *p = T::from_acc(old.add(alpha.mul(*x)));
                }
            }
        }
    });
}

/// Runs `dst[b] = beta*dst[b] + alpha*(a[b] @ b[b])` over the batch of 2-d or 3-d tensors of
/// one dtype, `dst` disjoint from the operands. Small products of a batch run in parallel
/// over the batch; large ones one after the other, each on every thread.
fn batched_gemm(
    dst: &Tensor,
    a: &Tensor,
    b: &Tensor,
    alpha: Scalar,
    beta: Scalar,
    op: &str,
) -> Result<()> {
    let nd = dst.dim();
    let (m, n) = (dst.sizes()[nd - 2] as usize, dst.sizes()[nd - 1] as usize);
    let k = a.sizes()[a.dim() - 1] as usize;
    let batches = if nd == 3 { dst.sizes()[0] } else { 1 };
    if m == 0 || n == 0 || batches == 0 {
        return Ok(());
    }
    let read_dst = beta.to_f64() != 0.0;
    let dtype = dst.dtype();
    if matches!(dtype, ScalarType::Half | ScalarType::BFloat16) {
        // Compute in f32, then round once (PyTorch's opmath).
        let d32 = if read_dst {
            cast(dst, ScalarType::Float)?
        } else {
            Tensor::empty_on(dst.sizes(), ScalarType::Float, dst.device())?
        };
        let (a32, b32) = (cast(a, ScalarType::Float)?, cast(b, ScalarType::Float)?);
        batched_gemm(&d32, &a32, &b32, alpha, beta, op)?;
        return copy_into(dst, &d32);
    }
    let _access = Access::new(&[a, b], &[dst])?;
    let per = m.saturating_mul(n).saturating_mul(k.max(1));
    let grain = (PAR_FLOPS / per.max(1)).max(1);
    let run = |f: &(dyn Fn(i64) + Sync)| {
        if batches > 1 && per < PAR_FLOPS {
            parallel_for(batches as usize, grain, |s, e| {
                (s..e).for_each(|i| f(i as i64));
            });
        } else {
            (0..batches).for_each(f);
        }
    };
    macro_rules! float_path {
        ($t:ty) => {{
            let (al, be) = (alpha.to_f64() as $t, beta.to_f64() as $t);
            run(&|i| {
                // SAFETY: `_access` borrows the storages (dst exclusively); the matrices come
                // from the tensors' own sizes and strides (in bounds); callers made `dst`
                // disjoint from the operands and free of internal overlap; batches are
                // disjoint matrices of `dst`.
                unsafe {
                    gemm_float::<$t>(
                        m,
                        n,
                        k,
                        MatPtr::of(dst, i),
                        MatPtr::of(a, i),
                        MatPtr::of(b, i),
                        al,
                        be,
                        read_dst,
                    )
                }
            });
            Ok(())
        }};
    }
    match dtype {
        ScalarType::Float => float_path!(f32),
        ScalarType::Double => float_path!(f64),
        ScalarType::Bool => Err(not_implemented(op, dtype)),
        dt => dispatch_integral_types!(dt, op, T => {
            let (al, be) = (scalar_acc::<T>(alpha), scalar_acc::<T>(beta));
            run(&|i| {
                // SAFETY: as in the float path.
                unsafe {
                    gemm_loop::<T>(
                        m,
                        n,
                        k,
                        MatPtr::of(dst, i),
                        MatPtr::of(a, i),
                        MatPtr::of(b, i),
                        al,
                        be,
                        read_dst,
                    )
                }
            });
            Ok(())
        }),
    }
}

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
    match dtype {
        ScalarType::Byte => "unsigned char",
        ScalarType::Char => "signed char",
        ScalarType::Short => "short int",
        ScalarType::Int => "int",
        ScalarType::Long => "long int",
        ScalarType::Half => "c10::Half",
        ScalarType::Float => "float",
        ScalarType::Double => "double",
        ScalarType::Bool => "bool",
        ScalarType::BFloat16 => "c10::BFloat16",
    }
}

/// The device of a matrix op (every tensor on one device, CPU or meta).
fn op_device(op: &str, tensors: &[&Tensor]) -> Result<Device> {
    let device = same_device(tensors)?;
    check_cpu_or_meta(op, device)?;
    Ok(device)
}

/// Checks a user's `out` against the result's shape and dtype (out tensors are not resized:
/// `Tensor` metadata is immutable here, unlike PyTorch's `resize_output`).
fn check_out(out: &Tensor, sizes: &[i64], dtype: ScalarType) -> Result<()> {
    if out.dtype() != dtype {
        return Err(invalid(format!(
            "Expected out tensor to have dtype {}, but got {} instead",
            type_meta_name(dtype),
            type_meta_name(out.dtype())
        )));
    }
    if out.sizes() != sizes {
        return Err(invalid(format!(
            "Expected out tensor to have shape {}, but got {} instead (out tensors are not \
             resized)",
            shape_str(sizes),
            shape_str(out.sizes())
        )));
    }
    Ok(())
}

/// `mm`'s checks (PyTorch's `TORCH_META_FUNC(mm)` and `addmm_impl_cpu_`); returns the
/// result's shape.
fn mm_check(self_: &Tensor, mat2: &Tensor) -> Result<[i64; 2]> {
    if self_.dim() != 2 {
        return Err(invalid("self must be a matrix"));
    }
    if mat2.dim() != 2 {
        return Err(invalid("mat2 must be a matrix"));
    }
    let (a, b) = (self_.sizes(), mat2.sizes());
    if a[1] != b[0] {
        return Err(invalid(format!(
            "mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{})",
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
    let out = Tensor::empty_on(&shape, self_.dtype(), device)?;
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

/// `mm.out(Tensor self, Tensor mat2, *, Tensor(a!) out) -> Tensor(a!)`: `out` must already
/// have the result's shape and dtype.
pub fn mm_out(self_: &Tensor, mat2: &Tensor, out: &Tensor) -> Result<Tensor> {
    op_device("mm", &[self_, mat2, out])?;
    let shape = mm_check(self_, mat2)?;
    check_out(out, &shape, self_.dtype())?;
    addmm_into(
        out,
        None,
        self_,
        mat2,
        Scalar::Int(0),
        Scalar::Int(1),
        "addmm_impl_cpu_",
    )?;
    Ok(out.clone())
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
    let out = Tensor::empty_on(&shape, self_.dtype(), device)?;
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
    check_out(out, &shape, self_.dtype())?;
    addmm_into(
        out,
        None,
        self_,
        mat2,
        Scalar::Int(0),
        Scalar::Int(1),
        "bmm",
    )?;
    Ok(out.clone())
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
    for (name, t) in [("mat1", mat1), ("mat2", mat2)] {
        if t.dim() != 2 {
            return Err(invalid(format!(
                "{name} must be a matrix, got {}-D tensor",
                t.dim()
            )));
        }
    }
    let (a, b) = (mat1.sizes(), mat2.sizes());
    if a[1] != b[0] {
        return Err(invalid(format!(
            "mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{})",
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
    let out = Tensor::empty_on(&shape, mat1.dtype(), device)?;
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
    check_out(out, &shape, mat1.dtype())?;
    let input = self_.expand(&shape)?;
    addmm_into(
        out,
        Some(&input),
        mat1,
        mat2,
        beta,
        alpha,
        "addmm_impl_cpu_",
    )?;
    Ok(out.clone())
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
