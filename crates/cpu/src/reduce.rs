//! The shared reduction helper: a [`Reducer`] (init, fold, combine, project) run over the
//! reduced dimensions of a tensor by [`reduce_into`], in parallel, with two loop orders:
//!
//! - *inner* reductions (the reduced dimensions include the input's fastest one): each output
//!   folds its elements, contiguous rows through [`Reducer::fold_slice`] (vectorised sums);
//!   a full reduction splits its range over threads and combines the partial results;
//! - *outer* reductions (a kept dimension is the fastest): a row of outputs accumulates
//!   side by side while the loop walks the reduced dimensions, so the input is read in order.

use smallvec::SmallVec;
use switchboard_tensor::{Access, DimVec, Element, Tensor};

use crate::error::{invalid, Result};
use crate::loops::{
    for_each_row, in_parallel_region, parallel_for, parallel_region, Geometry, GRAIN_SIZE,
};

/// A reduction over elements of type `T`.
pub trait Reducer<T: Element>: Sync {
    /// The accumulator.
    type Acc: Copy + Send + Sync;
    /// The output element type.
    type Out: Element;
    /// The accumulator before any element.
    fn init(&self) -> Self::Acc;
    /// Folds element `x`, the `idx`-th of the reduced elements in loop order (for a single
    /// reduced dimension: the position along it).
    fn fold(&self, acc: Self::Acc, x: T, idx: i64) -> Self::Acc;
    /// Folds a contiguous run starting at reduced index `idx0` (override to vectorise).
    #[inline]
    fn fold_slice(&self, mut acc: Self::Acc, xs: &[T], idx0: i64) -> Self::Acc {
        for (i, &x) in xs.iter().enumerate() {
            acc = self.fold(acc, x, idx0 + i as i64);
        }
        acc
    }
    /// Merges the accumulators of two consecutive ranges (`a` before `b`).
    fn combine(&self, a: Self::Acc, b: Self::Acc) -> Self::Acc;
    /// The output value of an accumulator.
    fn project(&self, acc: Self::Acc) -> Self::Out;
}

pub use switchboard_ops::structured::{reduced_shape, reduction_mask};

// Note [Lane folds]
// A row reduced in one running accumulator waits on one add's latency per element and never
// vectorises (floating-point addition is not associative, so the compiler keeps the order).
// PyTorch's row kernels reduce in vector registers instead. `lane_fold` does the same in
// `LANES` independent accumulators, one AVX register of `f32`: element `j` of the full chunks
// goes to lane `j % LANES`, the tail to its own accumulator, and the result is the tail
// combined with the lanes in order. The order of the additions differs from a sequential
// sum, as PyTorch's does, by rounding only.

/// The accumulators of [`lane_fold`] (Note [Lane folds]).
pub(crate) const LANES: usize = 8;

/// Folds `fold(acc, x)` over `xs` in [`LANES`] interleaved accumulators started at `init`,
/// merged by `combine` (Note [Lane folds]).
#[inline(always)]
pub(crate) fn lane_fold<X: Copy, A: Copy>(
    xs: &[X],
    init: A,
    fold: impl Fn(A, X) -> A,
    combine: impl Fn(A, A) -> A,
) -> A {
    let mut lanes = [init; LANES];
    let mut chunks = xs.chunks_exact(LANES);
    for c in &mut chunks {
        for (l, &x) in lanes.iter_mut().zip(c) {
            *l = fold(*l, x);
        }
    }
    let tail = chunks.remainder().iter().fold(init, |a, &x| fold(a, x));
    lanes.iter().fold(tail, |a, &l| combine(a, l))
}

/// [`lane_fold`] over two rows of the same length, `fold(acc, x, y)`.
#[inline(always)]
pub(crate) fn lane_fold2<X: Copy, Y: Copy, A: Copy>(
    xs: &[X],
    ys: &[Y],
    init: A,
    fold: impl Fn(A, X, Y) -> A,
    combine: impl Fn(A, A) -> A,
) -> A {
    debug_assert_eq!(xs.len(), ys.len());
    let mut lanes = [init; LANES];
    let (mut cx, mut cy) = (xs.chunks_exact(LANES), ys.chunks_exact(LANES));
    for (a, b) in (&mut cx).zip(&mut cy) {
        for ((l, &x), &y) in lanes.iter_mut().zip(a).zip(b) {
            *l = fold(*l, x, y);
        }
    }
    let tail = cx
        .remainder()
        .iter()
        .zip(cy.remainder())
        .fold(init, |a, (&x, &y)| fold(a, x, y));
    lanes.iter().fold(tail, |a, &l| combine(a, l))
}

