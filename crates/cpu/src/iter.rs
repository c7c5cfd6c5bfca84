//! [`TensorIter`]: the one helper behind every elementwise kernel, like PyTorch's
//! `TensorIterator`. It checks devices, broadcasts shapes, computes the common dtype (type
//! promotion, wrapped numbers and zero-dim tensors included), casts inputs, allocates or checks
//! the output, checks memory overlap, permutes and coalesces dimensions, and then runs a
//! closure over the elements: contiguous rows as slice loops, everything else in blocks, in
//! parallel above [`GRAIN_SIZE`](crate::loops::GRAIN_SIZE) elements.
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

use smallvec::SmallVec;
use switchboard_tensor::{Access, Device, DimVec, Element, ScalarType, Tensor, TensorError};

use crate::copy::{cast, copy_into};
use crate::error::{check_cpu_or_meta, common_device, shape_str, Result};
use crate::loops::{
    for_each_row, parallel_for, row1, row2, row3, Geometry, GRAIN_SIZE, STREAM_BYTES,
};
use crate::promote::{can_cast, infer_size, result_type, PromoteArg, DEFAULT_FLOAT};

/// How an input takes part in type promotion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum InputKind {
    /// Counts for the common dtype and is cast to it.
    Promoted,
    /// Kept as it is (a `where` condition, a mask, an index).
    Exact,
}

