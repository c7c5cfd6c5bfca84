//! Printing a graph as readable code, in the style of `torch.fx`'s generated code.

use std::collections::HashMap;
use std::fmt::{self, Write};

use switchboard_dispatcher::{IValue, OperatorHandle};
use switchboard_tensor::ScalarType;

use crate::graph::Graph;
use crate::node::{Arg, NodeKind, TensorMeta, Value};

/// `f32`, `i64`, `b8`...: the short dtype names of FX's annotations.
pub fn short_dtype(dtype: ScalarType) -> &'static str {
    dtype.abbreviation()
}

/// `f32[4, 3]`, with the strides appended when they are not contiguous (`f32[3, 4][1, 3]`)
/// and the storage offset when it is not 0 (`+4`).
pub fn meta_annotation(m: &TensorMeta) -> String {
    let mut s = format!("{}{}", short_dtype(m.dtype), list(&m.sizes));
    if !m.is_contiguous() {
        s.push_str(&list(&m.strides));
    }
    if m.storage_offset != 0 {
        let _ = write!(s, "+{}", m.storage_offset);
    }
    s
}

fn list(v: &[i64]) -> String {
    let items: Vec<String> = v.iter().map(i64::to_string).collect();
    format!("[{}]", items.join(", "))
}

/// `aten.add.Tensor`, `aten.relu.default`: an operator as FX names it.
pub fn op_path(op: &OperatorHandle) -> String {
    let name = op.name();
    let overload = if name.overload_name().is_empty() {
        "default"
    } else {
        name.overload_name()
    };
    format!("{}.{overload}", name.name().replace("::", "."))
}

/// A Python-like rendering of a constant.
pub fn const_code(c: &IValue) -> String {
    match c {
        IValue::Str(s) => format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'")),
        IValue::Device(d) => format!("device('{d}')"),
        IValue::Double(v) if v.is_infinite() => if *v > 0.0 { "inf" } else { "-inf" }.into(),
        IValue::Double(v) if v.is_nan() => "nan".into(),
        IValue::GenericList(vs) => {
            format!(
                "[{}]",
                vs.iter().map(const_code).collect::<Vec<_>>().join(", ")
            )
        }
        IValue::Tuple(vs) => {
            let items: Vec<String> = vs.iter().map(const_code).collect();
            if items.len() == 1 {
                format!("({},)", items[0])
            } else {
                format!("({})", items.join(", "))
            }
        }
        c => c.to_string(),
    }
}

/// The names printing uses: `argN` for inputs, the operator's name (numbered from its second
/// use: `mm`, `mm_1`) for calls.
pub(crate) fn node_names(g: &Graph) -> Vec<String> {
    let mut used: HashMap<String, usize> = HashMap::new();
    g.nodes()
        .map(|n| match n.kind() {
            NodeKind::Input { index } => format!("arg{index}"),
            NodeKind::Call { op } => {
                let base = op.name().name();
                let base = base.rsplit("::").next().unwrap_or(base);
                let base = if base.starts_with(|c: char| c.is_ascii_digit()) {
                    format!("_{base}")
                } else {
                    base.to_string()
                };
                let k = used.entry(base.clone()).or_insert(0);
                let name = if *k == 0 {
                    base.clone()
                } else {
                    format!("{base}_{k}")
                };
                *k += 1;
                name
            }
        })
        .collect()
}

/// The name of value `v` given the node names: `mm`, or `max_1[0]` for one output of a
/// node with several.
pub(crate) fn value_name(g: &Graph, names: &[String], v: Value) -> String {
    if g.num_outputs(v.node.index()) == 1 {
        names[v.node.index()].clone()
    } else {
        format!("{}[{}]", names[v.node.index()], v.output)
    }
}

impl fmt::Display for Graph {
    /// The graph as code: one line per call, annotated with the metadata of its result(s),
    /// keyword-only arguments by name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = node_names(self);
        let params: Vec<String> = self
            .inputs
            .iter()
            .map(|id| {
                format!(
                    "{}: \"{}\"",
                    names[id.index()],
                    meta_annotation(&self.node(*id).outputs()[0].meta)
                )
            })
            .collect();
        writeln!(f, "def graph({}):", params.join(", "))?;
        for (i, n) in self.nodes().enumerate() {
            let Some(op) = n.op() else {
                continue;
            };
            let args = n.args();
            let schema = op.schema();
            let mut parts = Vec::with_capacity(args.len());
            for (k, a) in args.iter().enumerate() {
                let code = match a {
                    Arg::Value(v) => value_name(self, &names, *v),
                    Arg::Values(vs) => format!(
                        "[{}]",
                        vs.iter()
                            .map(|v| value_name(self, &names, *v))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    Arg::OptionalValues(vs) => format!(
                        "[{}]",
                        vs.iter()
                            .map(|v| v.map_or("None".into(), |v| value_name(self, &names, v)))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    Arg::Const(c) => const_code(c),
                    Arg::Number(s) => const_code(&Arg::number_ivalue(*s)),
                };
                let kw = schema
                    .as_ref()
                    .and_then(|s| s.schema.arguments().get(k).cloned())
                    .filter(|a| a.kwarg_only());
                match kw {
                    Some(a) => parts.push(format!("{}={code}", a.name())),
                    None => parts.push(code),
                }
            }
            let annotation = match n.outputs().len() {
                1 => format!("\"{}\"", meta_annotation(&n.outputs()[0].meta)),
                _ => format!(
                    "\"({})\"",
                    n.outputs()
                        .iter()
                        .map(|o| meta_annotation(&o.meta))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            writeln!(
                f,
                "    {}: {annotation} = {}({})",
                names[i],
                op_path(op),
                parts.join(", ")
            )?;
        }
        let outs: Vec<String> = self
            .outputs
            .iter()
            .map(|v| value_name(self, &names, *v))
            .collect();
        if outs.len() == 1 {
            writeln!(f, "    return ({},)", outs[0])
        } else {
            writeln!(f, "    return ({})", outs.join(", "))
        }
    }
}
