//! The raw elementwise loops behind [`TensorIter`](crate::iter::TensorIter): a parallel
//! driver over a coalesced [`Geometry`], and row kernels for one, two and three inputs.

use std::ptr;

use smallvec::SmallVec;
use switchboard_tensor::DimVec;

/// Elements below which loops stay on the calling thread (PyTorch's `GRAIN_SIZE`).
pub const GRAIN_SIZE: usize = 32768;

/// Elements per block in the blocked row kernel (Note [Blocked rows]).
const BLOCK: usize = 128;

/// The loop shape of an elementwise op after permuting and coalescing: `sizes[0]` is the
/// innermost (fastest) dimension; `strides[k][d]` is operand `k`'s stride in elements along
/// `d` (operand 0 is the output). Always at least one dimension.
#[derive(Clone, Debug, Default)]
pub struct Geometry {
    /// Loop sizes, innermost first.
    pub sizes: DimVec,
    /// Per operand, strides in elements, innermost first.
    pub strides: SmallVec<[DimVec; 4]>,
}

impl Geometry {
    /// A one-dimensional geometry of `n` elements, every operand contiguous.
    pub fn contiguous(n: i64, operands: usize) -> Geometry {
        Geometry {
            sizes: DimVec::from_elem(n, 1),
            strides: (0..operands).map(|_| DimVec::from_elem(1, 1)).collect(),
        }
    }

    /// The number of elements.
    pub fn numel(&self) -> usize {
        self.sizes.iter().product::<i64>().max(0) as usize
    }
}

/// Whether the calling thread is a rayon worker (nested loops then run serially, as
/// `at::parallel_for` does inside a parallel region).
pub fn in_parallel_region() -> bool {
    rayon::current_thread_index().is_some()
}

/// Runs `f(start, end)` over a partition of `0..n`: on the calling thread when `n <= grain`,
/// inside a parallel region or with one thread; else in parallel chunks of at least `grain`.
pub fn parallel_for(n: usize, grain: usize, f: impl Fn(usize, usize) + Sync) {
    if n == 0 {
        return;
    }
    let threads = if n <= grain || in_parallel_region() {
        1
    } else {
        rayon::current_num_threads()
    };
    if threads <= 1 {
        f(0, n);
        return;
    }
    let chunks = n.div_ceil(grain.max(1)).min(threads * 2).max(1);
    let chunk = n.div_ceil(chunks);
    use rayon::prelude::*;
    (0..chunks).into_par_iter().for_each(|c| {
        let start = c * chunk;
        let end = (start + chunk).min(n);
        if start < end {
            f(start, end);
        }
    });
}

/// Calls `row(n, offsets)` for the rows of `g` covering linear elements `start..end`, where
/// `offsets[k]` is operand `k`'s element offset at the row's first element.
#[inline]
pub fn for_each_row<const N: usize>(
    g: &Geometry,
    start: usize,
    end: usize,
    mut row: impl FnMut(usize, [isize; N]),
) {
    let ndim = g.sizes.len();
    let mut idx: SmallVec<[i64; 6]> = SmallVec::from_elem(0, ndim);
    let mut rem = start as i64;
    let mut offs = [0isize; N];
    for d in 0..ndim {
        let s = g.sizes[d].max(1);
        idx[d] = rem % s;
        rem /= s;
        for (k, o) in offs.iter_mut().enumerate() {
            *o += (idx[d] * g.strides[k][d]) as isize;
        }
    }
    let mut pos = start;
    while pos < end {
        let n = ((g.sizes[0] - idx[0]) as usize).min(end - pos);
        row(n, offs);
        pos += n;
        if pos >= end {
            break;
        }
        idx[0] += n as i64;
        for (k, o) in offs.iter_mut().enumerate() {
            *o += n as isize * g.strides[k][0] as isize;
        }
        let mut d = 0;
        while idx[d] >= g.sizes[d] && d + 1 < ndim {
            for (k, o) in offs.iter_mut().enumerate() {
                *o -= (g.sizes[d] * g.strides[k][d]) as isize;
                *o += g.strides[k][d + 1] as isize;
            }
            idx[d] = 0;
            d += 1;
            idx[d] += 1;
        }
    }
}

