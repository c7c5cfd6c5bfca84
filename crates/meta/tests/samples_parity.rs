//! Meta against CPU on every sample of the operator-sample registry (Note [Operator samples]
//! in switchboard-opinfo): every operator that runs on Meta (a Meta kernel, or a composite
//! one) gives the same sizes, strides and dtypes there as on CPU, produces no data, and fails
//! exactly when the CPU fails, with the same message; its in-place and `out=` forms too.

use switchboard_dispatcher::DispatchKey;
use switchboard_dispatcher::{DispatchError, Dispatcher, IValue, Result};
use switchboard_opinfo::{
    assert_same_metadata, aten_operators, registry, returned_tensors, variants_of, OpInfo,
    Prepared, Sample, Unsampled,
};
use switchboard_ops as ops;
use switchboard_tensor::{Device, Tensor};

use switchboard_cpu as _;
use switchboard_meta as _;

/// The CPU's error for a write into a tensor that repeats an element.
const INTERNAL_OVERLAP: &str =
    "unsupported operation: more than one element of the written-to tensor";

/// What one call gave: its returns (tensors, and other values printed), or its error.
type Outcome = std::result::Result<Vec<IValue>, DispatchError>;

/// `device_dependent`: the entry's non-tensor answers are about the device (Unsampled).
fn compare(
    what: &str,
    s: &Sample,
    device_dependent: bool,
    cpu: Outcome,
    meta: Outcome,
    failures: &mut Vec<String>,
) {
    // PyTorch's Meta kernels cannot check values (an index out of range passes), and cannot
    // run what reads them (`narrow` with a Tensor start).
    if s.error_from_data {
        if cpu.is_ok() || meta.is_err() {
            failures.push(format!(
                "{what}: expected a CPU error from the values and Meta to run"
            ));
        }
        return;
    }
    if s.needs_data {
        // The CPU runs, or fails because of the values it reads (an error sample); Meta cannot
        // read them.
        if cpu.is_ok() == s.error || meta.is_ok() {
            let cpu_should = if s.error { "fail" } else { "run" };
            failures.push(format!(
                "{what}: expected the CPU to {cpu_should} and Meta to fail"
            ));
        }
        return;
    }
    match (cpu, meta) {
        (Ok(c), Ok(m)) => {
            let (ct, mt) = (returned_tensors(&c), returned_tensors(&m));
            if ct.len() != mt.len() {
                failures.push(format!(
                    "{what}: {} outputs on CPU, {} on Meta",
                    ct.len(),
                    mt.len()
                ));
            }
            for (i, (c, m)) in ct.iter().zip(&mt).enumerate() {
                if let Err(e) = assert_same_metadata(m, c, &format!("{what}: output {i}")) {
                    failures.push(e);
                }
                if !m.is_meta() || m.has_data() {
                    failures.push(format!(
                        "{what}: output {i} is not a meta tensor without data"
                    ));
                }
            }
            // Non-tensor returns (numel, size) are the same values, unless they are about the
            // device.
            for (c, m) in c.iter().zip(&m) {
                if !device_dependent
                    && !matches!(c, IValue::Tensor(_) | IValue::TensorList(_))
                    && format!("{c:?}") != format!("{m:?}")
                {
                    failures.push(format!("{what}: returns {c:?} on CPU, {m:?} on Meta"));
                }
            }
        }
        (Err(c), Err(m)) => {
            if c.first_line() != m.first_line() {
                failures.push(format!("{what}: errors differ: CPU `{c}`, Meta `{m}`"));
            }
        }
        // PyTorch's Meta kernels take a written tensor that repeats an element (an expanded
        // `self` of an in-place call): a meta tensor has no memory to overlap.
        (Err(c), Ok(_)) if c.first_line().starts_with(INTERNAL_OVERLAP) => {}
        (c, m) => failures.push(format!(
            "{what}: CPU {}, Meta {}",
            c.map(|_| "ok".to_owned()).unwrap_or_else(|e| e.to_string()),
            m.map(|_| "ok".to_owned()).unwrap_or_else(|e| e.to_string()),
        )),
    }
}

/// Runs `f` on the sample prepared on `device`.
fn on(
    device: Device,
    info: &OpInfo,
    sample: &Sample,
    f: &dyn Fn(&Prepared, &[Tensor], Device) -> Outcome,
) -> Outcome {
    let p = Prepared::new(info.name, sample, device, None)?;
    let inputs = p.fresh_inputs()?;
    f(&p, &inputs, device)
}

#[test]
fn every_sample_runs_alike_on_meta_and_cpu() {
    let d = Dispatcher::global();
    let all = aten_operators();
    let mut failures = Vec::new();
    let mut calls = 0;
    for info in registry() {
        if info.unsampled == Some(Unsampled::DataDependent) {
            continue;
        }
        let dd = info.unsampled == Some(Unsampled::DeviceDependent);
        let q = info.qualified();
        if !d
            .has_computed_kernel_for_dispatch_key(&q, DispatchKey::Meta)
            .unwrap()
        {
            continue;
        }
        let schema = switchboard_opinfo::operator(info.name).unwrap().1;
        let (inplace, out) = variants_of(&schema, &all);
        for (k, s) in info.samples.iter().enumerate() {
            let what = format!("{} sample {k}", info.name);
            let functional = |p: &Prepared, t: &[Tensor], _: Device| p.call(t);
            let cpu = on(Device::CPU, &info, s, &functional);
            let meta = on(Device::META, &info, s, &functional);
            calls += 1;
            // The out= form: out tensors of the functional outputs' dtypes, resized by the call.
            if let (Some((op, _)), Ok(c)) = (out, &cpu) {
                let dtypes: Vec<_> = returned_tensors(c).iter().map(|t| t.dtype()).collect();
                let with_out = |p: &Prepared, t: &[Tensor], dev: Device| -> Outcome {
                    let outs = dtypes
                        .iter()
                        .map(|&dt| {
                            ops::empty_with(
                                &[0],
                                ops::EmptyOptions::default().dtype(dt).device(dev),
                            )
                        })
                        .collect::<Result<Vec<_>>>()?;
                    p.call_variant(op, t, &outs)?;
                    Ok(outs.into_iter().map(IValue::Tensor).collect())
                };
                let oc = on(Device::CPU, &info, s, &with_out);
                let om = on(Device::META, &info, s, &with_out);
                compare(&format!("{what} (out=)"), s, dd, oc, om, &mut failures);
            }
            if let Some((op, _)) = inplace {
                let in_place = |p: &Prepared, t: &[Tensor], _: Device| -> Outcome {
                    p.call_variant(op, t, &[])?;
                    Ok(vec![IValue::Tensor(t[0].clone())])
                };
                let ic = on(Device::CPU, &info, s, &in_place);
                let im = on(Device::META, &info, s, &in_place);
                compare(&format!("{what} (in place)"), s, dd, ic, im, &mut failures);
            }
            compare(&what, s, dd, cpu, meta, &mut failures);
        }
    }
    assert!(calls > 500, "{calls} samples compared");
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
