//! [`TensorIter`]: the one helper behind every elementwise kernel, like PyTorch's
//! `TensorIterator`. It checks devices, broadcasts shapes, computes the common dtype (type
//! promotion, wrapped numbers and zero-dim tensors included), casts inputs, allocates or checks
//! the output, checks memory overlap, permutes and coalesces dimensions, and then runs a
//! closure over the elements: contiguous rows as slice loops, everything else in blocks, in
//! parallel above [`GRAIN_SIZE`] elements.
//!
//! ```
//! use switchboard_cpu::iter::IterConfig;
//! use switchboard_tensor::Tensor;
//! let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
//! let b = Tensor::from_vec(vec![10i64], &[1]).unwrap();
//! let iter = IterConfig::new("add").input(&a).input(&b).build().unwrap();
//! // Long promotes to Float; b was cast and is broadcast.
//! iter.for_each2(|x: f32, y: f32| x + y).unwrap();
//! assert_eq!(iter.finish().unwrap().to_vec::<f32>().unwrap(), [11.0, 12.0, 13.0]);
//! ```

mod config;
mod dense;
mod dims;
mod overlap;
#[cfg(test)]
mod tests;

pub use config::IterConfig;
pub use dense::{scalar_operand, BinaryLoop, DenseBinary, DENSE_IN_PLACE, DENSE_SCALAR};
pub use dims::{broadcast_strides, coalesce, reorder_dims, strides_for_perm};
pub(crate) use overlap::check_no_overlap;
pub use overlap::{check_internal_overlap, check_no_partial_overlap, result_device};

use std::cell::Cell;

use smallvec::SmallVec;
use switchboard_tensor::{Access, FixedAccess, ScalarType, StorageElement, Tensor, TensorError};

use crate::copy::copy_into;
use crate::error::Result;
use crate::loops::{
    for_each_row, parallel_for, row1, row1_fused, row2, row2_fused, row3, row3_fused, Geometry,
    GRAIN_SIZE, STREAM_BYTES,
};

/// A prepared elementwise loop (see the module docs). Run it with one of the `for_each*`
/// methods, then take the result with [`finish`](TensorIter::finish).
pub struct TensorIter {
    common_dtype: ScalarType,
    out: Tensor,
    /// The tensor the loop writes when it is not `out`: a temporary in the kernel dtype,
    /// copied to `out` by `finish`.
    temp_out: Option<Tensor>,
    inputs: SmallVec<[Tensor; 3]>,
    numel: usize,
    /// The coalesced loop; `None` when every operand is one dense row of `numel` elements
    /// (boxed: the common small-op path stays small and cheap to move).
    geom: Option<Box<Geometry>>,
    compute: bool,
    /// Whether the tensor the loops write was allocated by the iterator itself (Note
    /// [Private outputs]).
    private_out: bool,
    /// Set while a loop runs (Note [Private outputs]).
    looping: Cell<bool>,
    /// Whether `out` is a fresh output whose elements are not written yet (Note
    /// [Uninitialised outputs]).
    uninit: Cell<bool>,
}

// Note [Private outputs]
// An output the iterator allocated itself (the fresh `out` when no `out=` tensor was given, or
// the `temp_out` of another dtype) is private until `finish` hands it out: the only handle to
// its storage is a private field, and no method gives it (or its storage) away. So the loops
// need no borrow of its storage to exclude other readers and writers (Note [Storage
// mutability]): none can exist. The only code that runs during a loop besides the loop itself
// is the element closure, which could reach the iterator only through a thread-local (it must
// be `Sync`, and the iterator is not: its flags are `Cell`s), and start a nested loop writing
// the same output; `looping` refuses that, as the storage's exclusive borrow does for a given
// `out`. The inputs are borrowed as before (shared), since other handles to them exist.

// Note [Uninitialised outputs]
// The fast path allocates a fresh output without zeroing it (`Tensor::empty_uninit`): every
// `for_each*` writes every element of the output, so zeroing would be wasted work (a memset of
// the whole output, or a cache-missing calloc, for large tensors). Soundness rests on the
// output being reachable only through the private `out` field until `finish` hands it out,
// and on `finish` zero-filling it if no loop wrote it (a kernel that failed before running its
// loop, or never ran one). `uninit` is cleared only after a loop has written every element;
// if a loop panics, the iterator and its output are dropped unread.

