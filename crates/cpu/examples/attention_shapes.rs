//! The attention of the transformer benchmark (`transformer_train_step` in switchboard-cli's
//! `compute_bench`: batch 16, 4 heads, 128 tokens, head dim 64, causal, f32) through the fused
//! kernel and through the math path's CPU kernels (`bmm`, `where`, `_softmax`, and in
//! backward `_softmax_backward_data` and three more `bmm`), forward and backward:
//!
//! ```text
//! cargo build --release -p switchboard-cpu --example attention_shapes
//! target/release/examples/attention_shapes [REPS [THREADS]]
//! ```
//!
//! Prints the best time of `REPS` runs of each, in milliseconds.

mod timing;

use switchboard_cpu as cpu;
use switchboard_tensor::{RawOps, Scalar, ScalarType, Tensor};
use timing::best;

const B: i64 = 16;
const H: i64 = 4;
const L: i64 = 128;
const E: i64 = 64;

fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i as f32 * 0.618 + seed as f32).sin() * 43758.545).fract())
        .collect()
}

fn main() {
    let (reps, threads, _) = timing::start(10, 1);
    let n = (B * H * L * E) as usize;
    let t4 = |seed| Tensor::from_vec(values(n, seed), &[B, H, L, E]).unwrap();
    let (q, k, v, dout) = (t4(1), t4(2), t4(3), t4(4));
    let scale = 1.0 / (E as f64).sqrt();

    let (out, lse) =
        cpu::_scaled_dot_product_flash_attention_for_cpu(&q, &k, &v, 0.0, true, None, None)
            .unwrap();
    let flash_fwd = best(reps, || {
        cpu::_scaled_dot_product_flash_attention_for_cpu(&q, &k, &v, 0.0, true, None, None)
            .unwrap();
    });
    let flash_bwd = best(reps, || {
        cpu::_scaled_dot_product_flash_attention_for_cpu_backward(
            &dout, &q, &k, &v, &out, &lse, 0.0, true, None, None,
        )
        .unwrap();
    });

    // The math path over [B*H, L, E] batches.
    let flat = |t: &Tensor| t.reshape(&[B * H, L, E]).unwrap();
    let (q3, k3, v3, d3) = (flat(&q), flat(&k), flat(&v), flat(&dout));
    let rows = Tensor::from_vec((0..L).collect::<Vec<i64>>(), &[L, 1]).unwrap();
    let cols = Tensor::from_vec((0..L).collect::<Vec<i64>>(), &[1, L]).unwrap();
    let causal = cpu::ge_tensor(&rows, &cols).unwrap();
    let neg_inf = Tensor::scalar_tensor(Scalar::Float(f64::NEG_INFINITY), ScalarType::Float);
    let zero = Tensor::scalar_tensor(Scalar::Float(0.0), ScalarType::Float);
    let root = Scalar::Float(scale.sqrt());
    let forward = || {
        let qs = cpu::mul_scalar(&q3, root).unwrap();
        let ks = cpu::mul_scalar(&k3.transpose(1, 2).unwrap(), root).unwrap();
        let s = cpu::bmm(&qs, &ks).unwrap();
        let s = cpu::where_self(&causal, &s, &neg_inf).unwrap();
        let p = cpu::_softmax(&s, -1, false).unwrap();
        (cpu::bmm(&p, &v3).unwrap(), p)
    };
    let (_, p) = forward();
    let math_fwd = best(reps, || {
        forward();
    });
    let math_bwd = best(reps, || {
        cpu::bmm(&p.transpose(1, 2).unwrap(), &d3).unwrap();
        let dp = cpu::bmm(&d3, &v3.transpose(1, 2).unwrap()).unwrap();
        let ds = cpu::_softmax_backward_data(&dp, &p, -1, ScalarType::Float).unwrap();
        let ds = cpu::where_self(&causal, &ds, &zero).unwrap();
        let ds = cpu::mul_scalar(&ds, Scalar::Float(scale)).unwrap();
        cpu::bmm(&ds, &k3).unwrap();
        cpu::bmm(&ds.transpose(1, 2).unwrap(), &q3).unwrap();
    });
    println!(
        "B{B} H{H} L{L} E{E} causal f32, {threads} thread(s), best of {reps}: flash fwd {flash_fwd:.2} \
         ms, bwd {flash_bwd:.2} ms; math kernels fwd {math_fwd:.2} ms, bwd {math_bwd:.2} ms"
    );
}
