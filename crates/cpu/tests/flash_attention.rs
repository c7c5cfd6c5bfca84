//! `_scaled_dot_product_flash_attention_for_cpu` and its backward against a direct f64
//! computation of attention (`softmax(scale * q k^T + mask) v`, its logsumexp and its
//! gradients), across the block sizes (query blocks of 32, 64 and 256 rows, several key
//! blocks), masks, causal attention with L != S, grouped-query heads, strided inputs and the
//! dtypes; plus the layouts, the meta tensors and the error messages of PyTorch 2.15.

use switchboard_ops::ScaledDotProductFlashAttentionForCpuOptions as Opts;
use switchboard_ops::{
    self as ops, ScaledDotProductFlashAttentionForCpuBackwardOptions as BwdOpts,
};
use switchboard_tensor::{Device, ScalarType, Tensor};

use switchboard_cpu as cpu;

/// Deterministic values in about [-2, 2].
fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 11) as f64 / (1u64 << 53) as f64) * 4.0 - 2.0
        })
        .collect()
}

/// A `[B, H, M, E]` tensor of `dtype` (f64 values `v` in logical order), stored BLHE when
/// `blhe` (a `transpose(1, 2)` view).
fn tensor(v: &[f64], s: [i64; 4], dtype: ScalarType, blhe: bool) -> Tensor {
    let t = ops::_to_copy_with(
        &Tensor::from_vec(v.to_vec(), &s).unwrap(),
        ops::ToCopyOptions {
            dtype: Some(dtype),
            ..Default::default()
        },
    )
    .unwrap();
    if blhe {
        let stored = ops::contiguous(&ops::transpose(&t, 1, 2).unwrap()).unwrap();
        ops::transpose(&stored, 1, 2).unwrap()
    } else {
        t
    }
}

fn to_f64(t: &Tensor) -> Vec<f64> {
    let c = ops::_to_copy_with(
        t,
        ops::ToCopyOptions {
            dtype: Some(ScalarType::Double),
            ..Default::default()
        },
    )
    .unwrap();
    ops::contiguous(&c).unwrap().to_vec::<f64>().unwrap()
}

/// One case: shapes, options, and the reference in f64.
#[derive(Clone)]
struct Case {
    b: usize,
    hq: usize,
    hkv: usize,
    l: usize,
    s: usize,
    e: usize,
    causal: bool,
    scale: Option<f64>,
    /// The mask's 4-d shape (size-1 dims broadcast) and values (`-inf` allowed).
    mask: Option<([usize; 4], Vec<f64>)>,
}

struct Reference {
    out: Vec<f64>,
    lse: Vec<f64>,
    dq: Vec<f64>,
    dk: Vec<f64>,
    dv: Vec<f64>,
}

impl Case {
    fn new(b: usize, h: usize, l: usize, s: usize, e: usize) -> Case {
        Case {
            b,
            hq: h,
            hkv: h,
            l,
            s,
            e,
            causal: false,
            scale: None,
            mask: None,
        }
    }

