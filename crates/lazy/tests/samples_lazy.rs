//! The lazy backend against the CPU on every sample of the operator-sample registry (Note
//! [Operator samples] in switchboard-opinfo): each sample runs with its tensors on the `lazy`
//! device and on the CPU, and the results (moved back to the CPU) have the same sizes,
//! strides, dtypes and values; the sample's inputs are written alike (in-place operators, the
//! in-place and `out=` variants); a call the CPU refuses fails when it is captured, with the
//! CPU's message (one that fails because of its values fails when the graph runs, with the
//! CPU's message); gradients through lazy tensors are the CPU's. Random operators run eagerly
//! on the lazy device (interception layer 3 in switchboard-lazy): reseeded alike,
//! their values are compared too. The same runs again with lazy mode off.

use std::sync::Mutex;

use switchboard_autograd::{operator_autograd, AutogradKind, AutogradTensor};
use switchboard_dispatcher::{DispatchError, IValue, OperatorHandle, Result};
use switchboard_keys::DeviceType;
use switchboard_lazy as lazy;
use switchboard_opinfo::{
    assert_close, aten_operators, harness_error, operator, registry, returned_tensors,
    same_random_draws, short_name, t, variants_of, viewed_input, OpInfo, Prepared, Sample,
    Unsampled,
};
use switchboard_ops as ops;
use switchboard_tensor::{Device, ScalarType, Tensor};

// Each test runs on a lazy device of its own (lazy:1, lazy:2, lazy:3; lazy mode is the
// thread's), but the default generator, reseeded before each run so that random operators
// draw alike on both devices, is the process's: the tests of this binary take turns.
static SERIAL: Mutex<()> = Mutex::new(());

fn lazy_device(index: i16) -> Device {
    Device::with_index(DeviceType::Lazy, index)
}

/// How a sample is called.
#[derive(Clone, Copy)]
enum Form<'a> {
    Functional,
    InPlace(&'a OperatorHandle),
    /// The `out=` form, with out tensors of these dtypes (empty: resized by the call).
    Out(&'a OperatorHandle, &'a [ScalarType]),
}

/// What a call gave: its returns and its inputs afterwards, on the CPU, and the strides its
/// tensor returns had on the device; or its error.
struct Run {
    returns: std::result::Result<Vec<IValue>, DispatchError>,
    strides: Vec<Vec<i64>>,
    /// For each tensor return, the input it is a view of (`viewed_input`).
    views: Vec<Option<usize>>,
    inputs: Vec<Tensor>,
    /// The inputs had eager's layout when the call ran (an input is not contiguous).
    strided_inputs: bool,
    /// The call failed, and succeeds on contiguous copies of its inputs (run on the CPU only).
    layout_error: bool,
    /// The call returned, and its error showed only when the pending graph ran.
    deferred: bool,
}

fn to_cpu(t: &Tensor) -> Result<Tensor> {
    if t.is_cpu() {
        return Ok(t.clone());
    }
    ops::_to_copy_with(t, ops::ToCopyOptions::default().device(Device::CPU))
}

fn ivalues_to_cpu(v: Vec<IValue>) -> Result<Vec<IValue>> {
    v.into_iter()
        .map(|v| {
            Ok(match v {
                IValue::Tensor(t) => IValue::Tensor(to_cpu(&t)?),
                IValue::TensorList(ts) => {
                    IValue::TensorList(ts.iter().map(to_cpu).collect::<Result<_>>()?)
                }
                other => other,
            })
        })
        .collect()
}