// Note [Blocked rows]
// A row whose operands are all contiguous and whose output does not overlap an input is run
// over plain slices: the compiler vectorises `out[i] = f(a[i], b[i])`. Every other row (an
// in-place op, whose output *is* an input; a broadcast scalar; strided operands) is run in
// blocks: each block of inputs is gathered into arrays on the stack (a plain copy, or a fill
// for a stride-0 operand), `f` runs over the arrays (vectorised again: they cannot alias), and
// the results are scattered to the output. Reading a block before writing it keeps in-place
// ops exact, and no `&mut` ever aliases a `&` (slices are formed only for disjoint memory).

/// Whether `[a, a + n)` and `[b, b + m)` (in elements of the given sizes) share a byte.
#[inline]
fn overlaps<A, B>(a: *const A, n: usize, b: *const B, m: usize) -> bool {
    let (a0, b0) = (a as usize, b as usize);
    let (a1, b1) = (
        a0 + n * std::mem::size_of::<A>(),
        b0 + m * std::mem::size_of::<B>(),
    );
    a0 < b1 && b0 < a1
}

/// Gathers `m` elements from `p` with `stride` into `buf`.
///
/// # Safety
/// `p + i * stride` must be valid for reads for `i < m`, and `m <= buf.len()`.
#[inline(always)]
unsafe fn load_block<A: Copy>(p: *const A, stride: isize, m: usize, buf: &mut [A; BLOCK]) {
    if stride == 1 {
        // SAFETY: the caller guarantees m readable elements; `buf` is a distinct local array.
        unsafe { ptr::copy_nonoverlapping(p, buf.as_mut_ptr(), m) };
    } else if stride == 0 {
        // SAFETY: the caller guarantees `p` is readable.
        let v = unsafe { *p };
        buf[..m].fill(v);
    } else {
        for (i, b) in buf[..m].iter_mut().enumerate() {
            // SAFETY: i < m, in bounds by the caller's guarantee.
            *b = unsafe { *p.offset(i as isize * stride) };
        }
    }
}

/// Scatters `m` elements of `buf` to `p` with `stride`.
///
/// # Safety
/// `p + i * stride` must be valid for writes for `i < m`, with no live reference to them.
#[inline(always)]
unsafe fn store_block<O: Copy>(p: *mut O, stride: isize, m: usize, buf: &[O; BLOCK]) {
    if stride == 1 {
        // SAFETY: the caller guarantees m writable elements; `buf` is a distinct local array.
        unsafe { ptr::copy_nonoverlapping(buf.as_ptr(), p, m) };
    } else {
        for (i, b) in buf[..m].iter().enumerate() {
            // SAFETY: i < m, in bounds by the caller's guarantee.
            unsafe { *p.offset(i as isize * stride) = *b };
        }
    }
}

/// One row of a one-input loop: `out[i] = f(a[i])`.
///
/// # Safety
/// For `i < n`, `po + i*so` must be valid for writes and `pa + i*sa` for reads, under an
/// `Access` covering both; the output must not partially overlap the input.
#[inline(always)]
pub unsafe fn row1<O: Copy + Default, A: Copy + Default>(
    n: usize,
    (po, so): (*mut O, isize),
    (pa, sa): (*const A, isize),
    f: &impl Fn(A) -> O,
) {
    if so == 1 && sa == 1 && !overlaps(po, n, pa, n) {
        // SAFETY: both ranges are valid (caller) and disjoint (checked), so a `&mut` and a `&`
        // over them do not alias.
        let (o, a) = unsafe {
            (
                std::slice::from_raw_parts_mut(po, n),
                std::slice::from_raw_parts(pa, n),
            )
        };
        for (o, &a) in o.iter_mut().zip(a) {
            *o = f(a);
        }
        return;
    }
    let (mut ba, mut bo) = ([A::default(); BLOCK], [O::default(); BLOCK]);
    let mut i = 0;
    while i < n {
        let m = BLOCK.min(n - i);
        let off = i as isize;
        // SAFETY: elements i..i+m of each operand are in range (caller).
        unsafe { load_block(pa.offset(off * sa), sa, m, &mut ba) };
        for (o, &a) in bo[..m].iter_mut().zip(&ba[..m]) {
            *o = f(a);
        }
        // SAFETY: as above; the inputs of this block were read before this write.
        unsafe { store_block(po.offset(off * so), so, m, &bo) };
        i += m;
    }
}

