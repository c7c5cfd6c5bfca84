//! The operator-sample registry (Note [Operator samples] in switchboard-opinfo) under
//! functionalization: every sample, and its in-place and `out=` forms, runs eagerly and inside
//! `functionalize` (views kept, and views removed), with the same returns (sizes, dtypes,
//! values; strides where the call's result is a view of an input, which functionalization
//! with views kept keeps), the same aliasing of returns and inputs (views kept), the same
//! inputs afterwards (written back), and the same errors; gradients through a functionalized
//! call are eager's.

use switchboard_autograd::{operator_autograd, AutogradKind, AutogradTensor};
use switchboard_dispatcher::{DispatchError, IValue, OperatorHandle, Result};
use switchboard_functionalize::{functionalize, Remove};
use switchboard_opinfo::{
    assert_close, aten_operators, operator, registry, returned_tensors, same_random_draws,
    short_name, t, variants_of, viewed_input, OpInfo, Prepared, Sample, Unsampled,
};
use switchboard_ops as ops;
use switchboard_tensor::{Device, ScalarType, Tensor};

use switchboard_cpu as _;
use switchboard_meta as _;

// The default generator is per process: the tests of this binary take turns, so that random
// operators draw alike eagerly and functionalized.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// How a sample is called.
#[derive(Clone, Copy)]
enum Form<'a> {
    Functional,
    InPlace(&'a OperatorHandle),
    /// The `out=` form, with out tensors of these dtypes (empty: resized by the call).
    Out(&'a OperatorHandle, &'a [ScalarType]),
}

/// What a call gave: its returns, which input each returned tensor aliases, and the inputs
/// afterwards; or its error.
struct Run {
    returns: std::result::Result<Vec<IValue>, DispatchError>,
    aliases: Vec<Option<usize>>,
    inputs: Vec<Tensor>,
}

/// Runs `sample` in `form`, eagerly (`remove` `None`) or functionalized.
fn run(info: &OpInfo, s: &Sample, form: Form, remove: Option<Remove>) -> Result<Run> {
    let p = Prepared::new(info.name, s, Device::CPU, None)?;
    let mut inputs = p.fresh_inputs()?;
    let n = inputs.len();
    if let Form::Out(_, dtypes) = form {
        for &dt in dtypes {
            inputs.push(ops::empty_with(
                &[0],
                ops::EmptyOptions::default().dtype(dt),
            )?);
        }
    }
    let call = |xs: &[Tensor]| -> Result<Vec<IValue>> {
        match form {
            Form::Functional => p.call(&xs[..n]),
            Form::InPlace(op) => p.call_variant(op, &xs[..n], &[]),
            Form::Out(op, _) => p.call_variant(op, &xs[..n], &xs[n..]),
        }
    };
    p.reseed(42);
    let returns = match remove {
        None => call(&inputs),
        Some(remove) => {
            let boxed = std::cell::RefCell::new(None);
            let f = |xs: &[Tensor]| {
                let r = call(xs)?;
                let tensors = returned_tensors(&r);
                *boxed.borrow_mut() = Some(r);
                Ok(tensors)
            };
            let result = functionalize(f, remove)(&inputs);
            result.map(|values| {
                // The returns with their tensors replaced by the unwrapped values.
                let mut r = boxed.borrow_mut().take().unwrap_or_default();
                let mut values = values.into_iter();
                for v in &mut r {
                    for t in v.tensors_mut() {
                        *t = values.next().expect("as many values as tensors");
                    }
                }
                r
            })
        }
    };
    let aliases = match &returns {
        Ok(r) => returned_tensors(r)
            .iter()
            .map(|o| viewed_input(o, &inputs[..n]))
            .collect(),
        Err(_) => Vec::new(),
    };
    Ok(Run {
        returns,
        aliases,
        inputs: inputs[..n].to_vec(),
    })
}

