//! `per_sample_grads`: `vmap(grad(loss))` against a loop of single-sample `grad` calls whose
//! results are stacked (the `torch.func` tutorial's `compute_sample_grads`).

use std::time::Instant;

use switchboard_autograd::AutogradTensor;
use switchboard_nn::{mlp, Module};
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

use crate::measure::{data, round3, BoxError};

/// One sample's loss of the MLP 784-512-512-10 (`params`: w1, b1, w2, b2, w3, b3, then the
/// sample and its label), on a batch of one as the `torch.func` tutorial's `functional_call`.
fn sample_loss(args: &[Tensor]) -> Result<Tensor, switchboard_dispatcher::DispatchError> {
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

pub fn per_sample_grads(steps: usize, threads: usize) -> Result<(), BoxError> {
    use switchboard::func::{grad, Dims, Tree, Vmap};
    let model = mlp(&[784, 512, 512, 10], 0)?;
    let params: Vec<Tensor> = model.parameters().iter().map(|p| p.detach()).collect();
    let (x, y) = data(64, &[784])?;
    let argnums = [0, 1, 2, 3, 4, 5];
    let mut in_dims = vec![Dims::Dim(None); 6];
    in_dims.extend([Dims::Dim(Some(0)), Dims::Dim(Some(0))]);
    let mut args: Vec<Tree> = params.iter().cloned().map(Tree::Tensor).collect();
    args.extend([Tree::Tensor(x.clone()), Tree::Tensor(y.clone())]);
    let vmapped = || -> Result<(), BoxError> {
        Vmap::new().in_dims(Dims::List(in_dims.clone())).call(
            |xs| {
                let ts: Vec<Tensor> = xs.iter().filter_map(|t| t.as_tensor().cloned()).collect();
                let gs = grad(sample_loss, &ts, &argnums)?;
                Ok(Tree::List(gs.into_iter().map(Tree::Tensor).collect()))
            },
            &args,
        )?;
        Ok(())
    };
    // The tutorial's loop: each sample's gradients are kept and stacked per parameter, so that
    // both sides end with the same per-sample gradient tensors.
    let looped = || -> Result<(), BoxError> {
        let mut per_parameter: Vec<Vec<Tensor>> = vec![Vec::new(); params.len()];
        for b in 0..x.sizes()[0] {
            let mut one = params.clone();
            one.push(ops::select(&x, 0, b)?);
            one.push(ops::select(&y, 0, b)?);
            for (slot, g) in per_parameter
                .iter_mut()
                .zip(grad(sample_loss, &one, &argnums)?)
            {
                slot.push(g);
            }
        }
        for gs in &per_parameter {
            ops::stack(gs)?;
        }
        Ok(())
    };
    let time = |f: &dyn Fn() -> Result<(), BoxError>, n: usize| -> Result<Vec<f64>, BoxError> {
        f()?;
        let mut times = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            f()?;
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        times.sort_by(f64::total_cmp);
        Ok(times)
    };
    let vmap_ms = time(&vmapped, steps.max(1))?;
    let loop_ms = time(&looped, (steps / 5).max(3))?;
    let (v, l) = (vmap_ms[vmap_ms.len() / 2], loop_ms[loop_ms.len() / 2]);
    println!(
        "{}",
        serde_json::json!({
            "bench": "per_sample_grads",
            "impl": "switchboard",
            "model": "MLP 784-512-512-10 (ReLU), cross-entropy per sample",
            "batch": 64,
            "threads": threads,
            "steps": vmap_ms.len(),
            "ms_per_step_median": round3(v),
            "ms_per_step_min": round3(vmap_ms[0]),
            "loop_ms_median": round3(l),
            "loop_steps": loop_ms.len(),
            "speedup_vs_loop": round3(l / v),
        })
    );
    Ok(())
}
