//! Every sample of the operator-sample registry (Note [Operator samples] in switchboard-opinfo)
//! run under `vmap` against a loop over the batch: each tensor argument batched (in_dims 0,
//! every element of a `Tensor[]` too), and, for operators with two tensor arguments, the
//! second left unbatched (in_dims None). A sample whose per-sample call fails must fail under
//! vmap too; operators PyTorch refuses to batch (data-dependent output shapes, `.item()`,
//! random operators in the default randomness mode) must give PyTorch's vmap error.

use switchboard_autograd as _;
use switchboard_cpu as _;
use switchboard_dispatcher::{IValue, Result};
use switchboard_functorch::{Dims, Tree, Vmap};
use switchboard_opinfo::{assert_close, registry, returned_tensors, Prepared, Unsampled};
use switchboard_ops as ops;
use switchboard_tensor::{Device, Tensor};

const BATCH: i64 = 3;

/// Sample `b` of a batch built from `t`: floating tensors shifted by `0.125 * b` (so that each
/// sample differs), others repeated.
fn sample_of(t: &Tensor, b: i64) -> Result<Tensor> {
    if t.dtype().is_floating_point() {
        ops::add_scalar(t, 0.125 * b as f64)
    } else {
        ops::clone(t)
    }
}

/// The loop: the operator per sample, each output stacked.
fn looped(p: &Prepared, inputs: &[Tensor], batched: &[bool]) -> Result<Vec<Tensor>> {
    let mut per_output: Vec<Vec<Tensor>> = Vec::new();
    for b in 0..BATCH {
        let samples: Vec<Tensor> = inputs
            .iter()
            .zip(batched)
            .map(|(t, &is)| if is { sample_of(t, b) } else { Ok(t.clone()) })
            .collect::<Result<_>>()?;
        let outs = returned_tensors(&p.call(&samples)?);
        per_output.resize(outs.len(), Vec::new());
        for (slot, o) in per_output.iter_mut().zip(outs) {
            slot.push(o);
        }
    }
    per_output.iter().map(|ts| ops::stack(ts)).collect()
}

/// The same under vmap.
fn vmapped(p: &Prepared, inputs: &[Tensor], batched: &[bool]) -> Result<Vec<Tensor>> {
    let args: Vec<Tree> = inputs
        .iter()
        .zip(batched)
        .map(|(t, &is)| -> Result<Tree> {
            if !is {
                return Ok(Tree::Tensor(t.clone()));
            }
            let samples: Vec<Tensor> =
                (0..BATCH).map(|b| sample_of(t, b)).collect::<Result<_>>()?;
            Ok(Tree::Tensor(ops::stack(&samples)?))
        })
        .collect::<Result<_>>()?;
    let dims = Dims::List(
        batched
            .iter()
            .map(|&is| Dims::Dim(is.then_some(0)))
            .collect(),
    );
    let out = Vmap::new().in_dims(dims).name(p.schema.name()).call(
        |xs| {
            let ts: Vec<Tensor> = xs.iter().filter_map(|x| x.as_tensor().cloned()).collect();
            let returns = p.call(&ts)?;
            Ok(Tree::List(
                returned_tensors(&returns)
                    .into_iter()
                    .map(Tree::Tensor)
                    .collect(),
            ))
        },
        &args,
    )?;
    let Tree::List(items) = out else {
        unreachable!()
    };
    Ok(items
        .iter()
        .filter_map(|t| t.as_tensor().cloned())
        .collect())
}

/// Whether PyTorch refuses to batch this operator under the default randomness mode.
fn refused(message: &str) -> bool {
    message.contains("vmap: We do not support batching operators that can output dynamic shape")
        || message.contains("vmap: It looks like you're calling .item()")
        || message.contains("vmap: called random operation while in randomness error mode")
}

#[test]
fn every_sample_batched_against_a_loop() {
    let mut failures = Vec::new();
    let mut compared = 0;
    for info in registry() {
        if matches!(info.unsampled, Some(Unsampled::Uninitialized)) {
            continue;
        }
        for (k, sample) in info.samples.iter().enumerate() {
            let Ok(p) = Prepared::new(info.name, sample, Device::CPU, None) else {
                continue;
            };
            let Ok(inputs) = p.inputs() else { continue };
            if inputs.is_empty() {
                continue;
            }
            let mut patterns = vec![vec![true; inputs.len()]];
            if inputs.len() == 2 {
                patterns.push(vec![true, false]);
            }
            for batched in patterns {
                let what = format!("{} sample {k} batched {batched:?}", info.name);
                let want = looped(&p, &inputs, &batched);
                let got = vmapped(&p, &inputs, &batched);
                match (want, got) {
                    (Ok(want), Ok(got)) => {
                        if matches!(info.unsampled, Some(Unsampled::Random)) {
                            failures.push(format!("{what}: a random operator ran under vmap"));
                            continue;
                        }
                        if want.len() != got.len() {
                            failures.push(format!(
                                "{what}: {} outputs, want {}",
                                got.len(),
                                want.len()
                            ));
                            continue;
                        }
                        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                            if let Err(e) = assert_close(g, w, &format!("{what} output {i}")) {
                                failures.push(e);
                            }
                        }
                        compared += 1;
                    }
                    (Err(_), Err(_)) => {}
                    (_, Err(e)) if refused(&e.to_string()) => {}
                    (Ok(_), Err(e)) => failures.push(format!("{what}: vmap failed: {e}")),
                    // The batch is made contiguous: a sample whose per-sample call fails for
                    // its strides (a view of a transposed tensor) is not that sample any more.
                    (Err(_), Ok(_)) if inputs.iter().any(|t| !t.is_contiguous()) => {}
                    (Err(e), Ok(_)) => {
                        failures.push(format!("{what}: the loop fails ({e}) but vmap does not"))
                    }
                }
            }
        }
    }
    let _ = IValue::None;
    println!("{compared} batched calls compared");
    assert!(compared > 300, "only {compared} calls compared");
    switchboard_opinfo::assert_no_failures(&failures);
}