impl TensorIter {
    /// The dtype inputs were promoted to (the compute dtype).
    pub fn common_dtype(&self) -> ScalarType {
        self.common_dtype
    }

    /// The dtype the loop writes.
    pub fn kernel_dtype(&self) -> ScalarType {
        self.kernel_out().dtype()
    }

    /// The tensor the loop writes.
    #[inline]
    fn kernel_out(&self) -> &Tensor {
        self.temp_out.as_ref().unwrap_or(&self.out)
    }

    /// The broadcast shape (the output's sizes).
    pub fn shape(&self) -> &[i64] {
        self.out.sizes()
    }

    /// Input `i`, cast to its compute dtype.
    pub fn input(&self, i: usize) -> &Tensor {
        &self.inputs[i]
    }

    /// The number of elements.
    pub fn numel(&self) -> usize {
        self.numel
    }

    /// Whether the loop computes (false on the meta device: only metadata is produced).
    pub fn computes(&self) -> bool {
        self.compute
    }

    /// The coalesced loop geometry.
    pub fn geometry(&self) -> Geometry {
        match &self.geom {
            Some(g) => (**g).clone(),
            None => Geometry::contiguous(self.numel as i64, 1 + self.inputs.len()),
        }
    }

    /// Runs `row(n, offsets, strides)` over every row of the loop, in parallel chunks above
    /// [`GRAIN_SIZE`] elements; `stream` tells the rows whether to write with non-temporal
    /// stores (Note [Streaming stores]). Offsets and strides are in elements, operand 0 being
    /// the output.
    #[inline(always)]
    fn run<const N: usize>(
        &self,
        elem_bytes: usize,
        row: impl Fn(usize, [isize; N], [isize; N], bool) + Sync,
    ) {
        let n = self.numel;
        let stream = n.saturating_mul(elem_bytes) >= STREAM_BYTES;
        match &self.geom {
            None if n <= GRAIN_SIZE => {
                if n > 0 {
                    row(n, [0; N], [1; N], stream);
                }
            }
            None => parallel_for(n, GRAIN_SIZE, |s, e| {
                row(e - s, [s as isize; N], [1; N], stream)
            }),
            Some(g) => {
                let st: [isize; N] = std::array::from_fn(|k| g.strides[k][0] as isize);
                parallel_for(n, GRAIN_SIZE, |s, e| {
                    for_each_row::<N>(g, s, e, |m, offs| row(m, offs, st, stream))
                })
            }
        }
    }

    /// The inputs, after checking that the loop's element types are the operands' dtypes.
    #[inline(always)]
    fn typed_inputs<const K: usize>(
        &self,
        out: ScalarType,
        ins: [ScalarType; K],
    ) -> Result<[&Tensor; K]> {
        if let Ok(arr) = <&[Tensor; K]>::try_from(&self.inputs[..]) {
            if out == self.kernel_out().dtype() && (0..K).all(|i| arr[i].dtype() == ins[i]) {
                return Ok(std::array::from_fn(|i| &arr[i]));
            }
        }
        Err(self.type_error(out, &ins))
    }

    #[cold]
    fn type_error(&self, out: ScalarType, ins: &[ScalarType]) -> TensorError {
        TensorError::invalid(format!(
            "TensorIter: loop element types {:?} <- {:?} do not match the operands {:?} <- {:?}",
            out,
            ins,
            self.kernel_out().dtype(),
            self.inputs.iter().map(|t| t.dtype()).collect::<Vec<_>>()
        ))
    }

    /// Runs `out = f()` over every output element (fills).
    pub fn for_each0<O: StorageElement>(&self, f: impl Fn() -> O + Sync) -> Result<()> {
        let [] = self.typed_inputs(O::DTYPE, [])?;
        if !self.compute {
            return Ok(());
        }
        let out = self.kernel_out();
        let _access = self.begin_loop([])?;
        let po = out.mut_data_ptr() as usize;
        self.run::<1>(0, |n, [oo], [so], _| {
            let p = (po as *mut O).wrapping_offset(oo);
            for i in 0..n as isize {
                // SAFETY: `_access` holds the output's storage exclusively; the offsets come
                // from its geometry, in bounds (Note [Tensor bounds invariant]); chunks of
                // `parallel_for` write disjoint elements (no internal overlap).
                unsafe { *p.offset(i * so) = f() };
            }
        });
        self.mark_written();
        Ok(())
    }

