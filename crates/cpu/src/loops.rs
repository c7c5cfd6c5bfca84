//! The raw elementwise loops behind [`TensorIter`](crate::iter::TensorIter): a parallel
//! driver over a coalesced [`Geometry`], and row kernels for one, two and three inputs.

use std::cell::Cell;
use std::ptr;

use smallvec::SmallVec;
use switchboard_tensor::DimVec;

/// Elements below which loops stay on the calling thread (PyTorch's `GRAIN_SIZE`).
pub const GRAIN_SIZE: usize = 32768;

/// Elements per block in the blocked row kernel (Note [Blocked rows]).
const BLOCK: usize = 128;

/// Rows of up to this many elements run as a plain scalar loop: no slice or block set-up,
/// which is most of the cost of a tiny op's loop (Note [Blocked rows]).
const SMALL_ROW: usize = 4;

/// Bytes moved by one elementwise loop (all operands) from which its output is written with
/// non-temporal stores (Note [Streaming stores]).
pub const STREAM_BYTES: usize = 64 << 20;

// Note [Streaming stores]
// A loop over more memory than the last-level cache holds gains nothing from keeping its
// output in cache: by the time the next op reads the output's start, it has been evicted. Plain
// stores then cost a read of every output line before it is overwritten (read for ownership),
// a third more memory traffic for `out = a + b`. Above STREAM_BYTES the dense rows of one- and
// two-input loops compute tiles of 16 elements (kept in registers) and store each with
// non-temporal stores (x86-64 `movntdq`, part of SSE2, so always available), like glibc's
// memcpy above its non-temporal threshold, then fence so the stores are ordered before the
// loop's end is published to other threads. Computing a larger block on the stack and copying
// it out was measured slower than plain stores, hence the register tiles. Strided, in-place and
// three-input rows, and other architectures, use plain stores.

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

// Note [Parallel regions]
// A loop nested in a parallel loop's body runs serially, as `at::parallel_for` does inside a
// parallel region: the threads are busy with the outer loop already. Being a rayon worker does
// not mean being in a region: the thread that drives the kernels can itself be one (a pool
// built with `use_current_thread`, PyTorch's arrangement of the main thread plus workers), and
// its loops must then still run in parallel. So the region is a thread-local flag, set by
// `parallel_region` around each body a parallel loop runs; every parallel loop of this crate
// runs its bodies through it.

thread_local! {
    static IN_PARALLEL_REGION: Cell<bool> = const { Cell::new(false) };
}

/// Whether the calling thread is running the body of a parallel loop (nested loops then run
/// serially; Note [Parallel regions]).
pub fn in_parallel_region() -> bool {
    IN_PARALLEL_REGION.with(Cell::get)
}

/// Runs `body`, one piece of a parallel loop, inside a parallel region (Note [Parallel
/// regions]).
#[inline]
pub fn parallel_region<R>(body: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            IN_PARALLEL_REGION.with(|flag| flag.set(self.0));
        }
    }
    let _restore = Restore(IN_PARALLEL_REGION.with(|flag| flag.replace(true)));
    body()
}

// Note [One thread runs inline]
// A parallel iterator started outside the rayon pool hands its work to the pool's threads and
// blocks until they finish, even when the pool has a single thread: the calling thread then
// sleeps while one worker does the whole loop, and every such loop pays a wake-up of the worker
// and of the caller (on a loaded machine, a wait for a time slice each: measured as most of the
// ResNet step's batch norm time on one thread). Like `at::parallel_for`, loops run on the
// calling thread unless there are several threads to share them.

/// Whether a loop over `work` elements runs on the rayon threads: more than [`GRAIN_SIZE`]
/// elements, more than one thread, and not already inside a parallel region (Note [One thread
/// runs inline]).
pub fn runs_in_parallel(work: usize) -> bool {
    work > GRAIN_SIZE && rayon::current_num_threads() > 1 && !in_parallel_region()
}

