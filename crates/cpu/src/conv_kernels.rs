//! The computational core of the convolutions (see Note [Convolution as im2col + GEMM]):
//! the geometry, im2col / col2im, and the forward and backward passes over contiguous data.

use std::mem::MaybeUninit;
use std::ops::Range;

use rayon::prelude::*;

use switchboard_tensor::TensorError;

use crate::dispatch_dtype::Num;
use crate::error::Result;
use crate::fresh_output::fill;
use crate::linalg::{gemm_float, GemmFloat, MatPtr};
use crate::loops::{in_parallel_region, parallel_region};
use crate::reduce::lane_fold;

// Note [Convolution as im2col + GEMM]
// Every convolution is computed as a 2-d one: a 1-d input `(N, C, W)` is the 2-d input
// `(N, C, 1, W)` with a 1-high kernel, which has the same memory layout, so only the geometry
// changes. For image `n` and group `g`, im2col unrolls the input patches into a matrix
// `cols` of `K = C_in/groups * kh * kw` rows and `L = oh * ow` columns (zeros where a patch
// overlaps the padding); the output block is then `W_g (C_out/groups x K) @ cols (K x L)`,
// written straight into the output (bias pre-filled, GEMM accumulating onto it). A 1x1
// kernel with unit stride and no padding needs no im2col: the input is already `cols`.
// The backward pass reuses the same matrices: `grad_W_g += grad_out_g @ cols^T`,
// `grad_cols = W_g^T @ grad_out_g` scattered back by col2im, `grad_bias` sums grad_out.
// The weight gradient is computed transposed, `grad_W_g^T += cols @ grad_out_g^T` (Note
// [Weight gradient transposed]).
// Images run in parallel when there are several (each task with its own `cols` buffer and,
// for the weight gradient, its own partial sum, added up at the end); a single image uses
// the GEMM's own parallelism.

// Note [Weight gradient transposed]
// `grad_W_g += grad_out_g @ cols^T` reduces over the `L` output positions with `cols^T` a
// column-major right-hand side, a layout for which the GEMM crate's kernels run up to ten
// times slower than for row-major operands (measured on the ResNet step's shapes: 16 x 144
// x 1024 took 222 us against 21 us for the forward product of the same size). Transposing
// `cols` (`K x L`) would cost a pass over the largest matrix. Computed transposed instead,
// `grad_W_g^T (K x C_out/groups) += cols @ grad_out_g^T`, `cols` is a row-major left-hand
// side and `grad_out_g^T` is read in place (the crate packs that small operand itself, faster
// than a transposed copy made beforehand: 17 us against 15 + 3 us on a block of 448
// positions of that shape). The transposed partial sums are added into `grad_W` once, at the
// end.

// Note [Input gradient as a convolution]
// With unit strides, the input gradient is itself a convolution: of `grad_out` by the weight
// flipped in space with its two channel dimensions swapped, with padding `d*(k-1) - p` (not
// negative while `p <= d*(k-1)`) and the same dilation. Computed that way, one image's input
// gradient is an im2col of `grad_out` and one GEMM writing `grad_in` directly: the same work
// as a forward pass, where the adjoint route (`grad_cols = W_g^T @ grad_out_g`, then col2im
// scattering `K x L` sums back) runs a GEMM with a depth of only `C_out/groups` over the whole
// `K x L` buffer and adds that buffer back element by element. Strided convolutions keep
// col2im (their gradient is a convolution of a zero-dilated `grad_out`).

// Note [im2col in cache-sized blocks]
// The GEMM reads `cols` right after im2col writes it. When the whole buffer is larger than the
// core's L2 cache (the ResNet's first stage: 144 rows of 1024 positions, 576 KiB per image),
// it is written out to memory and read back; computed a block of output rows at a time, each
// block of at most `COLS_BLOCK_BYTES` stays in cache between the two. The blocks are products
// with fewer columns but the same depth, so nothing else changes: the forward pass, the input
// gradient computed as a convolution and the weight gradient all run over the blocks (on the
// ResNet's first-stage shape, 32 images, one thread: forward 5.4 ms whole, 2.8-3.4 ms in
// blocks). Smaller buffers are one block, as before.