    /// Runs `out = f(a)` over every element.
    pub fn for_each1<O: StorageElement, A: StorageElement>(
        &self,
        f: impl Fn(A) -> O + Sync,
    ) -> Result<()> {
        self.for_each1_in::<false, O, A>(f)
    }

    /// [`for_each1`](Self::for_each1) for an `f` built on `mul_add`, compiled with fused
    /// multiply-add instructions where the CPU has them (Note [Fused multiply-add]).
    pub fn for_each1_fused<O: StorageElement, A: StorageElement>(
        &self,
        f: impl Fn(A) -> O + Sync,
    ) -> Result<()> {
        self.for_each1_in::<true, O, A>(f)
    }

    #[inline(always)]
    fn for_each1_in<const FUSED: bool, O: StorageElement, A: StorageElement>(
        &self,
        f: impl Fn(A) -> O + Sync,
    ) -> Result<()> {
        let [a] = self.typed_inputs(O::DTYPE, [A::DTYPE])?;
        if !self.compute {
            return Ok(());
        }
        let out = self.kernel_out();
        let _access = self.begin_loop([a])?;
        let po = out.mut_data_ptr() as usize;
        let pa = a.data_ptr() as usize;
        let bytes = size_of::<O>() + size_of::<A>();
        self.run::<2>(bytes, |n, [oo, oa], [so, sa], stream| {
            // SAFETY: `_access` borrows the storages (the output exclusively); offsets and
            // strides come from the operands' own geometry, so they are in bounds; parallel
            // chunks write disjoint output elements; partial overlap was ruled out at build.
            unsafe {
                let (o, a) = (
                    ((po as *mut O).offset(oo), so),
                    ((pa as *const A).offset(oa), sa),
                );
                if FUSED {
                    row1_fused(n, o, a, &f, stream)
                } else {
                    row1(n, o, a, &f, stream)
                }
            }
        });
        self.mark_written();
        Ok(())
    }

    /// Runs `out = f(a, b)` over every element.
    pub fn for_each2<O: StorageElement, A: StorageElement, B: StorageElement>(
        &self,
        f: impl Fn(A, B) -> O + Sync,
    ) -> Result<()> {
        self.for_each2_in::<false, O, A, B>(f)
    }

    /// [`for_each2`](Self::for_each2) for an `f` built on `mul_add`, compiled with fused
    /// multiply-add instructions where the CPU has them (Note [Fused multiply-add]).
    pub fn for_each2_fused<O: StorageElement, A: StorageElement, B: StorageElement>(
        &self,
        f: impl Fn(A, B) -> O + Sync,
    ) -> Result<()> {
        self.for_each2_in::<true, O, A, B>(f)
    }

    #[inline(always)]
    fn for_each2_in<const FUSED: bool, O: StorageElement, A: StorageElement, B: StorageElement>(
        &self,
        f: impl Fn(A, B) -> O + Sync,
    ) -> Result<()> {
        let [a, b] = self.typed_inputs(O::DTYPE, [A::DTYPE, B::DTYPE])?;
        if !self.compute {
            return Ok(());
        }
        let out = self.kernel_out();
        let _access = self.begin_loop([a, b])?;
        let po = out.mut_data_ptr() as usize;
        let pa = a.data_ptr() as usize;
        let pb = b.data_ptr() as usize;
        let bytes = size_of::<O>() + size_of::<A>() + size_of::<B>();
        self.run::<3>(bytes, |n, [oo, oa, ob], [so, sa, sb], stream| {
            // SAFETY: as in `for_each1`.
            unsafe {
                let (o, a, b) = (
                    ((po as *mut O).offset(oo), so),
                    ((pa as *const A).offset(oa), sa),
                    ((pb as *const B).offset(ob), sb),
                );
                if FUSED {
                    row2_fused(n, o, a, b, &f, stream)
                } else {
                    row2(n, o, a, b, &f, stream)
                }
            }
        });
        self.mark_written();
        Ok(())
    }

    /// Runs `out = f(a, b, c)` over every element.
    pub fn for_each3<O: StorageElement, A: StorageElement, B: StorageElement, C: StorageElement>(
        &self,
        f: impl Fn(A, B, C) -> O + Sync,
    ) -> Result<()> {
        self.for_each3_in::<false, O, A, B, C>(f)
    }