/// The stride of `out` for each input dimension (0 for reduced ones), given that `out` has
/// the shape [`reduced_shape`] made with `keepdim`.
fn out_strides_per_input_dim(out: &Tensor, mask: &[bool], keepdim: bool) -> DimVec {
    let mut st = DimVec::from_elem(0, mask.len());
    let mut od = 0;
    for d in 0..mask.len() {
        if !mask[d] {
            st[d] = out.strides()[od];
            od += 1;
        } else if keepdim {
            od += 1;
        }
    }
    st
}

/// Sorts dims by input stride and merges neighbours that walk memory contiguously, in place (the
/// vector is 150 bytes: moving it in and out would copy it twice).
fn coalesce_dims(dims: &mut SmallVec<[(i64, i64, i64); 6]>) {
    // Most reductions see one or two dims here (after dropping size-1 dims): a stable sort's
    // set-up would cost more than the rest of the reduction's geometry on a small tensor.
    match dims.len() {
        0 | 1 => return,
        // What the stable sort does with two: swap only when strictly out of order.
        2 if dims[0].1 > dims[1].1 => dims.swap(0, 1),
        2 => {}
        _ => dims.sort_by_key(|d| d.1),
    }
    let mut len = 1;
    for i in 1..dims.len() {
        let (last, d) = (dims[len - 1], dims[i]);
        if last.1 * last.0 == d.1 && last.2 * last.0 == d.2 {
            dims[len - 1].0 *= d.0;
        } else {
            dims[len] = d;
            len += 1;
        }
    }
    dims.truncate(len);
}

/// Reduces `input` (dtype `T`) over the dims in `mask` into `out` (dtype `R::Out`, shape
/// [`reduced_shape`] with `keepdim`). `out` must not share storage with `input`.
pub fn reduce_into<T: Element, R: Reducer<T>>(
    input: &Tensor,
    out: &Tensor,
    mask: &[bool],
    keepdim: bool,
    r: &R,
) -> Result<()> {
    if out.is_alias_of(input) {
        return Err(invalid(
            "unsupported operation: the output of a reduction shares memory with its input",
        ));
    }
    let _ = input.data_ptr_as::<T>()?;
    let _ = out.data_ptr_as::<R::Out>()?;
    let ostrides = out_strides_per_input_dim(out, mask, keepdim);
    let (mut kept, mut red): (SmallVec<[_; 6]>, SmallVec<[_; 6]>) =
        (SmallVec::new(), SmallVec::new());
    for d in 0..input.dim() {
        let s = input.sizes()[d];
        if s == 1 {
            continue;
        }
        let entry = (s, input.strides()[d], ostrides[d]);
        if mask[d] {
            red.push((s, input.strides()[d], 0));
        } else {
            kept.push(entry);
        }
    }
    coalesce_dims(&mut kept);
    coalesce_dims(&mut red);
    let n_out: i64 = kept.iter().map(|d| d.0).product();
    let n_red: i64 = red.iter().map(|d| d.0).product();
    if n_out == 0 {
        return Ok(());
    }
    let access = Access::new(&[input], &[out])?;
    let pi = input.data_ptr() as usize;
    let po = out.mut_data_ptr() as usize;
    let red_geom = geometry(&red, 1);
    let kernel = Kernel {
        pi,
        red_geom,
        n_red: n_red.max(0) as usize,
        r,
        _t: std::marker::PhantomData::<T>,
    };
    let outer = !kept.is_empty() && !red.is_empty() && kept[0].1 < red[0].1;
    if kept.is_empty() {
        let acc = kernel.fold_all();
        // SAFETY: `access` holds `out` exclusively; it has one element here (all kept dims
        // have size 1), at offset 0 of its data pointer.
        unsafe { *(po as *mut R::Out) = r.project(acc) };
    } else if outer {
        kernel.outer(&kept, po);
    } else {
        let kept_geom = geometry(&kept, 2);
        let grain = (GRAIN_SIZE / (kernel.n_red.max(1))).max(1);
        parallel_for(n_out as usize, grain, |s, e| {
            let (is, os) = (
                kept_geom.strides[0][0] as isize,
                kept_geom.strides[1][0] as isize,
            );
            for_each_row::<2>(&kept_geom, s, e, |n, [io, oo]| {
                for j in 0..n as isize {
                    let acc = kernel.fold_from(io + j * is);
                    // SAFETY: the output offset comes from `out`'s own strides for an index in
                    // range; `access` holds it exclusively and chunks write disjoint outputs.
                    unsafe { *(po as *mut R::Out).offset(oo + j * os) = r.project(acc) };
                }
            });
        });
    }
    drop(access);
    Ok(())
}

