//! Exporting a graph: JSON (for tools) and DOT (for Graphviz).

use serde_json::{json, Value as Json};

use switchboard_dispatcher::IValue;

use crate::graph::Graph;
use crate::node::{Arg, NodeKind, Source, TensorMeta};
use crate::print::{const_code, meta_annotation, node_names, value_name};

fn meta_json(m: &TensorMeta) -> Json {
    json!({
        "dtype": m.dtype.name(),
        "shape": m.sizes.as_slice(),
        "strides": m.strides.as_slice(),
        "storage_offset": m.storage_offset,
        "device": m.device.to_string(),
    })
}

fn const_json(c: &IValue) -> Json {
    match c {
        IValue::None => Json::Null,
        IValue::Int(v) => json!(v),
        IValue::Double(v) if v.is_finite() => json!(v),
        IValue::Bool(v) => json!(v),
        IValue::Str(s) => json!(s.as_str()),
        IValue::IntList(v) => json!(v.as_slice()),
        IValue::BoolList(v) => json!(v.as_slice()),
        IValue::DoubleList(v) if v.iter().all(|x| x.is_finite()) => json!(v.as_slice()),
        other => json!({ "code": const_code(other) }),
    }
}

impl Graph {
    /// The graph as JSON, the one form every graph is written in (a lazy step's, a trace's):
    /// `inputs` (name and metadata: `dtype`, `shape`, `strides`, `storage_offset`, `device`),
    /// `constants` (the indices of the inputs that hold tensors the graph captured rather than
    /// tensors a caller passes: empty here, a trace fills it in), `nodes` in execution order
    /// (`name`, `op`, `schema`, `inputs`: the arguments in schema order, each named and either
    /// a graph value, `{"name": "self", "value": "t"}`, or a constant, `{"name": "beta",
    /// "const": 1}`; `outputs`: the metadata of each output and its `source`), and `outputs`
    /// (value names).
    ///
    /// ```
    /// # use switchboard_graph::{Graph, TensorMeta};
    /// # use switchboard_tensor::{ScalarType, Tensor};
    /// let mut g = Graph::new();
    /// let x = g.add_input(TensorMeta::of(&Tensor::zeros(&[2], ScalarType::Float).unwrap()));
    /// g.set_outputs(vec![x]).unwrap();
    /// let j = g.to_json();
    /// assert_eq!(j["inputs"][0]["name"], "arg0");
    /// assert_eq!(j["inputs"][0]["shape"], serde_json::json!([2]));
    /// assert_eq!(j["outputs"][0], "arg0");
    /// ```
    pub fn to_json(&self) -> Json {
        let names = node_names(self);
        let inputs: Vec<Json> = self
            .inputs
            .iter()
            .map(|id| {
                let mut m = meta_json(&self.node(*id).outputs()[0].meta);
                m["name"] = json!(names[id.index()]);
                m
            })
            .collect();
        let mut nodes = Vec::new();
        for (i, n) in self.nodes().enumerate() {
            let Some(op) = n.op() else {
                continue;
            };
            let schema = op.schema();
            let arg_names: Vec<String> = match &schema {
                Some(s) => s
                    .schema
                    .arguments()
                    .iter()
                    .map(|a| a.name().to_string())
                    .collect(),
                None => Vec::new(),
            };
            let args: Vec<Json> = n
                .args()
                .iter()
                .enumerate()
                .map(|(k, a)| {
                    let value = match a {
                        Arg::Value(v) => json!({ "value": value_name(self, &names, *v) }),
                        Arg::Values(vs) => json!({
                            "values": vs.iter().map(|v| value_name(self, &names, *v)).collect::<Vec<_>>()
                        }),
                        Arg::OptionalValues(vs) => json!({
                            "values": vs.iter().map(|v| v.map(|v| value_name(self, &names, v))).collect::<Vec<_>>()
                        }),
                        Arg::Const(c) => json!({ "const": const_json(c) }),
                        Arg::Number(s) => json!({ "number": const_json(&Arg::number_ivalue(*s)) }),
                    };
                    let mut value = value;
                    value["name"] = json!(arg_names.get(k).cloned().unwrap_or_else(|| format!("arg{k}")));
                    value
                })
                .collect();
            let outputs: Vec<Json> = n
                .outputs()
                .iter()
                .map(|o| {
                    let mut m = meta_json(&o.meta);
                    m["source"] = match o.source {
                        Source::Return(r) => json!({ "return": r }),
                        Source::ReturnItem(r, j) => json!({ "return": r, "item": j }),
                        Source::Argument(a) => json!({ "argument": a }),
                    };
                    m
                })
                .collect();
            nodes.push(json!({
                "name": names[i],
                "op": op.name().to_string(),
                "schema": schema.map(|s| s.schema.to_string()),
                "inputs": args,
                "outputs": outputs,
            }));
        }
        let outputs: Vec<String> = self
            .outputs
            .iter()
            .map(|v| value_name(self, &names, *v))
            .collect();
        json!({ "inputs": inputs, "constants": [], "nodes": nodes, "outputs": outputs })
    }

