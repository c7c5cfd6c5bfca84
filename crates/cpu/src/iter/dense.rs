//! [`DenseBinary`]: the loop of a binary elementwise op whose operands need none of
//! [`TensorIter`]'s work, and [`BinaryLoop`], what binary kernels need of either.

use std::cell::Cell;

use switchboard_tensor::{Element, FixedAccess, ScalarType, Storage, Tensor, TensorError};

use super::TensorIter;
use crate::copy::cast;
use crate::error::Result;
use crate::loops::{parallel_for, row2, row2_fused, GRAIN_SIZE, STREAM_BYTES};
use crate::promote::{ResultTypeState, DEFAULT_FLOAT};

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
//
// The in-place form (`a op= b`, and `op(a, b, out=a)`) is the same case with the first input
// as the output: `a` and `b` contiguous, of one dtype and one shape. The output is then not
// private: the loop borrows its storage exclusively, as the general path does. `b` may share
// `a`'s storage only as exactly the same elements (`x.mul_(x)`: each element is read before it
// is written, which the row loops allow); a partial overlap takes the general path, which
// reports it as PyTorch does.
//
// A wrapped number as the second operand (`x * 2.0`, `x.mul_(0.9)`) is the same case too, when
// the number does not promote `a`'s dtype: `scalar_operand` casts it to that dtype (as the
// general path does) and the loop reads that one value for every element (`DENSE_SCALAR`).

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
    /// [`for_each2`](Self::for_each2) for an `f` built on `mul_add` (Note [Fused
    /// multiply-add]).
    fn for_each2_fused<O: Element, A: Element, B: Element>(
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

    #[inline(always)]
    fn for_each2_fused<O: Element, A: Element, B: Element>(
        &self,
        f: impl Fn(A, B) -> O + Sync,
    ) -> Result<()> {
        TensorIter::for_each2_fused(self, f)
    }
}

/// [`DenseBinary`]'s `MODE` bit: the output is the first input (`a op= b`).
pub const DENSE_IN_PLACE: u8 = 1;
/// [`DenseBinary`]'s `MODE` bit: the second operand is one value for every element (a wrapped
/// number already in the common dtype, see [`scalar_operand`]).
pub const DENSE_SCALAR: u8 = 2;

/// A binary elementwise loop over two contiguous CPU tensors of one dtype and one shape (or,
/// `DENSE_SCALAR`, a contiguous tensor and one value), writing a fresh output of that dtype and
/// shape, or (`DENSE_IN_PLACE`) the first input (Note [Dense binary loops]). The mode is a type
/// parameter so that each loop is compiled for its case, without tests of the others.
pub struct DenseBinary<'a, const MODE: u8 = 0> {
    inputs: [&'a Tensor; 2],
    /// Private until `finish` (Note [Private outputs]) and uninitialised until `written`; or,
    /// in place, the first input.
    out: Tensor,
    /// Whether a loop wrote every element of `out` (Note [Uninitialised outputs]).
    written: Cell<bool>,
    /// Set while a loop runs (Note [Private outputs]).
    looping: Cell<bool>,
}

impl<'a> DenseBinary<'a, 0> {
    /// The loop of `a op b` when the operands qualify (Note [Dense binary loops]); `None` when
    /// the general path is needed. `int_to_float`: integer inputs compute in the default
    /// float dtype (then only floating inputs qualify).
    #[inline(always)]
    pub fn try_new(a: &'a Tensor, b: &'a Tensor, int_to_float: bool) -> Result<Option<Self>> {
        if !qualify(a, b, int_to_float) {
            return Ok(None);
        }
        // SAFETY: the output stays private until `finish`, which zero-fills it unless a loop
        // wrote every element (Note [Uninitialised outputs]).
        let out = unsafe { Tensor::empty_uninit(a.sizes(), a.dtype())? };
        Ok(Some(DenseBinary {
            inputs: [a, b],
            out,
            written: Cell::new(false),
            looping: Cell::new(false),
        }))
    }
}

impl<'a> DenseBinary<'a, DENSE_IN_PLACE> {
    /// The loop of `a op= b`, writing `a`, when the operands qualify (Note [Dense binary
    /// loops]); `None` when the general path is needed.
    #[inline(always)]
    pub fn try_in_place(a: &'a Tensor, b: &'a Tensor, int_to_float: bool) -> Option<Self> {
        let partial_overlap = Storage::ptr_eq(a.storage(), b.storage())
            && a.data_ptr() != b.data_ptr()
            && a.numel() > 0;
        if !qualify(a, b, int_to_float) || partial_overlap {
            return None;
        }
        Some(DenseBinary {
            inputs: [a, b],
            out: a.clone(),
            // Initialised: nothing to zero if no loop runs.
            written: Cell::new(true),
            looping: Cell::new(false),
        })
    }
}