/// A geometry over `dims` (size, input stride, output stride) for `operands` (1: input only;
/// 2: input and output).
fn geometry(dims: &[(i64, i64, i64)], operands: usize) -> Geometry {
    if dims.is_empty() {
        return Geometry {
            sizes: DimVec::from_elem(1, 1),
            strides: (0..operands).map(|_| DimVec::from_elem(0, 1)).collect(),
        };
    }
    let mut g = Geometry {
        sizes: dims.iter().map(|d| d.0).collect(),
        strides: SmallVec::new(),
    };
    g.strides.push(dims.iter().map(|d| d.1).collect());
    if operands > 1 {
        g.strides.push(dims.iter().map(|d| d.2).collect());
    }
    g
}

struct Kernel<'r, T, R> {
    pi: usize,
    red_geom: Geometry,
    n_red: usize,
    r: &'r R,
    _t: std::marker::PhantomData<T>,
}

impl<T: Element, R: Reducer<T>> Kernel<'_, T, R> {
    /// Folds reduced elements `start..end` (loop order) from input offset `base`.
    fn fold_range(&self, base: isize, start: usize, end: usize) -> R::Acc {
        let mut acc = self.r.init();
        if start >= end {
            return acc;
        }
        let s0 = self.red_geom.strides[0][0] as isize;
        let mut idx = start as i64;
        let p = self.pi as *const T;
        for_each_row::<1>(&self.red_geom, start, end, |n, [off]| {
            // SAFETY: offsets come from the input's own strides for indices in range (Note
            // [Tensor bounds invariant]); the caller's Access holds a shared borrow of the
            // input, whose storage no output shares.
            unsafe {
                let row = p.offset(base + off);
                if s0 == 1 {
                    acc = self
                        .r
                        .fold_slice(acc, std::slice::from_raw_parts(row, n), idx);
                } else {
                    for j in 0..n as isize {
                        acc = self.r.fold(acc, *row.offset(j * s0), idx + j as i64);
                    }
                }
            }
            idx += n as i64;
        });
        acc
    }

    fn fold_from(&self, base: isize) -> R::Acc {
        self.fold_range(base, 0, self.n_red)
    }

    /// A full reduction: split over threads when large, partial results combined in order.
    fn fold_all(&self) -> R::Acc {
        let n = self.n_red;
        let threads = rayon::current_num_threads();
        if n <= GRAIN_SIZE || threads <= 1 || in_parallel_region() {
            return self.fold_from(0);
        }
        let chunks = n.div_ceil(GRAIN_SIZE).min(threads * 2);
        let chunk = n.div_ceil(chunks);
        use rayon::prelude::*;
        let partials: Vec<R::Acc> = (0..chunks)
            .into_par_iter()
            .map(|c| parallel_region(|| self.fold_range(0, c * chunk, ((c + 1) * chunk).min(n))))
            .collect();
        let mut acc = partials[0];
        for p in &partials[1..] {
            acc = self.r.combine(acc, *p);
        }
        acc
    }

    /// An outer reduction: rows of outputs along the fastest kept dim accumulate together.
    fn outer(&self, kept: &[(i64, i64, i64)], po: usize) {
        const JB: usize = 256;
        let (k0, ks0, os0) = kept[0];
        let groups_geom = geometry(&kept[1..], 2);
        let n_groups: usize = kept[1..].iter().map(|d| d.0 as usize).product();
        let blocks = (k0 as usize).div_ceil(JB);
        let tasks = n_groups * blocks;
        let grain = (GRAIN_SIZE / (self.n_red.max(1) * JB)).max(1);
        parallel_for(tasks, grain, |s, e| {
            let p = self.pi as *const T;
            let mut acc: Vec<R::Acc> = Vec::with_capacity(JB);
            for t in s..e {
                let (g, b) = (t / blocks, t % blocks);
                let (mut gi, mut go) = (0isize, 0isize);
                for_each_row::<2>(&groups_geom, g, g + 1, |_, [i, o]| {
                    gi = i;
                    go = o;
                });
                let j0 = b * JB;
                let jn = JB.min(k0 as usize - j0);
                acc.clear();
                acc.resize(jn, self.r.init());
                let mut idx = 0i64;
                let s0 = self.red_geom.strides[0][0] as isize;
                for_each_row::<1>(&self.red_geom, 0, self.n_red, |n, [off]| {
                    for r in 0..n as isize {
                        // SAFETY: every offset is an in-range index of the input's geometry
                        // (kept group, kept column j0 + j, reduced element), under the
                        // caller's shared Access.
                        unsafe {
                            let base = p.offset(gi + off + r * s0 + (j0 as isize) * ks0 as isize);
                            if ks0 == 1 {
                                let xs = std::slice::from_raw_parts(base, jn);
                                for (a, &x) in acc.iter_mut().zip(xs) {
                                    *a = self.r.fold(*a, x, idx);
                                }
                            } else {
                                for (j, a) in acc.iter_mut().enumerate() {
                                    *a = self.r.fold(
                                        *a,
                                        *base.offset(j as isize * ks0 as isize),
                                        idx,
                                    );
                                }
                            }
                        }
                        idx += 1;
                    }
                });
                for (j, a) in acc.iter().enumerate() {
                    let o = go + ((j0 + j) as isize) * os0 as isize;
                    // SAFETY: an in-range output index under the caller's exclusive Access;
                    // tasks write disjoint outputs.
                    unsafe { *(po as *mut R::Out).offset(o) = self.r.project(*a) };
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_tensor::RawOps;
    use switchboard_tensor::ScalarType;

    struct SumI64;
    impl Reducer<i64> for SumI64 {
        type Acc = i64;
        type Out = i64;
        fn init(&self) -> i64 {
            0
        }
        fn fold(&self, a: i64, x: i64, _: i64) -> i64 {
            a + x
        }
        fn combine(&self, a: i64, b: i64) -> i64 {
            a + b
        }
        fn project(&self, a: i64) -> i64 {
            a
        }
    }

    fn run(t: &Tensor, dims: &[i64], keepdim: bool) -> Tensor {
        let mask = reduction_mask(Some(dims), t.dim()).unwrap();
        let out =
            Tensor::zeros(&reduced_shape(t.sizes(), &mask, keepdim), ScalarType::Long).unwrap();
        reduce_into(t, &out, &mask, keepdim, &SumI64).unwrap();
        out
    }

    #[test]
    fn inner_outer_and_full() {
        let t = Tensor::arange(0, 24, 1, None)
            .unwrap()
            .view(&[2, 3, 4])
            .unwrap();
        assert_eq!(
            run(&t, &[2], false).to_vec::<i64>().unwrap(),
            [6, 22, 38, 54, 70, 86]
        );
        assert_eq!(
            run(&t, &[0], false).to_vec::<i64>().unwrap(),
            [12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34]
        );
        assert_eq!(run(&t, &[0, 2], true).sizes(), &[1, 3, 1]);
        assert_eq!(
            run(&t, &[0, 2], true).to_vec::<i64>().unwrap(),
            [60, 92, 124]
        );
        assert_eq!(run(&t, &[], false).to_vec::<i64>().unwrap(), [276]);
        let tt = t.permute(&[2, 0, 1]).unwrap();
        assert_eq!(
            run(&tt, &[1], false).to_vec::<i64>().unwrap(),
            run(&tt.contiguous().unwrap(), &[1], false)
                .to_vec::<i64>()
                .unwrap()
        );
        let big = Tensor::arange(0, 100_000, 1, None).unwrap();
        assert_eq!(
            run(&big, &[0], false).to_vec::<i64>().unwrap(),
            [4_999_950_000]
        );
    }

    #[test]
    fn masks() {
        assert!(reduction_mask(Some(&[0, -2]), 2).is_err());
        assert_eq!(
            &reduction_mask(Some(&[-1]), 3).unwrap()[..],
            &[false, false, true]
        );
        assert!(reduction_mask(Some(&[3]), 3).is_err());
        assert_eq!(reduction_mask(Some(&[0]), 0).unwrap().len(), 0);
    }
}