/// The largest `cols` block, in bytes (Note [im2col in cache-sized blocks]): half of a 512
/// KiB L2 cache, leaving room for the GEMM's packed operands.
const COLS_BLOCK_BYTES: usize = 256 << 10;

/// The geometry of a 2-d convolution (1-d ones have `h = kh = oh = 1`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Geom {
    pub(super) n: usize,
    pub(super) c_in: usize,
    pub(super) h: usize,
    pub(super) w: usize,
    pub(super) c_out: usize,
    pub(super) kh: usize,
    pub(super) kw: usize,
    pub(super) sh: usize,
    pub(super) sw: usize,
    pub(super) ph: usize,
    pub(super) pw: usize,
    pub(super) dh: usize,
    pub(super) dw: usize,
    pub(super) oh: usize,
    pub(super) ow: usize,
    pub(super) groups: usize,
    /// Elements of the im2col buffer `K x L` (checked to fit when the geometry was built).
    pub(super) cols: usize,
}

impl Geom {
    fn cin_g(&self) -> usize {
        self.c_in / self.groups
    }
    fn cout_g(&self) -> usize {
        self.c_out / self.groups
    }
    /// Rows of `cols`: the length of one unrolled patch.
    fn k(&self) -> usize {
        self.cin_g() * self.kh * self.kw
    }
    /// Columns of `cols`: output positions per channel.
    fn l(&self) -> usize {
        self.oh * self.ow
    }
    fn in_image(&self) -> usize {
        self.c_in * self.h * self.w
    }
    fn out_image(&self) -> usize {
        self.c_out * self.l()
    }
    /// Output rows per im2col block of `T` (Note [im2col in cache-sized blocks]): all of them
    /// when the whole `cols` fits in `COLS_BLOCK_BYTES`, else as many as fit, at least one.
    fn block_rows<T>(&self) -> usize {
        let row_bytes = self.k() * self.ow * size_of::<T>();
        (COLS_BLOCK_BYTES / row_bytes.max(1)).clamp(1, self.oh.max(1))
    }

    /// Elements of one im2col block of `T` (no more than `self.cols`).
    fn block_len<T>(&self) -> usize {
        self.k() * self.block_rows::<T>().min(self.oh) * self.ow
    }

    /// A 1x1 kernel with unit stride and no padding: the input is its own `cols`.
    fn pointwise(&self) -> bool {
        self.kh == 1 && self.kw == 1 && self.sh == 1 && self.sw == 1 && self.ph == 0 && self.pw == 0
    }

    /// The convolution whose output is this one's input gradient (Note [Input gradient as a
    /// convolution]), when there is one and it pays: unit strides, padding at most the
    /// dilated kernel's extent, and an im2col buffer no larger than the forward's.
    fn input_grad_conv(&self) -> Option<Geom> {
        if self.sh != 1 || self.sw != 1 || self.pointwise() {
            return None;
        }
        let ph = (self.dh * (self.kh - 1)).checked_sub(self.ph)?;
        let pw = (self.dw * (self.kw - 1)).checked_sub(self.pw)?;
        let cols = (self.cout_g() * self.kh * self.kw).checked_mul(self.h.checked_mul(self.w)?)?;
        if cols > self.cols {
            // A larger im2col (more output than input channels, or an output smaller than
            // the input) makes the route slower than col2im (the MNIST CNN's second conv).
            return None;
        }
        Some(Geom {
            c_in: self.c_out,
            h: self.oh,
            w: self.ow,
            c_out: self.c_in,
            ph,
            pw,
            oh: self.h,
            ow: self.w,
            cols,
            ..*self
        })
    }
}