/// Runs `sample` in `form` on `device`, reseeded, then runs what is pending (on `lazy`).
fn run(info: &OpInfo, s: &Sample, form: Form, device: Device) -> Result<Run> {
    let p = Prepared::new(info.name, s, device, None)?;
    let inputs = p.fresh_inputs()?;
    let outs = match form {
        Form::Out(_, dtypes) => dtypes
            .iter()
            .map(|&dt| ops::empty_with(&[0], ops::EmptyOptions::default().dtype(dt).device(device)))
            .collect::<Result<Vec<_>>>()?,
        _ => Vec::new(),
    };
    p.reseed(42);
    let returns = match form {
        Form::Functional => p.call(&inputs),
        Form::InPlace(op) => p.call_variant(op, &inputs, &[]),
        Form::Out(op, _) => p.call_variant(op, &inputs, &outs),
    };
    // What is still pending runs now: a call refused at capture time left nothing behind,
    // one whose values are wrong fails here.
    let synced = match device.ty {
        DeviceType::Lazy => lazy::backend(device)?.sync(),
        _ => Ok(()),
    };
    let (returns, deferred) = match (returns, synced) {
        (Ok(_), Err(e)) => (Err(e), true),
        (r, _) => (r, false),
    };
    let strides = match &returns {
        Ok(r) => returned_tensors(r)
            .iter()
            .map(|t| t.strides().to_vec())
            .collect(),
        Err(_) => Vec::new(),
    };
    let views = match &returns {
        Ok(r) => returned_tensors(r)
            .iter()
            .map(|t| viewed_input(t, &inputs))
            .collect(),
        Err(_) => Vec::new(),
    };
    let strided_inputs = inputs.iter().any(|t| !t.is_contiguous());
    // A functional tensor's value is dense: a CPU kernel's check of an input's layout
    // (`_pdist_forward` wants a contiguous input) does not fire on it.
    let layout_error = device == Device::CPU && returns.is_err() && strided_inputs && {
        let dense = inputs
            .iter()
            .map(ops::contiguous)
            .collect::<Result<Vec<_>>>()?;
        let dense_outs = match form {
            Form::Out(_, dtypes) => dtypes
                .iter()
                .map(|&dt| ops::empty_with(&[0], ops::EmptyOptions::default().dtype(dt)))
                .collect::<Result<Vec<_>>>()?,
            _ => Vec::new(),
        };
        p.reseed(42);
        match form {
            Form::Functional => p.call(&dense),
            Form::InPlace(op) => p.call_variant(op, &dense, &[]),
            Form::Out(op, _) => p.call_variant(op, &dense, &dense_outs),
        }
        .is_ok()
    };
    // A call on lazy tensors returns lazy tensors (the eager fallback wraps its results).
    if let Ok(r) = &returns {
        if let Some(t) = returned_tensors(r).iter().find(|t| t.device() != device) {
            return Err(harness_error(format!(
                "returns a tensor on {}, not on {device}",
                t.device()
            )));
        }
    }
    let returns = match returns {
        Ok(r) => Ok(ivalues_to_cpu(r)?),
        Err(e) => Err(e),
    };
    let inputs = match returns {
        Ok(_) => inputs.iter().map(to_cpu).collect::<Result<_>>()?,
        Err(_) => Vec::new(),
    };
    Ok(Run {
        returns,
        strides,
        views,
        inputs,
        strided_inputs,
        layout_error,
        deferred,
    })
}

