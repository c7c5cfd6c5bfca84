//! Every collective, for every dtype and reduction, under `mpirun` with 2 and 3 ranks, against
//! the values computed locally.
#![cfg(feature = "mpi")]

mod common;

use switchboard_cpu as _;
use switchboard_distributed::{ProcessGroup, ReduceOp};
use switchboard_ops as ops;
use switchboard_tensor::{ScalarType, Tensor};

const N: usize = 6;

/// Rank `q`'s values: small positive integers, exact in every dtype, whose products over
/// three ranks fit an int8.
fn values(q: usize) -> Vec<f64> {
    (0..N)
        .map(|i| (((q + 1) * (i + 2)) % 5 + 1) as f64)
        .collect()
}

fn bools(q: usize) -> Vec<bool> {
    (0..N)
        .map(|i| (q + i).is_multiple_of(2) || i == 0)
        .collect()
}

fn tensor(q: usize, dtype: ScalarType) -> Tensor {
    if dtype == ScalarType::Bool {
        return Tensor::from_vec(bools(q), &[2, 3]).unwrap();
    }
    ops::to(&Tensor::from_vec(values(q), &[2, 3]).unwrap(), dtype).unwrap()
}

fn as_f64(t: &Tensor) -> Vec<f64> {
    t.to_vec_as::<f64>().unwrap()
}

/// The reduction of every rank's values, computed here as the backend must compute it.
fn expected_reduce(dtype: ScalarType, op: ReduceOp, size: usize) -> Vec<f64> {
    if dtype == ScalarType::Bool {
        return (0..N)
            .map(|i| {
                let all = (0..size).map(|q| bools(q)[i]);
                let v = match op {
                    ReduceOp::Sum | ReduceOp::Max => all.into_iter().any(|b| b),
                    _ => all.into_iter().all(|b| b),
                };
                v as u8 as f64
            })
            .collect();
    }
    (0..N)
        .map(|i| {
            let all: Vec<f64> = (0..size).map(|q| values(q)[i]).collect();
            let sum: f64 = all.iter().sum();
            match op {
                ReduceOp::Sum => sum,
                ReduceOp::Product => all.iter().product(),
                ReduceOp::Min => all.iter().cloned().fold(f64::INFINITY, f64::min),
                ReduceOp::Max => all.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
                ReduceOp::Avg if dtype.is_floating_point() => {
                    // Summed exactly, then divided in the dtype (Note [Average as sum then
                    // divide]).
                    let d = Tensor::from_vec(vec![sum], &[1]).unwrap();
                    let d = ops::to(&d, dtype).unwrap();
                    let q = ops::div(
                        &d,
                        &ops::to(&Tensor::from_vec(vec![size as f64], &[1]).unwrap(), dtype)
                            .unwrap(),
                    )
                    .unwrap();
                    as_f64(&q)[0]
                }
                ReduceOp::Avg => (sum as i64 / size as i64) as f64,
            }
        })
        .collect()
}

fn check_all_reduce(pg: &ProcessGroup) {
    let (rank, size) = (pg.rank(), pg.size());
    for dtype in ScalarType::ALL.into_iter().filter(|d| !d.is_complex()) {
        for op in ReduceOp::ALL {
            let t = tensor(rank, dtype);
            let work = pg.all_reduce(&t, op);
            if dtype == ScalarType::Bool && op == ReduceOp::Avg {
                assert_eq!(
                    work.wait().unwrap_err().to_string(),
                    "Cannot use ReduceOp.AVG with boolean inputs"
                );
                continue;
            }
            work.wait().unwrap();
            assert_eq!(t.dtype(), dtype);
            assert_eq!(
                as_f64(&t),
                expected_reduce(dtype, op, size),
                "all_reduce {op} of {dtype} on rank {rank}"
            );
        }
    }
}

fn check_broadcast_and_gathers(pg: &ProcessGroup) {
    let (rank, size) = (pg.rank(), pg.size());
    for dtype in ScalarType::ALL.into_iter().filter(|d| !d.is_complex()) {
        let root = size - 1;
        let t = tensor(rank, dtype);
        pg.broadcast(&t, root).wait().unwrap();
        assert_eq!(
            as_f64(&t),
            as_f64(&tensor(root, dtype)),
            "broadcast {dtype}"
        );

        let input = tensor(rank, dtype);
        let out = Tensor::zeros(&[2 * size as i64, 3], dtype).unwrap();
        pg.all_gather_into_tensor(&out, &input).wait().unwrap();
        let want: Vec<f64> = (0..size).flat_map(|q| as_f64(&tensor(q, dtype))).collect();
        assert_eq!(as_f64(&out), want, "all_gather_into_tensor {dtype}");

        let outs: Vec<Tensor> = (0..size)
            .map(|_| Tensor::zeros(&[2, 3], dtype).unwrap())
            .collect();
        pg.all_gather(&outs, &input).wait().unwrap();
        for (q, o) in outs.iter().enumerate() {
            assert_eq!(as_f64(o), as_f64(&tensor(q, dtype)), "all_gather {dtype}");
        }
    }
}