    fn inputs(&self) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
        let (b, l, s, e) = (self.b, self.l, self.s, self.e);
        (
            values(b * self.hq * l * e, 1),
            values(b * self.hkv * s * e, 2),
            values(b * self.hkv * s * e, 3),
            values(b * self.hq * l * e, 4),
        )
    }

    fn reference(&self) -> Reference {
        let (q, k, v, dout) = self.inputs();
        let (l, s, e) = (self.l, self.s, self.e);
        let scale = self.scale.unwrap_or(1.0 / (e as f64).sqrt());
        let mut r = Reference {
            out: vec![0.0; q.len()],
            lse: vec![0.0; self.b * self.hq * l],
            dq: vec![0.0; q.len()],
            dk: vec![0.0; k.len()],
            dv: vec![0.0; v.len()],
        };
        for b in 0..self.b {
            for h in 0..self.hq {
                let hk = h / (self.hq / self.hkv);
                let qo = (b * self.hq + h) * l * e;
                let ko = (b * self.hkv + hk) * s * e;
                for i in 0..l {
                    let mut sc: Vec<f64> = (0..s)
                        .map(|j| {
                            if self.causal && j > i {
                                return f64::NEG_INFINITY;
                            }
                            let dot: f64 =
                                (0..e).map(|c| q[qo + i * e + c] * k[ko + j * e + c]).sum();
                            let m = self.mask.as_ref().map_or(0.0, |(ms, mv)| {
                                let idx = [b, h, i, j];
                                let at = (0..4).fold(0, |a, d| {
                                    a * ms[d] + if ms[d] == 1 { 0 } else { idx[d] }
                                });
                                mv[at]
                            });
                            dot * scale + m
                        })
                        .collect();
                    let max = sc.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    if max == f64::NEG_INFINITY {
                        continue;
                    }
                    let sum: f64 = sc
                        .iter_mut()
                        .map(|x| {
                            *x = (*x - max).exp();
                            *x
                        })
                        .sum();
                    sc.iter_mut().for_each(|x| *x /= sum);
                    r.lse[(b * self.hq + h) * l + i] = max + sum.ln();
                    for c in 0..e {
                        r.out[qo + i * e + c] = (0..s).map(|j| sc[j] * v[ko + j * e + c]).sum();
                    }
                    let dp: Vec<f64> = (0..s)
                        .map(|j| {
                            (0..e)
                                .map(|c| dout[qo + i * e + c] * v[ko + j * e + c])
                                .sum()
                        })
                        .collect();
                    let d: f64 = (0..s).map(|j| sc[j] * dp[j]).sum();
                    for j in 0..s {
                        let ds = sc[j] * (dp[j] - d);
                        for c in 0..e {
                            r.dv[ko + j * e + c] += sc[j] * dout[qo + i * e + c];
                            r.dq[qo + i * e + c] += scale * ds * k[ko + j * e + c];
                            r.dk[ko + j * e + c] += scale * ds * q[qo + i * e + c];
                        }
                    }
                }
            }
        }
        r
    }

    fn mask_tensor(&self, dtype: ScalarType) -> Option<Tensor> {
        self.mask.as_ref().map(|(ms, mv)| {
            let shape: Vec<i64> = ms.iter().map(|&d| d as i64).collect();
            let t = Tensor::from_vec(mv.clone(), &shape).unwrap();
            ops::_to_copy_with(
                &t,
                ops::ToCopyOptions {
                    dtype: Some(dtype),
                    ..Default::default()
                },
            )
            .unwrap()
        })
    }

    /// Runs forward and backward in `dtype` and checks them against the reference.
    fn check(&self, dtype: ScalarType, blhe: bool, tol: f64) {
        let (q, k, v, dout) = self.inputs();
        let (b, hq, hkv, l, s, e) = (
            self.b as i64,
            self.hq as i64,
            self.hkv as i64,
            self.l as i64,
            self.s as i64,
            self.e as i64,
        );
        let qt = tensor(&q, [b, hq, l, e], dtype, blhe);
        let kt = tensor(&k, [b, hkv, s, e], dtype, blhe);
        let vt = tensor(&v, [b, hkv, s, e], dtype, blhe);
        let dt = tensor(&dout, [b, hq, l, e], dtype, false);
        let mask_dtype = if dtype == ScalarType::Double {
            dtype
        } else {
            ScalarType::Float
        };
        let mask = self.mask_tensor(mask_dtype);
        let (out, lse) = ops::_scaled_dot_product_flash_attention_for_cpu_with(
            &qt,
            &kt,
            &vt,
            Opts {
                is_causal: self.causal,
                attn_mask: mask.as_ref(),
                scale: self.scale,
                ..Default::default()
            },
        )
        .unwrap();
        let (dq, dk, dv) = ops::_scaled_dot_product_flash_attention_for_cpu_backward_with(
            &dt,
            &qt,
            &kt,
            &vt,
            &out,
            &lse,
            0.0,
            self.causal,
            BwdOpts {
                attn_mask: mask.as_ref(),
                scale: self.scale,
            },
        )
        .unwrap();
        let r = self.reference();
        for (name, got, want) in [
            ("out", &out, &r.out),
            ("lse", &lse, &r.lse),
            ("dq", &dq, &r.dq),
            ("dk", &dk, &r.dk),
            ("dv", &dv, &r.dv),
        ] {
            let got = to_f64(got);
            let worst = got
                .iter()
                .zip(want.iter())
                .map(|(a, b)| (a - b).abs() / (1.0 + b.abs()))
                .fold(0.0, f64::max);
            assert!(
                worst <= tol,
                "{name} of {dtype:?} off by {worst:e} (tolerance {tol:e})"
            );
        }
    }
}

const F32: f64 = 1e-5;
const F64: f64 = 1e-12;

#[test]
fn matches_attention_without_and_with_causal_masking() {
    let mut c = Case::new(2, 3, 40, 40, 16);
    c.check(ScalarType::Float, false, F32);
    c.check(ScalarType::Double, false, F64);
    c.causal = true;
    c.check(ScalarType::Float, false, F32);
    c.check(ScalarType::Double, false, F64);
}

#[test]
fn causal_follows_the_top_left_diagonal_when_lengths_differ() {
    for (l, s) in [(40, 70), (70, 40)] {
        let mut c = Case::new(1, 2, l, s, 8);
        c.causal = true;
        c.check(ScalarType::Double, false, F64);
    }
}

