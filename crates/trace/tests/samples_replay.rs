//! Tracing every sample of the operator-sample registry (Note [Operator samples] in
//! switchboard-opinfo), as make_fx would: each sample's call (and its in-place and `out=`
//! forms) is traced with the sample's tensors as the graph's inputs, and the graph re-run on
//! new inputs (the same layouts, other values: a graph that kept the traced values would give
//! the traced results) gives eager's results on them (sizes, strides, dtypes, values) and
//! writes its inputs as eager does. A call eager refuses fails while it is traced, with
//! eager's message. Random operators are reseeded alike before each run, so their values are
//! compared too.

use switchboard_cpu as _;
use switchboard_dispatcher::{DispatchError, OperatorHandle, Result};
use switchboard_opinfo::{
    assert_close, aten_operators, operator, registry, returned_tensors, short_name, variants_of,
    OpInfo, Prepared, Sample, Unsampled,
};
use switchboard_ops as ops;
use switchboard_tensor::{Device, ScalarType, Tensor};
use switchboard_trace::trace;

/// How a sample is called.
#[derive(Clone, Copy)]
enum Form<'a> {
    Functional,
    InPlace(&'a OperatorHandle),
    /// The `out=` form, with empty out tensors of these dtypes (resized by the call), which
    /// are inputs of the graph too.
    Out(&'a OperatorHandle, &'a [ScalarType]),
}

/// The sample's tensors (and out tensors), fresh.
fn fresh(p: &Prepared, form: Form) -> Result<(Vec<Tensor>, Vec<Tensor>)> {
    let inputs = p.fresh_inputs()?;
    let outs = match form {
        Form::Out(_, dtypes) => dtypes
            .iter()
            .map(|&dt| Tensor::empty(&[0], dt).map_err(DispatchError::from))
            .collect::<Result<_>>()?,
        _ => Vec::new(),
    };
    Ok((inputs, outs))
}

/// Inputs for the replay: the sample's tensors with other values (floating ones scaled by
/// 3/4, which keeps signs, order, zeros and every sample's domain), in the same layouts.
fn other_values(p: &Prepared, form: Form) -> Result<(Vec<Tensor>, Vec<Tensor>)> {
    let (_, outs) = fresh(p, form)?;
    let inputs = p
        .tensors
        .iter()
        .map(|s| {
            let base = if s.base.dtype().is_floating_point() {
                ops::mul_scalar(&s.base, 0.75)?
            } else {
                ops::clone(&s.base)?
            };
            s.spec.view(&base)
        })
        .collect::<Result<_>>()?;
    Ok((inputs, outs))
}

/// Calls the sample on `inputs` (the sample's tensors, then the out tensors); the returned
/// tensors.
fn call(p: &Prepared, form: Form, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
    let n = p.tensors.len();
    let returns = match form {
        Form::Functional => p.call(inputs)?,
        Form::InPlace(op) => p.call_variant(op, inputs, &[])?,
        Form::Out(op, _) => p.call_variant(op, &inputs[..n], &inputs[n..])?,
    };
    Ok(returned_tensors(&returns))
}

/// What a run gave: the returned tensors and the inputs afterwards, or the error.
type Outcome = std::result::Result<(Vec<Tensor>, Vec<Tensor>), DispatchError>;

/// Eager on the replay's inputs, and the replay of the trace on them (or the error tracing
/// gave, or eager's error on the sample's own inputs).
fn runs(info: &OpInfo, s: &Sample, form: Form) -> Result<(Outcome, Outcome)> {
    let p = Prepared::new(info.name, s, Device::CPU, None)?;
    let all_inputs = |(a, b): (Vec<Tensor>, Vec<Tensor>)| a.into_iter().chain(b).collect();
    let sample_inputs: Vec<Tensor> = all_inputs(fresh(&p, form)?);
    p.reseed(42);
    let on_sample = call(&p, form, &sample_inputs);

    let traced_inputs: Vec<Tensor> = all_inputs(fresh(&p, form)?);
    p.reseed(42);
    let traced = match trace(&traced_inputs, |xs| call(&p, form, xs)) {
        Ok(t) => t,
        Err(e) => return Ok((on_sample.map(|r| (r, sample_inputs)), Err(e))),
    };
    if let Err(e) = on_sample {
        // Traced although eager fails: reported as a mismatch.
        return Ok((Err(e), Ok((Vec::new(), Vec::new()))));
    }
    let eager_inputs: Vec<Tensor> = all_inputs(other_values(&p, form)?);
    p.reseed(42);
    let eager = call(&p, form, &eager_inputs).map(|r| (r, eager_inputs));
    let replay_inputs: Vec<Tensor> = all_inputs(other_values(&p, form)?);
    p.reseed(42);
    let replayed = traced.run(&replay_inputs).map(|r| (r, replay_inputs));
    Ok((eager, replayed))
}

