//! The operator-sample registry (Note [Operator samples] in switchboard-opinfo) against the
//! CPU kernels: in-place and `out=` forms against the functional one, result dtypes against
//! PyTorch's documented promotion, random operators' statistics.

use switchboard_dispatcher::{DispatchError, IValue, OperatorHandle, Result};
use switchboard_opinfo::{
    assert_close, aten_operators, operator, registry, result_type, returned_tensors, variants_of,
    Arg, OpInfo, Operand, Prepared, Promotion, Sample, Unsampled,
};
use switchboard_ops as ops;
use switchboard_tensor::{Device, ScalarType, Tensor};

use switchboard_cpu as _;

/// Every call starts from the same random state, so random operators are compared too.
fn reseed(p: &Prepared) {
    p.reseed(42);
}

fn prepare(info: &OpInfo, s: &Sample) -> Result<Prepared> {
    Prepared::new(info.name, s, Device::CPU, None)
}

/// The functional result of a sample (on fresh inputs, reseeded).
fn functional(p: &Prepared) -> Result<Vec<IValue>> {
    let inputs = p.fresh_inputs()?;
    reseed(p);
    p.call(&inputs)
}

/// PyTorch's `canCast`: no floating to integral, no integral to bool.
fn can_cast(from: ScalarType, to: ScalarType) -> bool {
    !(from.is_floating_point() && !to.is_floating_point()
        || from != ScalarType::Bool && to == ScalarType::Bool)
}

fn cast(t: &Tensor, dtype: ScalarType) -> Result<Tensor> {
    ops::_to_copy_with(t, ops::ToCopyOptions::default().dtype(dtype))
}

fn message(r: &std::result::Result<Vec<IValue>, DispatchError>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(e) => e.to_string(),
    }
}

fn check_inplace(
    what: &str,
    info: &OpInfo,
    s: &Sample,
    op: &OperatorHandle,
) -> std::result::Result<(), String> {
    let p = prepare(info, s).map_err(|e| format!("{what}: {e}"))?;
    let want = functional(&p);
    let inputs = p.fresh_inputs().map_err(|e| e.to_string())?;
    let self_ = inputs[0].clone();
    reseed(&p);
    let got = p.call_variant(op, &inputs, &[]);
    let y = match &want {
        Err(_) => {
            return match got {
                Err(_) => Ok(()),
                Ok(_) => Err(format!(
                    "{what}: the functional form fails, the in-place one runs"
                )),
            }
        }
        Ok(v) => returned_tensors(v).remove(0),
    };
    let overlapping = self_.numel() > 1 && self_.strides().contains(&0);
    let expect = if overlapping {
        Some("more than one element of the written-to tensor refers to a single memory location")
    } else if y.sizes() != self_.sizes() {
        // TensorIterator's message, or addmm_'s "Bad in-place call: input tensor size ...".
        Some(if info.name == "addmm" {
            "should match"
        } else {
            "doesn't match the broadcast shape"
        })
    } else if y.dtype() != self_.dtype() && s.kwargs.iter().any(|(n, _)| *n == "dtype") {
        // An explicit `dtype` makes the result's dtype (`cumsum_`), and torchgen's
        // `check_inplace` wants it to be `self`'s.
        Some("Bad in-place call")
    } else if !can_cast(y.dtype(), self_.dtype()) {
        Some("can't be cast to the desired output type")
    } else {
        None
    };
    match (expect, got) {
        (Some(m), Err(e)) if e.to_string().contains(m) => Ok(()),
        (Some(m), r) => Err(format!(
            "{what}: expected an error with `{m}`, got {}",
            message(&r)
        )),
        (None, Err(e)) => Err(format!("{what}: the in-place form fails: {e}")),
        (None, Ok(r)) => {
            let out = returned_tensors(&r);
            if !out.first().is_some_and(|o| o.is_same(&self_)) {
                return Err(format!("{what}: the in-place form does not return self"));
            }
            let y = cast(&y, self_.dtype()).map_err(|e| e.to_string())?;
            if info.unsampled == Some(Unsampled::Uninitialized) {
                return Ok(());
            }
            assert_close(&self_, &y, what)
        }
    }
}

