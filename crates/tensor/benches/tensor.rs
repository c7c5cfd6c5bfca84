//! Costs on the eager hot path: making small tensors, reading and writing them.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use switchboard_tensor::RawOps;
use switchboard_tensor::{Access, ScalarType, Tensor};

fn bench(c: &mut Criterion) {
    c.bench_function("empty [1] f32", |b| {
        b.iter(|| Tensor::empty(black_box(&[1]), ScalarType::Float).unwrap())
    });
    c.bench_function("from_vec [1] f32", |b| {
        b.iter(|| Tensor::from_vec(black_box(vec![1.0f32]), &[1]).unwrap())
    });
    c.bench_function("empty_like [2, 3] f32", |b| {
        let t = Tensor::zeros(&[2, 3], ScalarType::Float).unwrap();
        b.iter(|| black_box(&t).empty_like().unwrap())
    });
    c.bench_function("clone handle", |b| {
        let t = Tensor::zeros(&[1], ScalarType::Float).unwrap();
        b.iter(|| black_box(&t).clone())
    });
    c.bench_function("1-element add through Access", |b| {
        let x = Tensor::from_vec(vec![1.0f32], &[1]).unwrap();
        let y = Tensor::from_vec(vec![2.0f32], &[1]).unwrap();
        b.iter(|| {
            let (x, y) = (black_box(&x), black_box(&y));
            let out = x.empty_like().unwrap();
            let access = Access::new(&[x, y], &[&out]).unwrap();
            let (px, py, po) = (
                x.data_ptr_as::<f32>().unwrap(),
                y.data_ptr_as::<f32>().unwrap(),
                out.mut_data_ptr_as::<f32>().unwrap(),
            );
            // SAFETY: `access` holds the borrows; each tensor has one element.
            unsafe { *po = *px + *py };
            drop(access);
            out
        })
    });
    c.bench_function("view [2, 3] -> [6]", |b| {
        let t = Tensor::zeros(&[2, 3], ScalarType::Float).unwrap();
        b.iter(|| black_box(&t).view(&[6]).unwrap())
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
