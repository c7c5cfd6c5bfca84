//! [`DenseBinary`]: the loop of a binary elementwise op whose operands need none of
//! [`TensorIter`]'s work, and [`BinaryLoop`], what binary kernels need of either.

use std::cell::Cell;

use switchboard_tensor::{Element, FixedAccess, ScalarType, Tensor, TensorError};

use super::TensorIter;
use crate::error::Result;
use crate::loops::{parallel_for, row2, GRAIN_SIZE, STREAM_BYTES};

// Note [Dense binary loops]
// Almost every eager `a + b` (and `a * b`, a backward's `grad * y`, ...) has two contiguous
// CPU operands of one dtype and one shape, and no `out=`: no broadcasting, no promotion, no
// casts, no permutation, and an output with the inputs' (contiguous) layout. For a small
// tensor, building a `TensorIter` for that (a config, owned input handles, checks of cases
// that cannot arise) costs more than the arithmetic and the output's allocation together.
// `DenseBinary` is that case alone: it borrows the inputs, allocates the output uninitialised
// and runs the row loop directly. `binary!` (binary.rs) tries it first and takes the general
// path otherwise; kernels are written once, against `BinaryLoop`, and compiled for both.
// The result is exactly the general path's (same dtype, sizes, strides, values and errors: the
// tests compare them); the conditions are those of the general path's own fast path
// (`IterConfig::try_fast_path`) without an `out`.
//
// Soundness is the iterator's: the output is private until `finish` (Note [Private outputs]),
// a nested loop is refused, and an output no loop wrote is zeroed before it is handed out
// (Note [Uninitialised outputs]).

/// What a binary elementwise kernel uses of its loop: implemented by [`TensorIter`] and by
/// [`DenseBinary`] (Note [Dense binary loops]).
pub trait BinaryLoop {
    /// The dtype the inputs have (were promoted to).
    fn common_dtype(&self) -> ScalarType;
    /// Input `i` (0 or 1), in the common dtype.
    fn input(&self, i: usize) -> &Tensor;
    /// Runs `out = f(a, b)` over every element.
    fn for_each2<O: Element, A: Element, B: Element>(
        &self,
        f: impl Fn(A, B) -> O + Sync,
    ) -> Result<()>;
}

impl BinaryLoop for TensorIter {
    #[inline(always)]
    fn common_dtype(&self) -> ScalarType {
        TensorIter::common_dtype(self)
    }

    #[inline(always)]
    fn input(&self, i: usize) -> &Tensor {
        TensorIter::input(self, i)
    }

    #[inline(always)]
    fn for_each2<O: Element, A: Element, B: Element>(
        &self,
        f: impl Fn(A, B) -> O + Sync,
    ) -> Result<()> {
        TensorIter::for_each2(self, f)
    }
}

/// A binary elementwise loop over two contiguous CPU tensors of one dtype and one shape,
/// writing a fresh output of that dtype and shape (Note [Dense binary loops]).
pub struct DenseBinary<'a> {
    inputs: [&'a Tensor; 2],
    /// Private until `finish` (Note [Private outputs]); uninitialised until `written`.
    out: Tensor,
    /// Whether a loop wrote every element of `out` (Note [Uninitialised outputs]).
    written: Cell<bool>,
    /// Set while a loop runs (Note [Private outputs]).
    looping: Cell<bool>,
}

impl<'a> DenseBinary<'a> {
    /// The loop of `a op b` when the operands qualify (Note [Dense binary loops]); `None` when
    /// the general path is needed. `int_to_float`: integer inputs compute in the default
    /// float dtype (then only floating inputs qualify).
    #[inline(always)]
    pub fn try_new(a: &'a Tensor, b: &'a Tensor, int_to_float: bool) -> Result<Option<Self>> {
        let dtype = a.dtype();
        let fits = |t: &Tensor| t.is_cpu() && t.is_contiguous() && !t.is_wrapped_number();
        if b.dtype() != dtype
            || !fits(a)
            || !fits(b)
            || !same_sizes(a.sizes(), b.sizes())
            || (int_to_float && !dtype.is_floating_point())
        {
            return Ok(None);
        }
        // SAFETY: the output stays private until `finish`, which zero-fills it unless a loop
        // wrote every element (Note [Uninitialised outputs]).
        let out = unsafe { Tensor::empty_uninit(a.sizes(), dtype)? };
        Ok(Some(DenseBinary {
            inputs: [a, b],
            out,
            written: Cell::new(false),
            looping: Cell::new(false),
        }))
    }

