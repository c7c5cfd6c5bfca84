//! The `_c10d_functional` operators across ranks under `mpirun`: eager, captured by the lazy
//! backend (the graph runs the collective), and the autograd forms' gradients.
#![cfg(feature = "mpi")]

mod common;

use switchboard_autograd::AutogradTensor;
use switchboard_cpu as _;
use switchboard_distributed::{functional, functional_autograd, ReduceOp, WORLD};
use switchboard_meta as _;
use switchboard_ops as ops;
use switchboard_tensor::{ScalarType, Tensor};

fn t(v: Vec<f32>) -> Tensor {
    let n = v.len() as i64;
    Tensor::from_vec(v, &[n]).unwrap()
}

rank_test!(functional_collectives_across_ranks, [2, 3], |pg| {
    let (rank, size) = (pg.rank() as f32, pg.size());
    let sum_of_ranks: f32 = (0..size).map(|r| r as f32 + 1.0).sum();
    // Eager.
    let x = t(vec![rank + 1.0; 3]);
    let y = functional::wait_tensor(&functional::all_reduce(&x, ReduceOp::Sum, WORLD).unwrap())
        .unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), [sum_of_ranks; 3]);
    assert_eq!(
        x.to_vec::<f32>().unwrap(),
        [rank + 1.0; 3],
        "input untouched"
    );

    // Lazy: captured, run when the value is read.
    let lazy = switchboard_lazy::DEVICE;
    let xl = ops::to_device(&x, lazy, ScalarType::Float).unwrap();
    let g = functional::all_gather_into_tensor(&xl, size as i64, WORLD).unwrap();
    let g = functional::wait_tensor(&g).unwrap();
    let graph = switchboard_lazy::pending_graph().to_string();
    assert!(
        graph.contains("_c10d_functional.all_gather_into_tensor"),
        "{graph}"
    );
    let want: Vec<f32> = (0..size).flat_map(|r| [r as f32 + 1.0; 3]).collect();
    assert_eq!(g.to_vec::<f32>().unwrap(), want);

    // Autograd: d/dx sum(all_gather(x) * w) = sum over ranks of w's chunk for this rank.
    let xg = t(vec![rank + 1.0; 2]).requires_grad_(true).unwrap();
    let w = t((0..2 * size).map(|i| i as f32).collect());
    let gathered = functional_autograd::all_gather_into_tensor(&xg, size as i64, WORLD).unwrap();
    ops::sum(&ops::mul(&gathered, &w).unwrap())
        .unwrap()
        .backward()
        .unwrap();
    let r = pg.rank();
    let want: Vec<f32> = (0..2).map(|i| size as f32 * (2 * r + i) as f32).collect();
    assert_eq!(xg.grad().unwrap().to_vec::<f32>().unwrap(), want);

    // All-to-all: rank r sends j+1 rows of value 10r+j to rank j (lazy: captured, then run).
    let send: Vec<f32> = (0..size)
        .flat_map(|j| vec![(10 * r + j) as f32; j + 1])
        .collect();
    let input_splits: Vec<i64> = (0..size as i64).map(|j| j + 1).collect();
    let output_splits = vec![r as i64 + 1; size];
    let a = ops::to_device(&t(send.clone()), lazy, ScalarType::Float).unwrap();
    let out = functional::all_to_all_single(&a, &output_splits, &input_splits, WORLD).unwrap();
    assert_eq!(
        out.sizes(),
        [(size * (r + 1)) as i64],
        "the meta function's shape"
    );
    let out = functional::wait_tensor(&out).unwrap();
    let want: Vec<f32> = (0..size)
        .flat_map(|i| vec![(10 * i + r) as f32; r + 1])
        .collect();
    assert_eq!(out.to_vec::<f32>().unwrap(), want);

    // Its gradient goes back where each row came from: d/dx sum(a2a(x) * w) = w's rows, sent back.
    let xa = t(send).requires_grad_(true).unwrap();
    let moved =
        functional_autograd::all_to_all_single(&xa, &output_splits, &input_splits, WORLD).unwrap();
    let w: Vec<f32> = (0..size)
        .flat_map(|i| vec![(1000 * i + r) as f32; r + 1])
        .collect();
    ops::sum(&ops::mul(&moved, &t(w)).unwrap())
        .unwrap()
        .backward()
        .unwrap();
    // Row block j of x went to rank j, whose weight for rows from rank r is 1000r + j.
    let want: Vec<f32> = (0..size)
        .flat_map(|j| vec![(1000 * r + j) as f32; j + 1])
        .collect();
    assert_eq!(xa.grad().unwrap().to_vec::<f32>().unwrap(), want);
});
