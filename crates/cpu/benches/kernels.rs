//! Criterion benchmarks of the CPU kernels called directly (no dispatch): the elementwise
//! iterator's contiguous fast path, a broadcast, a strided (transposed) input and a reduction.
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use switchboard_cpu as cpu;
use switchboard_tensor::RawOps;
use switchboard_tensor::{Scalar, Tensor};

fn ramp(n: usize, shape: &[i64]) -> Tensor {
    Tensor::from_vec((0..n).map(|i| (i % 97) as f32 * 0.01).collect(), shape).unwrap()
}

fn kernels(c: &mut Criterion) {
    let a = ramp(1 << 20, &[1024, 1024]);
    let b = ramp(1 << 20, &[1024, 1024]);
    let row = ramp(1024, &[1024]);
    let at = a.transpose(0, 1).unwrap();
    let one = Scalar::Int(1);
    c.bench_function("cpu/add_1M_contiguous", |bch| {
        bch.iter(|| cpu::add_tensor(black_box(&a), black_box(&b), one).unwrap())
    });
    c.bench_function("cpu/add_1M_broadcast_row", |bch| {
        bch.iter(|| cpu::add_tensor(black_box(&a), black_box(&row), one).unwrap())
    });
    c.bench_function("cpu/add_1M_transposed", |bch| {
        bch.iter(|| cpu::add_tensor(black_box(&at), black_box(&b), one).unwrap())
    });
    c.bench_function("cpu/sum_1M", |bch| {
        bch.iter(|| cpu::sum(black_box(&a), None).unwrap())
    });
    let small = ramp(1, &[1]);
    c.bench_function("cpu/add_1elem", |bch| {
        bch.iter(|| cpu::add_tensor(black_box(&small), black_box(&small), one).unwrap())
    });
}

/// `mm` of square f32 matrices; the throughput is reported in elements/s where one element is
/// one flop (`2n^3` per product), so `Gelem/s` reads as GFLOP/s.
fn matmul(c: &mut Criterion) {
    let mut g = c.benchmark_group("cpu");
    for n in [512usize, 1024] {
        let a = ramp(n * n, &[n as i64, n as i64]);
        let b = ramp(n * n, &[n as i64, n as i64]);
        g.throughput(Throughput::Elements(2 * (n as u64).pow(3)));
        g.bench_function(format!("mm_{n}"), |bch| {
            bch.iter(|| cpu::mm(black_box(&a), black_box(&b)).unwrap())
        });
    }
    g.finish();
}

criterion_group!(benches, kernels, matmul);
criterion_main!(benches);