    /// The result (zeroed if no loop wrote it).
    #[inline(always)]
    pub fn finish(self) -> Result<Tensor> {
        if !self.written.get() {
            zero_fill(&self.out);
        }
        Ok(self.out)
    }
}

/// Zero-fills a fresh private output no loop wrote (Note [Uninitialised outputs]).
#[cold]
fn zero_fill(out: &Tensor) {
    // SAFETY: the output is private (no other handle, so no borrow or reader can exist: Note
    // [Private outputs]); a fresh output is contiguous at offset 0 of a storage of exactly
    // `nbytes` bytes.
    unsafe { std::ptr::write_bytes(out.mut_data_ptr(), 0, out.nbytes()) };
}

impl BinaryLoop for DenseBinary<'_> {
    #[inline(always)]
    fn common_dtype(&self) -> ScalarType {
        self.out.dtype()
    }

    #[inline(always)]
    fn input(&self, i: usize) -> &Tensor {
        self.inputs[i]
    }

    #[inline(always)]
    fn for_each2<O: Element, A: Element, B: Element>(
        &self,
        f: impl Fn(A, B) -> O + Sync,
    ) -> Result<()> {
        let dt = self.out.dtype();
        if O::DTYPE != dt || A::DTYPE != dt || B::DTYPE != dt {
            return Err(type_error(dt, O::DTYPE, [A::DTYPE, B::DTYPE]));
        }
        if self.looping.replace(true) {
            return Err(nested_loop_error());
        }
        let guard = LoopGuard(&self.looping);
        let [a, b] = self.inputs;
        // The output is private: only the inputs are borrowed (Note [Private outputs]).
        let _access = FixedAccess::new(None, [a, b])?;
        let n = self.out.numel() as usize;
        let po = self.out.mut_data_ptr() as usize;
        let (pa, pb) = (a.data_ptr() as usize, b.data_ptr() as usize);
        let bytes = size_of::<O>() + size_of::<A>() + size_of::<B>();
        let stream = n.saturating_mul(bytes) >= STREAM_BYTES;
        let row = |s: usize, e: usize| {
            let (len, s) = (e - s, s as isize);
            // SAFETY: `_access` borrows the inputs' storages shared and the output is private;
            // all three are contiguous with `n` elements (in bounds: Note [Tensor bounds
            // invariant]) and `s..e` lies in `0..n`; parallel chunks write disjoint elements;
            // the fresh output overlaps no input.
            unsafe {
                row2(
                    len,
                    ((po as *mut O).offset(s), 1),
                    ((pa as *const A).offset(s), 1),
                    ((pb as *const B).offset(s), 1),
                    &f,
                    stream,
                )
            }
        };
        if n <= GRAIN_SIZE {
            if n > 0 {
                row(0, n);
            }
        } else {
            parallel_for(n, GRAIN_SIZE, row);
        }
        self.written.set(true);
        drop(guard);
        Ok(())
    }
}

/// Clears the running mark on drop (also when the element closure panics).
struct LoopGuard<'s>(&'s Cell<bool>);

impl Drop for LoopGuard<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.0.set(false);
    }
}

#[cold]
fn type_error(dtype: ScalarType, out: ScalarType, ins: [ScalarType; 2]) -> TensorError {
    TensorError::invalid(format!(
        "TensorIter: loop element types {out:?} <- {ins:?} do not match the operands {dtype:?} \
         <- {:?}",
        [dtype, dtype]
    ))
}

#[cold]
fn nested_loop_error() -> TensorError {
    TensorError::StorageBorrowed("TensorIter: a loop was started while another one runs")
}

/// Slice equality without a `memcmp` call (sizes are short).
#[inline(always)]
fn same_sizes(a: &[i64], b: &[i64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}
