//! The CPU autocast policy against every sample of the operator-sample registry (Note
//! [Operator samples] in switchboard-opinfo), in bfloat16 and float16 regions: a sample with
//! floating inputs gives, inside the region, what the eager call gives on its inputs cast as
//! PyTorch 2.15's CPU policy says (the operator's own entry: lower precision, float32, the
//! widest dtype, a float32 `dtype` argument; untouched when it has none), errors included.
//! The expectations come from PyTorch's lists as `pytorch_policies` records them, not from
//! the crate's table. A
//! composite operator with no entry whose decomposition reaches listed operators (`einsum` ->
//! `bmm`) is checked through those calls instead: a dispatch mode below the autocast layer
//! sees every call, and each call of a listed operator must arrive with its arguments in the
//! dtypes the policy gives.

mod pytorch_policies;

use std::cell::RefCell;
use std::rc::Rc;

use switchboard_autocast::{autocast, registered_policy, CastPolicy};
use switchboard_cpu as _;
use switchboard_dispatcher::{
    DispatchError, DispatchErrorKind, DispatchKeySet, Dispatcher, IValue, OperatorHandle, Result,
    Stack,
};
use switchboard_keys::DeviceType;
use switchboard_modes::push_mode;
use switchboard_opinfo::{
    assert_close, registry, returned_tensors, short_name, OpInfo, Prepared, Sample, Unsampled,
};
use switchboard_ops as ops;
use switchboard_schema::Type;
use switchboard_tensor::{Device, ScalarType, Tensor};

/// A tensor autocast casts (`at::autocast::is_eligible`): floating, not float64, on the CPU.
fn eligible(t: &Tensor) -> bool {
    t.dtype().is_floating_point() && t.dtype() != ScalarType::Double && t.is_cpu()
}

/// The dtype `policy` casts eligible tensors to, for tensors `ts` (the `Tensor` and
/// `Tensor[]` arguments, for `Promote`), in a region of dtype `lower`. `Promote` follows
/// `at::autocast::prioritize`: float32 wins, float64 is left out, and another floating dtype
/// than the region's (float16 in a bfloat16 region) is an error (checked against PyTorch
/// 2.15: `torch.cat([half, bool])` in a bfloat16 CPU region raises it).
fn target(policy: CastPolicy, lower: ScalarType, ts: &[&Tensor]) -> Result<Option<ScalarType>> {
    Ok(match policy {
        CastPolicy::LowerPrecisionFp => Some(lower),
        CastPolicy::Fp32 => Some(ScalarType::Float),
        CastPolicy::Promote => {
            let mut to = lower;
            for t in ts.iter().filter(|t| eligible(t)) {
                to = if to == ScalarType::Float || t.dtype() == ScalarType::Float {
                    ScalarType::Float
                } else if to == lower && t.dtype() == lower {
                    lower
                } else {
                    return Err(DispatchErrorKind::Kernel(
                        "Unexpected floating ScalarType in at::autocast::prioritize".into(),
                    )
                    .into());
                };
            }
            Some(to)
        }
        CastPolicy::Fp32SetOptDtype => None,
    })
}

/// The position of the first `ScalarType?` argument (the `dtype` `Fp32SetOptDtype` sets).
fn dtype_argument(op: &OperatorHandle) -> Option<usize> {
    let schema = op.schema()?;
    schema
        .schema
        .arguments()
        .iter()
        .position(|a| matches!(a.ty(), Type::Optional(inner) if **inner == Type::ScalarType))
}

/// The eager call of the sample with its inputs cast as `policy` says (untouched when
/// `None`): what the region must give.
fn expected(
    p: &Prepared,
    inputs: &[Tensor],
    policy: Option<CastPolicy>,
    lower: ScalarType,
) -> Result<Vec<IValue>> {
    let Some(policy) = policy else {
        return p.call(inputs);
    };
    // The tensors taking part in `Promote`: `Tensor` and `Tensor[]` arguments, not optional ones.
    let promoted: Vec<&Tensor> = p
        .tensors
        .iter()
        .zip(inputs)
        .filter(|(slot, _)| {
            p.schema
                .arguments()
                .iter()
                .any(|a| a.name() == slot.arg && matches!(a.ty(), Type::Tensor | Type::List(_)))
        })
        .map(|(_, t)| t)
        .collect();
    let cast: Vec<Tensor> = match target(policy, lower, &promoted)? {
        Some(to) => inputs
            .iter()
            .map(|t| {
                if eligible(t) && t.dtype() != to {
                    ops::to(t, to)
                } else {
                    Ok(t.clone())
                }
            })
            .collect::<Result<_>>()?,
        None => inputs.to_vec(),
    };
    let mut stack = p.stack(&cast);
    if policy == CastPolicy::Fp32SetOptDtype && inputs.first().is_some_and(eligible) {
        if let Some(i) = dtype_argument(&p.op) {
            if stack[i].is_none() {
                stack[i] = IValue::ScalarType(ScalarType::Float);
            }
        }
    }
    p.op.call_boxed(&mut stack)?;
    Ok(stack)
}

