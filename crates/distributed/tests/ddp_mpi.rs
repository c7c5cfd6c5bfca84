//! DistributedDataParallel across ranks under `mpirun`: ranks that start from different
//! models and train on their shards of each global batch end with the parameters of one
//! process training on the whole batch; `no_sync` accumulation gives the same as one
//! synchronized backward over all the micro-batches.
#![cfg(feature = "mpi")]

mod common;

use switchboard_autograd::AutogradTensor;
use switchboard_cpu as _;
use switchboard_distributed::sampler::shard;
use switchboard_distributed::{DistributedDataParallel, ProcessGroup, DEFAULT_BUCKET_CAP_MIB};
use switchboard_nn::{mlp, Module, Optimizer, Sequential, Sgd};
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

const GLOBAL_BATCH: usize = 12;

/// Global batch `step`: inputs and labels, the same on every rank.
fn batch(step: usize) -> (Tensor, Tensor) {
    let x: Vec<f32> = (0..GLOBAL_BATCH * 8)
        .map(|i| (((i * 7 + step * 13) % 23) as f32 - 11.0) / 11.0)
        .collect();
    let y: Vec<i64> = (0..GLOBAL_BATCH).map(|i| ((i + step) % 4) as i64).collect();
    (
        Tensor::from_vec(x, &[GLOBAL_BATCH as i64, 8]).unwrap(),
        Tensor::from_vec(y, &[GLOBAL_BATCH as i64]).unwrap(),
    )
}

/// The rows of `rows` of (x, y).
fn rows(x: &Tensor, y: &Tensor, rows: &[i64]) -> (Tensor, Tensor) {
    let idx = Tensor::from_vec(rows.to_vec(), &[rows.len() as i64]).unwrap();
    (
        ops::index_select(x, 0, &idx).unwrap(),
        ops::index_select(y, 0, &idx).unwrap(),
    )
}

/// The summed cross-entropy of `model` on (x, y), scaled so that averaging over `ranks`
/// gives the mean over `global` samples.
fn loss(model: &Sequential, x: &Tensor, y: &Tensor, global: usize, ranks: usize) -> Tensor {
    let sum = ops::cross_entropy_loss_with(
        &model.forward(x).unwrap(),
        y,
        ops::CrossEntropyLossOptions::default().reduction(2),
    )
    .unwrap();
    ops::mul_scalar(&sum, ranks as f64 / global as f64).unwrap()
}

fn params(model: &Sequential) -> Vec<Vec<f32>> {
    model
        .parameters()
        .iter()
        .map(|p| p.to_vec::<f32>().unwrap())
        .collect()
}

fn assert_close(a: &[Vec<f32>], b: &[Vec<f32>]) {
    for (pa, pb) in a.iter().zip(b) {
        for (x, y) in pa.iter().zip(pb) {
            assert!((x - y).abs() <= 1e-5, "{x} vs {y}");
        }
    }
}

fn my_rows(pg: &ProcessGroup, global: usize) -> Vec<i64> {
    let all: Vec<i64> = (0..global as i64).collect();
    shard(&all, pg.rank(), pg.size())
}

rank_test!(ddp_matches_single_process_training, [2, 3], |pg| {
    let (rank, size) = (pg.rank(), pg.size());
    // Each rank starts from another model: DDP broadcasts rank 0's.
    let model = mlp(&[8, 16, 4], rank as u64).unwrap();
    // Small buckets: several per step, launched from the hooks.
    let ddp = DistributedDataParallel::new(model.parameters(), pg.clone(), 0.0002).unwrap();
    assert!(ddp.buckets().len() > 1);
    let reference = mlp(&[8, 16, 4], 0).unwrap();
    assert_close(&params(&model), &params(&reference));
    let mut opt = Sgd::new(model.parameters(), 0.1).momentum(0.9);
    let mut ref_opt = Sgd::new(reference.parameters(), 0.1).momentum(0.9);
    for step in 0..4 {
        let (x, y) = batch(step);
        let (xs, ys) = rows(&x, &y, &my_rows(&pg, GLOBAL_BATCH));
        opt.zero_grad();
        loss(&model, &xs, &ys, GLOBAL_BATCH, size)
            .backward()
            .unwrap();
        ddp.finish_gradient_synchronization().unwrap();
        opt.step().unwrap();

        ref_opt.zero_grad();
        loss(&reference, &x, &y, GLOBAL_BATCH, 1)
            .backward()
            .unwrap();
        ref_opt.step().unwrap();
        assert_close(&params(&model), &params(&reference));
    }
});

rank_test!(no_sync_accumulates_then_averages, [2], |pg| {
    let size = pg.size();
    let model = mlp(&[8, 16, 4], 0).unwrap();
    let ddp = DistributedDataParallel::new(model.parameters(), pg.clone(), DEFAULT_BUCKET_CAP_MIB)
        .unwrap();
    let reference = mlp(&[8, 16, 4], 0).unwrap();
    // Two micro-batches: the first under no_sync, the second synchronized.
    let global = 2 * GLOBAL_BATCH;
    let before = pg.sequence_number();
    for step in 0..2 {
        let (x, y) = batch(step);
        let (xs, ys) = rows(&x, &y, &my_rows(&pg, GLOBAL_BATCH));
        let _guard = (step == 0).then(|| ddp.no_sync());
        loss(&model, &xs, &ys, global, size).backward().unwrap();
        ddp.finish_gradient_synchronization().unwrap();
        if step == 0 {
            assert_eq!(pg.sequence_number(), before, "no collective under no_sync");
        }
        loss(&reference, &x, &y, global, 1).backward().unwrap();
    }
    let grads = |m: &Sequential| -> Vec<Vec<f32>> {
        m.parameters()
            .iter()
            .map(|p| p.grad().unwrap().to_vec::<f32>().unwrap())
            .collect()
    };
    assert_close(&grads(&model), &grads(&reference));
});