fn check_reduce_scatter(pg: &ProcessGroup) {
    let (rank, size) = (pg.rank(), pg.size());
    for dtype in ScalarType::ALL.into_iter().filter(|d| !d.is_complex()) {
        for op in [
            ReduceOp::Sum,
            ReduceOp::Max,
            ReduceOp::Min,
            ReduceOp::Product,
        ] {
            // Each rank's input: `size` chunks of 6 values, chunk c being values(rank + c).
            let chunks: Vec<Tensor> = (0..size).map(|c| tensor(rank + c, dtype)).collect();
            let input = ops::cat(&chunks).unwrap();
            let out = Tensor::zeros(&[2, 3], dtype).unwrap();
            pg.reduce_scatter_tensor(&out, &input, op).wait().unwrap();
            // Rank r gets chunk r of every rank q: values(q + r).
            let want: Vec<f64> = (0..N)
                .map(|i| {
                    let all: Vec<f64> = (0..size)
                        .map(|q| as_f64(&tensor(q + rank, dtype))[i])
                        .collect();
                    match (op, dtype) {
                        (ReduceOp::Sum | ReduceOp::Max, ScalarType::Bool) => {
                            all.iter().any(|v| *v != 0.0) as u8 as f64
                        }
                        (_, ScalarType::Bool) => all.iter().all(|v| *v != 0.0) as u8 as f64,
                        (ReduceOp::Sum, _) => all.iter().sum(),
                        (ReduceOp::Product, _) => all.iter().product(),
                        (ReduceOp::Min, _) => all.iter().cloned().fold(f64::INFINITY, f64::min),
                        _ => all.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
                    }
                })
                .collect();
            assert_eq!(as_f64(&out), want, "reduce_scatter {op} of {dtype}");
        }
    }
}

fn check_send_recv_and_barrier(pg: &ProcessGroup) {
    let (rank, size) = (pg.rank(), pg.size());
    for dtype in ScalarType::ALL.into_iter().filter(|d| !d.is_complex()) {
        // A ring: each rank sends its values to the next and receives the previous one's.
        let next = (rank + 1) % size;
        let prev = (rank + size - 1) % size;
        let got = Tensor::zeros(&[2, 3], dtype).unwrap();
        // Even ranks send first, odd ones receive first: no rank waits on a send it
        // cannot match.
        let (a, b) = if rank.is_multiple_of(2) {
            let s = pg.send(&tensor(rank, dtype), next, 7);
            s.wait().unwrap();
            (pg.recv(&got, prev, 7), None)
        } else {
            let r = pg.recv(&got, prev, 7);
            r.wait().unwrap();
            (pg.send(&tensor(rank, dtype), next, 7), Some(()))
        };
        a.wait().unwrap();
        let _ = b;
        assert_eq!(as_f64(&got), as_f64(&tensor(prev, dtype)), "recv {dtype}");
    }
    pg.barrier().wait().unwrap();
}

rank_test!(every_collective_every_dtype, [2, 3], |pg| {
    check_all_reduce(&pg);
    check_broadcast_and_gathers(&pg);
    check_reduce_scatter(&pg);
    check_send_recv_and_barrier(&pg);
});

rank_test!(refused_arguments, [2], |pg| {
    let t = Tensor::zeros(&[4], ScalarType::Float).unwrap();
    assert_eq!(
        pg.broadcast(&t, 2).wait().unwrap_err().to_string(),
        "Invalid root rank: should be within the range of [0, 2), but got 2."
    );
    let out = Tensor::zeros(&[5], ScalarType::Float).unwrap();
    assert_eq!(
        pg.all_gather_into_tensor(&out, &t)
            .wait()
            .unwrap_err()
            .to_string(),
        "output tensor size must be equal to world_size times input tensor size (2 x 4 \
         elements), but got 5"
    );
    assert_eq!(
        pg.reduce_scatter_tensor(&out, &t, ReduceOp::Sum)
            .wait()
            .unwrap_err()
            .to_string(),
        "input tensor must be the same size as output size times world size (2 x 5 elements), \
         but got 4"
    );
    assert_eq!(
        pg.send(&t, pg.rank(), 0).wait().unwrap_err().to_string(),
        "Invalid destination rank: a rank cannot send to itself"
    );
    // Refused calls launch nothing: the ranks are still in step.
    pg.all_reduce(&t, ReduceOp::Sum).wait().unwrap();
});
