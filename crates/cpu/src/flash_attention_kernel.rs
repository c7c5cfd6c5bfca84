//! The loops of the fused CPU attention (Note [Flash attention on CPU]): the blocked forward
//! with an online softmax, and the backward that recomputes the attention weights from the
//! saved logsumexp. Both work on raw strided operands in the accumulation type `A` (f32 or
//! f64); `flash_attention.rs` checks the arguments and prepares the operands.

use crate::dispatch_dtype::Num;
use crate::linalg::gemm_core::{gemm_float, GemmFloat, MatPtr};
use crate::loops::{parallel_for, with_avx2_fma};
use crate::vectorized_math::exp_f32;

/// A 4-d operand `[B, H, rows, cols]` as an address and strides in elements (a stride is 0
/// along a broadcast dimension of the mask; `cols` stride 0 for the logsumexp).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Operand {
    pub ptr: usize,
    pub sb: isize,
    pub sh: isize,
    pub sm: isize,
    pub se: isize,
}

impl Operand {
    /// The matrix of head `(b, h)` from row `m` on.
    #[inline]
    fn block<A>(self, b: usize, h: usize, m: usize) -> MatPtr {
        let off = b as isize * self.sb + h as isize * self.sh + m as isize * self.sm;
        MatPtr {
            ptr: self
                .ptr
                .wrapping_add_signed(off.wrapping_mul(size_of::<A>() as isize)),
            rs: self.sm,
            cs: self.se,
        }
    }
}

/// Element `(r, c)` of a matrix of `A`.
///
/// # Safety
/// The element must be in bounds of a live allocation.
#[inline(always)]
unsafe fn at<A>(m: MatPtr, r: usize, c: usize) -> *mut A {
    // SAFETY: the caller's guarantee.
    unsafe { (m.ptr as *mut A).offset(r as isize * m.rs + c as isize * m.cs) }
}

/// The geometry and options of one attention call.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Problem {
    pub batch: usize,
    pub q_heads: usize,
    pub kv_heads: usize,
    /// Query and key sequence lengths.
    pub l: usize,
    pub s: usize,
    /// Head dim of the queries and keys, and of the values.
    pub e: usize,
    pub ev: usize,
    pub scale: f64,
    pub causal: bool,
}

impl Problem {
    /// PyTorch's block sizes, chosen by the query length alone (`flash_attention_kernel_impl`).
    fn splits(&self) -> (usize, usize) {
        let q_split = match self.l {
            0..192 => 32,
            192..768 => 64,
            _ => 256,
        };
        (q_split.min(self.l).max(1), 512.min(self.s).max(1))
    }

    /// The keys query block `m..m + qb` attends to: causal skips whole blocks past the
    /// diagonal.
    fn kv_end(&self, m: usize, qb: usize) -> usize {
        if self.causal {
            (m + qb).min(self.s)
        } else {
            self.s
        }
    }

    /// The query heads sharing key/value head `hk` (grouped-query attention).
    fn group(&self) -> usize {
        self.q_heads / self.kv_heads
    }
}

/// The accumulation types, with their row exps (for f32 the vector `exp_f32`, as PyTorch's
/// kernels use its vector exps: Note [Flash attention on CPU]).
pub(crate) trait FlashFloat: GemmFloat {
    /// `row[i] = exp(row[i] - max)`, returning the row's sum.
    fn exp_shifted_sum(row: &mut [Self], max: Self) -> Self;
}

impl FlashFloat for f64 {
    fn exp_shifted_sum(row: &mut [f64], max: f64) -> f64 {
        row.iter_mut().fold(0.0, |s, x| {
            *x = (*x - max).exp();
            s + *x
        })
    }
}

/// Partial sums of the f32 exp row (a sum in one accumulator would not vectorise).
const LANES: usize = 8;