/// Whether a loop over `planes` independent planes of `work_per_plane` elements each runs its
/// planes on the rayon threads: several planes, and [`runs_in_parallel`] for the whole work.
pub fn runs_planes_in_parallel(planes: usize, work_per_plane: usize) -> bool {
    planes > 1 && runs_in_parallel(planes.saturating_mul(work_per_plane))
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
    run_chunks(n, chunks, &f);
}

// Note [One rayon loop for every kernel]
// `parallel_for` is generic over its closure, and rayon's machinery (the bridge, the join
// closures, the stack jobs) is generic over what it runs: handing rayon the closure itself
// would copy that machinery into every kernel, for every dtype (about 3200 copies, half of
// this crate's LLVM IR, measured with `cargo llvm-lines`, and most of its release build time).
// The parallel branch hands rayon a `&dyn Fn` instead, so that one copy serves every loop; the
// cost is one indirect call per chunk (a few per loop), and the serial branch stays inlined.
fn run_chunks(n: usize, chunks: usize, f: &(dyn Fn(usize, usize) + Sync)) {
    let chunk = n.div_ceil(chunks);
    use rayon::prelude::*;
    (0..chunks).into_par_iter().for_each(|c| {
        let start = c * chunk;
        let end = (start + chunk).min(n);
        if start < end {
            parallel_region(|| f(start, end));
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
    // One dim (a contiguous or coalesced operand, the common case): `start..end` is one row,
    // without the index vector and the divisions of the general walk.
    if ndim == 1 && end as i64 <= g.sizes[0] {
        if start < end {
            row(
                end - start,
                std::array::from_fn(|k| start as isize * g.strides[k][0] as isize),
            );
        }
        return;
    }
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
// Rows of at most SMALL_ROW elements skip both set-ups: a scalar loop through raw pointers
// reads element i of every input before writing element i of the output, which is exact too,
// since an output is either one of the inputs (same addresses at the same i) or disjoint
// from it.

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

/// Elements per tile of a streamed row: computed into registers, then stored with
/// non-temporal stores (a multiple of 16 bytes for every element size).
const TILE: usize = 16;

/// Elements of `O` before `p` is 16-byte aligned, or `None` if it never gets there.
#[inline(always)]
fn head_to_align16<O>(p: *const O) -> Option<usize> {
    let gap = (p as usize).wrapping_neg() & 15;
    let size = std::mem::size_of::<O>();
    (size != 0 && gap.is_multiple_of(size)).then(|| gap / size)
}

/// Stores one tile at a 16-byte aligned `dst` with non-temporal stores.
///
/// # Safety
/// `dst` must be 16-byte aligned and valid for writes of `TILE` elements, with no live
/// reference to them.
#[inline(always)]
unsafe fn stream_tile<O: Copy>(dst: *mut O, tile: &[O; TILE]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        let (d, s) = (dst as *mut __m128i, tile.as_ptr() as *const __m128i);
        for q in 0..std::mem::size_of_val(tile) / 16 {
            // SAFETY: the tile is TILE * size_of::<O>() bytes, a multiple of 16; `d` is
            // 16-aligned and valid for as many bytes (caller); SSE2 is x86-64 baseline.
            unsafe { _mm_stream_si128(d.add(q), _mm_loadu_si128(s.add(q))) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: the caller's guarantee.
    unsafe {
        ptr::copy_nonoverlapping(tile.as_ptr(), dst, TILE)
    };
}

/// Orders the non-temporal stores of [`stream_tile`] before later stores (no-op elsewhere).
#[inline(always)]
fn stream_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `sfence` has no preconditions; SSE is part of the x86-64 baseline.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

/// `out[i] = g(i)` for `i < n` with the aligned middle streamed in tiles (Note [Streaming
/// stores]); `g` must read only memory disjoint from the output.
///
/// # Safety
/// `po` must be valid for writes of `n` elements with no live reference to them.
#[inline(always)]
unsafe fn stream_row<O: Copy + Default>(n: usize, po: *mut O, g: impl Fn(usize) -> O) {
    let head = match head_to_align16(po) {
        Some(h) if h < n => h,
        _ => 0,
    };
    let aligned = head_to_align16(po) == Some(head);
    let tiles = if aligned { (n - head) / TILE } else { 0 };
    for i in 0..head {
        // SAFETY: i < n (caller).
        unsafe { *po.add(i) = g(i) };
    }
    for t in 0..tiles {
        let base = head + t * TILE;
        let tile: [O; TILE] = std::array::from_fn(|j| g(base + j));
        // SAFETY: `po + base` is 16-aligned (head aligned it; tiles are multiples of 16
        // bytes) and `base + TILE <= n`.
        unsafe { stream_tile(po.add(base), &tile) };
    }
    for i in head + tiles * TILE..n {
        // SAFETY: i < n (caller).
        unsafe { *po.add(i) = g(i) };
    }
    stream_fence();
}

/// One row of a one-input loop: `out[i] = f(a[i])`; `stream` writes the output with
/// non-temporal stores (Note [Streaming stores]).
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
    stream: bool,
) {
    if n <= SMALL_ROW {
        for i in 0..n as isize {
            // SAFETY: i < n, in range (caller); input element i is read before output
            // element i is written, and the output is the input or disjoint from it (caller).
            unsafe { *po.offset(i * so) = f(*pa.offset(i * sa)) };
        }
        return;
    }
    if stream && so == 1 && sa == 1 && !overlaps(po, n, pa, n) {
        // SAFETY: the input is valid for reads (caller) and disjoint from the output.
        let a = unsafe { std::slice::from_raw_parts(pa, n) };
        // SAFETY: the output is valid for writes (caller); only the output is written.
        unsafe { stream_row(n, po, |i| f(a[i])) };
        return;
    }
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

// Note [Fused multiply-add]
// PyTorch's CPU kernels for `add` and `sub` with an `alpha` compute `a + alpha * b` with one
// fused multiply-add (its vectorized loops call `fmadd`; an AVX2 build contracts the scalar
// tails too), so the product is not rounded before the sum: the last bit differs from a
// multiply then an add in about a fifth of the elements, and with it every SGD update
// (`param.add_(grad, alpha=-lr)`). `mul_add` is that exact operation, but it compiles to an
// instruction only in code built for a CPU with FMA, and to a libm call per element (correct,
// and never vectorised) otherwise. Loops whose element function uses `mul_add` therefore run
// through `row2_fused`, which calls a copy of `row2` compiled with the `fma` target feature
// when the CPU has it (x86-64 since 2013), and the portable one, as exact but slower, when not
// (`row1_fused` and `row3_fused` likewise). The element function must be inlined into that
// copy (`#[inline(always)]` on a closure too large for the inliner's own choice): left out of
// line, it is compiled without the feature and each `mul_add` is a libm call.

/// [`row1`] for element functions built on `mul_add` (Note [Fused multiply-add]).
///
/// # Safety
/// See [`row1`].
#[inline(always)]
pub unsafe fn row1_fused<O: Copy + Default, A: Copy + Default>(
    n: usize,
    o: (*mut O, isize),
    a: (*const A, isize),
    f: &impl Fn(A) -> O,
    stream: bool,
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has the `fma` feature (checked); the rest is the caller's.
        unsafe { row1_fma(n, o, a, f, stream) };
        return;
    }
    // SAFETY: the caller's guarantee.
    unsafe { row1(n, o, a, f, stream) }
}

/// [`row1`] compiled with fused multiply-add instructions.
///
/// # Safety
/// See [`row1`]; and the CPU has the `fma` feature.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
unsafe fn row1_fma<O: Copy + Default, A: Copy + Default>(
    n: usize,
    o: (*mut O, isize),
    a: (*const A, isize),
    f: &impl Fn(A) -> O,
    stream: bool,
) {
    // SAFETY: the caller's guarantee.
    unsafe { row1(n, o, a, f, stream) }
}

/// [`row2`] for element functions built on `mul_add` (Note [Fused multiply-add]).
///
/// # Safety
/// See [`row2`].
#[inline(always)]
pub unsafe fn row2_fused<O: Copy + Default, A: Copy + Default, B: Copy + Default>(
    n: usize,
    o: (*mut O, isize),
    a: (*const A, isize),
    b: (*const B, isize),
    f: &impl Fn(A, B) -> O,
    stream: bool,
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has the `fma` feature (checked); the rest is the caller's.
        unsafe { row2_fma(n, o, a, b, f, stream) };
        return;
    }
    // SAFETY: the caller's guarantee.
    unsafe { row2(n, o, a, b, f, stream) }
}

/// [`row2`] compiled with fused multiply-add instructions.
///
/// # Safety
/// See [`row2`]; and the CPU has the `fma` feature.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
unsafe fn row2_fma<O: Copy + Default, A: Copy + Default, B: Copy + Default>(
    n: usize,
    o: (*mut O, isize),
    a: (*const A, isize),
    b: (*const B, isize),
    f: &impl Fn(A, B) -> O,
    stream: bool,
) {
    // SAFETY: the caller's guarantee.
    unsafe { row2(n, o, a, b, f, stream) }
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
    stream: bool,
) {
    if n <= SMALL_ROW {
        for i in 0..n as isize {
            // SAFETY: as in `row1`.
            unsafe { *po.offset(i * so) = f(*pa.offset(i * sa), *pb.offset(i * sb)) };
        }
        return;
    }
    // `b` must be dense or one value there: a strided `b` (`x.add_(y[:, ::2])`) takes the
    // general loop below.
    if so == 1
        && sa == 1
        && (sb == 0 || sb == 1)
        && std::ptr::addr_eq(po, pa)
        && size_of::<O>() == size_of::<A>()
    {
        // In place over a dense row (`a op= b`, `a op= s`): Note [Blocked rows].
        // SAFETY: the caller's guarantee, and the output is the first input element for
        // element (same address, same element size).
        unsafe { in_place_row2(n, po, (pb, sb), f) };
        return;
    }
    let dense = so == 1 && sa == 1 && sb == 1;
    if dense && stream && !overlaps(po, n, pa, n) && !overlaps(po, n, pb, n) {
        // SAFETY: the inputs are valid for reads (caller) and not written here (the output is
        // disjoint from both, checked).
        let (a, b) = unsafe {
            (
                std::slice::from_raw_parts(pa, n),
                std::slice::from_raw_parts(pb, n),
            )
        };
        // SAFETY: the output is valid for writes (caller); only the output is written.
        unsafe { stream_row(n, po, |i| f(a[i], b[i])) };
        return;
    }
    if dense && !overlaps(po, n, pa, n) && !overlaps(po, n, pb, n) {
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

/// `out[i] = f(out[i], b[i])` over a dense row whose first input is the output (same address):
/// the input is read through the output's pointer, so the compiler sees one array read and
/// written at the same index and vectorises the loop (through two pointers it could not tell
/// the read from a conflicting one). `b` is a dense row (`sb == 1`), which may be the output
/// itself or disjoint from it, or one value (`sb == 0`).
///
/// # Safety
/// As [`row2`], with `pa == po`, `A` of `O`'s size, and `sb` 0 or 1.
#[inline(always)]
unsafe fn in_place_row2<O: Copy, A: Copy, B: Copy>(
    n: usize,
    po: *mut O,
    (pb, sb): (*const B, isize),
    f: &impl Fn(A, B) -> O,
) {
    let pa = po as *const A;
    if sb == 0 {
        // SAFETY: `pb` is readable (caller) and not written in the loop unless it is the
        // output's first element, which is read here before any write.
        let b = unsafe { *pb };
        for i in 0..n {
            // SAFETY: i < n: element i is readable and writable (caller), read before written.
            unsafe { *po.add(i) = f(*pa.add(i), b) };
        }
    } else {
        for i in 0..n {
            // SAFETY: as above; `b`'s element i is the output's element i or disjoint from
            // the output (caller), and is read before the output's element i is written.
            unsafe { *po.add(i) = f(*pa.add(i), *pb.add(i)) };
        }
    }
}

/// [`row3`] for element functions built on `mul_add` (Note [Fused multiply-add]).
///
/// # Safety
/// See [`row3`].
#[inline(always)]
pub unsafe fn row3_fused<O, A, B, C>(
    n: usize,
    o: (*mut O, isize),
    a: (*const A, isize),
    b: (*const B, isize),
    c: (*const C, isize),
    f: &impl Fn(A, B, C) -> O,
) where
    O: Copy + Default,
    A: Copy + Default,
    B: Copy + Default,
    C: Copy + Default,
{
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has the `fma` feature (checked); the rest is the caller's.
        unsafe { row3_fma(n, o, a, b, c, f) };
        return;
    }
    // SAFETY: the caller's guarantee.
    unsafe { row3(n, o, a, b, c, f) }
}

/// [`row3`] compiled with fused multiply-add instructions.
///
/// # Safety
/// See [`row3`]; and the CPU has the `fma` feature.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
unsafe fn row3_fma<O, A, B, C>(
    n: usize,
    o: (*mut O, isize),
    a: (*const A, isize),
    b: (*const B, isize),
    c: (*const C, isize),
    f: &impl Fn(A, B, C) -> O,
) where
    O: Copy + Default,
    A: Copy + Default,
    B: Copy + Default,
    C: Copy + Default,
{
    // SAFETY: the caller's guarantee.
    unsafe { row3(n, o, a, b, c, f) }
}

/// Runs `f` compiled for AVX2 with fused multiply-add when the CPU has both (x86-64 since
/// 2013), as is otherwise: eight `f32` lanes per instruction instead of SSE2's four, and
/// `mul_add` as one instruction (Note [Fused multiply-add]). For row kernels whose loops
/// vectorise: `f` and what it calls must be `#[inline(always)]`, or they are compiled without
/// the features.
#[inline(always)]
pub fn with_avx2_fma<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has both features (checked).
        return unsafe { call_avx2_fma(f) };
    }
    f()
}

/// `f()` compiled with the `avx2` and `fma` target features.
///
/// # Safety
/// The CPU has the `avx2` and `fma` features.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn call_avx2_fma<R>(f: impl FnOnce() -> R) -> R {
    f()
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
    fn one_dim_rows_are_one_row_per_range() {
        // Two operands: strides 2 and -1 (a strided input, a reversed output).
        let g = Geometry {
            sizes: DimVec::from_slice(&[5]),
            strides: [DimVec::from_slice(&[2]), DimVec::from_slice(&[-1])]
                .into_iter()
                .collect(),
        };
        for (start, end) in [(0, 5), (1, 4), (3, 3), (4, 5), (0, 0)] {
            let mut rows = vec![];
            for_each_row::<2>(&g, start, end, |n, offs| rows.push((n, offs)));
            let expected = if start < end {
                vec![(end - start, [2 * start as isize, -(start as isize)])]
            } else {
                vec![]
            };
            assert_eq!(rows, expected, "{start}..{end}");
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
    fn planes_run_in_parallel_when_several_threads_share_enough_work() {
        let half = GRAIN_SIZE / 2;
        let several = rayon::current_num_threads() > 1;
        // From this thread (no rayon worker): several planes of more than GRAIN_SIZE in all.
        assert_eq!(runs_planes_in_parallel(2, half + 1), several);
        assert_eq!(runs_planes_in_parallel(usize::MAX, usize::MAX), several);
        assert!(!runs_planes_in_parallel(2, half));
        assert!(!runs_planes_in_parallel(1, usize::MAX));
        // On a thread of a pool of two: yes, but not inside a parallel region, nor on one
        // thread (Note [Parallel regions]).
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        assert!(pool.install(|| runs_planes_in_parallel(2, half + 1)));
        assert!(!pool.install(|| parallel_region(|| runs_planes_in_parallel(2, half + 1))));
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        assert!(!pool.install(|| runs_planes_in_parallel(2, half + 1)));
    }

    #[test]
    fn a_parallel_region_is_a_flag_of_the_loop_body_not_of_the_thread() {
        assert!(!in_parallel_region());
        parallel_region(|| {
            assert!(in_parallel_region());
            parallel_region(|| assert!(in_parallel_region()));
            assert!(
                in_parallel_region(),
                "a nested region restores the outer one's flag"
            );
        });
        assert!(!in_parallel_region());
        // The bodies of a parallel loop run in a region, wherever they run.
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        pool.install(|| {
            assert!(!in_parallel_region());
            parallel_for(4 * GRAIN_SIZE, GRAIN_SIZE, |_, _| {
                assert!(in_parallel_region())
            });
            assert!(!in_parallel_region());
        });
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
                false,
            )
        };
        assert_eq!(v[299], 304);
        assert_eq!(v[0], 5);
    }

    #[test]
    fn streamed_rows_match() {
        // Odd lengths and a misaligned output start exercise the head and tail of the copy.
        let a: Vec<f64> = (0..1000).map(|i| i as f64).collect();
        let b: Vec<u8> = (0..1003).map(|i| i as u8).collect();
        for (off, n) in [(0usize, 1000usize), (1, 999), (3, 5), (0, 0)] {
            let mut o = vec![0.0f64; 1001];
            let mut o8 = vec![0u8; 1003];
            // SAFETY: n + off <= the lengths; outputs and inputs are distinct vectors.
            unsafe {
                row2(
                    n,
                    (o.as_mut_ptr().add(off), 1),
                    (a.as_ptr(), 1),
                    (a.as_ptr(), 1),
                    &|x, y| x + y,
                    true,
                );
                row1(
                    n,
                    (o8.as_mut_ptr().add(off), 1),
                    (b.as_ptr(), 1),
                    &|x| x ^ 1,
                    true,
                );
            }
            for i in 0..n {
                assert_eq!(o[off + i], 2.0 * i as f64);
                assert_eq!(o8[off + i], (i as u8) ^ 1);
            }
            assert!(o[..off].iter().all(|x| *x == 0.0));
            assert!(o[off + n..].iter().all(|x| *x == 0.0));
        }
    }

    #[test]
    fn in_place_rows_match_the_formula() {
        // `a op= b` with b disjoint, b the output itself, and b one value; rows around the
        // vector width and the small-row bound.
        for n in [5usize, 7, 8, 9, 31, 1000] {
            let init: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 3.0).collect();
            let other: Vec<f32> = (0..n).map(|i| 1.0 - i as f32 * 0.25).collect();
            let f = |x: f32, y: f32| x + 0.1 * y;
            let mut a = init.clone();
            let p = a.as_mut_ptr();
            // SAFETY: n elements of each vector; `other` is distinct from `a`.
            unsafe {
                row2(
                    n,
                    (p, 1),
                    (p as *const f32, 1),
                    (other.as_ptr(), 1),
                    &f,
                    false,
                )
            };
            let want: Vec<f32> = init.iter().zip(&other).map(|(&x, &y)| f(x, y)).collect();
            assert_eq!(a, want);
            let mut a = init.clone();
            let p = a.as_mut_ptr();
            // SAFETY: n elements; the second input is the output element for element.
            unsafe {
                row2(
                    n,
                    (p, 1),
                    (p as *const f32, 1),
                    (p as *const f32, 1),
                    &f,
                    false,
                )
            };
            let want: Vec<f32> = init.iter().map(|&x| f(x, x)).collect();
            assert_eq!(a, want);
            let mut a = init.clone();
            let p = a.as_mut_ptr();
            let s = [2.5f32];
            // SAFETY: n elements; the scalar is read with stride 0.
            unsafe { row2(n, (p, 1), (p as *const f32, 1), (s.as_ptr(), 0), &f, false) };
            let want: Vec<f32> = init.iter().map(|&x| f(x, 2.5)).collect();
            assert_eq!(a, want);
            // A strided second input (`x.add_(y[::2])`): every other element of `wide`.
            let wide: Vec<f32> = (0..2 * n).map(|i| i as f32).collect();
            let mut a = init.clone();
            let p = a.as_mut_ptr();
            // SAFETY: n elements of `a`; `wide` holds 2n elements read with stride 2.
            unsafe {
                row2(
                    n,
                    (p, 1),
                    (p as *const f32, 1),
                    (wide.as_ptr(), 2),
                    &f,
                    false,
                )
            };
            let want: Vec<f32> = init
                .iter()
                .enumerate()
                .map(|(i, &x)| f(x, 2.0 * i as f32))
                .collect();
            assert_eq!(a, want);
        }
    }
}