    /// The graph in Graphviz's DOT language: a box per call (name, operator, constant
    /// arguments, output metadata), an ellipse per input, an edge per value read (labelled
    /// with the argument's name), and the outputs marked.
    ///
    /// ```
    /// # use switchboard_graph::{Graph, TensorMeta};
    /// # use switchboard_tensor::{ScalarType, Tensor};
    /// let mut g = Graph::new();
    /// let x = g.add_input(TensorMeta::of(&Tensor::zeros(&[2], ScalarType::Float).unwrap()));
    /// g.set_outputs(vec![x]).unwrap();
    /// assert!(g.to_dot().starts_with("digraph graph {"));
    /// ```
    pub fn to_dot(&self) -> String {
        let names = node_names(self);
        let mut out =
            String::from("digraph graph {\n  rankdir=TB;\n  node [fontname=\"monospace\"];\n");
        for (i, n) in self.nodes().enumerate() {
            let metas: Vec<String> = n
                .outputs()
                .iter()
                .map(|o| meta_annotation(&o.meta))
                .collect();
            match n.kind() {
                NodeKind::Input { .. } => out.push_str(&format!(
                    "  n{i} [shape=ellipse, label=\"{}\\n{}\"];\n",
                    dot_escape(&names[i]),
                    dot_escape(&metas.join(", "))
                )),
                NodeKind::Call { op } => {
                    let args = n.args();
                    let schema = op.schema();
                    let consts: Vec<String> = args
                        .iter()
                        .enumerate()
                        .filter_map(|(k, a)| {
                            let code = match a {
                                Arg::Const(c) => const_code(c),
                                Arg::Number(s) => const_code(&Arg::number_ivalue(*s)),
                                _ => return None,
                            };
                            let name = schema
                                .as_ref()
                                .and_then(|s| {
                                    s.schema.arguments().get(k).map(|a| a.name().to_string())
                                })
                                .unwrap_or_else(|| format!("arg{k}"));
                            Some(format!("{name}={code}"))
                        })
                        .collect();
                    let mut label = format!(
                        "{}\\n{}",
                        dot_escape(&names[i]),
                        dot_escape(&op.name().to_string())
                    );
                    if !consts.is_empty() {
                        label.push_str(&format!("\\n{}", dot_escape(&consts.join(", "))));
                    }
                    label.push_str(&format!("\\n{}", dot_escape(&metas.join(", "))));
                    out.push_str(&format!("  n{i} [shape=box, label=\"{label}\"];\n"));
                    for (k, a) in args.iter().enumerate() {
                        let arg_name = schema
                            .as_ref()
                            .and_then(|s| s.schema.arguments().get(k).map(|a| a.name().to_string()))
                            .unwrap_or_default();
                        for v in a.values() {
                            out.push_str(&format!(
                                "  n{} -> n{i} [label=\"{}\"];\n",
                                v.node.0,
                                dot_escape(&arg_name)
                            ));
                        }
                    }
                }
            }
        }
        for (k, v) in self.outputs.iter().enumerate() {
            out.push_str(&format!(
                "  out{k} [shape=plaintext, label=\"output {k}\"];\n  n{} -> out{k};\n",
                v.node.0
            ));
        }
        out.push_str("}\n");
        out
    }
}

fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}
