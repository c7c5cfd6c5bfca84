//! Writes every sample of the operator-sample registry, with what the CPU kernels make of it,
//! as JSON lines for `scripts/opinfo_vs_pytorch.py`, which runs the same calls through
//! PyTorch and reports every difference (result dtypes, sizes, strides, values, errors).
//!
//! `cargo run -p switchboard-opinfo --example dump_samples > samples.jsonl`

use serde_json::{json, Value};
use switchboard_cpu as _;
use switchboard_dispatcher::IValue;
use switchboard_opinfo::{registry, Layout, Prepared, TensorSlot, Unsampled};
use switchboard_tensor::{Device, Tensor};

/// The values in row-major order; a complex tensor's as real and imaginary parts, interleaved
/// (its `view_as_real`).
fn values(t: &Tensor) -> Value {
    let parts = if t.dtype().is_complex() {
        switchboard_tensor::RawOps::view_as_real(t)
    } else {
        Ok(t.clone())
    };
    match parts.and_then(|p| p.to_vec_as::<f64>()) {
        Ok(v) => json!(v
            .into_iter()
            .map(|x| if x.is_finite() {
                json!(x)
            } else {
                json!(x.to_string())
            })
            .collect::<Vec<_>>()),
        Err(_) => Value::Null,
    }
}

/// A float as JSON: a number, or its text for the non-finite ones JSON has no number for
/// ("inf", "-inf", "NaN").
fn float_json(x: f64) -> Value {
    if x.is_finite() {
        json!(x)
    } else {
        json!(x.to_string())
    }
}

fn tensor_json(slot: &TensorSlot) -> Value {
    let layout = match &slot.spec.layout {
        Layout::Contiguous => json!("contiguous"),
        Layout::Transposed => json!("transposed"),
        Layout::Strided => json!("strided"),
        Layout::Expanded(from) => json!({ "expanded": from }),
    };
    json!({
        "kind": "tensor",
        "dtype": slot.base.dtype().name(),
        "base_shape": slot.base.sizes(),
        "base": values(&slot.base),
        "layout": layout,
        "shape": slot.spec.shape,
    })
}

fn value_json(v: &IValue, next: &mut dyn FnMut() -> Value) -> Value {
    match v {
        IValue::None => json!({ "kind": "none" }),
        IValue::Tensor(_) => next(),
        IValue::TensorList(ts) => {
            json!({ "kind": "tensors", "items": ts.iter().map(|_| next()).collect::<Vec<_>>() })
        }
        IValue::OptionalTensorList(ts) => json!({
            "kind": "tensors",
            "items": ts
                .iter()
                .map(|t| if t.is_some() { next() } else { json!({ "kind": "none" }) })
                .collect::<Vec<_>>()
        }),
        IValue::Int(i) => json!({ "kind": "int", "value": i }),
        IValue::Double(d) => json!({ "kind": "float", "value": float_json(*d) }),
        IValue::Bool(b) => json!({ "kind": "bool", "value": b }),
        IValue::Str(s) => json!({ "kind": "str", "value": s.as_str() }),
        IValue::ScalarType(t) => json!({ "kind": "dtype", "value": t.name() }),
        IValue::Device(d) => json!({ "kind": "device", "value": d.to_string() }),
        IValue::MemoryFormat(m) => json!({ "kind": "memory_format", "value": format!("{m:?}") }),
        IValue::Layout(_) => json!({ "kind": "layout" }),
        IValue::Generator(g) => json!({ "kind": "generator", "value": g.initial_seed() }),
        IValue::IntList(l) => json!({ "kind": "ints", "value": l.as_slice() }),
        IValue::DoubleList(l) => json!({ "kind": "floats", "value": l.as_slice() }),
        IValue::BoolList(l) => json!({ "kind": "bools", "value": l.as_slice() }),
        other => json!({ "kind": "unsupported", "value": format!("{other:?}") }),
    }
}

fn output_json(v: &IValue, compare_values: bool) -> Value {
    match v {
        IValue::Tensor(t) => json!({
            "kind": "tensor",
            "dtype": t.dtype().name(),
            "sizes": t.sizes(),
            "strides": t.strides(),
            "values": if compare_values { values(t) } else { Value::Null },
        }),
        IValue::TensorList(ts) => {
            json!({ "kind": "tensors", "items": ts.iter().map(|t| output_json(&IValue::Tensor(t.clone()), compare_values)).collect::<Vec<_>>() })
        }
        IValue::Int(i) => json!({ "kind": "int", "value": i }),
        IValue::Double(d) => json!({ "kind": "float", "value": float_json(*d) }),
        IValue::Bool(b) => json!({ "kind": "bool", "value": b }),
        other => json!({ "kind": "other", "value": format!("{other:?}") }),
    }
}

fn main() {
    for info in registry() {
        for (k, s) in info.samples.iter().enumerate() {
            let p = match Prepared::new(info.name, s, Device::CPU, None) {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("{} sample {k}: {e}", info.name);
                    continue;
                }
            };
            let inputs = p.fresh_inputs().unwrap();
            let stack = p.stack(&inputs);
            let mut slots = p.tensors.iter();
            let mut next = || slots.next().map(tensor_json).unwrap_or(Value::Null);
            let args: Vec<Value> = p
                .schema
                .arguments()
                .iter()
                .filter(|a| !a.is_out())
                .zip(&stack)
                .map(|(a, v)| {
                    let mut j = value_json(v, &mut next);
                    j["name"] = json!(a.name());
                    j["kwarg_only"] = json!(a.kwarg_only());
                    j
                })
                .collect();
            p.reseed(0);
            let compare_values = info.unsampled.is_none() && info.stats.is_none();
            let result = match p.call(&inputs) {
                Ok(outs) => {
                    json!({ "ok": true, "outputs": outs.iter().map(|o| output_json(o, compare_values)).collect::<Vec<_>>() })
                }
                Err(e) => json!({ "ok": false, "error": e.to_string() }),
            };
            let line = json!({
                "op": info.name,
                "sample": k,
                "random": info.unsampled == Some(Unsampled::Random) || info.stats.is_some(),
                "expect_error": s.error,
                "args": args,
                "result": result,
            });
            println!("{line}");
        }
    }
}