#[test]
fn every_block_size_and_several_key_blocks() {
    // Query blocks of 64 (L = 200), several key blocks of 512 (S = 1100), causal skipping.
    let mut c = Case::new(1, 1, 200, 1100, 8);
    c.check(ScalarType::Float, false, F32);
    c.causal = true;
    c.check(ScalarType::Float, false, F32);
    // Query blocks of 256.
    let mut c = Case::new(1, 1, 800, 600, 4);
    c.causal = true;
    c.check(ScalarType::Double, false, F64);
}

#[test]
fn masks_broadcast_and_add() {
    let (b, h, l, s) = (2, 3, 20, 24);
    for shape in [
        [b, 1, l, s],
        [1, 1, l, s],
        [b, h, 1, s],
        [1, 1, 1, 1],
        [b, h, l, s],
    ] {
        let n: usize = shape.iter().product();
        let mut c = Case::new(b, h, l, s, 8);
        c.mask = Some((shape, values(n, 9)));
        c.check(ScalarType::Float, false, F32);
        c.check(ScalarType::Double, false, F64);
    }
}

#[test]
fn a_fully_masked_row_gives_zeros_not_nan() {
    let (l, s) = (6, 5);
    let mut mv = vec![0.0; l * s];
    // Row 2 sees nothing; row 4 only key 3.
    mv[2 * s..3 * s].fill(f64::NEG_INFINITY);
    for (j, x) in mv[4 * s..5 * s].iter_mut().enumerate() {
        if j != 3 {
            *x = f64::NEG_INFINITY;
        }
    }
    let mut c = Case::new(1, 2, l, s, 4);
    c.mask = Some(([1, 1, l, s], mv));
    c.check(ScalarType::Float, false, F32);
    let r = c.reference();
    assert_eq!(r.lse[2], 0.0);
}

#[test]
fn grouped_query_heads_share_key_value_heads() {
    let mut c = Case::new(2, 4, 12, 12, 8);
    c.hkv = 2;
    c.causal = true;
    c.check(ScalarType::Float, false, F32);
    c.check(ScalarType::Double, false, F64);
}

#[test]
fn strided_inputs_and_scale() {
    let mut c = Case::new(2, 3, 33, 17, 8);
    c.scale = Some(0.3);
    c.check(ScalarType::Float, true, F32);
    c.causal = true;
    c.check(ScalarType::Double, true, F64);
}

#[test]
fn reduced_precision_computes_in_f32() {
    let mut c = Case::new(1, 2, 32, 32, 16);
    c.causal = true;
    c.check(ScalarType::BFloat16, false, 5e-2);
    c.check(ScalarType::Half, false, 1e-2);
}

fn qkv(dtype: ScalarType, blhe: bool) -> Tensor {
    tensor(&values(2 * 4 * 16 * 8, 5), [2, 4, 16, 8], dtype, blhe)
}

#[test]
fn layouts_follow_pytorch() {
    for (blhe, strides) in [(false, [512i64, 128, 8, 1]), (true, [512, 8, 32, 1])] {
        let cpu_q = qkv(ScalarType::Float, blhe);
        assert_eq!(cpu_q.strides(), strides);
        // Meta tensors (the kernel itself: the Meta backend is not linked here).
        let meta_q =
            Tensor::empty_strided(&[2, 4, 16, 8], &strides, ScalarType::Float, Device::META)
                .unwrap();
        for q in [cpu_q, meta_q] {
            let (out, lse) = cpu::_scaled_dot_product_flash_attention_for_cpu(
                &q, &q, &q, 0.0, false, None, None,
            )
            .unwrap();
            assert_eq!((out.device(), out.strides()), (q.device(), &strides[..]));
            assert_eq!(
                (lse.sizes(), lse.strides()),
                (&[2i64, 4, 16][..], &[64i64, 1, 4][..])
            );
            assert_eq!(lse.dtype(), ScalarType::Float);
            let (dq, dk, dv) = cpu::_scaled_dot_product_flash_attention_for_cpu_backward(
                &out, &q, &q, &q, &out, &lse, 0.0, false, None, None,
            )
            .unwrap();
            for g in [dq, dk, dv] {
                assert_eq!(
                    (g.sizes(), g.strides()),
                    (&[2i64, 4, 16, 8][..], &[512i64, 8, 32, 1][..])
                );
            }
        }
    }
    let q = qkv(ScalarType::Double, false);
    let (_, lse) = ops::_scaled_dot_product_flash_attention_for_cpu(&q, &q, &q).unwrap();
    assert_eq!(lse.dtype(), ScalarType::Double);
    let q = qkv(ScalarType::BFloat16, false);
    let (out, lse) = ops::_scaled_dot_product_flash_attention_for_cpu(&q, &q, &q).unwrap();
    assert_eq!(
        (out.dtype(), lse.dtype()),
        (ScalarType::BFloat16, ScalarType::Float)
    );
}

