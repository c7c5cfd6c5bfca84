//! Per-sample gradients (the `torch.func` tutorial): the gradient of each sample's loss with
//! respect to every parameter of an MLP 784-512-512-10, for a batch of 64, computed as
//! `vmap(grad(loss), in_dims=(None, ..., 0, 0))` and as a loop of 64 single-sample gradients.
//! Checks that both agree and prints both timings (median of the runs).
//!
//! `cargo run --release --example per_sample_grads [-- RUNS [BATCH]]`

use std::time::Instant;

use switchboard::func::{grad, Dims, Tree, Vmap};
use switchboard::prelude::*;

/// One sample's loss: `args` are the parameters (w1, b1, w2, b2, w3, b3), the sample's
/// features and its label; the MLP sees a batch of one, as the tutorial's `functional_call`.
fn loss(args: &[Tensor]) -> Result<Tensor, DispatchError> {
    let (params, x, y) = (&args[..6], &args[6], &args[7]);
    let mut h = ops::unsqueeze(x, 0)?;
    for (i, layer) in params.chunks(2).enumerate() {
        h = ops::add(&ops::linear(&h, &layer[0])?, &layer[1])?;
        if i < 2 {
            h = ops::relu(&h)?;
        }
    }
    ops::cross_entropy_loss(&h, &ops::unsqueeze(y, 0)?)
}

const PARAMETERS: [usize; 6] = [0, 1, 2, 3, 4, 5];

/// The per-sample gradients by `vmap(grad(loss))`: one tensor per parameter, batch first.
fn vmapped(params: &[Tensor], x: &Tensor, y: &Tensor) -> Result<Vec<Tensor>, DispatchError> {
    let mut in_dims = vec![Dims::Dim(None); params.len()];
    in_dims.extend([Dims::Dim(Some(0)), Dims::Dim(Some(0))]);
    let mut args: Vec<Tree> = params.iter().cloned().map(Tree::Tensor).collect();
    args.extend([Tree::Tensor(x.clone()), Tree::Tensor(y.clone())]);
    let out = Vmap::new().in_dims(Dims::List(in_dims)).call(
        |xs| {
            let ts: Vec<Tensor> = xs.iter().filter_map(|t| t.as_tensor().cloned()).collect();
            let grads = grad(loss, &ts, &PARAMETERS)?;
            Ok(Tree::List(grads.into_iter().map(Tree::Tensor).collect()))
        },
        &args,
    )?;
    let Tree::List(grads) = out else {
        unreachable!("the function returns a list")
    };
    Ok(grads
        .iter()
        .filter_map(|g| g.as_tensor().cloned())
        .collect())
}

/// The same by a loop of single-sample gradients, stacked.
fn looped(params: &[Tensor], x: &Tensor, y: &Tensor) -> Result<Vec<Tensor>, DispatchError> {
    let mut per_parameter: Vec<Vec<Tensor>> = vec![Vec::new(); params.len()];
    for b in 0..x.sizes()[0] {
        let mut args = params.to_vec();
        args.push(ops::select(x, 0, b)?);
        args.push(ops::select(y, 0, b)?);
        for (slot, g) in per_parameter
            .iter_mut()
            .zip(grad(loss, &args, &PARAMETERS)?)
        {
            slot.push(g);
        }
    }
    per_parameter.iter().map(|gs| ops::stack(gs)).collect()
}

fn median_ms(
    runs: usize,
    mut f: impl FnMut() -> Result<(), DispatchError>,
) -> Result<f64, DispatchError> {
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        f()?;
        times.push(start.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut argv = std::env::args().skip(1);
    let runs: usize = argv.next().map_or(Ok(5), |s| s.parse())?;
    let batch: i64 = argv.next().map_or(Ok(64), |s| s.parse())?;
    // Large per-sample gradient buffers are freed and made again every run: keep them in the
    // heap (Note [Allocator tuning] in switchboard-tensor), as the benches do.
    switchboard::tensor::tune_allocator();
    switchboard::tensor::manual_seed(0);
    let sizes = [784i64, 512, 512, 10];
    let params: Vec<Tensor> = sizes
        .windows(2)
        .flat_map(|w| {
            let bound = 1.0 / (w[0] as f64).sqrt();
            [
                ops::sub_scalar(
                    &ops::mul_scalar(&ops::rand(&[w[1], w[0]]).unwrap(), 2.0 * bound).unwrap(),
                    bound,
                )
                .unwrap(),
                ops::sub_scalar(
                    &ops::mul_scalar(&ops::rand(&[w[1]]).unwrap(), 2.0 * bound).unwrap(),
                    bound,
                )
                .unwrap(),
            ]
        })
        .collect();
    let x = ops::randn(&[batch, 784])?;
    let y = ops::randint(10, &[batch])?;

    let fast = vmapped(&params, &x, &y)?;
    let slow = looped(&params, &x, &y)?;
    for (i, (a, b)) in fast.iter().zip(&slow).enumerate() {
        let diff = ops::max(&ops::abs(&ops::sub(a, b)?)?)?.item()?.to_f64();
        assert!(diff < 1e-4, "parameter {i}: the gradients differ by {diff}");
    }
    println!(
        "per-sample gradients of {} parameters, shapes {:?}: vmap(grad) and the loop agree",
        fast.len(),
        fast.iter().map(|g| g.sizes().to_vec()).collect::<Vec<_>>()
    );
    let vmap_ms = median_ms(runs, || vmapped(&params, &x, &y).map(drop))?;
    let loop_ms = median_ms(runs, || looped(&params, &x, &y).map(drop))?;
    println!("vmap(grad):            {vmap_ms:.2} ms");
    println!("loop of {batch} grad calls: {loop_ms:.2} ms");
    println!("speed-up:              {:.2}x", loop_ms / vmap_ms);
    Ok(())
}