fn compare(what: &str, info: &OpInfo, s: &Sample, cpu: Run, lazy: Run, failures: &mut Vec<String>) {
    match (cpu.returns, lazy.returns) {
        (Ok(c), Ok(l)) => {
            // Lazy tensors are functional tensors (Note [Lazy tensors are functional]): random
            // draws are compared where functionalization keeps them (Note [Comparing
            // functionalized calls] in switchboard-opinfo).
            let values = info.unsampled != Some(Unsampled::Uninitialized)
                && same_random_draws(info, &cpu.inputs);
            let (ct, lt) = (returned_tensors(&c), returned_tensors(&l));
            if ct.len() != lt.len() {
                failures.push(format!(
                    "{what}: {} outputs on CPU, {} on lazy",
                    ct.len(),
                    lt.len()
                ));
            }
            // Strides where functionalization keeps them (Note [Comparing functionalized calls]
            // in switchboard-opinfo).
            for (i, (c, l)) in cpu.strides.iter().zip(&lazy.strides).enumerate() {
                let compared = cpu.views.get(i).copied().flatten().is_some();
                if c != l && compared {
                    failures.push(format!("{what}: output {i}: strides {l:?}, expected {c:?}"));
                }
            }
            let outputs = ct
                .iter()
                .zip(&lt)
                .enumerate()
                .map(|(i, p)| (p, "output", i));
            let inputs = cpu.inputs.iter().zip(&lazy.inputs);
            let written = inputs.enumerate().map(|(i, p)| (p, "input", i));
            for ((c, l), kind, i) in outputs.chain(written) {
                let what = format!("{what}: {kind} {i}");
                let r = if values {
                    assert_close(l, c, &what)
                } else {
                    check_metadata(l, c, &what)
                };
                if let Err(e) = r {
                    failures.push(e);
                }
            }
            // A device's answer about strided inputs (`_fused_sdp_choice`) is the answer about
            // their values' layout on functional tensors, as on PyTorch's lazy tensors, whose
            // data is always contiguous.
            let answers =
                !(info.unsampled == Some(Unsampled::DeviceDependent) && cpu.strided_inputs);
            for (c, l) in c.iter().zip(&l) {
                if answers
                    && !matches!(c, IValue::Tensor(_) | IValue::TensorList(_))
                    && format!("{c:?}") != format!("{l:?}")
                {
                    failures.push(format!("{what}: returns {c:?} on CPU, {l:?} on lazy"));
                }
            }
        }
        (Err(c), Err(l)) => {
            // A call the CPU refuses for its shapes, dtypes or arguments is refused when it
            // is captured (the Meta kernel checks what the CPU's does); an error from the
            // values shows when the graph runs, as the pending graph's.
            if lazy.deferred && !s.error_from_data {
                failures.push(format!(
                    "{what}: captured, failed only when the graph ran: {l}"
                ));
                return;
            }
            let same = if s.error_from_data {
                l.to_string().contains(&c.first_line())
            } else {
                c.first_line() == l.first_line()
            };
            if !same {
                failures.push(format!("{what}: errors differ: CPU `{c}`, lazy `{l}`"));
            }
        }
        // An error of the CPU kernel about an input's layout, which a functional tensor's
        // value does not have.
        (Err(_), Ok(_)) if cpu.layout_error && cpu.strided_inputs => {}
        (c, l) => failures.push(format!(
            "{what}: CPU {}, lazy {}",
            c.map(|_| "ok".to_owned()).unwrap_or_else(|e| e.to_string()),
            l.map(|_| "ok".to_owned()).unwrap_or_else(|e| e.to_string()),
        )),
    }
}

fn check_metadata(got: &Tensor, want: &Tensor, what: &str) -> std::result::Result<(), String> {
    if got.sizes() != want.sizes() || got.dtype() != want.dtype() {
        return Err(format!(
            "{what}: {:?} {:?}, expected {:?} {:?}",
            got.dtype(),
            got.sizes(),
            want.dtype(),
            want.sizes()
        ));
    }
    Ok(())
}

/// How many calls a run compared.
#[derive(Debug, Default)]
struct Counts {
    samples: usize,
    errors: usize,
    variants: usize,
}

/// Runs every sample (and its variants) on the CPU and on `lazy`; the mismatches, and how
/// many calls ran.
fn lazy_against_cpu(device: Device) -> (Vec<String>, Counts) {
    let all = aten_operators();
    let mut failures = Vec::new();
    let mut n = Counts::default();
    for info in registry() {
        let schema = operator(info.name).unwrap().1;
        let (inplace, out) = variants_of(&schema, &all);
        for (k, s) in info.samples.iter().enumerate() {
            let what = format!("{} sample {k}", info.name);
            let both = |form: Form| -> std::result::Result<(Run, Run), String> {
                let c = run(&info, s, form, Device::CPU).map_err(|e| format!("{what}: {e}"))?;
                let l = run(&info, s, form, device).map_err(|e| format!("{what}: {e}"))?;
                Ok((c, l))
            };
            n.samples += 1;
            n.errors += usize::from(s.error);
            let (c, l) = match both(Form::Functional) {
                Ok(r) => r,
                Err(e) => {
                    failures.push(e);
                    continue;
                }
            };
            let dtypes: Option<Vec<ScalarType>> = c
                .returns
                .as_ref()
                .ok()
                .map(|r| returned_tensors(r).iter().map(|t| t.dtype()).collect());
            compare(&what, &info, s, c, l, &mut failures);
            if let Some((op, vs)) = inplace {
                let what = format!("{} sample {k}", short_name(vs));
                n.variants += 1;
                match both(Form::InPlace(op)) {
                    Ok((c, l)) => compare(&what, &info, s, c, l, &mut failures),
                    Err(e) => failures.push(e),
                }
            }
            if let (Some((op, vs)), Some(dtypes)) = (out, &dtypes) {
                let what = format!("{} sample {k}", short_name(vs));
                n.variants += 1;
                match both(Form::Out(op, dtypes)) {
                    Ok((c, l)) => compare(&what, &info, s, c, l, &mut failures),
                    Err(e) => failures.push(e),
                }
            }
        }
    }
    (failures, n)
}