    /// [`for_each3`](Self::for_each3) for an `f` built on `mul_add`, compiled with fused
    /// multiply-add instructions where the CPU has them (Note [Fused multiply-add]).
    pub fn for_each3_fused<O, A, B, C>(&self, f: impl Fn(A, B, C) -> O + Sync) -> Result<()>
    where
        O: StorageElement,
        A: StorageElement,
        B: StorageElement,
        C: StorageElement,
    {
        self.for_each3_in::<true, O, A, B, C>(f)
    }

    #[inline(always)]
    fn for_each3_in<const FUSED: bool, O, A, B, C>(
        &self,
        f: impl Fn(A, B, C) -> O + Sync,
    ) -> Result<()>
    where
        O: StorageElement,
        A: StorageElement,
        B: StorageElement,
        C: StorageElement,
    {
        let [a, b, c] = self.typed_inputs(O::DTYPE, [A::DTYPE, B::DTYPE, C::DTYPE])?;
        if !self.compute {
            return Ok(());
        }
        let out = self.kernel_out();
        let _access = self.begin_loop([a, b, c])?;
        let po = out.mut_data_ptr() as usize;
        let (pa, pb, pc) = (
            a.data_ptr() as usize,
            b.data_ptr() as usize,
            c.data_ptr() as usize,
        );
        self.run::<4>(0, |n, [oo, oa, ob, oc], st, _| {
            // SAFETY: as in `for_each1`.
            unsafe {
                let (o, a, b, c) = (
                    ((po as *mut O).offset(oo), st[0]),
                    ((pa as *const A).offset(oa), st[1]),
                    ((pb as *const B).offset(ob), st[2]),
                    ((pc as *const C).offset(oc), st[3]),
                );
                if FUSED {
                    row3_fused(n, o, a, b, c, &f)
                } else {
                    row3(n, o, a, b, c, &f)
                }
            }
        });
        self.mark_written();
        Ok(())
    }

    /// Takes what a loop over `inputs` needs: shared borrows of the inputs' storages, and an
    /// exclusive one of the output's unless it is private, in which case the loop is only
    /// marked as running (Note [Private outputs]).
    #[inline(always)]
    fn begin_loop<'s, const K: usize>(
        &'s self,
        inputs: [&'s Tensor; K],
    ) -> Result<LoopGuard<'s, K>> {
        if self.looping.replace(true) {
            return Err(nested_loop_error());
        }
        let write = (!self.private_out).then(|| self.kernel_out());
        match FixedAccess::new(write, inputs) {
            Ok(access) => Ok(LoopGuard {
                _access: access,
                looping: &self.looping,
            }),
            Err(e) => {
                self.looping.set(false);
                Err(e)
            }
        }
    }

    /// Records that a loop wrote every element of the output (Note [Uninitialised outputs]).
    #[inline(always)]
    fn mark_written(&self) {
        self.uninit.set(false);
    }

    /// Zero-fills a fresh output no loop wrote (Note [Uninitialised outputs]).
    #[cold]
    fn zero_fill_out(&self) -> Result<()> {
        let out = &self.out;
        let _access = Access::new(&[], &[out])?;
        // SAFETY: `_access` borrows the output's storage exclusively; a fresh output is
        // contiguous at offset 0 of a storage of exactly `nbytes` bytes.
        unsafe { std::ptr::write_bytes(out.mut_data_ptr(), 0, out.nbytes()) };
        self.mark_written();
        Ok(())
    }

    /// The result: the output (copied from a temporary of the compute dtype when the given
    /// `out` has another dtype).
    pub fn finish(self) -> Result<Tensor> {
        if self.uninit.get() {
            self.zero_fill_out()?;
        }
        if let (true, Some(temp)) = (self.compute, &self.temp_out) {
            copy_into(&self.out, temp)?;
        }
        Ok(self.out)
    }
}

/// The borrows of a running loop (see [`TensorIter::begin_loop`]); clears the running mark on
/// drop (also when the element closure panics: nothing writes the output any more then).
struct LoopGuard<'s, const K: usize> {
    _access: FixedAccess<'s, K>,
    looping: &'s Cell<bool>,
}

impl<const K: usize> Drop for LoopGuard<'_, K> {
    #[inline(always)]
    fn drop(&mut self) {
        self.looping.set(false);
    }
}

#[cold]
fn nested_loop_error() -> TensorError {
    TensorError::StorageBorrowed("TensorIter: a loop was started while another one runs")
}
