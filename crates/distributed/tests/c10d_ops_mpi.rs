//! The in-place `c10d::*` operators across ranks under `mpirun`: the process group and the
//! reduction passed as custom class objects, the `Work` waited for, on CPU and lazy tensors.
#![cfg(feature = "mpi")]

mod common;

use switchboard_cpu as _;
use switchboard_distributed::{c10d_ops, ReduceOp};
use switchboard_meta as _;
use switchboard_ops as ops;
use switchboard_tensor::{ScalarType, Tensor};

fn t(v: Vec<f32>) -> Tensor {
    let n = v.len() as i64;
    Tensor::from_vec(v, &[n]).unwrap()
}

rank_test!(c10d_operators_across_ranks, [2, 3], |pg| {
    let (rank, size) = (pg.rank(), pg.size());
    let r = rank as f32;
    let sum_of_ranks: f32 = (0..size).map(|i| i as f32 + 1.0).sum();

    let x = t(vec![r + 1.0; 3]);
    c10d_ops::allreduce_(&x, ReduceOp::Sum, &pg)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap(), [sum_of_ranks; 3], "in place");

    let b = t(vec![r * 10.0; 2]);
    c10d_ops::broadcast_(&b, (size - 1) as i64, &pg)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(b.to_vec::<f32>().unwrap(), [(size - 1) as f32 * 10.0; 2]);

    let gathered = Tensor::zeros(&[2 * size as i64], ScalarType::Float).unwrap();
    c10d_ops::allgather_base_(&gathered, &t(vec![r; 2]), &pg)
        .unwrap()
        .wait()
        .unwrap();
    let want: Vec<f32> = (0..size).flat_map(|i| [i as f32; 2]).collect();
    assert_eq!(gathered.to_vec::<f32>().unwrap(), want);

    let scattered = Tensor::zeros(&[2], ScalarType::Float).unwrap();
    let input = t((0..2 * size).map(|i| i as f32).collect());
    c10d_ops::reduce_scatter_base_(&scattered, &input, ReduceOp::Sum, &pg)
        .unwrap()
        .wait()
        .unwrap();
    let n = size as f32;
    assert_eq!(
        scattered.to_vec::<f32>().unwrap(),
        [n * (2 * rank) as f32, n * (2 * rank + 1) as f32]
    );

    // Reduce to the last rank: only it gets the sum; the others keep their tensor.
    let root = size - 1;
    let red = t(vec![r + 1.0, 2.0 * (r + 1.0)]);
    c10d_ops::reduce_(&red, root as i64, ReduceOp::Sum, &pg)
        .unwrap()
        .wait()
        .unwrap();
    let want = if rank == root {
        vec![sum_of_ranks, 2.0 * sum_of_ranks]
    } else {
        vec![r + 1.0, 2.0 * (r + 1.0)]
    };
    assert_eq!(red.to_vec::<f32>().unwrap(), want);

    // All-to-all with equal shares: rank r's row j goes to rank j.
    let rows = |f: &dyn Fn(usize) -> f32| -> Vec<f32> { (0..size).map(f).collect() };
    let a2a = Tensor::zeros(&[size as i64], ScalarType::Float).unwrap();
    let mine = t(rows(&|j| (10 * rank + j) as f32));
    c10d_ops::alltoall_base_(&a2a, &mine, &[], &[], &pg)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(
        a2a.to_vec::<f32>().unwrap(),
        rows(&|i| (10 * i + rank) as f32),
        "row i from rank i"
    );
    // Uneven splits: rank r sends j+1 rows of value 100r+j to rank j, so it receives r+1 rows
    // from each rank i, of value 100i+r.
    let send: Vec<f32> = (0..size)
        .flat_map(|j| vec![(100 * rank + j) as f32; j + 1])
        .collect();
    let input_splits: Vec<i64> = (0..size as i64).map(|j| j + 1).collect();
    let output_splits = vec![rank as i64 + 1; size];
    let out = Tensor::zeros(&[(size * (rank + 1)) as i64, 1], ScalarType::Float).unwrap();
    let n_send = send.len() as i64;
    let input = Tensor::from_vec(send, &[n_send, 1]).unwrap();
    c10d_ops::alltoall_base_(&out, &input, &output_splits, &input_splits, &pg)
        .unwrap()
        .wait()
        .unwrap();
    let want: Vec<f32> = (0..size)
        .flat_map(|i| vec![(100 * i + rank) as f32; rank + 1])
        .collect();
    assert_eq!(out.to_vec::<f32>().unwrap(), want);

    // A lazy tensor: the collective runs on its data, in place (Note in c10d_ops.rs tests).
    let lazy = switchboard_lazy::DEVICE;
    let xl = ops::to_device(&t(vec![r + 1.0; 2]), lazy, ScalarType::Float).unwrap();
    let yl = ops::mul(&xl, &xl).unwrap();
    c10d_ops::allreduce_(&yl, ReduceOp::Max, &pg)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(yl.device(), lazy);
    assert_eq!(yl.to_vec::<f32>().unwrap(), [(n * n); 2]);
});