/// Every sample on lazy device `device` against the CPU, with lazy mode `on` or off.
fn every_sample_runs_alike(device: Device, on: bool) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _mode = lazy::LazyModeGuard::new(on);
    let (failures, n) = lazy_against_cpu(device);
    eprintln!("lazy mode {}: {n:?}", if on { "on" } else { "off" });
    assert!(
        n.samples > 1000 && n.errors > 50 && n.variants > 400,
        "{n:?}"
    );
    switchboard_opinfo::assert_no_failures(&failures);
}

#[test]
fn every_sample_runs_alike_on_lazy_and_cpu() {
    every_sample_runs_alike(lazy_device(1), true);
}

#[test]
fn every_sample_runs_alike_with_lazy_mode_off() {
    every_sample_runs_alike(lazy_device(2), false);
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
/// its differentiable outputs, computed on `device`, moved to the CPU.
fn gradients(info: &OpInfo, s: &Sample, device: Device) -> Result<(Vec<Tensor>, bool)> {
    let p = Prepared::new(info.name, s, device, Some(ScalarType::Double))?;
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
    let draws = same_random_draws(info, &tensors);
    if leaves.is_empty() {
        return Ok((Vec::new(), draws));
    }
    p.reseed(7);
    let outs = returned_tensors(&p.call(&tensors)?);
    let mut loss: Option<Tensor> = None;
    for (k, o) in outs.iter().enumerate() {
        if !o.dtype().is_floating_point() || !o.requires_grad() {
            continue;
        }
        // A weighting with distinct values, so every gradient element counts.
        let w = t(o.sizes())
            .seed(100 + k as u64)
            .make(device, Some(o.dtype()), 0)?;
        let term = ops::sum(&ops::mul(o, &w)?)?;
        loss = Some(match loss {
            Some(l) => ops::add(&l, &term)?,
            None => term,
        });
    }
    let Some(loss) = loss else {
        return Ok((Vec::new(), draws));
    };
    loss.backward()?;
    let grads = leaves
        .iter()
        .map(|l| match l.grad() {
            Some(g) => to_cpu(&g),
            None => ops::zeros_like(l).and_then(|z| to_cpu(&z)),
        })
        .collect::<Result<_>>()?;
    Ok((grads, draws))
}

#[test]
fn gradients_through_lazy_tensors_are_the_cpus() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _mode = lazy::LazyModeGuard::new(true);
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
            let cpu = gradients(&info, s, Device::CPU);
            let lz = gradients(&info, s, lazy_device(3));
            checked += 1;
            match (cpu, lz) {
                // Random draws where functionalization keeps them (Note [Comparing
                // functionalized calls] in switchboard-opinfo).
                (Ok(_), Ok((_, false))) => {}
                (Ok((c, _)), Ok((l, _))) => {
                    for (i, (c, l)) in c.iter().zip(&l).enumerate() {
                        if let Err(e) = assert_close(l, c, &format!("{what}: gradient {i}")) {
                            failures.push(e);
                        }
                    }
                }
                (Err(c), Err(l)) if c.first_line() == l.first_line() => {}
                (c, l) => failures.push(format!(
                    "{what}: CPU {}, lazy {}",
                    c.map(|_| "ok".to_owned()).unwrap_or_else(|e| e.to_string()),
                    l.map(|_| "ok".to_owned()).unwrap_or_else(|e| e.to_string()),
                )),
            }
        }
    }
    eprintln!("{checked} backward passes compared");
    assert!(checked > 300, "{checked} backward passes compared");
    switchboard_opinfo::assert_no_failures(&failures);
}