/// The description of an elementwise op, turned into a [`TensorIter`] by
/// [`build`](IterConfig::build).
#[must_use]
pub struct IterConfig<'a> {
    op: &'static str,
    out: Option<&'a Tensor>,
    inputs: SmallVec<[(&'a Tensor, InputKind); 3]>,
    int_to_float: bool,
    compute_dtype: Option<ScalarType>,
    out_dtype: Option<ScalarType>,
    check_out_cast: bool,
    out_in_shape: bool,
}

impl<'a> IterConfig<'a> {
    /// An op named `op` (the name appears in error messages).
    pub fn new(op: &'static str) -> IterConfig<'a> {
        IterConfig {
            op,
            out: None,
            inputs: SmallVec::new(),
            int_to_float: false,
            compute_dtype: None,
            out_dtype: None,
            check_out_cast: true,
            out_in_shape: false,
        }
    }

    /// Writes into `out` (an `out=` tensor, or `self` of an in-place op) instead of allocating
    /// the output. Its shape must be the broadcast shape (out tensors are not resized).
    pub fn out(mut self, out: &'a Tensor) -> Self {
        self.out = Some(out);
        self
    }

    /// Writes into `out` when given.
    pub fn maybe_out(mut self, out: Option<&'a Tensor>) -> Self {
        self.out = out;
        self
    }

    /// An input that takes part in type promotion and is cast to the common dtype.
    pub fn input(mut self, t: &'a Tensor) -> Self {
        self.inputs.push((t, InputKind::Promoted));
        self
    }

    /// An input read with its own dtype, outside type promotion (a condition or a mask).
    pub fn input_exact(mut self, t: &'a Tensor) -> Self {
        self.inputs.push((t, InputKind::Exact));
        self
    }

    /// Integer and bool inputs compute in the default float dtype (`true_divide`, `exp`, ...:
    /// PyTorch's `promote_integer_inputs_to_float`).
    pub fn int_to_float(mut self, yes: bool) -> Self {
        self.int_to_float = yes;
        self
    }

    /// Computes in `dtype` instead of the promoted dtype.
    pub fn compute_dtype(mut self, dtype: ScalarType) -> Self {
        self.compute_dtype = Some(dtype);
        self
    }

    /// The output dtype when it is not the common dtype (`Bool` for comparisons).
    pub fn out_dtype(mut self, dtype: ScalarType) -> Self {
        self.out_dtype = Some(dtype);
        self
    }

    /// Whether a given `out` must be a safe cast of the common dtype (default: yes).
    pub fn check_out_cast(mut self, yes: bool) -> Self {
        self.check_out_cast = yes;
        self
    }

    /// The given `out` takes part in broadcasting (inputs broadcast to its shape, as for
    /// `copy_` and `fill_`: PyTorch's `resize_outputs(false)`).
    pub fn broadcast_to_out(mut self) -> Self {
        self.out_in_shape = true;
        self
    }

    /// Checks everything and prepares the loop.
    pub fn build(self) -> Result<TensorIter> {
        if let Some(iter) = self.try_fast_path()? {
            return Ok(iter);
        }
        self.build_general()
    }

    /// Same dtype, same shape, all contiguous CPU tensors: no promotion, no permutation.
    fn try_fast_path(&self) -> Result<Option<TensorIter>> {
        let Some(&(first, _)) = self.inputs.first() else {
            return Ok(None);
        };
        let dtype = first.dtype();
        if self.compute_dtype.is_some()
            || (self.int_to_float && !dtype.is_floating_point())
            || first.is_wrapped_number()
        {
            return Ok(None);
        }
        for &(t, _) in &self.inputs {
            if t.dtype() != dtype
                || !t.is_cpu()
                || !t.is_contiguous()
                || t.sizes() != first.sizes()
                || t.is_wrapped_number()
            {
                return Ok(None);
            }
        }
        let out_dtype = self.out_dtype.unwrap_or(dtype);
        let out = match self.out {
            None => Tensor::empty(first.sizes(), out_dtype)?,
            Some(o) => {
                if o.dtype() != out_dtype
                    || !o.is_cpu()
                    || !o.is_contiguous()
                    || o.sizes() != first.sizes()
                {
                    return Ok(None);
                }
                for &(t, _) in &self.inputs {
                    check_no_partial_overlap(o, t)?;
                }
                o.clone()
            }
        };
        Ok(Some(TensorIter {
            shape: DimVec::from_slice(first.sizes()),
            common_dtype: dtype,
            out,
            temp_out: None,
            inputs: self.inputs.iter().map(|(t, _)| (*t).clone()).collect(),
            numel: first.numel() as usize,
            geom: None,
            compute: true,
        }))
    }

    fn build_general(self) -> Result<TensorIter> {
        let op = self.op;
        // Devices: zero-dim CPU tensors may mix with any device.
        let mut all: SmallVec<[&Tensor; 4]> = SmallVec::new();
        all.extend(self.out);
        all.extend(self.inputs.iter().map(|(t, _)| *t));
        let device = common_device(&all)?;
        check_cpu_or_meta(op, device)?;
        let compute = device.is_cpu();

        // Shape.
        let mut shape = DimVec::new();
        if let (Some(o), true) = (self.out, self.out_in_shape) {
            shape = DimVec::from_slice(o.sizes());
        }
        for &(t, _) in &self.inputs {
            shape = infer_size(&shape, t.sizes())?;
        }
        if let Some(o) = self.out {
            if o.sizes() != &shape[..] {
                if self.inputs.is_empty() {
                    shape = DimVec::from_slice(o.sizes());
                } else {
                    return Err(TensorError::invalid(format!(
                        "output with shape {} doesn't match the broadcast shape {}",
                        shape_str(o.sizes()),
                        shape_str(&shape)
                    )));
                }
            }
        }

        // Dtypes.
        let promoted: SmallVec<[PromoteArg; 4]> = self
            .inputs
            .iter()
            .filter(|(_, k)| *k == InputKind::Promoted)
            .map(|(t, _)| PromoteArg::of_tensor(t))
            .collect();
        let mut common = match self.compute_dtype {
            Some(d) => d,
            None if promoted.is_empty() => self.out.map(|o| o.dtype()).unwrap_or(DEFAULT_FLOAT),
            None => result_type(&promoted),
        };
        if self.int_to_float && self.compute_dtype.is_none() && !common.is_floating_point() {
            common = DEFAULT_FLOAT;
        }
        let kernel_dtype = self.out_dtype.unwrap_or(common);
        if let Some(o) = self.out {
            if self.check_out_cast && self.out_dtype.is_none() && !can_cast(common, o.dtype()) {
                return Err(TensorError::invalid(format!(
                    "result type {} can't be cast to the desired output type {}",
                    common.c10_name(),
                    o.dtype().c10_name()
                )));
            }
            check_internal_overlap(o)?;
            for &(t, _) in &self.inputs {
                check_no_partial_overlap(o, t)?;
            }
        }

        // Inputs in their compute dtypes.
        let mut inputs: SmallVec<[Tensor; 3]> = SmallVec::new();
        for &(t, kind) in &self.inputs {
            if kind == InputKind::Promoted && t.dtype() != common {
                inputs.push(cast(t, common)?);
            } else {
                inputs.push(t.clone());
            }
        }

        // Broadcast strides, the loop order, and the output.
        let mut in_strides: SmallVec<[DimVec; 4]> = inputs
            .iter()
            .map(|t| broadcast_strides(t, &shape))
            .collect();
        let (out, temp_out) = match self.out {
            Some(o) if o.dtype() == kernel_dtype => (o.clone(), None),
            given => {
                let refs: SmallVec<[&[i64]; 4]> = in_strides.iter().map(|s| &s[..]).collect();
                let perm = reorder_dims(&shape, &refs);
                let strides = strides_for_perm(&shape, &perm);
                let k = Tensor::empty_strided(&shape, &strides, kernel_dtype, device)?;
                match given {
                    Some(o) => (o.clone(), Some(k)),
                    None => (k, None),
                }
            }
        };
        in_strides.insert(
            0,
            broadcast_strides(temp_out.as_ref().unwrap_or(&out), &shape),
        );
        let refs: SmallVec<[&[i64]; 4]> = in_strides.iter().map(|s| &s[..]).collect();
        let perm = reorder_dims(&shape, &refs);
        let geom = coalesce(&shape, &in_strides, &perm);
        let numel = geom.numel();
        // One dense row for every operand: the loops need no geometry (as the fast path).
        let dense = geom.sizes.len() == 1 && geom.strides.iter().all(|s| s[0] == 1);
        Ok(TensorIter {
            shape,
            common_dtype: common,
            out,
            temp_out,
            inputs,
            numel,
            geom: (!dense).then(|| Box::new(geom)),
            compute,
        })
    }
}

/// A prepared elementwise loop (see the module docs). Run it with one of the `for_each*`
/// methods, then take the result with [`finish`](TensorIter::finish).
pub struct TensorIter {
    shape: DimVec,
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
}

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

    /// The broadcast shape.
    pub fn shape(&self) -> &[i64] {
        &self.shape
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

    fn check_types(&self, out: ScalarType, ins: &[ScalarType]) -> Result<()> {
        let bad = out != self.kernel_out().dtype()
            || ins.len() != self.inputs.len()
            || ins.iter().zip(&self.inputs).any(|(d, t)| *d != t.dtype());
        if bad {
            return Err(TensorError::invalid(format!(
                "TensorIter: loop element types {:?} <- {:?} do not match the operands {:?} <- \
                 {:?}",
                out,
                ins,
                self.kernel_out().dtype(),
                self.inputs.iter().map(|t| t.dtype()).collect::<Vec<_>>()
            )));
        }
        Ok(())
    }

    /// Runs `out = f()` over every output element (fills).
    pub fn for_each0<O: Element>(&self, f: impl Fn() -> O + Sync) -> Result<()> {
        self.check_types(O::DTYPE, &[])?;
        if !self.compute {
            return Ok(());
        }
        let out = self.kernel_out();
        let _access = Access::new(&[], &[out])?;
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
        Ok(())
    }

    /// Runs `out = f(a)` over every element.
    pub fn for_each1<O: Element, A: Element>(&self, f: impl Fn(A) -> O + Sync) -> Result<()> {
        self.check_types(O::DTYPE, &[A::DTYPE])?;
        if !self.compute {
            return Ok(());
        }
        let out = self.kernel_out();
        let _access = Access::new(&[&self.inputs[0]], &[out])?;
        let po = out.mut_data_ptr() as usize;
        let pa = self.inputs[0].data_ptr() as usize;
        let bytes = size_of::<O>() + size_of::<A>();
        self.run::<2>(bytes, |n, [oo, oa], [so, sa], stream| {
            // SAFETY: `_access` borrows the storages (the output exclusively); offsets and
            // strides come from the operands' own geometry, so they are in bounds; parallel
            // chunks write disjoint output elements; partial overlap was ruled out at build.
            unsafe {
                row1(
                    n,
                    ((po as *mut O).offset(oo), so),
                    ((pa as *const A).offset(oa), sa),
                    &f,
                    stream,
                )
            }
        });
        Ok(())
    }

    /// Runs `out = f(a, b)` over every element.
    pub fn for_each2<O: Element, A: Element, B: Element>(
        &self,
        f: impl Fn(A, B) -> O + Sync,
    ) -> Result<()> {
        self.check_types(O::DTYPE, &[A::DTYPE, B::DTYPE])?;
        if !self.compute {
            return Ok(());
        }
        let out = self.kernel_out();
        let _access = Access::new(&[&self.inputs[0], &self.inputs[1]], &[out])?;
        let po = out.mut_data_ptr() as usize;
        let pa = self.inputs[0].data_ptr() as usize;
        let pb = self.inputs[1].data_ptr() as usize;
        let bytes = size_of::<O>() + size_of::<A>() + size_of::<B>();
        self.run::<3>(bytes, |n, [oo, oa, ob], [so, sa, sb], stream| {
            // SAFETY: as in `for_each1`.
            unsafe {
                row2(
                    n,
                    ((po as *mut O).offset(oo), so),
                    ((pa as *const A).offset(oa), sa),
                    ((pb as *const B).offset(ob), sb),
                    &f,
                    stream,
                )
            }
        });
        Ok(())
    }

    /// Runs `out = f(a, b, c)` over every element.
    pub fn for_each3<O: Element, A: Element, B: Element, C: Element>(
        &self,
        f: impl Fn(A, B, C) -> O + Sync,
    ) -> Result<()> {
        self.check_types(O::DTYPE, &[A::DTYPE, B::DTYPE, C::DTYPE])?;
        if !self.compute {
            return Ok(());
        }
        let ins = &self.inputs;
        let out = self.kernel_out();
        let _access = Access::new(&[&ins[0], &ins[1], &ins[2]], &[out])?;
        let po = out.mut_data_ptr() as usize;
        let (pa, pb, pc) = (
            ins[0].data_ptr() as usize,
            ins[1].data_ptr() as usize,
            ins[2].data_ptr() as usize,
        );
        self.run::<4>(0, |n, [oo, oa, ob, oc], st, _| {
            // SAFETY: as in `for_each1`.
            unsafe {
                row3(
                    n,
                    ((po as *mut O).offset(oo), st[0]),
                    ((pa as *const A).offset(oa), st[1]),
                    ((pb as *const B).offset(ob), st[2]),
                    ((pc as *const C).offset(oc), st[3]),
                    &f,
                )
            }
        });
        Ok(())
    }

    /// The result: the output (copied from a temporary of the compute dtype when the given
    /// `out` has another dtype).
    pub fn finish(self) -> Result<Tensor> {
        if let (true, Some(temp)) = (self.compute, &self.temp_out) {
            copy_into(&self.out, temp)?;
        }
        Ok(self.out)
    }
}

/// `t`'s strides aligned to `shape` (right-aligned; 0 for broadcast and size-1 dimensions).
pub fn broadcast_strides(t: &Tensor, shape: &[i64]) -> DimVec {
    let nd = shape.len();
    let td = t.dim();
    let mut st = DimVec::from_elem(0, nd);
    for i in 0..td {
        let d = nd - td + i;
        if t.sizes()[i] != 1 {
            st[d] = t.strides()[i];
        }
    }
    st
}

/// PyTorch's `reorder_dimensions`: the dimensions from fastest to slowest by the operands'
/// strides (operand order breaks ties; broadcast dimensions do not vote).
pub fn reorder_dims(shape: &[i64], strides: &[&[i64]]) -> SmallVec<[usize; 6]> {
    let nd = shape.len();
    let mut perm: SmallVec<[usize; 6]> = (0..nd).rev().collect();
    let should_swap = |d0: usize, d1: usize| -> i32 {
        for st in strides {
            let (s0, s1) = (st[d0], st[d1]);
            if s0 == 0 || s1 == 0 {
                continue;
            }
            if s0 < s1 {
                return -1;
            }
            if s0 > s1 {
                return 1;
            }
            if shape[d0] > shape[d1] {
                return 1;
            }
        }
        0
    };
    for i in 1..nd {
        let mut d1 = i;
        for d0 in (0..i).rev() {
            let c = should_swap(perm[d0], perm[d1]);
            if c > 0 {
                perm.swap(d0, d1);
                d1 = d0;
            } else if c < 0 {
                break;
            }
        }
    }
    perm
}

/// Dense strides laying the dimensions out in `perm` order (fastest first).
pub fn strides_for_perm(shape: &[i64], perm: &[usize]) -> DimVec {
    let mut st = DimVec::from_elem(0, shape.len());
    let mut acc = 1i64;
    for &d in perm {
        st[d] = acc;
        acc = acc.saturating_mul(shape[d].max(1));
    }
    st
}

/// Applies `perm` and merges dimensions every operand walks contiguously
/// (`TensorIteratorBase::coalesce_dimensions`).
pub fn coalesce(shape: &[i64], strides: &[DimVec], perm: &[usize]) -> Geometry {
    let mut sizes: DimVec = perm.iter().map(|&d| shape[d]).collect();
    let mut st: SmallVec<[DimVec; 4]> = strides
        .iter()
        .map(|s| perm.iter().map(|&d| s[d]).collect())
        .collect();
    if sizes.is_empty() {
        return Geometry {
            sizes: DimVec::from_elem(1, 1),
            strides: st.iter().map(|_| DimVec::from_elem(0, 1)).collect(),
        };
    }
    let mut prev = 0;
    for d in 1..sizes.len() {
        let can =
            sizes[prev] == 1 || sizes[d] == 1 || st.iter().all(|s| sizes[prev] * s[prev] == s[d]);
        if can {
            if sizes[prev] == 1 {
                for s in st.iter_mut() {
                    s[prev] = s[d];
                }
            }
            sizes[prev] *= sizes[d];
        } else {
            prev += 1;
            if prev != d {
                for s in st.iter_mut() {
                    s[prev] = s[d];
                }
                sizes[prev] = sizes[d];
            }
        }
    }
    sizes.truncate(prev + 1);
    for s in st.iter_mut() {
        s.truncate(prev + 1);
    }
    Geometry { sizes, strides: st }
}

/// The first and one-past-last byte a tensor addresses (empty for no elements).
fn byte_range(t: &Tensor) -> (usize, usize) {
    if t.numel() == 0 || !t.has_data() {
        return (0, 0);
    }
    let start = t.data_ptr() as usize;
    let span: i64 = t
        .sizes()
        .iter()
        .zip(t.strides())
        .map(|(&s, &st)| (s - 1) * st)
        .sum();
    (start, start + (span as usize + 1) * t.element_size())
}

/// PyTorch's `assert_no_internal_overlap` for outputs: a written tensor may not have two
/// elements at one address.
pub fn check_internal_overlap(t: &Tensor) -> Result<()> {
    let overlapping = t
        .sizes()
        .iter()
        .zip(t.strides())
        .any(|(&s, &st)| s > 1 && st == 0);
    if overlapping {
        return Err(TensorError::invalid(
            "unsupported operation: more than one element of the written-to tensor refers to a \
             single memory location. Please clone() the tensor before performing the operation.",
        ));
    }
    Ok(())
}

/// PyTorch's `assert_no_partial_overlap`: an input may be the output itself (in-place) or
/// disjoint from it, not overlap it partially.
pub fn check_no_partial_overlap(out: &Tensor, input: &Tensor) -> Result<()> {
    if !out.is_alias_of(input) || Tensor::ptr_eq(out, input) {
        return Ok(());
    }
    let same = out.storage_offset() == input.storage_offset()
        && out.sizes() == input.sizes()
        && out.strides() == input.strides()
        && out.dtype() == input.dtype();
    if same {
        return Ok(());
    }
    let (a0, a1) = byte_range(out);
    let (b0, b1) = byte_range(input);
    if a0 < b1 && b0 < a1 {
        return Err(TensorError::invalid(
            "unsupported operation: some elements of the input tensor and the written-to tensor \
             refer to a single memory location. Please clone() the tensor before performing the \
             operation.",
        ));
    }
    Ok(())
}

/// The device of an op's result given its tensors (see [`common_device`]).
pub fn result_device(tensors: &[&Tensor]) -> Result<Device> {
    common_device(tensors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_tensor::RawOps;

    #[test]
    fn coalesces_contiguous_and_transposed() {
        let g = coalesce(
            &[2, 3, 4],
            &[DimVec::from_slice(&[12, 4, 1])],
            &reorder_dims(&[2, 3, 4], &[&[12, 4, 1]]),
        );
        assert_eq!(&g.sizes[..], &[24]);
        // A transposed operand keeps two dims; perm puts its stride-1 dim first.
        let st = [DimVec::from_slice(&[1, 3])];
        let perm = reorder_dims(&[3, 2], &[&st[0]]);
        assert_eq!(&perm[..], &[0, 1]);
        let g = coalesce(&[3, 2], &st, &perm);
        assert_eq!(&g.sizes[..], &[6]);
        assert_eq!(&g.strides[0][..], &[1]);
    }

    #[test]
    fn output_follows_input_layout() {
        let a = Tensor::arange(0, 6, 1, Some(ScalarType::Float))
            .unwrap()
            .view(&[2, 3])
            .unwrap()
            .t()
            .unwrap();
        let iter = IterConfig::new("neg").input(&a).build().unwrap();
        iter.for_each1(|x: f32| -x).unwrap();
        let out = iter.finish().unwrap();
        assert_eq!(out.strides(), &[1, 3]);
        assert_eq!(
            out.to_vec::<f32>().unwrap(),
            [-0.0, -3.0, -1.0, -4.0, -2.0, -5.0]
        );
    }

    #[test]
    fn overlap_errors() {
        let t = Tensor::arange(0, 5, 1, Some(ScalarType::Float)).unwrap();
        let a = t.narrow(0, 0, 4).unwrap();
        let b = t.narrow(0, 1, 4).unwrap();
        let err = IterConfig::new("add").out(&b).input(&a).input(&a).build();
        assert!(err
            .err()
            .unwrap()
            .to_string()
            .contains("some elements of the input"));
        let e = Tensor::zeros(&[1], ScalarType::Float)
            .unwrap()
            .expand(&[3])
            .unwrap();
        let err = IterConfig::new("add")
            .out(&e)
            .input(&a.narrow(0, 0, 3).unwrap())
            .build();
        assert!(err
            .err()
            .unwrap()
            .to_string()
            .contains("more than one element"));
    }

    #[test]
    fn large_loops_stream_and_match() {
        // 3 x 4 B x 6M = 72 MB moved: above STREAM_BYTES, parallel, streamed output.
        let n = 6_000_000usize;
        let a = Tensor::from_vec((0..n).map(|i| (i % 1000) as f32).collect(), &[n as i64]);
        let a = a.unwrap();
        let iter = IterConfig::new("add").input(&a).input(&a).build().unwrap();
        assert!(iter.numel() * 12 >= STREAM_BYTES);
        iter.for_each2(|x: f32, y: f32| x + y).unwrap();
        let out = iter.finish().unwrap().to_vec::<f32>().unwrap();
        assert!(out
            .iter()
            .enumerate()
            .all(|(i, v)| *v == 2.0 * (i % 1000) as f32));
    }

    #[test]
    fn meta_propagates_metadata_only() {
        let m = Tensor::zeros_on(&[2, 1], ScalarType::Int, Device::META).unwrap();
        let s = Tensor::scalar_tensor(1.5, ScalarType::Double);
        let iter = IterConfig::new("add").input(&m).input(&s).build().unwrap();
        assert!(!iter.computes());
        let out = iter.finish().unwrap();
        assert_eq!(out.dtype(), ScalarType::Double);
        assert!(out.is_meta());
    }
}
