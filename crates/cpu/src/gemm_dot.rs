//! Products whose two operands both run contiguously along the reduction (Note [Products
//! along the reduction]).

use crate::linalg::MatPtr;

// Note [Products along the reduction]
// In `a @ b` with `a`'s rows and `b`'s columns contiguous in `k` (`a` row-major, `b` the
// transpose of a row-major matrix), every output element is a dot product of two contiguous
// rows. Convolution weight gradients have that layout (im2col rows against `grad_out` rows),
// and so has a linear layer's `x @ W^T`. The gemm crate packs both operands into its
// micro-kernel's layout, a transposition for each of these, and runs them well only when
// both sides of the output are wide (`examples/gemm_shapes.rs`, one thread, AVX-512): 228
// GFLOP/s on 288x32x224, 128 on 288x16x224, 62 on 144x8x448; the ResNet's first-stage weight
// gradient block (144x16x448) 120, against 230 for the same product with one operand stored
// the other way; and 64 on the CNN's 64x128x9216 first linear layer, whose reduction is long.
// Here, with no packing, a tile of `MR x NR` outputs keeps one AVX-512 accumulator per output
// over `k`, loading `MR + NR` vectors per `MR * NR` fused multiply-adds, and adds up each
// accumulator's lanes once at the end. The reduction is cut in blocks of `KC` so that a
// tile's rows stay in cache while it runs. It takes the products the crate runs poorly: a
// side narrower than `NARROW`, or a reduction of `LONG_K` or more. Measured in alternated
// runs of `compute_bench` on one thread: the ResNet step went from 45.8 to 43.2 ms, the CNN
// step from 40.0 to 38.4 ms; the MLP and transformer steps, which have no such product, did
// not move. Only with AVX-512 (the crate's other paths were not measured on these shapes)
// and not under Miri, which runs the crate's path. The sums differ from the crate's only in
// rounding order.

/// Rows of `a` per tile.
const MR: usize = 4;
/// Columns of `b` per tile.
const NR: usize = 4;
/// Depth of a reduction block, in elements.
const KC: usize = 2048;
/// The shortest reduction this path takes: shorter ones are the crate's.
const MIN_K: usize = 128;
/// Products with fewer rows or columns than this take this path: with more, the crate's
/// micro-kernel is full and as fast as this one.
const NARROW: usize = 32;
/// Reductions at least this long take this path whatever the shape.
const LONG_K: usize = 4096;

/// An `f32` product `dst = beta*dst + alpha*(a @ b)` for an `m×k` `a` and a `k×n` `b`
/// (`dst` read only when `read_dst`), as `gemm_float` takes it.
#[derive(Clone, Copy)]
pub(crate) struct Product {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub dst: MatPtr,
    pub a: MatPtr,
    pub b: MatPtr,
    pub alpha: f32,
    pub beta: f32,
    pub read_dst: bool,
}

/// Computes `p` along the reduction when `a` has unit column stride, `b` unit row stride, the
/// CPU has AVX-512 and the product is one the gemm crate runs poorly (Note [Products along
/// the reduction]); returns whether it did.
///
/// # Safety
/// As for `gemm_float`: every addressed element in bounds of live allocations, `dst`
/// exclusive and disjoint from `a` and `b`, addressing no element twice.
pub(crate) unsafe fn gemm_along_k(p: &Product) -> bool {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if p.a.cs == 1
        && p.b.rs == 1
        && p.k >= MIN_K
        && (p.m.min(p.n) < NARROW || p.k >= LONG_K)
        && std::arch::is_x86_feature_detected!("avx512f")
    {
        // SAFETY: AVX-512 is present; the bounds are the caller's.
        unsafe { avx512::product(p) };
        return true;
    }
    let _ = p;
    false
}

#[cfg(all(target_arch = "x86_64", not(miri)))]
mod avx512 {
    use std::arch::x86_64::*;

    use super::{Product, KC, MR, NR};

