//! The backward node types and their formula functions (PyTorch's
//! `gen_autograd_functions.py`): what each node saves, and how a formula reads it back.

use super::*;

/// How a schema type is saved in a node, and how a formula reads it back.
pub(super) struct ValueForm {
    /// The field's type.
    pub(super) field: String,
    /// The saving expression, `{}` standing for the kernel parameter.
    pub(super) save: &'static str,
    /// The binding expression, `{}` standing for the field (`saved_.NAME`).
    pub(super) bind: &'static str,
}

pub(super) fn value_form(t: &Type) -> Option<ValueForm> {
    let copy = |field: &str| ValueForm {
        field: field.to_owned(),
        save: "{}",
        bind: "{}",
    };
    Some(match t {
        Type::Scalar => ValueForm {
            field: "Scalar".into(),
            save: "{}.get()",
            bind: "{}",
        },
        Type::Int | Type::SymInt => copy("i64"),
        Type::Float => copy("f64"),
        Type::Bool => copy("bool"),
        Type::ScalarType => copy("ScalarType"),
        Type::Layout => copy("Layout"),
        Type::Device => copy("Device"),
        Type::MemoryFormat => copy("MemoryFormat"),
        Type::Str => ValueForm {
            field: "String".into(),
            save: "{}.to_owned()",
            bind: "{}.as_str()",
        },
        Type::List(e) => match &**e {
            Type::Int | Type::SymInt => ValueForm {
                field: "SavedInts".into(),
                save: "SavedInts::from_slice({})",
                bind: "&{}[..]",
            },
            Type::Bool => ValueForm {
                field: "Vec<bool>".into(),
                save: "{}.to_vec()",
                bind: "&{}[..]",
            },
            Type::Float => ValueForm {
                field: "Vec<f64>".into(),
                save: "{}.to_vec()",
                bind: "&{}[..]",
            },
            _ => return None,
        },
        Type::Optional(e) => match &**e {
            Type::Scalar
            | Type::Int
            | Type::SymInt
            | Type::Float
            | Type::Bool
            | Type::ScalarType
            | Type::Layout
            | Type::Device
            | Type::MemoryFormat => {
                let inner = value_form(e)?;
                ValueForm {
                    field: format!("Option<{}>", inner.field),
                    save: "{}",
                    bind: "{}",
                }
            }
            Type::Str => ValueForm {
                field: "Option<String>".into(),
                save: "{}.map(str::to_owned)",
                bind: "{}.as_deref()",
            },
            Type::List(l) if matches!(**l, Type::Int | Type::SymInt) => ValueForm {
                field: "Option<SavedInts>".into(),
                save: "{}.map(SavedInts::from_slice)",
                bind: "{}.as_deref()",
            },
            _ => return None,
        },
        _ => return None,
    })
}

/// What a node field holds.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum FieldKind {
    /// A tensor argument (`Tensor`, `Tensor?`, `Tensor[]`).
    TensorArg,
    /// A non-tensor argument.
    Value,
    /// Output number `nr`.
    Output(usize),
    /// A value derived from a tensor argument or an output.
    Derived(Derived),
}

/// One field of a node.
#[derive(Clone, Debug)]
pub(super) struct Field {
    /// The schema name of the argument or output it comes from.
    pub(super) source: String,
    pub(super) kind: FieldKind,
    /// The field's Rust name.
    pub(super) ident: String,
    /// When only one gradient line uses it: the edges of that line's inputs (saved only when
    /// one of them needs a gradient, PyTorch's `should_compute_output` guard).
    pub(super) guard: Option<Vec<usize>>,
}

/// A node type to emit.
pub(super) struct NodeSpec<'a> {
    pub(super) d: &'a Derivative,
    /// The differentiable inputs (edges), in schema order.
    pub(super) inputs: Vec<&'a Argument>,
    /// The single differentiable tensor-list input, if the node has one.
    pub(super) list: Option<&'a Argument>,
    pub(super) fields: Vec<Field>,
}

pub(super) fn arg<'a>(d: &'a Derivative, name: &str) -> Option<&'a Argument> {
    d.schema.arguments().iter().find(|a| a.name() == name)
}

pub(super) fn output_index(d: &Derivative, name: &str) -> Option<usize> {
    output_names(&d.schema)
        .iter()
        .position(|names| names.iter().any(|n| n == name))
}

pub(super) fn is_list(t: &Type) -> bool {
    matches!(t, Type::List(e) if **e == Type::Tensor)
}

/// A `Tensor?[]` (the `indices` of `index.Tensor` and `index_put`).
pub(super) fn is_optional_list(t: &Type) -> bool {
    matches!(t, Type::List(e) if is_optional_tensor(e))
}

