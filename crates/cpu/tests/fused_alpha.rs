//! `add` and `sub` with an `alpha` round `a + alpha * b` once, as PyTorch's CPU kernels do
//! (Note [Fused multiply-add] in switchboard-cpu). The element values were recorded from
//! PyTorch 2.15 on the CPU: each is one where a multiply then an add gives another last bit.

use switchboard_ops::{self as ops, TensorOps};
use switchboard_tensor::Tensor;

use switchboard_cpu as _;

const F32_A: [u32; 4] = [0xbf276b4b, 0xbf1bf3ce, 0x3e9b8173, 0x3fd7f355];
const F32_B: [u32; 4] = [0xbfe6d4a1, 0x3f923256, 0x3e98a531, 0x3fbcf01e];
/// `torch.add(a, b, alpha=0.37)`.
const F32_ADD: [u32; 4] = [0xbfa91deb, 0xbe3f1143, 0x3ed3fc03, 0x400eedc5];

const F64_A: [u64; 4] = [
    0xbfd15e3832d73942,
    0x3fd0e91b7e96882b,
    0xbfbdf69fd602c35d,
    0xbfce72067bdb711c,
];
const F64_B: [u64; 4] = [
    0xbfed87799d4c282c,
    0x3fd27cf186389d7f,
    0xbfd8345e02685ebb,
    0xbfece934067ed556,
];
/// `torch.sub(a, b, alpha=0.37)`.
const F64_SUB: [u64; 4] = [
    0x3fb1ef2b063cd98e,
    0x3fc423d62e5516ab,
    0x3f976fff1c9c4212,
    0x3fb8af82c9979541,
];

fn f32s(bits: &[u32]) -> Tensor {
    Tensor::from_vec(bits.iter().map(|&b| f32::from_bits(b)).collect(), &[4]).unwrap()
}

fn f64s(bits: &[u64]) -> Tensor {
    Tensor::from_vec(bits.iter().map(|&b| f64::from_bits(b)).collect(), &[4]).unwrap()
}

fn bits32(t: &Tensor) -> Vec<u32> {
    t.to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

fn bits64(t: &Tensor) -> Vec<u64> {
    t.to_vec::<f64>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

#[test]
fn add_with_alpha_rounds_once_as_pytorch() {
    let (a, b) = (f32s(&F32_A), f32s(&F32_B));
    let alpha = || ops::AddOptions::default().alpha(0.37);
    // The dense path, and the general one (`b` broadcast from a column, `a` strided).
    assert_eq!(bits32(&ops::add_with(&a, &b, alpha()).unwrap()), F32_ADD);
    let a_col = a.reshape(&[4, 1]).unwrap().expand(&[4, 3]).unwrap();
    let b_col = b.reshape(&[4, 1]).unwrap();
    let r = ops::add_with(&a_col, &b_col, alpha()).unwrap();
    let first = r.select(1, 2).unwrap().contiguous().unwrap();
    assert_eq!(bits32(&first), F32_ADD);
    // In place, as SGD's `param.add_(grad, alpha=-lr)`.
    let p = ops::clone(&a).unwrap();
    ops::add_with_(&p, &b, ops::AddInplaceOptions::default().alpha(0.37)).unwrap();
    assert_eq!(bits32(&p), F32_ADD);
}

#[test]
fn sub_with_alpha_rounds_once_as_pytorch() {
    let (a, b) = (f64s(&F64_A), f64s(&F64_B));
    let r = ops::sub_with(&a, &b, ops::SubOptions::default().alpha(0.37)).unwrap();
    assert_eq!(bits64(&r), F64_SUB);
}

#[test]
fn large_and_parallel_loops_round_once() {
    // Over the parallel grain, in chunks, against the standard library's exact fused
    // multiply-add computed here element by element.
    let n = 100_003usize;
    let a: Vec<f32> = (0..n)
        .map(|i| ((i * 7919) % 1000) as f32 / 337.0 - 1.3)
        .collect();
    let b: Vec<f32> = (0..n)
        .map(|i| ((i * 104729) % 997) as f32 / 211.0 - 2.1)
        .collect();
    let alpha = -0.013f32;
    let expected: Vec<u32> = a
        .iter()
        .zip(&b)
        .map(|(&a, &b)| b.mul_add(alpha, a).to_bits())
        .collect();
    let ta = Tensor::from_vec(a, &[n as i64]).unwrap();
    let tb = Tensor::from_vec(b, &[n as i64]).unwrap();
    let r = ops::add_with(&ta, &tb, ops::AddOptions::default().alpha(alpha as f64)).unwrap();
    assert_eq!(bits32(&r), expected);
}