fn compare(what: &str, info: &OpInfo, want: Run, got: Run, view: bool, failures: &mut Vec<String>) {
    match (want.returns, got.returns) {
        (Ok(w), Ok(g)) => {
            // Random draws are compared where the functional form draws in the same order as
            // the in-place one (Note [Comparing functionalized calls] in switchboard-opinfo).
            let values = info.unsampled != Some(Unsampled::Uninitialized)
                && same_random_draws(info, &want.inputs);
            let (wt, gt) = (returned_tensors(&w), returned_tensors(&g));
            if wt.len() != gt.len() {
                failures.push(format!(
                    "{what}: {} outputs eagerly, {}",
                    wt.len(),
                    gt.len()
                ));
            }
            for (i, (w, g)) in wt.iter().zip(&gt).enumerate() {
                let what = format!("{what}: output {i}");
                let r = if values {
                    assert_close(g, w, &what)
                } else if g.sizes() != w.sizes() || g.dtype() != w.dtype() {
                    Err(format!(
                        "{what}: {:?} {:?}, expected {:?} {:?}",
                        g.dtype(),
                        g.sizes(),
                        w.dtype(),
                        w.sizes()
                    ))
                } else {
                    Ok(())
                };
                if let Err(e) = r {
                    failures.push(e);
                }
                // A view of an input stays one (with its strides) when views are kept.
                let viewed = want.aliases.get(i).copied().flatten();
                if view && viewed.is_some() {
                    if got.aliases.get(i).copied().flatten() != viewed {
                        failures.push(format!(
                            "{what}: aliases input {:?}, expected {viewed:?}",
                            got.aliases.get(i)
                        ));
                    } else if g.strides() != w.strides() {
                        failures.push(format!(
                            "{what}: strides {:?}, expected {:?}",
                            g.strides(),
                            w.strides()
                        ));
                    }
                }
            }
            for (i, (w, g)) in want.inputs.iter().zip(&got.inputs).enumerate() {
                if values {
                    if let Err(e) = assert_close(g, w, &format!("{what}: input {i} afterwards")) {
                        failures.push(e);
                    }
                }
            }
            for (w, g) in w.iter().zip(&g) {
                if !matches!(w, IValue::Tensor(_) | IValue::TensorList(_))
                    && format!("{w:?}") != format!("{g:?}")
                {
                    failures.push(format!("{what}: returns {g:?}, expected {w:?}"));
                }
            }
        }
        (Err(w), Err(g)) => {
            if w.first_line() != g.first_line() {
                failures.push(format!(
                    "{what}: errors differ: eager `{w}`, functionalized `{g}`"
                ));
            }
        }
        (w, g) => failures.push(format!(
            "{what}: eager {}, functionalized {}",
            w.map(|_| "ok".to_owned()).unwrap_or_else(|e| e.to_string()),
            g.map(|_| "ok".to_owned()).unwrap_or_else(|e| e.to_string()),
        )),
    }
}

fn every_sample_runs_alike(remove: Remove) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let all = aten_operators();
    let mut failures = Vec::new();
    let (mut samples, mut variants) = (0, 0);
    let keeps_views = remove == Remove::Mutations;
    for info in registry() {
        let (op, schema) = operator(info.name).unwrap();
        let (inplace, out) = variants_of(&schema, &all);
        for (k, s) in info.samples.iter().enumerate() {
            let what = format!("{} sample {k}", info.name);
            let both = |form: Form| -> std::result::Result<(Run, Run), String> {
                let e = run(&info, s, form, None).map_err(|e| format!("{what}: {e}"))?;
                let f = run(&info, s, form, Some(remove)).map_err(|e| format!("{what}: {e}"))?;
                Ok((e, f))
            };
            samples += 1;
            let (e, f) = match both(Form::Functional) {
                Ok(r) => r,
                Err(e) => {
                    failures.push(e);
                    continue;
                }
            };
            let dtypes: Option<Vec<ScalarType>> = e
                .returns
                .as_ref()
                .ok()
                .map(|r| returned_tensors(r).iter().map(|t| t.dtype()).collect());
            let view = keeps_views && op.semantics().is_some_and(|s| s.is_view);
            compare(&what, &info, e, f, view, &mut failures);
            if let Some((op, vs)) = inplace {
                let what = format!("{} sample {k}", short_name(vs));
                variants += 1;
                match both(Form::InPlace(op)) {
                    Ok((e, f)) => compare(&what, &info, e, f, false, &mut failures),
                    Err(e) => failures.push(e),
                }
            }
            if let (Some((op, vs)), Some(dtypes)) = (out, &dtypes) {
                let what = format!("{} sample {k}", short_name(vs));
                variants += 1;
                match both(Form::Out(op, dtypes)) {
                    Ok((e, f)) => compare(&what, &info, e, f, false, &mut failures),
                    Err(e) => failures.push(e),
                }
            }
        }
    }
    eprintln!("{remove:?}: {samples} samples, {variants} variants");
    assert!(
        samples > 1000 && variants > 400,
        "{samples} samples, {variants} variants"
    );
    switchboard_opinfo::assert_no_failures(&failures);
}