/// The weight of the input gradient's convolution (Note [Input gradient as a convolution]):
/// per group, `W'[ci][co][i][j] = W[co][ci][kh-1-i][kw-1-j]`, `C_in x C_out/groups x kh x kw`.
fn flipped_weight<T: Num>(wt: &[T], g: &Geom) -> Vec<T> {
    let (cin_g, cout_g, khw) = (g.cin_g(), g.cout_g(), g.kh * g.kw);
    let mut flipped = Vec::with_capacity(wt.len());
    for gi in 0..g.groups {
        for ci in 0..cin_g {
            for co in 0..cout_g {
                let src = &wt[((gi * cout_g + co) * cin_g + ci) * khw..][..khw];
                flipped.extend(src.iter().rev());
            }
        }
    }
    flipped
}

/// A zeroed buffer of `len` elements, allocated fallibly: its size comes from the user's
/// shapes, so running out of memory is an error, not an abort (PyTorch's allocator message).
fn zeroed<T: Num>(len: usize) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| {
        TensorError::invalid(format!(
            "DefaultCPUAllocator: not enough memory: you tried to allocate {} bytes.",
            len.saturating_mul(std::mem::size_of::<T>())
        ))
    })?;
    v.resize(len, T::ZERO);
    Ok(v)
}

/// The output positions `o < out` whose input position `o*s + off - p` lies in `0..size`, as
/// a range `lo..hi`.
fn valid_range(out: usize, size: usize, s: usize, p: usize, off: usize) -> (usize, usize) {
    let lo = if p > off { (p - off).div_ceil(s) } else { 0 };
    let hi = if size + p > off {
        (size + p - off).div_ceil(s).min(out)
    } else {
        0
    };
    (lo.min(hi), hi)
}

// Note [im2col rows as one copy]
// With unit strides and output rows as wide as the input's (a "same" padding, as every 3x3
// convolution of a ResNet has), consecutive output rows of one `cols` row read consecutive
// input rows at one fixed offset: the whole valid block is a single copy of the input plane,
// shifted, after which only the `pw` columns wrapped in from the neighbouring row at each edge
// are zeroed. One long copy replaces `oh` copies of `ow` elements, whose call overhead
// dominated at the ResNet's widths (32 and less).

// Note [im2col through a padded row]
// Other geometries (strides, or outputs narrower than the input) fill `cols` an input row at
// a time: the row is copied into a buffer with its padding around it (zeros, written once),
// after which kernel column `j` of output column `ox` is element `ox*sw + j*dw` of the
// buffer for every `ox`, padding included. Each `cols` row segment is then one copy (unit
// stride) or one branchless, bounds-check-free strided gather, and the `kw` segments of one
// input row share its copy. Zeroing the padded edges of each segment separately cost a
// `memset` call per edge, more than the segment itself on the ResNet's 8- to 16-wide strided
// outputs. At stride 2 (the ResNet's downsampling convolutions) the gather reads pairs, a
// constant stride the compiler turns into vector shuffles: on one thread, the 16->32 3x3
// stride-2 forward at batch 32 went from 0.86 to 0.76 ms (`examples/conv_shapes.rs`).

