//! The outputs of `switchboard call`: return `i` is `outI`; tensors go to the output file or are
//! printed, everything else into one JSON object (see Note [switchboard call]).

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use switchboard::dispatcher::{IValue, Stack};
use switchboard::tensor::{save_safetensors, write_output_file, Tensor};

use super::{one_line, CallError};

/// Outputs sorted into tensors (named `outI`, `outI.J`) and JSON values.
#[derive(Default)]
struct Outputs {
    tensors: Vec<(String, Tensor)>,
    json: Vec<(String, serde_json::Value)>,
    /// `outI` -> `Tensor[N]` for list returns, for the output file's metadata.
    lists: Vec<(String, String)>,
}

fn collect_outputs(returns: Stack) -> Outputs {
    let mut out = Outputs::default();
    for (i, v) in returns.into_iter().enumerate() {
        let name = format!("out{i}");
        match v {
            IValue::Tensor(t) => out.tensors.push((name, t)),
            IValue::TensorList(ts) => {
                out.lists
                    .push((name.clone(), format!("Tensor[{}]", ts.len())));
                for (j, t) in ts.into_iter().enumerate() {
                    out.tensors.push((format!("{name}.{j}"), t));
                }
            }
            IValue::OptionalTensorList(ts) => {
                // A `None` item has no entry in the file.
                out.lists
                    .push((name.clone(), format!("Tensor?[{}]", ts.len())));
                for (j, t) in ts.into_iter().enumerate() {
                    if let Some(t) = t {
                        out.tensors.push((format!("{name}.{j}"), t));
                    }
                }
            }
            other => {
                let v = to_json(other, &name, &mut out.tensors);
                out.json.push((name, v));
            }
        }
    }
    out
}

fn json_float(f: f64) -> serde_json::Value {
    // JSON has no NaN or infinities: they are written as the strings Python's float() reads.
    match serde_json::Number::from_f64(f) {
        Some(n) => serde_json::Value::Number(n),
        None if f.is_nan() => "nan".into(),
        None if f > 0.0 => "inf".into(),
        None => "-inf".into(),
    }
}

/// The JSON form of a non-tensor return. Tensors nested in tuples or generic lists are added to
/// `tensors` under their path and appear in the JSON as `"@path"`.
fn to_json(v: IValue, path: &str, tensors: &mut Vec<(String, Tensor)>) -> serde_json::Value {
    use serde_json::Value;
    let strip = |s: String| s.trim_start_matches("torch.").to_owned();
    match v {
        IValue::None => Value::Null,
        IValue::Int(i) => i.into(),
        IValue::Double(f) => json_float(f),
        IValue::Bool(b) => b.into(),
        IValue::Str(s) => (*s).into(),
        IValue::ScalarType(t) => t.name().into(),
        IValue::Layout(l) => strip(l.to_string()).into(),
        IValue::MemoryFormat(m) => strip(m.to_string()).into(),
        IValue::Device(dev) => dev.to_string().into(),
        IValue::IntList(v) => v.as_slice().into(),
        IValue::DoubleList(v) => Value::Array(v.into_iter().map(json_float).collect()),
        IValue::BoolList(v) => v.as_slice().into(),
        IValue::Tensor(t) => {
            tensors.push((path.to_owned(), t));
            format!("@{path}").into()
        }
        IValue::TensorList(ts) => Value::Array(
            ts.into_iter()
                .enumerate()
                .map(|(j, t)| to_json(IValue::Tensor(t), &format!("{path}.{j}"), tensors))
                .collect(),
        ),
        IValue::OptionalTensorList(ts) => Value::Array(
            ts.into_iter()
                .enumerate()
                .map(|(j, t)| {
                    let v = t.map_or(IValue::None, IValue::Tensor);
                    to_json(v, &format!("{path}.{j}"), tensors)
                })
                .collect(),
        ),
        IValue::Tuple(items) | IValue::GenericList(items) => Value::Array(
            items
                .into_iter()
                .enumerate()
                .map(|(j, x)| to_json(x, &format!("{path}.{j}"), tensors))
                .collect(),
        ),
        // Generators, and whatever the dispatcher boxes in the future: their printed form.
        other => other.to_string().into(),
    }
}

/// `{"out1":3,...}` with the keys in return order.
pub(super) fn json_object(entries: &[(String, serde_json::Value)]) -> String {
    let body: Vec<String> = entries
        .iter()
        .map(|(k, v)| format!("{}:{v}", serde_json::Value::from(k.as_str())))
        .collect();
    format!("{{{}}}", body.join(","))
}

/// Writes the returns and then `extra` tensors (the gradients of `--backward`, `grad.NAME`) to
/// the file `output` (Note [Output files]) or prints them, then the JSON object (see Note
/// [switchboard call]).
pub(super) fn write_outputs(
    op_name: &str,
    returns: Stack,
    extra: Vec<(String, Tensor)>,
    output: Option<&Path>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<(), CallError> {
    let mut out = collect_outputs(returns);
    out.tensors.extend(extra);
    match output {
        Some(path) => {
            let refs: Vec<(&str, &Tensor)> =
                out.tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
            let mut meta = HashMap::from([("operator".to_owned(), op_name.to_owned())]);
            meta.extend(out.lists.iter().cloned());
            let failed = |message: String| CallError::Output {
                path: path.display().to_string(),
                message: one_line(&message),
            };
            let bytes = save_safetensors(&refs, Some(meta)).map_err(|e| failed(e.to_string()))?;
            // No inputs to refuse: the input file was read whole before, so `--out` may
            // replace it (Note [Output files]).
            let written = write_output_file(path, &bytes, &[])
                .map_err(|e| failed(format!("cannot write it: {e}")))?;
            write!(stderr, "{}", written.note())?;
        }
        None => {
            for (name, t) in &out.tensors {
                writeln!(stdout, "{name} = {t}")?;
            }
        }
    }
    if output.is_some() || !out.json.is_empty() {
        writeln!(stdout, "{}", json_object(&out.json))?;
    }
    Ok(())
}