fn check_out(
    what: &str,
    info: &OpInfo,
    s: &Sample,
    op: &OperatorHandle,
) -> std::result::Result<(), String> {
    let p = prepare(info, s).map_err(|e| format!("{what}: {e}"))?;
    let want = match functional(&p) {
        Ok(v) => returned_tensors(&v),
        Err(_) => {
            // The out= form fails too.
            let inputs = p.fresh_inputs().map_err(|e| e.to_string())?;
            let out = Tensor::empty(&[0], ScalarType::Float).map_err(|e| e.to_string())?;
            let outs = vec![out; op.schema().unwrap().schema.out_arguments().len()];
            return match p.call_variant(op, &inputs, &outs) {
                Err(_) => Ok(()),
                Ok(_) => Err(format!(
                    "{what}: the functional form fails, the out= one runs"
                )),
            };
        }
    };
    // Empty out tensors (resized by the call), then out tensors of the right shape.
    for resized in [true, false] {
        let outs = want
            .iter()
            .map(|y| {
                let shape: &[i64] = if resized { &[0] } else { y.sizes() };
                Tensor::empty(shape, y.dtype())
            })
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        let inputs = p.fresh_inputs().map_err(|e| e.to_string())?;
        reseed(&p);
        let r = p
            .call_variant(op, &inputs, &outs)
            .map_err(|e| format!("{what}: the out= form fails: {e}"))?;
        // An out tensor of the result's shape is written and returned; an empty one is
        // resized, which gives a new handle here (Note [Functional resize]): the returned one.
        let returned = returned_tensors(&r);
        for (i, (o, y)) in outs.iter().zip(&want).enumerate() {
            let Some(got) = returned.get(i) else {
                return Err(format!("{what}: out= returns no tensor {i}"));
            };
            if !resized && !got.is_same(o) {
                return Err(format!("{what}: out= does not return its out tensor {i}"));
            }
            if resized && !got.is_alias_of(o) && o.numel() > 0 {
                return Err(format!(
                    "{what}: the resized out tensor {i} lost its storage"
                ));
            }
            if info.unsampled != Some(Unsampled::Uninitialized) {
                assert_close(got, y, &format!("{what} out {i}"))?;
            }
        }
    }
    Ok(())
}

