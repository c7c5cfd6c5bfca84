//! Criterion benches of eager operator calls through the whole stack (generated API,
//! dispatcher, Autograd fallthrough, CPU kernel, allocation): the compute targets.
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

use switchboard_cpu as _;

fn ramp(n: usize, shape: &[i64]) -> Tensor {
    Tensor::from_vec((0..n).map(|i| (i % 97) as f32 * 0.01).collect(), shape).unwrap()
}

fn eager(c: &mut Criterion) {
    let one_a = ramp(1, &[1]);
    let one_b = ramp(1, &[1]);
    c.bench_function("eager/add_1elem", |b| {
        b.iter(|| ops::add(black_box(&one_a), black_box(&one_b)).unwrap())
    });

    let n = 10_000_000usize;
    let (x, y, out) = (
        ramp(n, &[n as i64]),
        ramp(n, &[n as i64]),
        ramp(n, &[n as i64]),
    );
    let mut g = c.benchmark_group("eager/add_out_1e7");
    // Effective bandwidth as PyTorch's figure counts it: two reads and one write of f32.
    g.throughput(Throughput::Bytes((3 * 4 * n) as u64));
    g.sample_size(20);
    g.bench_function("f32", |b| {
        b.iter(|| ops::add_out(black_box(&x), black_box(&y), black_box(&out)).unwrap())
    });
    g.finish();

    for n in [512usize, 1024] {
        let a = ramp(n * n, &[n as i64, n as i64]);
        let bm = ramp(n * n, &[n as i64, n as i64]);
        let mut g = c.benchmark_group(format!("eager/matmul_{n}"));
        g.throughput(Throughput::Elements((2 * n * n * n) as u64)); // FLOPs
        g.sample_size(10);
        g.bench_function("f32", |b| {
            b.iter(|| ops::matmul(black_box(&a), black_box(&bm)).unwrap())
        });
        g.finish();
    }
}

criterion_group!(benches, eager);
criterion_main!(benches);