fn compare(what: &str, info: &OpInfo, eager: Outcome, replayed: Outcome) -> Vec<String> {
    let mut failures = Vec::new();
    match (eager, replayed) {
        (Ok((eo, ei)), Ok((ro, ri))) => {
            if eo.len() != ro.len() {
                failures.push(format!(
                    "{what}: {} outputs eagerly, {} replayed",
                    eo.len(),
                    ro.len()
                ));
            }
            let values = info.unsampled != Some(Unsampled::Uninitialized);
            let outputs = eo
                .iter()
                .zip(&ro)
                .enumerate()
                .map(|(i, p)| (p, "output", i));
            let inputs = ei.iter().zip(&ri).enumerate().map(|(i, p)| (p, "input", i));
            for ((e, r), kind, i) in outputs.chain(inputs) {
                let what = format!("{what}: {kind} {i}");
                if kind == "output" && r.strides() != e.strides() && e.numel() > 1 {
                    failures.push(format!(
                        "{what}: strides {:?}, expected {:?}",
                        r.strides(),
                        e.strides()
                    ));
                }
                let same = if values {
                    assert_close(r, e, &what)
                } else if r.sizes() != e.sizes() || r.dtype() != e.dtype() {
                    Err(format!(
                        "{what}: {:?} {:?}, expected {:?} {:?}",
                        r.dtype(),
                        r.sizes(),
                        e.dtype(),
                        e.sizes()
                    ))
                } else {
                    Ok(())
                };
                if let Err(e) = same {
                    failures.push(e);
                }
            }
        }
        (Err(e), Err(t)) => {
            if e.first_line() != t.first_line() {
                failures.push(format!("{what}: errors differ: eager `{e}`, traced `{t}`"));
            }
        }
        (e, t) => failures.push(format!(
            "{what}: eager {}, traced {}",
            e.map(|_| "ok".to_owned()).unwrap_or_else(|e| e.to_string()),
            t.map(|_| "ok".to_owned()).unwrap_or_else(|e| e.to_string()),
        )),
    }
    failures
}

#[test]
fn every_sample_replays_its_trace_with_eagers_results() {
    let all = aten_operators();
    let mut failures = Vec::new();
    let (mut samples, mut errors, mut variants) = (0, 0, 0);
    for info in registry() {
        let schema = operator(info.name).unwrap().1;
        let (inplace, out) = variants_of(&schema, &all);
        for (k, s) in info.samples.iter().enumerate() {
            let mut check = |what: String, form: Form| match runs(&info, s, form) {
                Ok((e, r)) => failures.extend(compare(&what, &info, e, r)),
                Err(e) => failures.push(format!("{what}: {e}")),
            };
            samples += 1;
            errors += usize::from(s.error);
            check(format!("{} sample {k}", info.name), Form::Functional);
            if let Some((op, vs)) = inplace {
                variants += 1;
                check(format!("{} sample {k}", short_name(vs)), Form::InPlace(op));
            }
            // The out= form of a sample that runs: out tensors of its results' dtypes.
            let dtypes = Prepared::new(info.name, s, Device::CPU, None)
                .and_then(|p| {
                    let inputs = p.fresh_inputs()?;
                    p.reseed(42);
                    p.call(&inputs)
                })
                .map(|r| {
                    returned_tensors(&r)
                        .iter()
                        .map(|t| t.dtype())
                        .collect::<Vec<_>>()
                });
            if let (Some((op, vs)), Ok(dtypes)) = (out, dtypes) {
                variants += 1;
                check(
                    format!("{} sample {k}", short_name(vs)),
                    Form::Out(op, &dtypes),
                );
            }
        }
    }
    eprintln!("{samples} samples ({errors} errors), {variants} in-place and out= calls traced");
    assert!(
        samples > 1000 && errors > 50 && variants > 400,
        "{samples} samples, {errors} errors, {variants} variants"
    );
    switchboard_opinfo::assert_no_failures(&failures);
}