impl<'a> DenseBinary<'a, DENSE_SCALAR> {
    /// The loop of `a op s`, `s` the value [`scalar_operand`] gave for `a op b`.
    #[inline(always)]
    pub fn with_scalar(a: &'a Tensor, s: &'a Tensor) -> Result<Self> {
        // SAFETY: the output stays private until `finish`, which zero-fills it unless a loop
        // wrote every element (Note [Uninitialised outputs]).
        let out = unsafe { Tensor::empty_uninit(a.sizes(), a.dtype())? };
        Ok(DenseBinary {
            inputs: [a, s],
            out,
            written: Cell::new(false),
            looping: Cell::new(false),
        })
    }
}

impl<'a> DenseBinary<'a, { DENSE_IN_PLACE | DENSE_SCALAR }> {
    /// The loop of `a op= s`, writing `a`, `s` the value [`scalar_operand`] gave for `a op b`
    /// (a fresh tensor: it overlaps nothing).
    #[inline(always)]
    pub fn in_place_with_scalar(a: &'a Tensor, s: &'a Tensor) -> Self {
        DenseBinary {
            inputs: [a, s],
            out: a.clone(),
            written: Cell::new(true),
            looping: Cell::new(false),
        }
    }
}

/// The second operand of `a op b` as one value in the common dtype, when `b` is a wrapped number
/// (a Python scalar), `a` a contiguous CPU tensor, and the common dtype `a`'s (the number does
/// not promote it); `None` when the general path is needed. The value is what the general path
/// computes with: the number cast to the common dtype (Note [Dense binary loops]). Out of line:
/// it allocates anyway, and inlined it would weigh on the tensor-tensor path of every op.
#[inline(never)]
pub fn scalar_operand(a: &Tensor, b: &Tensor, int_to_float: bool) -> Result<Option<Tensor>> {
    if !b.is_wrapped_number()
        || b.dim() != 0
        || !b.is_cpu()
        || !a.is_cpu()
        || !a.is_contiguous()
        || a.is_wrapped_number()
    {
        return Ok(None);
    }
    let mut promoted = ResultTypeState::default();
    promoted.update_tensor(a);
    promoted.update_tensor(b);
    let common = promoted.result().unwrap_or(DEFAULT_FLOAT);
    if common != a.dtype() || (int_to_float && !common.is_floating_point()) {
        return Ok(None);
    }
    cast(b, common).map(Some)
}

impl<const MODE: u8> DenseBinary<'_, MODE> {
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

impl<const MODE: u8> BinaryLoop for DenseBinary<'_, MODE> {
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
        self.for_each2_in::<false, O, A, B>(f)
    }

    #[inline(always)]
    fn for_each2_fused<O: Element, A: Element, B: Element>(
        &self,
        f: impl Fn(A, B) -> O + Sync,
    ) -> Result<()> {
        self.for_each2_in::<true, O, A, B>(f)
    }
}

impl<const MODE: u8> DenseBinary<'_, MODE> {
    #[inline(always)]
    fn for_each2_in<const FUSED: bool, O: Element, A: Element, B: Element>(
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
        // A fresh output is private: only the inputs are borrowed (Note [Private outputs]). In
        // place, the output's storage is borrowed exclusively (and `a`'s, the same, with it).
        let _access = FixedAccess::new((MODE & DENSE_IN_PLACE != 0).then_some(&self.out), [a, b])?;
        let n = self.out.numel() as usize;
        let po = self.out.mut_data_ptr() as usize;
        let (pa, pb) = (a.data_ptr() as usize, b.data_ptr() as usize);
        // One value for every element, or a row like the others.
        let sb = if MODE & DENSE_SCALAR != 0 { 0 } else { 1 };
        let bytes = size_of::<O>() + size_of::<A>() + size_of::<B>();
        let stream = n.saturating_mul(bytes) >= STREAM_BYTES;
        let row = |s: usize, e: usize| {
            let (len, s) = (e - s, s as isize);
            // SAFETY: `_access` borrows the inputs' storages shared and the output is private,
            // or (in place) borrows the output's storage exclusively; all three are contiguous
            // with `n` elements (in bounds: Note [Tensor bounds invariant]), but a scalar second
            // operand, one element read with stride 0; `s..e` lies in `0..n`; parallel chunks
            // write disjoint elements; a fresh output or scalar overlaps no input, and in place
            // an input overlaps the output only element for element (`try_in_place`), which
            // `row2` allows.
            unsafe {
                let (o, a, b) = (
                    ((po as *mut O).offset(s), 1),
                    ((pa as *const A).offset(s), 1),
                    ((pb as *const B).offset(s * sb), sb),
                );
                if FUSED {
                    row2_fused(len, o, a, b, &f, stream)
                } else {
                    row2(len, o, a, b, &f, stream)
                }
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

/// Whether `a op b` needs none of the general path's work (Note [Dense binary loops]).
#[inline(always)]
fn qualify(a: &Tensor, b: &Tensor, int_to_float: bool) -> bool {
    let dtype = a.dtype();
    let fits = |t: &Tensor| t.is_cpu() && t.is_contiguous() && !t.is_wrapped_number();
    b.dtype() == dtype
        && fits(a)
        && fits(b)
        && same_sizes(a.sizes(), b.sizes())
        && (!int_to_float || dtype.is_floating_point())
}

/// Slice equality without a `memcmp` call (sizes are short).
#[inline(always)]
fn same_sizes(a: &[i64], b: &[i64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}