/// The calls of listed operators that arrived below the autocast layer with arguments in
/// other dtypes than the policy gives, and how many listed calls it saw.
#[derive(Default)]
struct Seen {
    listed: usize,
    wrong: Vec<String>,
}

/// Checks one call the mode sees: a listed operator's eligible tensor arguments are in the
/// policy's dtype.
fn check_call(lower: ScalarType, op: &OperatorHandle, args: &[IValue]) -> Option<String> {
    let schema = op.schema()?;
    let name = short_name(&schema.schema);
    let cast = pytorch_policies::policy_in(pytorch_policies::CPU, &name)?;
    let tensors: Vec<&Tensor> = args
        .iter()
        .flat_map(|v| match v {
            IValue::Tensor(t) => vec![t],
            IValue::TensorList(ts) => ts.iter().collect(),
            IValue::OptionalTensorList(ts) => ts.iter().flatten().collect(),
            _ => Vec::new(),
        })
        .filter(|t| eligible(t))
        .collect();
    let dtypes: Vec<ScalarType> = tensors.iter().map(|t| t.dtype()).collect();
    let fine = match cast {
        CastPolicy::LowerPrecisionFp => dtypes.iter().all(|&d| d == lower),
        CastPolicy::Fp32 => dtypes.iter().all(|&d| d == ScalarType::Float),
        CastPolicy::Promote => dtypes.windows(2).all(|w| w[0] == w[1]),
        CastPolicy::Fp32SetOptDtype => match (tensors.first(), dtype_argument(op)) {
            (Some(_), Some(i)) => {
                matches!(args.get(i), Some(IValue::ScalarType(ScalarType::Float)))
            }
            _ => true,
        },
    };
    (!fine).then(|| format!("{name} ({cast:?}) called with {dtypes:?}"))
}

/// Runs the sample inside a region of dtype `lower` with a mode watching the calls below it.
fn in_region(
    p: &Prepared,
    inputs: &[Tensor],
    lower: ScalarType,
) -> (std::result::Result<Vec<IValue>, DispatchError>, Seen) {
    let seen = Rc::new(RefCell::new(Seen::default()));
    let watch = seen.clone();
    let mode = move |op: &OperatorHandle, _keys: DispatchKeySet, stack: &mut Stack| -> Result<()> {
        let n = op
            .schema()
            .map_or(0, |r| r.schema.arguments().len())
            .min(stack.len());
        let name = op
            .schema()
            .map(|s| short_name(&s.schema))
            .unwrap_or_default();
        if pytorch_policies::policy_in(pytorch_policies::CPU, &name).is_some() {
            let mut w = watch.borrow_mut();
            w.listed += 1;
            if let Some(e) = check_call(lower, op, &stack[stack.len() - n..]) {
                w.wrong.push(e);
            }
        }
        op.call_boxed(stack)
    };
    let r = {
        let _mode = push_mode(Rc::new(mode));
        p.reseed(42);
        autocast(Device::CPU, lower, || p.call(inputs))
    };
    let seen = std::mem::take(&mut *seen.borrow_mut());
    (r, seen)
}

fn has_float_input(p: &Prepared) -> bool {
    p.tensors
        .iter()
        .any(|t| t.spec.dtype.is_floating_point() && t.spec.dtype != ScalarType::Double)
}