#[inline(always)]
fn exp_shifted_sum_f32(row: &mut [f32], max: f32) -> f32 {
    let mut lanes = [0.0f32; LANES];
    let mut chunks = row.chunks_exact_mut(LANES);
    for chunk in &mut chunks {
        for (x, s) in chunk.iter_mut().zip(&mut lanes) {
            *x = exp_f32(*x - max);
            *s += *x;
        }
    }
    for x in chunks.into_remainder() {
        *x = exp_f32(*x - max);
        lanes[0] += *x;
    }
    lanes.iter().sum()
}

impl FlashFloat for f32 {
    fn exp_shifted_sum(row: &mut [f32], max: f32) -> f32 {
        // Eight lanes of `exp_f32` at a time where the CPU has AVX2 (Note [Fused
        // multiply-add]).
        with_avx2_fma(
            #[inline(always)]
            || exp_shifted_sum_f32(row, max),
        )
    }
}

/// The forward's operands: `q`, `k`, `v`, `out` and the optional mask in `A`, `lse` `[B, H,
/// L]` in `A` (its `se` unused). `round` rounds the attention weights to the input dtype before
/// the second product (the identity unless the inputs are float16/bfloat16).
pub(crate) struct Forward<A> {
    pub q: Operand,
    pub k: Operand,
    pub v: Operand,
    pub mask: Option<Operand>,
    pub out: Operand,
    pub lse: Operand,
    pub round: Option<fn(A) -> A>,
}

/// The blocked forward, parallel over (batch, head, query block).
///
/// # Safety
/// Every operand addresses, for the sizes of `p`, elements of live allocations the caller
/// borrows (`out` and `lse` exclusively, disjoint from the rest and without internal overlap);
/// `p.kv_heads` divides `p.q_heads`.
pub(crate) unsafe fn forward<A: FlashFloat>(p: &Problem, f: &Forward<A>) {
    let (q_split, kv_split) = p.splits();
    let q_slices = p.l.div_ceil(q_split);
    let tasks = p.batch * p.q_heads * q_slices;
    let (zero, neg_inf) = (<A as Num>::ZERO, <A as Num>::LOWEST);
    let scale = <A as Num>::from_f64(p.scale);
    parallel_for(tasks, 1, |start, end| {
        let mut scores = vec![zero; q_split * kv_split];
        let mut acc = vec![zero; q_split * p.ev];
        let (mut row_max, mut row_sum) = (vec![neg_inf; q_split], vec![zero; q_split]);
        for task in start..end {
            let (bh, qi) = (task / q_slices, task % q_slices);
            let (b, h) = (bh / p.q_heads, bh % p.q_heads);
            let hk = h / p.group();
            let m = qi * q_split;
            let qb = q_split.min(p.l - m);
            row_max[..qb].fill(neg_inf);
            row_sum[..qb].fill(zero);
            acc[..qb * p.ev].fill(zero);
            let kv_end = p.kv_end(m, qb);
            let q_blk = f.q.block::<A>(b, h, m);
            for n in (0..kv_end).step_by(kv_split) {
                let kb = kv_split.min(kv_end - n);
                let s_blk = MatPtr::row_major(scores.as_ptr(), kb);
                // SAFETY: the caller's operands cover these blocks; `scores` holds qb x kb.
                unsafe {
                    gemm_float::<A>(
                        qb,
                        kb,
                        p.e,
                        s_blk,
                        q_blk,
                        f.k.block::<A>(b, hk, n).t(),
                        <A as Num>::ONE,
                        zero,
                        false,
                    );
                }
                for r in 0..qb {
                    let row = &mut scores[r * kb..(r + 1) * kb];
                    if p.causal {
                        // Keys after the query: before the scale, as PyTorch (so a scale <= 0
                        // gives NaN there too).
                        let first = (m + r + 1).saturating_sub(n).min(kb);
                        row[first..].fill(neg_inf);
                    }
                    let mut blk_max = neg_inf;
                    if let Some(mask) = f.mask {
                        let mrow = mask.block::<A>(b, h, m + r);
                        for (c, x) in row.iter_mut().enumerate() {
                            // SAFETY: the mask covers (b, h, m + r, n + c) by its strides.
                            let mv = unsafe { *at::<A>(mrow, 0, n + c) };
                            *x = x.mul(scale).add(mv);
                            if *x > blk_max {
                                blk_max = *x;
                            }
                        }
                    } else {
                        for x in row.iter_mut() {
                            *x = x.mul(scale);
                            if *x > blk_max {
                                blk_max = *x;
                            }
                        }
                    }
                    let new_max = if blk_max > row_max[r] {
                        blk_max
                    } else {
                        row_max[r]
                    };
                    if new_max == neg_inf {
                        // Every key masked so far: no exp(-inf - -inf).
                        row.fill(zero);
                        continue;
                    }
                    let s = A::exp_shifted_sum(row, new_max);
                    let c = row_max[r].sub(new_max).exp();
                    row_sum[r] = s.add(c.mul(row_sum[r]));
                    row_max[r] = new_max;
                    if n > 0 {
                        acc[r * p.ev..(r + 1) * p.ev]
                            .iter_mut()
                            .for_each(|a| *a = a.mul(c));
                    }
                }
                if let Some(round) = f.round {
                    scores[..qb * kb].iter_mut().for_each(|x| *x = round(*x));
                }
                // SAFETY: as above; `acc` holds qb x ev.
                unsafe {
                    gemm_float::<A>(
                        qb,
                        p.ev,
                        kb,
                        MatPtr::row_major(acc.as_ptr(), p.ev),
                        s_blk,
                        f.v.block::<A>(b, hk, n),
                        <A as Num>::ONE,
                        <A as Num>::ONE,
                        n > 0,
                    );
                }
            }
            let (out_blk, lse_blk) = (f.out.block::<A>(b, h, m), f.lse.block::<A>(b, h, m));
            for r in 0..qb {
                // A fully masked row: output 0, logsumexp 0.
                let mx = if row_max[r] == neg_inf {
                    zero
                } else {
                    row_max[r]
                };
                let sum = if row_sum[r] == zero {
                    <A as Num>::ONE
                } else {
                    row_sum[r]
                };
                // SAFETY: `out` and `lse` cover row m + r of head (b, h); this task alone
                // writes it.
                unsafe {
                    for (c, a) in acc[r * p.ev..(r + 1) * p.ev].iter().enumerate() {
                        *at::<A>(out_blk, r, c) = a.div(sum);
                    }
                    *at::<A>(lse_blk, r, 0) = mx.add(sum.ln());
                }
            }
        }
    });
}

