//! The key-set operations on the dispatch hot path.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use switchboard_keys::{
    DispatchKey as K, DispatchKeySet, DEFAULT_EXCLUDED_SET, DEFAULT_INCLUDED_SET,
};

fn hot_path(c: &mut Criterion) {
    let sets: Vec<DispatchKeySet> = [
        &[K::CPU, K::ADInplaceOrView, K::AutogradCPU, K::AutocastCPU][..],
        &[K::Meta, K::ADInplaceOrView, K::AutogradMeta],
        &[K::SparseCUDA, K::AutogradOther],
        &[K::Lazy, K::FuncTorchBatched, K::Python],
    ]
    .iter()
    .map(|keys| DispatchKeySet::from_keys(keys))
    .collect();
    c.bench_function("keyset/highest_priority_type_id", |b| {
        b.iter(|| {
            for ks in &sets {
                black_box(black_box(*ks).highest_priority_type_id());
            }
        })
    });
    c.bench_function("keyset/dispatch_table_index", |b| {
        b.iter(|| {
            for ks in &sets {
                black_box(black_box(*ks).dispatch_table_index());
            }
        })
    });
    c.bench_function("keyset/call_keyset_and_index", |b| {
        // What a call does: union the arguments' sets, apply TLS, pick the slot.
        b.iter(|| {
            let ks = (black_box(sets[0]) | black_box(sets[0]) | DEFAULT_INCLUDED_SET)
                - DEFAULT_EXCLUDED_SET;
            black_box(ks.dispatch_table_index())
        })
    });
}

criterion_group!(benches, hot_path);
criterion_main!(benches);