    /// The product, tile by tile.
    ///
    /// # Safety
    /// AVX-512F must be present; the operands as for `gemm_along_k`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn product(p: &Product) {
        let Product {
            m,
            n,
            k,
            dst,
            a,
            b,
            alpha,
            beta,
            read_dst,
        } = *p;
        let (ap, bp, dp) = (
            a.ptr as *const f32,
            b.ptr as *const f32,
            dst.ptr as *mut f32,
        );
        for k0 in (0..k).step_by(KC) {
            let kl = KC.min(k - k0);
            // Later blocks add to what the first one wrote.
            let (beta, read_dst) = if k0 == 0 {
                (beta, read_dst)
            } else {
                (1.0, true)
            };
            for i0 in (0..m).step_by(MR) {
                let mr = MR.min(m - i0);
                for j0 in (0..n).step_by(NR) {
                    let nr = NR.min(n - j0);
                    let t = Tile {
                        a: ap.wrapping_offset(i0 as isize * a.rs + k0 as isize),
                        lda: a.rs,
                        b: bp.wrapping_offset(j0 as isize * b.cs + k0 as isize),
                        ldb: b.cs,
                        d: dp.wrapping_offset(i0 as isize * dst.rs + j0 as isize * dst.cs),
                        rs: dst.rs,
                        cs: dst.cs,
                        k: kl,
                        alpha,
                        beta,
                        read_dst,
                    };
                    // SAFETY: the tile's rows `i0..i0+mr` of `a`, columns `j0..j0+nr` of `b`
                    // and depth `k0..k0+kl` are within the caller's operands.
                    unsafe {
                        match (mr, nr) {
                            (4, 4) => t.run::<4, 4>(),
                            (4, 3) => t.run::<4, 3>(),
                            (4, 2) => t.run::<4, 2>(),
                            (4, 1) => t.run::<4, 1>(),
                            (3, 4) => t.run::<3, 4>(),
                            (3, 3) => t.run::<3, 3>(),
                            (3, 2) => t.run::<3, 2>(),
                            (3, 1) => t.run::<3, 1>(),
                            (2, 4) => t.run::<2, 4>(),
                            (2, 3) => t.run::<2, 3>(),
                            (2, 2) => t.run::<2, 2>(),
                            (2, 1) => t.run::<2, 1>(),
                            (1, 4) => t.run::<1, 4>(),
                            (1, 3) => t.run::<1, 3>(),
                            (1, 2) => t.run::<1, 2>(),
                            _ => t.run::<1, 1>(),
                        }
                    }
                }
            }
        }
    }

    /// One tile: `R` rows of `a` (`lda` apart) against `C` columns of `b` (`ldb` apart), over
    /// `k` contiguous elements, into `d` (strides `rs`, `cs`).
    struct Tile {
        a: *const f32,
        lda: isize,
        b: *const f32,
        ldb: isize,
        d: *mut f32,
        rs: isize,
        cs: isize,
        k: usize,
        alpha: f32,
        beta: f32,
        read_dst: bool,
    }

    impl Tile {
        /// # Safety
        /// AVX-512F present; the addressed rows, columns and outputs in bounds.
        #[target_feature(enable = "avx512f")]
        #[inline]
        // The tile is indexed `acc[i][j]` like the product it computes.
        #[allow(clippy::needless_range_loop)]
        unsafe fn run<const R: usize, const C: usize>(&self) {
            let mut acc = [[_mm512_setzero_ps(); C]; R];
            let mut av = [_mm512_setzero_ps(); R];
            let full = self.k / 16;
            for s in 0..full {
                let off = (s * 16) as isize;
                // SAFETY (loads): element `off..off+16` of each row is within depth `k`.
                for (i, v) in av.iter_mut().enumerate() {
                    *v = unsafe { _mm512_loadu_ps(self.a.offset(i as isize * self.lda + off)) };
                }
                for j in 0..C {
                    // SAFETY: as for `a`'s rows.
                    let bv = unsafe { _mm512_loadu_ps(self.b.offset(j as isize * self.ldb + off)) };
                    for i in 0..R {
                        acc[i][j] = _mm512_fmadd_ps(av[i], bv, acc[i][j]);
                    }
                }
            }
            let rem = self.k % 16;
            if rem > 0 {
                let off = (full * 16) as isize;
                let mask: __mmask16 = ((1u32 << rem) - 1) as u16;
                // SAFETY (masked loads): only the `rem` elements left in each row are read.
                for (i, v) in av.iter_mut().enumerate() {
                    *v = unsafe {
                        _mm512_maskz_loadu_ps(mask, self.a.offset(i as isize * self.lda + off))
                    };
                }
                for j in 0..C {
                    // SAFETY: as for `a`'s rows.
                    let bv = unsafe {
                        _mm512_maskz_loadu_ps(mask, self.b.offset(j as isize * self.ldb + off))
                    };
                    for i in 0..R {
                        acc[i][j] = _mm512_fmadd_ps(av[i], bv, acc[i][j]);
                    }
                }
            }
            for (i, row) in acc.iter().enumerate() {
                let zero = _mm512_setzero_ps();
                let pick = |j: usize| if j < C { row[j] } else { zero };
                let mut sums = [0f32; 4];
                // SAFETY: `sums` holds the four lanes stored.
                unsafe {
                    _mm_storeu_ps(sums.as_mut_ptr(), sum4(pick(0), pick(1), pick(2), pick(3)))
                };
                for (j, &s) in sums.iter().enumerate().take(C) {
                    // SAFETY: output (i, j) of the tile is in bounds, this call's alone.
                    unsafe {
                        let p = self.d.offset(i as isize * self.rs + j as isize * self.cs);
                        let old = if self.read_dst { self.beta * *p } else { 0.0 };
                        *p = old + self.alpha * s;
                    }
                }
            }
        }
    }

    /// The lane sums of four vectors, as the four lanes of one: pairs of vectors are
    /// interleaved and added until each 128-bit lane holds the four partial sums, then the
    /// four 128-bit lanes are added.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn sum4(v0: __m512, v1: __m512, v2: __m512, v3: __m512) -> __m128 {
        // Per 128-bit lane: [v0_0+v0_2, v1_0+v1_2, v0_1+v0_3, v1_1+v1_3], the same for v2, v3.
        let x = _mm512_add_ps(_mm512_unpacklo_ps(v0, v1), _mm512_unpackhi_ps(v0, v1));
        let y = _mm512_add_ps(_mm512_unpacklo_ps(v2, v3), _mm512_unpackhi_ps(v2, v3));
        // Per 128-bit lane: [sum v0, sum v1, sum v2, sum v3] over that lane.
        let s = _mm512_add_ps(
            _mm512_shuffle_ps::<0x44>(x, y),
            _mm512_shuffle_ps::<0xEE>(x, y),
        );
        // Add the 256-bit halves, then the 128-bit quarters.
        let h = _mm512_add_ps(s, _mm512_shuffle_f32x4::<0x4E>(s, s));
        let q = _mm512_add_ps(h, _mm512_shuffle_f32x4::<0xB1>(h, h));
        _mm512_castps512_ps128(q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `a @ b` in f64, `a` row-major `m×k`, `b` given as row-major `n×k` (its transpose).
    fn reference(m: usize, n: usize, k: usize, a: &[f32], bt: &[f32]) -> Vec<f64> {
        let mut out = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                out[i * n + j] = (0..k)
                    .map(|p| a[i * k + p] as f64 * bt[j * k + p] as f64)
                    .sum();
            }
        }
        out
    }

    #[test]
    fn products_along_the_reduction_match_the_definition_on_every_tile_shape() {
        // Edge tiles in both directions, a tail of `k` under 16, more than one `KC` block, a
        // long reduction over a wide product; `dst` read, or overwritten NaNs included.
        let shapes = [
            (9, 7, 133),
            (4, 4, 128),
            (5, 6, 2 * KC + 35),
            (144, 16, 448),
            (33, 40, LONG_K),
        ];
        for (m, n, k) in shapes {
            for read_dst in [true, false] {
                let a: Vec<f32> = (0..m * k)
                    .map(|i| ((i * 7 % 23) as f32 - 11.0) / 8.0)
                    .collect();
                let bt: Vec<f32> = (0..n * k)
                    .map(|i| ((i * 5 % 19) as f32 - 9.0) / 4.0)
                    .collect();
                let want = reference(m, n, k, &a, &bt);
                // Output row-major with a gap between rows, to check the strides.
                let ld = n + 3;
                let old = if read_dst { 1.5f32 } else { f32::NAN };
                let mut d = vec![old; m * ld];
                let (alpha, beta) = (0.5f32, 2.0f32);
                // SAFETY: the matrices are the vectors' elements: `a` m×k row-major, `b` the
                // transpose of row-major n×k `bt`, `d` m×n with rows `ld` apart.
                let done = unsafe {
                    gemm_along_k(&Product {
                        m,
                        n,
                        k,
                        dst: MatPtr::row_major(d.as_mut_ptr(), ld),
                        a: MatPtr::row_major(a.as_ptr(), k),
                        b: MatPtr::row_major(bt.as_ptr(), k).t(),
                        alpha,
                        beta,
                        read_dst,
                    })
                };
                let avx512 = cfg!(all(target_arch = "x86_64", not(miri)))
                    && std::arch::is_x86_feature_detected!("avx512f");
                assert_eq!(done, avx512, "{m}x{n}x{k}: taken exactly where AVX-512 is");
                if !done {
                    continue;
                }
                for i in 0..m {
                    for j in 0..n {
                        let want = if read_dst { 2.0 * 1.5 } else { 0.0 } + 0.5 * want[i * n + j];
                        let got = d[i * ld + j] as f64;
                        assert!(
                            (got - want).abs() <= 1e-4 * want.abs().max(1.0),
                            "{m}x{n}x{k} at ({i}, {j}): {got} against {want}"
                        );
                    }
                    let gap = &d[i * ld + n..(i + 1) * ld];
                    assert!(
                        gap.iter().all(|v| v.to_bits() == old.to_bits()),
                        "row gap written"
                    );
                }
            }
        }
    }

    #[test]
    fn wide_short_products_are_left_to_the_crate() {
        let (a, b) = (vec![1f32; 64 * 128], vec![1f32; 128 * 64]);
        let mut d = vec![0f32; 64 * 64];
        // SAFETY: 64×128 `a`, `b` the transpose of row-major 64×128, 64×64 `d`.
        let done = unsafe {
            gemm_along_k(&Product {
                m: 64,
                n: 64,
                k: 128,
                dst: MatPtr::row_major(d.as_mut_ptr(), 64),
                a: MatPtr::row_major(a.as_ptr(), 128),
                b: MatPtr::row_major(b.as_ptr(), 128).t(),
                alpha: 1.0,
                beta: 0.0,
                read_dst: false,
            })
        };
        assert!(!done);
    }
}