/// One row of a two-input loop: `out[i] = f(a[i], b[i])`. Safety as [`row1`].
///
/// # Safety
/// See [`row1`], for both inputs.
#[inline(always)]
pub unsafe fn row2<O: Copy + Default, A: Copy + Default, B: Copy + Default>(
    n: usize,
    (po, so): (*mut O, isize),
    (pa, sa): (*const A, isize),
    (pb, sb): (*const B, isize),
    f: &impl Fn(A, B) -> O,
) {
    if so == 1 && sa == 1 && sb == 1 && !overlaps(po, n, pa, n) && !overlaps(po, n, pb, n) {
        // SAFETY: valid (caller) and the output is disjoint from both inputs (checked).
        let (o, a, b) = unsafe {
            (
                std::slice::from_raw_parts_mut(po, n),
                std::slice::from_raw_parts(pa, n),
                std::slice::from_raw_parts(pb, n),
            )
        };
        for ((o, &a), &b) in o.iter_mut().zip(a).zip(b) {
            *o = f(a, b);
        }
        return;
    }
    let mut ba = [A::default(); BLOCK];
    let mut bb = [B::default(); BLOCK];
    let mut bo = [O::default(); BLOCK];
    let mut i = 0;
    while i < n {
        let m = BLOCK.min(n - i);
        let off = i as isize;
        // SAFETY: elements i..i+m of each operand are in range (caller).
        unsafe {
            load_block(pa.offset(off * sa), sa, m, &mut ba);
            load_block(pb.offset(off * sb), sb, m, &mut bb);
        }
        for ((o, &a), &b) in bo[..m].iter_mut().zip(&ba[..m]).zip(&bb[..m]) {
            *o = f(a, b);
        }
        // SAFETY: as above; the inputs of this block were read before this write.
        unsafe { store_block(po.offset(off * so), so, m, &bo) };
        i += m;
    }
}

/// One row of a three-input loop: `out[i] = f(a[i], b[i], c[i])` (always blocked).
///
/// # Safety
/// See [`row1`], for all three inputs.
#[inline(always)]
pub unsafe fn row3<O, A, B, C>(
    n: usize,
    (po, so): (*mut O, isize),
    (pa, sa): (*const A, isize),
    (pb, sb): (*const B, isize),
    (pc, sc): (*const C, isize),
    f: &impl Fn(A, B, C) -> O,
) where
    O: Copy + Default,
    A: Copy + Default,
    B: Copy + Default,
    C: Copy + Default,
{
    let mut ba = [A::default(); BLOCK];
    let mut bb = [B::default(); BLOCK];
    let mut bc = [C::default(); BLOCK];
    let mut bo = [O::default(); BLOCK];
    let mut i = 0;
    while i < n {
        let m = BLOCK.min(n - i);
        let off = i as isize;
        // SAFETY: elements i..i+m of each operand are in range (caller).
        unsafe {
            load_block(pa.offset(off * sa), sa, m, &mut ba);
            load_block(pb.offset(off * sb), sb, m, &mut bb);
            load_block(pc.offset(off * sc), sc, m, &mut bc);
        }
        for (j, o) in bo[..m].iter_mut().enumerate() {
            *o = f(ba[j], bb[j], bc[j]);
        }
        // SAFETY: as above; the inputs of this block were read before this write.
        unsafe { store_block(po.offset(off * so), so, m, &bo) };
        i += m;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_visit_every_element_once() {
        // sizes (3, 2, 2) innermost first, one contiguous operand.
        let g = Geometry {
            sizes: DimVec::from_slice(&[3, 2, 2]),
            strides: [DimVec::from_slice(&[1, 3, 6])].into_iter().collect(),
        };
        for (start, end) in [(0, 12), (1, 11), (4, 5), (5, 12)] {
            let mut seen = vec![];
            for_each_row::<1>(&g, start, end, |n, [o]| {
                seen.extend((0..n as isize).map(|i| o + i));
            });
            assert_eq!(seen, (start as isize..end as isize).collect::<Vec<_>>());
        }
    }

    #[test]
    fn parallel_for_partitions() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let total = AtomicUsize::new(0);
        parallel_for(100_000, 1000, |s, e| {
            total.fetch_add(e - s, Ordering::Relaxed);
        });
        assert_eq!(total.into_inner(), 100_000);
    }

    #[test]
    fn in_place_blocked_row() {
        let mut v: Vec<i32> = (0..300).collect();
        let p = v.as_mut_ptr();
        // SAFETY: 300 valid elements; out and a are the same memory (in-place), b is broadcast.
        unsafe {
            row2(
                300,
                (p, 1),
                (p as *const i32, 1),
                (&5i32 as *const i32, 0),
                &|a, b| a + b,
            )
        };
        assert_eq!(v[299], 304);
        assert_eq!(v[0], 5);
    }
}