fn compare(
    what: &str,
    info: &OpInfo,
    got: std::result::Result<Vec<IValue>, DispatchError>,
    want: std::result::Result<Vec<IValue>, DispatchError>,
) -> Option<String> {
    match (got, want) {
        (Ok(g), Ok(w)) => {
            let (g, w) = (returned_tensors(&g), returned_tensors(&w));
            if g.len() != w.len() {
                return Some(format!("{what}: {} outputs, expected {}", g.len(), w.len()));
            }
            for (i, (g, w)) in g.iter().zip(&w).enumerate() {
                let what = format!("{what}: output {i}");
                let r = if info.unsampled == Some(Unsampled::Uninitialized) {
                    if g.sizes() == w.sizes() && g.dtype() == w.dtype() {
                        Ok(())
                    } else {
                        Err(format!(
                            "{what}: {:?} {:?}, expected {:?} {:?}",
                            g.dtype(),
                            g.sizes(),
                            w.dtype(),
                            w.sizes()
                        ))
                    }
                } else {
                    assert_close(g, w, &what)
                };
                if let Err(e) = r {
                    return Some(e);
                }
            }
            None
        }
        (Err(g), Err(w)) if g.first_line() == w.first_line() => None,
        (g, w) => Some(format!(
            "{what}: autocast {}, expected {}",
            g.map(|_| "ok".to_owned()).unwrap_or_else(|e| e.to_string()),
            w.map(|_| "ok".to_owned()).unwrap_or_else(|e| e.to_string()),
        )),
    }
}

fn check_sample(
    info: &OpInfo,
    k: usize,
    s: &Sample,
    lower: ScalarType,
    n: &mut Counts,
    failures: &mut Vec<String>,
) -> Result<()> {
    let p = Prepared::new(info.name, s, Device::CPU, None)?;
    if !has_float_input(&p) {
        return Ok(());
    }
    let what = format!("{} sample {k} ({lower:?})", info.name);
    let own = pytorch_policies::policy_in(pytorch_policies::CPU, info.name);
    let inputs = p.fresh_inputs()?;
    let (got, seen) = in_region(&p, &inputs, lower);
    // A listed operator's own decomposition runs with autocast off, as in PyTorch (the math
    // path of `scaled_dot_product_attention` computes bfloat16 inputs in float): its result
    // is what is checked, below. Another operator's decomposition is checked call by call.
    if own.is_none() {
        failures.extend(seen.wrong.iter().map(|e| format!("{what}: {e}")));
    }
    let inputs = p.fresh_inputs()?;
    p.reseed(42);
    let want = expected(&p, &inputs, own, lower);
    n.samples += 1;
    n.listed += usize::from(own.is_some());
    n.listed_calls += seen.listed;
    if own.is_none() && seen.listed > 0 {
        // A decomposition reaching listed operators: checked through the calls above.
        n.decomposed += 1;
        if got.is_err() != want.is_err() {
            failures.push(format!(
                "{what}: fails in the region only one way: {:?} / {:?}",
                got.err(),
                want.err()
            ));
        }
        return Ok(());
    }
    failures.extend(compare(&what, info, got, want));
    Ok(())
}

/// How many samples ran.
#[derive(Debug, Default)]
struct Counts {
    samples: usize,
    /// Of an operator on the policy's lists.
    listed: usize,
    /// Of an operator not on them whose decomposition reaches them.
    decomposed: usize,
    /// Calls of listed operators the mode below the autocast layer saw.
    listed_calls: usize,
}

#[test]
fn every_sample_follows_the_cpu_policy_in_a_region() {
    // The libraries of linked crates register with the global dispatcher when it starts.
    Dispatcher::global();
    assert!(
        registered_policy(DeviceType::CPU).is_some(),
        "linking the crate registers the CPU policy"
    );
    let mut failures = Vec::new();
    let mut n = Counts::default();
    for lower in [ScalarType::BFloat16, ScalarType::Half] {
        for info in registry() {
            for (k, s) in info.samples.iter().enumerate() {
                if let Err(e) = check_sample(&info, k, s, lower, &mut n, &mut failures) {
                    failures.push(format!("{} sample {k}: {e}", info.name));
                }
            }
        }
    }
    // Every operator of the policy has samples.
    for (name, _) in pytorch_policies::CPU {
        if !registry()
            .iter()
            .any(|o| o.name == *name && !o.samples.is_empty())
        {
            failures.push(format!("{name}: on the CPU policy, but no registry sample"));
        }
    }
    eprintln!("{n:?}");
    assert!(
        n.samples > 1000 && n.listed > 40 && n.listed_calls > 40,
        "{n:?}"
    );
    switchboard_opinfo::assert_no_failures(&failures);
}