#[test]
fn every_sample_runs_alike_functionalized_with_views_kept() {
    every_sample_runs_alike(Remove::Mutations);
}

#[test]
fn every_sample_runs_alike_functionalized_with_views_removed() {
    every_sample_runs_alike(Remove::MutationsAndViews);
}

/// The differentiable inputs of an entry: its formula's, or any for a composite operator.
fn differentiable_inputs(info: &OpInfo) -> Option<&'static [&'static str]> {
    let a = operator_autograd(info.name)?;
    match a.kind {
        AutogradKind::Composite => None,
        _ => Some(a.differentiable_inputs),
    }
}

/// The gradients of the sample's differentiable inputs (float64) for a fixed weighting of
/// its differentiable outputs, eagerly or functionalized.
fn gradients(info: &OpInfo, s: &Sample, remove: Option<Remove>) -> Result<Vec<Tensor>> {
    let p = Prepared::new(info.name, s, Device::CPU, Some(ScalarType::Double))?;
    let grad = p.grad_inputs(differentiable_inputs(info));
    let mut leaves = Vec::new();
    let mut tensors = Vec::new();
    for (i, slot) in p.tensors.iter().enumerate() {
        let base = if grad.contains(&i) {
            let leaf = ops::clone(&slot.base)?;
            leaf.requires_grad_(true)?;
            leaves.push(leaf.clone());
            leaf
        } else {
            slot.base.clone()
        };
        tensors.push(slot.spec.view(&base)?);
    }
    if leaves.is_empty() {
        return Ok(Vec::new());
    }
    p.reseed(7);
    let call = |xs: &[Tensor]| Ok(returned_tensors(&p.call(xs)?));
    let outs = match remove {
        None => call(&tensors)?,
        Some(remove) => functionalize(call, remove)(&tensors)?,
    };
    let mut loss: Option<Tensor> = None;
    for (k, o) in outs.iter().enumerate() {
        if !o.dtype().is_floating_point() || !o.requires_grad() {
            continue;
        }
        let w = t(o.sizes())
            .seed(100 + k as u64)
            .make(Device::CPU, Some(o.dtype()), 0)?;
        let term = ops::sum(&ops::mul(o, &w)?)?;
        loss = Some(match loss {
            Some(l) => ops::add(&l, &term)?,
            None => term,
        });
    }
    let Some(loss) = loss else {
        return Ok(Vec::new());
    };
    loss.backward()?;
    leaves
        .iter()
        .map(|l| match l.grad() {
            Some(g) => Ok(g),
            None => ops::zeros_like(l),
        })
        .collect()
}

#[test]
fn gradients_through_functionalized_calls_are_eagers() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut failures = Vec::new();
    let mut checked = 0;
    for info in registry() {
        if !info.grad.checks() || info.is_inplace_only() {
            continue;
        }
        for (k, s) in info.samples.iter().enumerate() {
            if !s.for_gradcheck() {
                continue;
            }
            let what = format!("{} sample {k} (backward)", info.name);
            let eager = gradients(&info, s, None);
            let functional = gradients(&info, s, Some(Remove::MutationsAndViews));
            checked += 1;
            match (eager, functional) {
                (Ok(e), Ok(f)) => {
                    for (i, (e, f)) in e.iter().zip(&f).enumerate() {
                        if let Err(err) = assert_close(f, e, &format!("{what}: gradient {i}")) {
                            failures.push(err);
                        }
                    }
                }
                (Err(e), Err(f)) if e.first_line() == f.first_line() => {}
                (e, f) => failures.push(format!(
                    "{what}: eager {}, functionalized {}",
                    e.map(|_| "ok".to_owned()).unwrap_or_else(|e| e.to_string()),
                    f.map(|_| "ok".to_owned()).unwrap_or_else(|e| e.to_string()),
                )),
            }
        }
    }
    eprintln!("{checked} backward passes compared");
    assert!(checked > 300, "{checked} backward passes compared");
    switchboard_opinfo::assert_no_failures(&failures);
}