/// The backward's operands (all in `A`): the inputs and mask as in [`Forward`], `dout` and
/// `out` `[B, H, L, Ev]`, `lse`, and the gradients `dq`, `dk`, `dv` (zeroed, accumulated
/// into). `round` rounds the weights and their gradient before the products.
pub(crate) struct Backward<A> {
    pub q: Operand,
    pub k: Operand,
    pub v: Operand,
    pub mask: Option<Operand>,
    pub dout: Operand,
    pub out: Operand,
    pub lse: Operand,
    pub dq: Operand,
    pub dk: Operand,
    pub dv: Operand,
    pub round: Option<fn(A) -> A>,
}

/// The backward, parallel over (batch, key/value head): one task owns the key and value
/// gradients of its head (and the query gradients of the query heads that share it), so the
/// accumulations need no synchronisation.
///
/// # Safety
/// As for [`forward`], with `dq`, `dk` and `dv` borrowed exclusively and disjoint.
pub(crate) unsafe fn backward<A: FlashFloat>(p: &Problem, f: &Backward<A>) {
    let (q_split, kv_split) = p.splits();
    let zero = <A as Num>::ZERO;
    let (one, scale) = (<A as Num>::ONE, <A as Num>::from_f64(p.scale));
    parallel_for(p.batch * p.kv_heads, 1, |start, end| {
        let mut attn = vec![zero; q_split * kv_split];
        let mut dattn = vec![zero; q_split * kv_split];
        let mut dsum = vec![zero; q_split];
        for task in start..end {
            let (b, hk) = (task / p.kv_heads, task % p.kv_heads);
            for h in hk * p.group()..(hk + 1) * p.group() {
                for m in (0..p.l).step_by(q_split) {
                    let qb = q_split.min(p.l - m);
                    let (q_blk, do_blk) = (f.q.block::<A>(b, h, m), f.dout.block::<A>(b, h, m));
                    let (o_blk, lse_blk) = (f.out.block::<A>(b, h, m), f.lse.block::<A>(b, h, m));
                    // D = rowsum(dO * O).
                    for (r, d) in dsum[..qb].iter_mut().enumerate() {
                        // SAFETY: dout and out cover rows m..m + qb of head (b, h).
                        *d = (0..p.ev).fold(zero, |s, c| unsafe {
                            s.add((*at::<A>(do_blk, r, c)).mul(*at::<A>(o_blk, r, c)))
                        });
                    }
                    for n in (0..p.kv_end(m, qb)).step_by(kv_split) {
                        let kb = kv_split.min(p.kv_end(m, qb) - n);
                        let (k_blk, v_blk) = (f.k.block::<A>(b, hk, n), f.v.block::<A>(b, hk, n));
                        let a_blk = MatPtr::row_major(attn.as_ptr(), kb);
                        let da_blk = MatPtr::row_major(dattn.as_ptr(), kb);
                        // SAFETY: the operands cover these blocks; the scratch holds qb x kb.
                        unsafe {
                            gemm_float::<A>(
                                qb,
                                kb,
                                p.e,
                                a_blk,
                                q_blk,
                                k_blk.t(),
                                scale,
                                zero,
                                false,
                            );
                            gemm_float::<A>(
                                qb,
                                kb,
                                p.ev,
                                da_blk,
                                do_blk,
                                v_blk.t(),
                                one,
                                zero,
                                false,
                            );
                        }
                        for r in 0..qb {
                            // SAFETY: lse covers row m + r of head (b, h).
                            let lse = unsafe { *at::<A>(lse_blk, r, 0) };
                            let row = &mut attn[r * kb..(r + 1) * kb];
                            if let Some(mask) = f.mask {
                                let mrow = mask.block::<A>(b, h, m + r);
                                for (c, x) in row.iter_mut().enumerate() {
                                    // SAFETY: the mask covers (b, h, m + r, n + c).
                                    *x = x.add(unsafe { *at::<A>(mrow, 0, n + c) });
                                }
                            }
                            // The weights exp(x - lse); 0 for the keys after the query.
                            let first = if p.causal {
                                (m + r + 1).saturating_sub(n).min(kb)
                            } else {
                                kb
                            };
                            A::exp_shifted_sum(&mut row[..first], lse);
                            row[first..].fill(zero);
                            let drow = &mut dattn[r * kb..(r + 1) * kb];
                            for (d, pv) in drow.iter_mut().zip(row.iter()) {
                                *d = pv.mul(d.sub(dsum[r]));
                            }
                        }
                        if let Some(round) = f.round {
                            attn[..qb * kb].iter_mut().for_each(|x| *x = round(*x));
                            dattn[..qb * kb].iter_mut().for_each(|x| *x = round(*x));
                        }
                        // SAFETY: as above; this task alone writes the gradients of heads
                        // (b, hk) and (b, h).
                        unsafe {
                            let dv = f.dv.block::<A>(b, hk, n);
                            gemm_float::<A>(kb, p.ev, qb, dv, a_blk.t(), do_blk, one, one, true);
                            let dq = f.dq.block::<A>(b, h, m);
                            gemm_float::<A>(qb, p.e, kb, dq, da_blk, k_blk, scale, one, true);
                            let dk = f.dk.block::<A>(b, hk, n);
                            gemm_float::<A>(kb, p.e, qb, dk, da_blk.t(), q_blk, scale, one, true);
                        }
                    }
                }
            }
        }
    });
}