#[test]
fn inplace_and_out_variants_match_the_functional_form() {
    let all = aten_operators();
    let mut failures = Vec::new();
    let mut checked = 0;
    for info in registry() {
        if !info.inplace && !info.out {
            continue;
        }
        let schema = operator(info.name).unwrap().1;
        let (inplace, out) = variants_of(&schema, &all);
        for (k, s) in info.samples.iter().enumerate() {
            if s.error_from_data {
                continue;
            }
            if let Some((op, vs)) = inplace {
                let what = format!("{} sample {k}", vs.name());
                if let Err(e) = check_inplace(&what, &info, s, op) {
                    failures.push(e);
                }
                checked += 1;
            }
            if let Some((op, vs)) = out {
                let what = format!("{} sample {k}", vs.name());
                if let Err(e) = check_out(&what, &info, s, op) {
                    failures.push(e);
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 400, "{checked} variant calls");
    switchboard_opinfo::assert_no_failures(&failures);
}

/// The promotion participants of a prepared sample: its `self`, `other`, `exponent`, `min`,
/// `max`, `tensors` (and a backward helper's `grad_output`, `output`, a loss's `target`)
/// arguments, tensors or numbers.
fn operands(p: &Prepared, s: &Sample) -> Vec<Operand> {
    const PARTICIPANTS: [&str; 9] = [
        "self",
        "other",
        "exponent",
        "min",
        "max",
        "tensors",
        "grad_output",
        "output",
        "target",
    ];
    let mut ops = Vec::new();
    for t in &p.tensors {
        if PARTICIPANTS.contains(&t.arg.as_str()) {
            let dtype = t.spec.dtype;
            ops.push(if t.spec.shape.is_empty() {
                Operand::ZeroDim(dtype)
            } else {
                Operand::Dimensioned(dtype)
            });
        }
    }
    let names: Vec<&str> = p.schema.arguments().iter().map(|a| a.name()).collect();
    let given = s
        .args
        .iter()
        .enumerate()
        .map(|(i, a)| (names[i], a))
        .chain(s.kwargs.iter().map(|(n, a)| (*n, a)));
    for (name, a) in given {
        if let (true, Arg::Value(v)) = (PARTICIPANTS.contains(&name), a) {
            match v {
                IValue::Int(_) => ops.push(Operand::Number(ScalarType::Long)),
                IValue::Double(_) => ops.push(Operand::Number(ScalarType::Double)),
                IValue::Bool(_) => ops.push(Operand::Number(ScalarType::Bool)),
                _ => {}
            }
        }
    }
    ops
}

/// Integers and bool to the default float dtype.
fn int_to_float(t: ScalarType) -> ScalarType {
    if t.is_floating_point() {
        t
    } else {
        ScalarType::Float
    }
}

#[test]
fn result_dtypes_follow_pytorchs_promotion() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for info in registry() {
        if info.promotion == Promotion::Unchecked {
            continue;
        }
        for (k, s) in info.samples.iter().enumerate() {
            if s.error || s.kwarg("dtype").is_some() {
                continue;
            }
            let p = prepare(&info, s).unwrap();
            let got = match functional(&p) {
                Ok(v) => returned_tensors(&v)[0].dtype(),
                Err(e) => {
                    failures.push(format!("{} sample {k}: {e}", info.name));
                    continue;
                }
            };
            let operands = operands(&p, s);
            let self_dtype = p.tensors.first().map(|t| t.spec.dtype);
            let want = match info.promotion {
                Promotion::Unchecked => unreachable!(),
                Promotion::Default => result_type(&operands),
                Promotion::IntToFloat => int_to_float(result_type(&operands)),
                Promotion::Division => match s.kwarg("rounding_mode") {
                    Some(Arg::Value(IValue::Str(_))) => result_type(&operands),
                    _ => int_to_float(result_type(&operands)),
                },
                Promotion::Bool => ScalarType::Bool,
                Promotion::SameAsSelf => self_dtype.unwrap(),
                Promotion::IntToLong => match self_dtype.unwrap() {
                    t if t.is_floating_point() => t,
                    _ => ScalarType::Long,
                },
            };
            checked += 1;
            if got != want {
                failures.push(format!(
                    "{} sample {k}: result dtype {got:?}, PyTorch's promotion of {operands:?} gives {want:?}",
                    info.name
                ));
            }
        }
    }
    assert!(checked > 300, "{checked} samples checked");
    switchboard_opinfo::assert_no_failures(&failures);
}

#[test]
fn random_operators_have_their_distributions() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for info in registry() {
        let Some(st) = &info.stats else { continue };
        let p = prepare(&info, &st.sample).unwrap();
        let y = match functional(&p) {
            Ok(v) => returned_tensors(&v).remove(0),
            Err(e) => {
                failures.push(format!("{}: {e}", info.name));
                continue;
            }
        };
        let v = y.to_vec_as::<f64>().unwrap();
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let std = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        let (lo, hi) = v
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
                (a.min(x), b.max(x))
            });
        checked += 1;
        // Bounds are checked with float32's rounding of them.
        let slack = |b: f64| 1e-6 * b.abs().max(1.0);
        if (mean - st.mean).abs() > st.tol
            || (std - st.std).abs() > st.tol
            || lo < st.min - slack(st.min)
            || hi > st.max + slack(st.max)
        {
            failures.push(format!(
                "{}: mean {mean}, std {std}, range [{lo}, {hi}]; expected mean {} ± {}, std {}, range [{}, {}]",
                info.name, st.mean, st.tol, st.std, st.min, st.max
            ));
        }
    }
    assert!(checked >= 15, "{checked} random operators");
    switchboard_opinfo::assert_no_failures(&failures);
}