/// Unrolls the patches of output rows `rows` of one image's group (`cin_g` channels of `h x
/// w`) into `cols` (`K x rows.len()*ow`, row-major).
fn im2col<T: Num>(x: &[T], cols: &mut [T], g: &Geom, rows: Range<usize>) {
    let (l, hw) = (rows.len() * g.ow, g.h * g.w);
    if l == 0 || g.k() == 0 {
        return;
    }
    // Note [im2col rows as one copy].
    if g.sh == 1 && g.sw == 1 && g.ow == g.w {
        return im2col_one_copy(x, cols, g, rows);
    }
    // Note [im2col through a padded row].
    let wp = (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1;
    // At stride 2, one zero past the row's end, so that every tap's gather reads `ow` whole
    // pairs (it uses only the first of each).
    let mut padded = vec![T::ZERO; wp + usize::from(g.sw == 2)];
    let interior = g.w.min(wp.saturating_sub(g.pw));
    for c in 0..g.cin_g() {
        for i in 0..g.kh {
            let (ylo, yhi) = valid_range(g.oh, g.h, g.sh, g.ph, i * g.dh);
            for oy in rows.clone() {
                let at = (oy - rows.start) * g.ow;
                let row_of = |j: usize| ((c * g.kh + i) * g.kw + j) * l + at;
                if oy < ylo || oy >= yhi {
                    for j in 0..g.kw {
                        cols[row_of(j)..][..g.ow].fill(T::ZERO);
                    }
                    continue;
                }
                let iy = oy * g.sh + i * g.dh - g.ph;
                if interior > 0 {
                    padded[g.pw..g.pw + interior]
                        .copy_from_slice(&x[c * hw + iy * g.w..][..interior]);
                }
                for j in 0..g.kw {
                    let seg = &mut cols[row_of(j)..][..g.ow];
                    if g.sw == 1 {
                        seg.copy_from_slice(&padded[j * g.dw..][..g.ow]);
                        continue;
                    }
                    let taps = &padded[j * g.dw..];
                    if g.sw == 2 {
                        // A constant stride: the compiler gathers whole vectors.
                        for (v, pair) in seg.iter_mut().zip(taps.as_chunks::<2>().0) {
                            *v = pair[0];
                        }
                        continue;
                    }
                    for (v, &t) in seg.iter_mut().zip(taps.iter().step_by(g.sw)) {
                        *v = t;
                    }
                }
            }
        }
    }
}

/// im2col when every output row reads a whole input row at unit stride (Note [im2col rows
/// as one copy]).
fn im2col_one_copy<T: Num>(x: &[T], cols: &mut [T], g: &Geom, rows: Range<usize>) {
    let (l, hw) = (rows.len() * g.ow, g.h * g.w);
    for c in 0..g.cin_g() {
        for i in 0..g.kh {
            let (ylo, yhi) = valid_range(g.oh, g.h, g.sh, g.ph, i * g.dh);
            let (ylo, yhi) = (
                ylo.clamp(rows.start, rows.end),
                yhi.clamp(rows.start, rows.end),
            );
            for j in 0..g.kw {
                let (xlo, xhi) = valid_range(g.ow, g.w, g.sw, g.pw, j * g.dw);
                let row = &mut cols[((c * g.kh + i) * g.kw + j) * l..][..l];
                // Output `(oy, ox)` reads input `(oy + i*dh - ph, ox + j*dw - pw)`: flat offset
                // `q` reads `q + (i*dh - ph)*w + j*dw - pw` (in range from the first valid
                // element to the last).
                if ylo >= yhi || xlo >= xhi {
                    row.fill(T::ZERO);
                    continue;
                }
                let (start, end) = (
                    (ylo - rows.start) * g.ow + xlo,
                    (yhi - 1 - rows.start) * g.ow + xhi,
                );
                let src = (ylo + i * g.dh - g.ph) * g.w + xlo + j * g.dw - g.pw;
                row[..start].fill(T::ZERO);
                row[end..].fill(T::ZERO);
                let body = &mut row[start..end];
                body.copy_from_slice(&x[c * hw + src..][..end - start]);
                // Each output row of `body` starts at column `xlo`: zero its columns `xhi..`
                // and the next row's `..xlo`, a few elements `ow` apart (strided stores: a
                // `fill` per row would be a `memset` call per element or two).
                for skip in xhi - xlo..g.ow {
                    for v in body.iter_mut().skip(skip).step_by(g.ow) {
                        *v = T::ZERO;
                    }
                }
            }
        }
    }
}

/// The adjoint of [`im2col`]: adds each entry of `cols` to the input position it came from.
fn col2im_add<T: Num>(cols: &[T], gx: &mut [T], g: &Geom) {
    let (l, hw) = (g.l(), g.h * g.w);
    for c in 0..g.cin_g() {
        for i in 0..g.kh {
            let (ylo, yhi) = valid_range(g.oh, g.h, g.sh, g.ph, i * g.dh);
            for j in 0..g.kw {
                let (xlo, xhi) = valid_range(g.ow, g.w, g.sw, g.pw, j * g.dw);
                let row = &cols[((c * g.kh + i) * g.kw + j) * l..][..l];
                for oy in ylo..yhi {
                    let r = &row[oy * g.ow..][..g.ow];
                    let iy = oy * g.sh + i * g.dh - g.ph;
                    let dst = &mut gx[c * hw + iy * g.w..][..g.w];
                    if g.sw == 1 {
                        // Unit stride: a slice add, which vectorises.
                        let ix0 = xlo + j * g.dw - g.pw;
                        let d = &mut dst[ix0..ix0 + (xhi - xlo)];
                        for (d, &v) in d.iter_mut().zip(&r[xlo..xhi]) {
                            *d = d.add(v);
                        }
                        continue;
                    }
                    for (ox, &v) in r.iter().enumerate().take(xhi).skip(xlo) {
                        let d = &mut dst[ox * g.sw + j * g.dw - g.pw];
                        *d = d.add(v);
                    }
                }
            }
        }
    }
}

/// One group's convolution as GEMMs: `dst` (`cout_g x L`, row-major) is set to, or when
/// `accumulate` added to, `wg @ cols(xg)`, block by block of output rows (Note [im2col in
/// cache-sized blocks]; a pointwise convolution multiplies `xg` itself). `cols` holds a
/// block.
fn conv_gemm<T: GemmFloat>(
    xg: &[T],
    wg: &[T],
    dst: &mut [MaybeUninit<T>],
    cols: &mut [T],
    g: &Geom,
    accumulate: bool,
) {
    let (k, l, cout_g) = (g.k(), g.l(), g.cout_g());
    for_each_cols_block(xg, cols, g, |oy0, n, b| {
        let d = &mut dst[oy0 * g.ow..];
        // SAFETY: row-major views of live slices: `d` the exclusive `cout_g x n` block of
        // `dst` at column `oy0*ow` (rows `l` apart; read only when `accumulate`, when the caller
        // has initialised it), the `cout_g x k` weight, and `b` the `k x n` block of `cols`
        // (or of `xg`, rows `l` apart, when pointwise).
        unsafe {
            gemm_float(
                cout_g,
                n,
                k,
                MatPtr::row_major(d.as_mut_ptr() as *mut T, l),
                MatPtr::row_major(wg.as_ptr(), k),
                b,
                <T as Num>::ONE,
                <T as Num>::ONE,
                accumulate,
            )
        };
    });
}

/// Runs `f(oy0, n, block)` over one group's im2col a block of output rows at a time (Note
/// [im2col in cache-sized blocks]): `block` is the `k x n` matrix of the block's columns,
/// written into `cols`, or `xg` itself (rows `l` apart, one block) when pointwise.
fn for_each_cols_block<T: Num>(
    xg: &[T],
    cols: &mut [T],
    g: &Geom,
    mut f: impl FnMut(usize, usize, MatPtr),
) {
    let step = if g.pointwise() {
        g.oh
    } else {
        g.block_rows::<T>()
    };
    for oy0 in (0..g.oh).step_by(step.max(1)) {
        let rows = oy0..(oy0 + step).min(g.oh);
        let n = rows.len() * g.ow;
        if g.pointwise() {
            f(oy0, n, MatPtr::row_major(xg.as_ptr(), g.l()));
        } else {
            im2col(xg, cols, g, rows);
            f(oy0, n, MatPtr::row_major(cols.as_ptr(), n));
        }
    }
}

/// Splits `0..n` images into contiguous chunks to run in parallel (one chunk when there is a
/// single image, one thread, or when already inside a parallel region).
fn image_chunks(n: usize) -> usize {
    let threads = rayon::current_num_threads();
    if n <= 1 || threads <= 1 || in_parallel_region() {
        1
    } else {
        n.min(threads)
    }
}

/// The forward pass on contiguous data (`x`: `N x C_in x H x W`, `wt`: `C_out x K`, `out`:
/// `N x C_out x L`); writes every element of `out`.
pub(super) fn forward_impl<T: GemmFloat>(
    x: &[T],
    wt: &[T],
    bias: Option<&[T]>,
    out: &mut [MaybeUninit<T>],
    g: &Geom,
) -> Result<()> {
    let (k, l, cin_g, cout_g) = (g.k(), g.l(), g.cin_g(), g.cout_g());
    let chunks = image_chunks(g.n);
    let per = g.n.div_ceil(chunks).max(1);
    let task = |c: usize, out: &mut [MaybeUninit<T>]| -> Result<()> {
        let mut cols = zeroed::<T>(if g.pointwise() { 0 } else { g.block_len::<T>() })?;
        for (i, o) in out.chunks_mut(g.out_image()).enumerate() {
            let x_img = &x[(c * per + i) * g.in_image()..][..g.in_image()];
            // With a bias, the rows start as the bias and the GEMMs add to them; without, the
            // GEMMs overwrite them: either way every element is written.
            if let Some(b) = bias {
                for (co, row) in o.chunks_mut(l).enumerate() {
                    fill(row, b[co]);
                }
            }
            for gi in 0..g.groups {
                let xg = &x_img[gi * cin_g * g.h * g.w..][..cin_g * g.h * g.w];
                let dst = &mut o[gi * cout_g * l..][..cout_g * l];
                let wg = &wt[gi * cout_g * k..][..cout_g * k];
                conv_gemm(xg, wg, dst, &mut cols, g, bias.is_some());
            }
        }
        Ok(())
    };
    let span = per * g.out_image();
    if chunks == 1 || span == 0 {
        task(0, out)
    } else {
        out.par_chunks_mut(span)
            .enumerate()
            .try_for_each(|(c, o)| parallel_region(|| task(c, o)))
    }
}

/// The backward pass on contiguous data; returns nothing, writing every element of `gx` and
/// adding to `gw` and `gb` (each when given).
pub(super) fn backward_impl<T: GemmFloat>(
    go: &[T],
    x: &[T],
    wt: &[T],
    gx: Option<&mut [MaybeUninit<T>]>,
    gw: Option<&mut [T]>,
    gb: Option<&mut [T]>,
    g: &Geom,
) -> Result<()> {
    let (k, l, cin_g, cout_g) = (g.k(), g.l(), g.cin_g(), g.cout_g());
    let (need_w, need_b) = (gw.is_some(), gb.is_some());
    // The input gradient as a convolution of `grad_out` where there is one (Note [Input
    // gradient as a convolution]), with its geometry and weight.
    let grad_conv = gx
        .as_ref()
        .and_then(|_| g.input_grad_conv())
        .map(|ig| (ig, flipped_weight(wt, g)));
    let chunks = image_chunks(g.n);
    let per = g.n.div_ceil(chunks).max(1);
    // One task: images `c*per ..` (as many as `gx_chunk` holds, or up to `per`); returns its
    // partial weight and bias gradients.
    let task =
        |c: usize, mut gx_chunk: Option<&mut [MaybeUninit<T>]>| -> Result<(Vec<T>, Vec<T>)> {
            // The weight gradient transposed, per group `K x C_out/groups` (Note [Weight
            // gradient transposed]).
            let mut pw = zeroed::<T>(if need_w { g.c_out * k } else { 0 })?;
            let mut pb = zeroed::<T>(if need_b { g.c_out } else { 0 })?;
            let mut cols = zeroed::<T>(if g.pointwise() { 0 } else { g.block_len::<T>() })?;
            // For the input gradient: blocks of the im2col of grad_out when that gradient is a
            // convolution, else the `grad_cols` that col2im scatters back.
            let mut dcols = zeroed::<T>(match &grad_conv {
                Some((ig, _)) => ig.block_len::<T>(),
                None if gx_chunk.is_some() && !g.pointwise() => g.cols,
                None => 0,
            })?;
            let first = c * per;
            let last = (first + per).min(g.n);
            for n in first..last {
                let go_img = &go[n * g.out_image()..][..g.out_image()];
                let x_img = &x[n * g.in_image()..][..g.in_image()];
                if need_b {
                    for (co, row) in go_img.chunks(l).enumerate() {
                        pb[co] = pb[co].add(lane_fold(row, <T as Num>::ZERO, Num::add, Num::add));
                    }
                }
                for gi in 0..g.groups {
                    let go_g = MatPtr::row_major(go_img[gi * cout_g * l..].as_ptr(), l);
                    let xg = &x_img[gi * cin_g * g.h * g.w..][..cin_g * g.h * g.w];
                    let wg = &wt[gi * cout_g * k..][..cout_g * k];
                    if need_w {
                        for_each_cols_block(xg, &mut cols, g, |oy0, n, cols_block| {
                            let go_rows = &go_img[gi * cout_g * l + oy0 * g.ow..];
                            let dst = &mut pw[gi * cout_g * k..][..cout_g * k];
                            // SAFETY: views of live slices of the stated shapes: row-major `k x
                            // cout_g` dst and `k x n` block of cols (of `xg`, rows `l` apart,
                            // when pointwise), and the `n x cout_g` transpose of the `cout_g x
                            // n` block of grad_out at column `oy0*ow` (rows `l` apart, within
                            // the image); `dst` is this task's own buffer.
                            unsafe {
                                gemm_float(
                                    k,
                                    cout_g,
                                    n,
                                    MatPtr::row_major(dst.as_mut_ptr(), cout_g),
                                    cols_block,
                                    MatPtr::row_major(go_rows.as_ptr(), l).t(),
                                    <T as Num>::ONE,
                                    <T as Num>::ONE,
                                    true,
                                )
                            };
                        });
                    }
                    if let Some(gxc) = gx_chunk.as_deref_mut() {
                        let gx_img = &mut gxc[(n - first) * g.in_image()..][..g.in_image()];
                        let gxg = &mut gx_img[gi * cin_g * g.h * g.w..][..cin_g * g.h * g.w];
                        if let Some((ig, flipped)) = &grad_conv {
                            let go_rows = &go_img[gi * cout_g * l..][..cout_g * l];
                            let wg2 = &flipped[gi * cin_g * ig.k()..][..cin_g * ig.k()];
                            conv_gemm(go_rows, wg2, gxg, &mut dcols, ig, false);
                            continue;
                        }
                        let dst = if g.pointwise() {
                            gxg.as_mut_ptr() as *mut T
                        } else {
                            dcols.as_mut_ptr()
                        };
                        // SAFETY: `W_g^T` is the transposed row-major `cout_g x k` weight slice,
                        // grad_out a `cout_g x l` slice, `dst` an exclusive `k x l` buffer (the
                        // group's own input-gradient channels when pointwise, which the GEMM
                        // overwrites without reading).
                        unsafe {
                            gemm_float(
                                k,
                                l,
                                cout_g,
                                MatPtr::row_major(dst, l),
                                MatPtr::row_major(wg.as_ptr(), k).t(),
                                go_g,
                                <T as Num>::ONE,
                                <T as Num>::ZERO,
                                false,
                            )
                        };
                        if !g.pointwise() {
                            col2im_add(&dcols, fill(gxg, <T as Num>::ZERO), g);
                        }
                    }
                }
            }
            Ok((pw, pb))
        };
    let partials: Vec<(Vec<T>, Vec<T>)> = match gx {
        Some(gx) if chunks > 1 && g.in_image() > 0 => gx
            .par_chunks_mut(per * g.in_image())
            .enumerate()
            .map(|(c, s)| parallel_region(|| task(c, Some(s))))
            .collect::<Result<_>>()?,
        Some(gx) => vec![task(0, Some(gx))?],
        None if chunks > 1 => (0..chunks)
            .into_par_iter()
            .map(|c| parallel_region(|| task(c, None)))
            .collect::<Result<_>>()?,
        None => vec![task(0, None)?],
    };
    if let Some(gw) = gw.filter(|_| cout_g * k > 0) {
        // Each group's partial sum is `K x C_out/groups`: added in transposed.
        for p in &partials {
            for (dst, src) in gw.chunks_mut(cout_g * k).zip(p.0.chunks(cout_g * k)) {
                for (co, row) in dst.chunks_mut(k).enumerate() {
                    for (r, d) in row.iter_mut().enumerate() {
                        *d = d.add(src[r * cout_g + co]);
                    }
                }
            }
        }
    }
    if let Some(gb) = gb {
        for p in &partials {
            for (d, &v) in gb.iter_mut().zip(&p.1) {
                *d = d.add(v);
            }
        }
    }
    Ok(())
}