fn message(r: switchboard_dispatcher::Result<(Tensor, Tensor)>) -> String {
    r.expect_err("an error").to_string()
}

#[test]
fn errors_carry_pytorchs_messages() {
    let q = qkv(ScalarType::Float, false);
    let p = "scaled_dot_product_attention_flash_attention: ";
    let long = ops::_to_copy_with(
        &q,
        ops::ToCopyOptions {
            dtype: Some(ScalarType::Long),
            ..Default::default()
        },
    )
    .unwrap();
    let flash = |q: &Tensor, k: &Tensor, v: &Tensor, o: Opts| {
        ops::_scaled_dot_product_flash_attention_for_cpu_with(q, k, v, o)
    };
    let m = message(flash(&long, &long, &long, Opts::default()));
    assert!(
        m.contains(&format!(
            "{p}Expected data type in FP32, FP64, BF16, FP16, but got Long instead."
        )),
        "{m}"
    );
    let three = ops::select(&q, 0, 0).unwrap();
    let m = message(flash(&three, &three, &three, Opts::default()));
    assert!(
        m.contains(&format!(
            "{p}Accept only 4 dims inputs shape of {{B, H, T, K}}"
        )),
        "{m}"
    );
    let o = Opts {
        dropout_p: 0.1,
        ..Default::default()
    };
    assert!(
        message(flash(&q, &q, &q, o)).contains(&format!("{p}Currently do not support dropout > 0"))
    );
    let narrow = ops::narrow(&q, 3, 0, 4).unwrap();
    assert!(message(flash(&q, &q, &narrow, Opts::default()))
        .contains(&format!("{p}Q/K/V should have the same head size")));
    let bool_mask = ops::ge_scalar(
        &ops::select(&ops::select(&q, 0, 0).unwrap(), 0, 0).unwrap(),
        0.0,
    )
    .unwrap();
    let bool_mask = ops::expand(&ops::narrow(&bool_mask, 1, 0, 1).unwrap(), &[16, 16]).unwrap();
    let o = Opts {
        attn_mask: Some(&bool_mask),
        ..Default::default()
    };
    assert!(message(flash(&q, &q, &q, o))
        .contains(&format!("{p}Attention mask is the same data type as query")));
    let mask3 = ops::select(&q, 3, 0).unwrap();
    let o = Opts {
        attn_mask: Some(&mask3),
        ..Default::default()
    };
    assert!(message(flash(&q, &q, &q, o)).contains(&format!("{p}Attention mask dim in {{2, 4}}")));
    // Where PyTorch reads out of bounds, an error.
    let k1 = ops::narrow(&q, 0, 0, 1).unwrap();
    assert!(message(flash(&q, &k1, &k1, Opts::default())).contains("batch size"));
}

/// With `scale` 0 and causal masking, the rows before the last have NaN weights (the mask comes
/// before the scale: `-inf * 0`), as in PyTorch. PyTorch's backward applies the scale as the
/// `alpha` of a BLAS product, which then reads nothing: the query and key gradients are 0, not
/// NaN, while the value gradient keeps the NaN rows (PyTorch 2.15 on `[1, 1, 3, 2]` inputs).
#[test]
fn a_zero_scale_gives_pytorchs_zero_query_and_key_gradients() {
    let s = [1, 1, 3, 2];
    let (q, k, v) = (
        tensor(&values(6, 1), s, ScalarType::Float, false),
        tensor(&values(6, 2), s, ScalarType::Float, false),
        tensor(&values(6, 3), s, ScalarType::Float, false),
    );
    let scale = Some(0.0);
    let opts = Opts {
        is_causal: true,
        scale,
        ..Default::default()
    };
    let (out, lse) =
        ops::_scaled_dot_product_flash_attention_for_cpu_with(&q, &k, &v, opts).unwrap();
    let grad = Tensor::ones(&s, ScalarType::Float).unwrap();
    let bwd = BwdOpts {
        attn_mask: None,
        scale,
    };
    let (dq, dk, dv) = ops::_scaled_dot_product_flash_attention_for_cpu_backward_with(
        &grad, &q, &k, &v, &out, &lse, 0.0, true, bwd,
    )
    .unwrap();
    let nan_rows = |t: &Tensor| to_f64(t).iter().map(|x| x.is_nan()).collect::<Vec<_>>();
    let first_two = [true, true, true, true, false, false];
    assert_eq!(nan_rows(&out), first_two);
    assert_eq!(nan_rows(&dv), first_two);
    assert_eq!(to_f64(&dq), [0.0; 6]);
    assert_eq!(to_f64(&dk), [0.0; 6]);
}