pub(super) fn is_optional_tensor(t: &Type) -> bool {
    matches!(t, Type::Optional(e) if **e == Type::Tensor)
}

impl<'a> NodeSpec<'a> {
    pub(super) fn new(d: &'a Derivative) -> Result<NodeSpec<'a>, String> {
        let inputs = d.differentiable_inputs();
        let list = inputs.iter().copied().find(|a| is_list(a.ty()));
        if list.is_some() && inputs.len() != 1 {
            return Err(format!(
                "{}: a differentiable tensor list must be the only differentiable input",
                d.schema
            ));
        }
        for a in &inputs {
            if !a.ty().is_tensor_like() {
                return Err(format!(
                    "{}: `{}` has a formula but is not a tensor",
                    d.schema,
                    a.name()
                ));
            }
        }
        let edge_of = |name: &str| inputs.iter().position(|a| a.name() == name);
        // Which lines use each field.
        let mut uses: BTreeMap<(String, FieldKind), BTreeSet<usize>> = BTreeMap::new();
        for (li, f) in d.formulas.iter().enumerate() {
            for v in &f.analysis.vars {
                if matches!(v.as_str(), "grad" | "grads" | "grad_input_mask") {
                    continue;
                }
                let kind = if let Some(nr) = output_index(d, v) {
                    FieldKind::Output(nr)
                } else if arg(d, v).is_some_and(|a| a.ty().is_tensor_like()) {
                    FieldKind::TensorArg
                } else {
                    FieldKind::Value
                };
                // An output may be named by `resultN` and by its own name: one field.
                let source = match kind {
                    FieldKind::Output(nr) => format!("result{nr}"),
                    _ => v.clone(),
                };
                uses.entry((source, kind)).or_default().insert(li);
            }
            for (v, dv) in &f.analysis.derived {
                let source = match output_index(d, v) {
                    Some(nr) => format!("result{nr}"),
                    None => v.clone(),
                };
                uses.entry((source, FieldKind::Derived(*dv)))
                    .or_default()
                    .insert(li);
            }
        }
        let mut fields = Vec::new();
        for ((source, kind), lines) in uses {
            let ident = match &kind {
                FieldKind::Derived(dv) => derived_ident(&source, *dv),
                _ => var_ident(&source),
            };
            // Only what costs to save is guarded: tensors, and sizes and strides.
            let guardable = match &kind {
                FieldKind::TensorArg => arg(d, &source).is_some_and(|a| *a.ty() == Type::Tensor),
                FieldKind::Output(_) => false,
                FieldKind::Derived(Derived::Sizes | Derived::Strides) => {
                    arg(d, &source).is_some_and(|a| *a.ty() == Type::Tensor)
                }
                _ => false,
            };
            // A node with one input exists only when that input needs a gradient.
            let guard = if guardable && lines.len() == 1 && list.is_none() && inputs.len() > 1 {
                let li = *lines.iter().next().expect("one line");
                let edges: Option<Vec<usize>> =
                    d.formulas[li].inputs.iter().map(|n| edge_of(n)).collect();
                edges
            } else {
                None
            };
            fields.push(Field {
                source,
                kind,
                ident,
                guard,
            });
        }
        // Check the types once, here.
        for f in &fields {
            match &f.kind {
                FieldKind::Value => {
                    let a = arg(d, &f.source).expect("a value field is an argument");
                    if value_form(a.ty()).is_none() {
                        return Err(format!(
                            "{}: formulas cannot read `{}` of type {}",
                            d.schema,
                            a.name(),
                            a.ty()
                        ));
                    }
                }
                FieldKind::Derived(dv) => {
                    if let Some(a) = arg(d, &f.source) {
                        let ok = match dv {
                            Derived::ListSizes | Derived::ListScalarTypes => is_list(a.ty()),
                            Derived::Sizes => *a.ty() == Type::Tensor || is_optional_tensor(a.ty()),
                            _ => *a.ty() == Type::Tensor,
                        };
                        if !ok {
                            return Err(format!(
                                "{}: `{}.{}` is not available for {}",
                                d.schema,
                                a.name(),
                                dv.suffix(),
                                a.ty()
                            ));
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(NodeSpec {
            d,
            inputs,
            list,
            fields,
        })
    }

    pub(super) fn field_type(&self, f: &Field) -> String {
        let base = match &f.kind {
            FieldKind::TensorArg => {
                let a = arg(self.d, &f.source).expect("tensor field");
                match a.ty() {
                    Type::Tensor => "SavedTensor".to_owned(),
                    t if is_list(t) => "Vec<SavedTensor>".to_owned(),
                    t if is_optional_list(t) => "Vec<Option<SavedTensor>>".to_owned(),
                    _ => "Option<SavedTensor>".to_owned(),
                }
            }
            FieldKind::Output(_) => "Option<SavedTensor>".to_owned(),
            FieldKind::Value => {
                let a = arg(self.d, &f.source).expect("value field");
                value_form(a.ty()).expect("checked").field
            }
            FieldKind::Derived(dv) => {
                let optional = arg(self.d, &f.source).is_some_and(|a| is_optional_tensor(a.ty()));
                let t = match dv {
                    Derived::Sizes | Derived::Strides => "SavedInts",
                    Derived::StorageOffset | Derived::Numel => "i64",
                    Derived::Dim => "usize",
                    Derived::ScalarType => "ScalarType",
                    Derived::Device => "Device",
                    Derived::ListSizes => "Vec<Vec<i64>>",
                    Derived::ListScalarTypes => "Vec<ScalarType>",
                };
                if optional {
                    format!("Option<{t}>")
                } else {
                    t.to_owned()
                }
            }
        };
        if f.guard.is_some() {
            format!("Option<{base}>")
        } else {
            base
        }
    }

    /// The formula function's name (`add_backward0`).
    pub(super) fn formula_fn(&self) -> String {
        snake(node_type(&self.d.node))
    }
}

pub(super) fn snake(camel: &str) -> String {
    let mut s = String::new();
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                s.push('_');
            }
            s.push(c.to_ascii_lowercase());
        } else {
            s.push(c);
        }
    }
    s
}

/// The Rust struct name of a node (its name, or the last path segment of a name such as
/// `CopyBackwards`).
pub(super) fn node_type(name: &str) -> &str {
    name.rsplit("::").next().unwrap_or(name)
}

/// Emits the node type and its formula function.
pub(super) fn emit_node(w: &mut String, n: &NodeSpec<'_>) -> Result<(), String> {
    let d = n.d;
    let ty = node_type(&d.node);
    writeln!(
        w,
        "/// The backward node of `{}` (and of its in-place form).\npub(crate) struct {ty} {{",
        d.schema
            .to_string()
            .trim_start_matches("aten::")
            .replace('`', "'")
    )
    .unwrap();
    for f in &n.fields {
        writeln!(w, "    pub(crate) {}: {},", f.ident, n.field_type(f)).unwrap();
    }
    writeln!(w, "}}\n").unwrap();

    let fun = n.formula_fn();
    let n_inputs = if n.list.is_some() {
        "needs_.len()".to_owned()
    } else {
        n.inputs.len().to_string()
    };
    writeln!(
        w,
        "#[allow(unused_variables, clippy::needless_borrow, clippy::redundant_locals)]\npub(crate) fn {fun}(saved_: &{ty}, node_: &Arc<dyn Node>, grads_: &[Option<Tensor>], needs_: &[bool]) -> Result<Vec<Option<Tensor>>> {{\n    let mut grad_inputs_: Vec<Option<Tensor>> = vec![None; {n_inputs}];"
    )
    .unwrap();
    for line in &d.formulas {
        let edges: Vec<usize> = if n.list.is_some() {
            Vec::new()
        } else {
            line.inputs
                .iter()
                .map(|name| {
                    n.inputs
                        .iter()
                        .position(|a| a.name() == name)
                        .expect("a formula's input is differentiable")
                })
                .collect()
        };
        let cond = if n.list.is_some() {
            "needs_.iter().any(|n| *n)".to_owned()
        } else {
            edges
                .iter()
                .map(|e| format!("needs_[{e}]"))
                .collect::<Vec<_>>()
                .join(" || ")
        };
        writeln!(w, "    if {cond} {{").unwrap();
        // Bindings.
        let a = &line.analysis;
        if a.vars.contains("grad") {
            writeln!(w, "        let grad = grad_of(grads_)?;").unwrap();
        }
        if a.vars.contains("grads") {
            writeln!(
                w,
                "        let grads: Vec<Option<&Tensor>> = grads_.iter().map(Option::as_ref).collect();"
            )
            .unwrap();
        }
        if a.vars.contains("grad_input_mask") {
            if n.list.is_some() {
                writeln!(w, "        let grad_input_mask = [true];").unwrap();
            } else {
                let m: Vec<String> = edges.iter().map(|e| format!("needs_[{e}]")).collect();
                writeln!(w, "        let grad_input_mask = [{}];", m.join(", ")).unwrap();
            }
        }
        for f in &n.fields {
            let used = match &f.kind {
                FieldKind::Derived(dv) => {
                    let src = f.source.clone();
                    a.derived.iter().any(|(v, x)| {
                        x == dv
                            && (*v == src
                                || output_index(d, v)
                                    .is_some_and(|nr| format!("result{nr}") == src))
                    })
                }
                _ => a.vars.iter().any(|v| {
                    *v == f.source
                        || output_index(d, v).is_some_and(|nr| format!("result{nr}") == f.source)
                }),
            };
            if !used {
                continue;
            }
            let field = if f.guard.is_some() {
                format!("guarded(&saved_.{})?", f.ident)
            } else {
                format!("saved_.{}", f.ident)
            };
            // The names a formula may use for this field.
            let mut names: Vec<String> = match &f.kind {
                FieldKind::Derived(dv) => a
                    .derived
                    .iter()
                    .filter(|(v, x)| {
                        x == dv
                            && (*v == f.source
                                || output_index(d, v)
                                    .is_some_and(|nr| format!("result{nr}") == f.source))
                    })
                    .map(|(v, x)| derived_ident(v, *x))
                    .collect(),
                FieldKind::Output(nr) => output_names(&d.schema)[*nr]
                    .iter()
                    .filter(|name| a.vars.contains(*name))
                    .map(|name| var_ident(name))
                    .collect(),
                _ => vec![f.ident.clone()],
            };
            names.dedup();
            let first = names[0].clone();
            match &f.kind {
                FieldKind::TensorArg => {
                    let t = arg(d, &f.source).expect("tensor field").ty();
                    if *t == Type::Tensor {
                        writeln!(w, "        let {first} = &{field}.unpack(node_)?;").unwrap();
                    } else if is_list(t) {
                        writeln!(
                            w,
                            "        let {first}_list_ = unpack_list(&{field}, node_)?;\n        let {first} = &{first}_list_[..];"
                        )
                        .unwrap();
                    } else if is_optional_list(t) {
                        writeln!(
                            w,
                            "        let {first}_list_ = unpack_optional_list(&{field}, node_)?;\n        let {first} = &{first}_list_[..];"
                        )
                        .unwrap();
                    } else {
                        writeln!(
                            w,
                            "        let {first}_opt_ = unpack_optional(&{field}, node_)?;\n        let {first} = {first}_opt_.as_ref();"
                        )
                        .unwrap();
                    }
                }
                FieldKind::Output(_) => {
                    writeln!(
                        w,
                        "        let {first} = &guarded(&saved_.{})?.unpack(node_)?;",
                        f.ident
                    )
                    .unwrap();
                }
                FieldKind::Value => {
                    let t = arg(d, &f.source).expect("value field").ty();
                    let form = value_form(t).expect("checked");
                    writeln!(
                        w,
                        "        let {first} = {};",
                        form.bind.replace("{}", &field)
                    )
                    .unwrap();
                }
                FieldKind::Derived(dv) => {
                    let optional = arg(d, &f.source).is_some_and(|a| is_optional_tensor(a.ty()));
                    let e = match dv {
                        Derived::Sizes | Derived::Strides if optional => {
                            format!("{field}.as_deref()")
                        }
                        Derived::Sizes
                        | Derived::Strides
                        | Derived::ListSizes
                        | Derived::ListScalarTypes => format!("&{field}[..]"),
                        _ if f.guard.is_some() => format!("*{field}"),
                        _ => field.clone(),
                    };
                    writeln!(w, "        let {first} = {e};").unwrap();
                }
            }
            for other in names.iter().skip(1) {
                writeln!(w, "        let {other} = {first};").unwrap();
            }
        }
        // The formula.
        if n.list.is_some() {
            writeln!(
                w,
                "        let list_grads_ = into_grads({}, grad_inputs_.len())?;\n        for (slot_, (g_, need_)) in grad_inputs_.iter_mut().zip(list_grads_.into_iter().zip(needs_)) {{\n            if *need_ {{\n                *slot_ = g_;\n            }}\n        }}",
                a.code
            )
            .unwrap();
        } else if edges.len() == 1 {
            writeln!(
                w,
                "        grad_inputs_[{}] = into_grad({})?;",
                edges[0], a.code
            )
            .unwrap();
        } else {
            writeln!(
                w,
                "        let line_grads_ = into_grads({}, {})?;",
                a.code,
                edges.len()
            )
            .unwrap();
            for (j, e) in edges.iter().enumerate() {
                writeln!(
                    w,
                    "        if needs_[{e}] {{\n            grad_inputs_[{e}] = line_grads_[{j}].clone();\n        }}"
                )
                .unwrap();
            }
        }
        writeln!(w, "    }}").unwrap();
    }
    writeln!(w, "    Ok(grad_inputs_)\n}}\n").unwrap();
    Ok(())
}
