//! Time per training step of the default MLP (64 -> 128 -> 10, global batch 32) with
//! DistributedDataParallel, and the time spent waiting on communication, for two ways of
//! averaging the gradients: DDP's buckets launched from the gradient hooks during backward
//! (25 MiB), and one all-reduce per parameter after backward. Run under mpirun:
//!
//! ```sh
//! cargo build --release -p switchboard-distributed --features mpi --example ddp_step_bench
//! mpirun -np 2 target/release/examples/ddp_step_bench
//! ```

use std::time::{Duration, Instant};

use switchboard_autograd::AutogradTensor;
use switchboard_cpu as _;
use switchboard_distributed::{
    destroy_process_group, init_process_group, BackendKind, DistributedDataParallel, ProcessGroup,
    ReduceOp, DEFAULT_BUCKET_CAP_MIB,
};
use switchboard_nn::{mlp, Module, Optimizer, Sgd};
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

const GLOBAL_BATCH: i64 = 32;
const STEPS: usize = 400;

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Buckets,
    PerParameterAfterBackward,
}

fn run(pg: &std::sync::Arc<ProcessGroup>, mode: Mode) -> (Duration, Duration) {
    let model = mlp(&[64, 128, 10], 0).unwrap();
    let ddp = (mode == Mode::Buckets).then(|| {
        DistributedDataParallel::new(model.parameters(), pg.clone(), DEFAULT_BUCKET_CAP_MIB)
            .unwrap()
    });
    let mut opt = Sgd::new(model.parameters(), 0.05).momentum(0.9);
    let local = GLOBAL_BATCH / pg.size() as i64;
    let x: Vec<f32> = (0..local * 64)
        .map(|i| ((i * 37 + pg.rank() as i64 * 11) % 17) as f32 / 17.0)
        .collect();
    let x = Tensor::from_vec(x, &[local, 64]).unwrap();
    let y = Tensor::from_vec((0..local).map(|i| i % 10).collect::<Vec<i64>>(), &[local]).unwrap();
    let (mut total, mut comm) = (Duration::ZERO, Duration::ZERO);
    for step in 0..STEPS + 20 {
        pg.barrier().wait().unwrap();
        let t0 = Instant::now();
        let loss = ops::cross_entropy_loss(&model.forward(&x).unwrap(), &y).unwrap();
        opt.zero_grad();
        loss.backward().unwrap();
        let c0 = Instant::now();
        match &ddp {
            Some(ddp) => ddp.finish_gradient_synchronization().unwrap(),
            None => {
                let works: Vec<_> = model
                    .parameters()
                    .iter()
                    .map(|p| pg.all_reduce(&p.grad().unwrap(), ReduceOp::Avg))
                    .collect();
                for w in works {
                    w.wait().unwrap();
                }
            }
        }
        let waited = c0.elapsed();
        opt.step().unwrap();
        if step >= 20 {
            total += t0.elapsed();
            comm += waited;
        }
    }
    (total / STEPS as u32, comm / STEPS as u32)
}

fn main() {
    let pg = init_process_group(BackendKind::Mpi, Default::default()).unwrap();
    for (name, mode) in [
        ("buckets from the hooks (25 MiB)", Mode::Buckets),
        (
            "one all-reduce per parameter after backward",
            Mode::PerParameterAfterBackward,
        ),
    ] {
        let (step, comm) = run(&pg, mode);
        if pg.rank() == 0 {
            println!(
                "{} rank(s), {name}: {:.1} us/step, {:.1} us waiting on communication after \
                 backward ({:.0}%)",
                pg.size(),
                step.as_secs_f64() * 1e6,
                comm.as_secs_f64() * 1e6,
                100.0 * comm.as_secs_f64() / step.as_secs_f64()
            );
        }
    }
    destroy_process_group();
}
