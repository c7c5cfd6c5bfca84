//! The GEMM core of the matrix products (Note [GEMM through the gemm crate]): strided
//! operands, the float path over the `gemm` crate, the integer loop, and the batched driver.

use gemm::Parallelism;
use rayon::prelude::*;
use switchboard_tensor::{Access, Element, Scalar, ScalarType, Tensor};

use crate::copy::{cast, copy_into};
use crate::dispatch_dtype::{CpuElement, Float, Num};
use crate::dispatch_integral_types;
use crate::error::{not_implemented, Result};
use crate::gemm_dot::{gemm_along_k, Product};
use crate::loops::{in_parallel_region, parallel_for, parallel_region};

// Note [GEMM through the gemm crate]
// `gemm::gemm` takes each operand as a pointer plus row and column strides in elements, so
// transposed, sliced and expanded (stride-0) operands go straight in, without the copies a
// BLAS needs for non-unit inner strides. Its convention is `dst = a*dst + b*lhs*rhs`, with
// `dst` read only when `read_dst` is set; we keep PyTorch's `beta*self + alpha*(m1@m2)`
// naming everywhere and swap the two scalars at the one call site. PyTorch ignores `self`
// when `beta == 0` (so NaNs in it do not propagate): that is `read_dst = false`.
// Float and Double call the crate directly; Half and BFloat16 compute in f32 (PyTorch's
// opmath type) by converting the operands; the integer types use a row loop in wrapping
// arithmetic. Above `PAR_FLOPS` multiply-adds a product runs on all rayon threads (Note
// [Splitting a product over the threads]); inside a parallel region (a batch of small
// products, a batch of convolutions) it stays on the calling thread.
//
// Note [Splitting a product over the threads]
// A parallel product is cut into one block of output columns per thread (of rows when the
// output is taller than wide), each computed by a serial `gemm::gemm` call, rather than
// handed to the crate's own `Parallelism::Rayon`. The crate parallelises inside its packing
// loops, which suits large square products but not the skinny ones of training: on 2
// threads, the 64x128x9216 forward of the CNN's first linear layer took 6 ms that way and
// 2.8 ms as two 64-column halves, and the 64x9216x128 input gradient 2.9 ms against 1.9 ms
// (`examples/gemm_shapes.rs`). The blocks are multiples of `SPLIT_ALIGN` wide, so each
// thread runs full micro-kernel tiles, and disjoint, so no synchronisation is needed beyond
// the join.

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

    /// The sub-matrix starting at element `(row, col)` of a matrix of `T`.
    fn offset<T>(self, row: usize, col: usize) -> MatPtr {
        let elems = (row as isize)
            .wrapping_mul(self.rs)
            .wrapping_add((col as isize).wrapping_mul(self.cs));
        MatPtr {
            ptr: self
                .ptr
                .wrapping_add_signed(elems.wrapping_mul(size_of::<T>() as isize)),
            ..self
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
pub(crate) trait GemmFloat: Float + Element {
    /// The value as an `f32` when `Self` is `f32` (products of `f32` may take the path of
    /// Note [Products along the reduction]).
    fn as_f32(self) -> Option<f32> {
        None
    }
}
impl GemmFloat for f32 {
    fn as_f32(self) -> Option<f32> {
        Some(self)
    }
}
impl GemmFloat for f64 {}

/// Rows or columns per block of a split product are a multiple of this (two AVX2 vectors of
/// f32: the height of the crate's f32 micro-kernel; Note [Splitting a product over the
/// threads]).
const SPLIT_ALIGN: usize = 16;

/// The threads one `m×k @ k×n` product runs on (Note [GEMM through the gemm crate]).
fn threads_for(m: usize, n: usize, k: usize) -> usize {
    let threads = rayon::current_num_threads();
    if threads <= 1 || in_parallel_region() || m.saturating_mul(n).saturating_mul(k) < PAR_FLOPS {
        1
    } else {
        threads
    }
}

/// The block of `0..len` that part `i` of `parts` computes: aligned starts, the last block
/// taking the rest (empty blocks when `len` is short).
pub(super) fn split_block(len: usize, parts: usize, i: usize) -> (usize, usize) {
    let per = len.div_ceil(parts).next_multiple_of(SPLIT_ALIGN);
    let start = (i * per).min(len);
    (start, (start + per).min(len))
}

/// `dst = beta*dst + alpha*(a @ b)` for an `m×k` matrix `a` and a `k×n` matrix `b`; `dst` is
/// read only when `read_dst` (else it is overwritten, NaNs included). As in BLAS, which
/// PyTorch's CPU products call, `a` and `b` are not read when `alpha` is 0: their NaNs do not
/// reach `dst` (`addmm(c, nan, b, alpha=0)` is `c`).
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
    if k == 0 || <T as Num>::to_f64(alpha) == 0.0 {
        // An empty sum, or one scaled away: the crate's kernels assume k > 0 (as PyTorch's
        // BLAS path does).
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
    let threads = threads_for(m, n, k);
    if threads <= 1 {
        gemm_serial(m, n, k, dst, a, b, alpha, beta, read_dst);
        return;
    }
    // Note [Splitting a product over the threads]: column blocks of `dst` and `b`, or row
    // blocks of `dst` and `a`.
    let by_columns = n >= m;
    (0..threads).into_par_iter().for_each(|i| {
        let (s, e) = split_block(if by_columns { n } else { m }, threads, i);
        if s == e {
            return;
        }
        // SAFETY: the blocks are disjoint sub-matrices of the caller's `dst` (rows or
        // columns `s..e`) and of `a` or `b`, so the caller's guarantees hold for each.
        parallel_region(|| unsafe {
            if by_columns {
                let (dst, b) = (dst.offset::<T>(0, s), b.offset::<T>(0, s));
                gemm_serial(m, e - s, k, dst, a, b, alpha, beta, read_dst);
            } else {
                let (dst, a) = (dst.offset::<T>(s, 0), a.offset::<T>(s, 0));
                gemm_serial(e - s, n, k, dst, a, b, alpha, beta, read_dst);
            }
        })
    });
}

/// [`gemm_float`] on the calling thread, for `k > 0`.
///
/// # Safety
/// As for [`gemm_float`].
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_serial<T: GemmFloat>(
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
    if let (Some(alpha), Some(beta)) = (alpha.as_f32(), beta.as_f32()) {
        let product = Product {
            m,
            n,
            k,
            dst,
            a,
            b,
            alpha,
            beta,
            read_dst,
        };
        // SAFETY: forwarded to the caller (the operands are `f32` matrices).
        if unsafe { gemm_along_k(&product) } {
            return;
        }
    }
    // SAFETY: forwarded to the caller.
    unsafe {
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
            Parallelism::None,
        )
    }
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
pub(super) fn batched_gemm(
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
    // `alpha.to<opmath_t>()` (checked; float16/bfloat16 reached this with a float `dst`).
    alpha.check_fits(dtype)?;
    beta.check_fits(dtype)?;
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
            let (al, be) = (alpha.to::<T>().to_acc(), beta.to::<T>().to_acc());
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
