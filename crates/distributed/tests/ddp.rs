//! DistributedDataParallel in one process (the single-process group): buckets, their launch
//! from the gradient hooks during backward, `no_sync`, unused parameters. `ddp_mpi.rs` checks
//! it against single-process training across ranks.

use std::sync::Arc;

use switchboard_autograd::AutogradTensor;
use switchboard_cpu as _;
use switchboard_distributed::{
    DistributedDataParallel, ProcessGroup, ProcessGroupOptions, SingleProcess,
};
use switchboard_nn::{mlp, Module};
use switchboard_ops::{self as ops, TensorOps};
use switchboard_tensor::{ScalarType, Tensor};

/// A group of its own per test (the tests run in parallel and count collectives).
fn world() -> Result<Arc<ProcessGroup>, ()> {
    Ok(Arc::new(ProcessGroup::new(
        Box::new(SingleProcess::default()),
        "test",
        ProcessGroupOptions::default(),
    )))
}

fn param(n: i64) -> Tensor {
    Tensor::zeros(&[n], ScalarType::Float)
        .unwrap()
        .requires_grad_(true)
        .unwrap()
}

#[test]
fn buckets_are_reverse_order_and_capped() {
    // 6 parameters of 256 KiB each (65536 floats): every bucket holds at most
    // `bucket_cap_mib`, the first (the last parameters) also at most 1 MiB.
    let params: Vec<Tensor> = (0..6).map(|_| param(65536)).collect();
    let ddp = DistributedDataParallel::new(params.clone(), world().unwrap(), 0.5).unwrap();
    assert_eq!(ddp.buckets(), [vec![5, 4], vec![3, 2], vec![1, 0]]);
    let ddp = DistributedDataParallel::new(params.clone(), world().unwrap(), 25.0).unwrap();
    assert_eq!(ddp.buckets(), [vec![5, 4, 3, 2], vec![1, 0]]);
    // A cap of 0: one bucket per parameter.
    let ddp = DistributedDataParallel::new(params, world().unwrap(), 0.0).unwrap();
    assert_eq!(ddp.buckets().len(), 6);
    // One dtype per bucket.
    let mixed = vec![
        param(4),
        Tensor::zeros(&[4], ScalarType::Double)
            .unwrap()
            .requires_grad_(true)
            .unwrap(),
        param(4),
    ];
    let ddp = DistributedDataParallel::new(mixed, world().unwrap(), 25.0).unwrap();
    assert_eq!(ddp.buckets(), [vec![2, 0], vec![1]]);
}

#[test]
fn buckets_launch_during_backward_and_no_sync_defers() {
    let model = mlp(&[8, 16, 4], 0).unwrap();
    let pg = world().unwrap();
    // One bucket per parameter: each launches from its hook as backward reaches it.
    let ddp = DistributedDataParallel::new(model.parameters(), pg.clone(), 0.0).unwrap();
    let x = ops::ones(&[2, 8]).unwrap();
    let before = pg.sequence_number();
    model
        .forward(&x)
        .unwrap()
        .sum()
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(
        pg.sequence_number() - before,
        4,
        "the 4 buckets launched from the hooks, before finish"
    );
    ddp.finish_gradient_synchronization().unwrap();
    assert_eq!(
        pg.sequence_number() - before,
        4,
        "finish launched nothing more"
    );
    let once: Vec<Vec<f32>> = model
        .parameters()
        .iter()
        .map(|p| p.grad().unwrap().to_vec().unwrap())
        .collect();

    // Under no_sync: no collective; the gradients accumulate.
    let before = pg.sequence_number();
    {
        let _no_sync = ddp.no_sync();
        model
            .forward(&x)
            .unwrap()
            .sum()
            .unwrap()
            .backward()
            .unwrap();
        ddp.finish_gradient_synchronization().unwrap();
    }
    assert_eq!(pg.sequence_number(), before, "no collective under no_sync");
    model
        .forward(&x)
        .unwrap()
        .sum()
        .unwrap()
        .backward()
        .unwrap();
    ddp.finish_gradient_synchronization().unwrap();
    assert_eq!(pg.sequence_number() - before, 4);
    for (p, g1) in model.parameters().iter().zip(&once) {
        let g3: Vec<f32> = p.grad().unwrap().to_vec().unwrap();
        for (a, b) in g3.iter().zip(g1) {
            assert!(
                (a - 3.0 * b).abs() <= 1e-5 * b.abs().max(1.0),
                "{a} vs 3 x {b}"
            );
        }
    }
}

#[test]
fn unused_parameters_count_as_zero_gradients() {
    let used = param(3);
    let unused = param(2);
    let ddp =
        DistributedDataParallel::new(vec![used.clone(), unused.clone()], world().unwrap(), 0.0)
            .unwrap();
    ops::sum(&ops::mul(&used, &used).unwrap())
        .unwrap()
        .backward()
        .unwrap();
    ddp.finish_gradient_synchronization().unwrap();
    assert_eq!(unused.grad().unwrap().to_vec::<f32>().unwrap(), [0.0, 0.0]);
}

#[test]
fn refused_configurations() {
    let frozen = Tensor::zeros(&[2], ScalarType::Float).unwrap();
    let err = DistributedDataParallel::new(vec![frozen], world().unwrap(), 25.0)
        .err()
        .unwrap();
    assert_eq!(
        err.to_string(),
        "parameter 0 does not require grad: DistributedDataParallel averages the gradients of \
         trainable parameters"
    );
    let err = DistributedDataParallel::new(vec![param(1)], world().unwrap(), f64::NAN)
        .err()
        .unwrap();
    assert_eq!(
        err.to_string(),
        "bucket_cap_mb must be a finite number, at least 0, got NaN"
    );
}
