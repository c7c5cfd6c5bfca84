//! The autograd crate's generated code (PyTorch's `gen_autograd_functions.py`,
//! `gen_variable_type.py` and `gen_inplace_or_view_type.py`): backward node types, the Autograd
//! kernel of every operator, the ADInplaceOrView kernels, and their registrations.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use switchboard_schema::{Argument, Type};

use crate::derivatives::{output_names, plan, AutogradKind, Derivative};
use crate::formula::{derived_ident, var_ident, Derived};
use crate::model::NativeFunction;
use crate::types::{return_type, RustArg};

// Note [Which kernel an operator gets]
// For every operator of native_functions.yaml (PyTorch's gen_variable_type):
// - CompositeImplicitAutograd: none; autograd records the operators its decomposition calls.
// - no tensor argument (factories): none; the Autograd keys never reach it.
// - `out=` overloads: a kernel that refuses inputs or outputs that require grad (grad mode
//   on), with PyTorch's message, and passes the call on.
// - a `derivatives.yaml` entry (an in-place operator without one takes its out-of-place
//   form's, matched by signature, as PyTorch does): a kernel that records the entry's node.
// - outputs never differentiable (`output_differentiability: [False]`, or PyTorch's
//   DONT_REQUIRE_DERIVATIVE list): a fallthrough, the key is skipped at no cost.
// - anything else (a kernel and no formula): a kernel recording a node that fails in
//   backward, naming the operator (PyTorch's autogradNotImplementedFallback), so that no
//   gradient is ever silently dropped.
// And an ADInplaceOrView kernel for every operator that is not CompositeImplicitAutograd and
// writes an argument (`Tensor(a!)`: bumps its version) or returns a view (`Tensor(a)`: records
// the base), read from the schema's alias annotations.

// Note [Generated kernel shape]
// Every generated Autograd kernel has the shape Note [Autograd fast path] (in the autograd
// crate) describes: an `#[inline(always)]` entry that tests the `requires_grad` flags of the
// tensors that matter and redispatches below autograd when none is set, and an
// `#[inline(never)]` recording function for the rest, which reads grad mode, checks, runs the
// operator below autograd and records the node through the autograd crate's one recorder.

/// How a schema type is saved in a node, and how a formula reads it back.
struct ValueForm {
    /// The field's type.
    field: String,
    /// The saving expression, `{}` standing for the kernel parameter.
    save: &'static str,
    /// The binding expression, `{}` standing for the field (`saved_.NAME`).
    bind: &'static str,
}

fn value_form(t: &Type) -> Option<ValueForm> {
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
enum FieldKind {
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
struct Field {
    /// The schema name of the argument or output it comes from.
    source: String,
    kind: FieldKind,
    /// The field's Rust name.
    ident: String,
    /// When only one gradient line uses it: the edges of that line's inputs (saved only when
    /// one of them needs a gradient, PyTorch's `should_compute_output` guard).
    guard: Option<Vec<usize>>,
}

/// A node type to emit.
struct NodeSpec<'a> {
    d: &'a Derivative,
    /// The differentiable inputs (edges), in schema order.
    inputs: Vec<&'a Argument>,
    /// The single differentiable tensor-list input, if the node has one.
    list: Option<&'a Argument>,
    fields: Vec<Field>,
}

fn arg<'a>(d: &'a Derivative, name: &str) -> Option<&'a Argument> {
    d.schema.arguments().iter().find(|a| a.name() == name)
}

fn output_index(d: &Derivative, name: &str) -> Option<usize> {
    output_names(&d.schema)
        .iter()
        .position(|names| names.iter().any(|n| n == name))
}

fn is_list(t: &Type) -> bool {
    matches!(t, Type::List(e) if **e == Type::Tensor)
}

fn is_optional_tensor(t: &Type) -> bool {
    matches!(t, Type::Optional(e) if **e == Type::Tensor)
}

impl<'a> NodeSpec<'a> {
    fn new(d: &'a Derivative) -> Result<NodeSpec<'a>, String> {
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

    fn field_type(&self, f: &Field) -> String {
        let base = match &f.kind {
            FieldKind::TensorArg => {
                let a = arg(self.d, &f.source).expect("tensor field");
                match a.ty() {
                    Type::Tensor => "SavedTensor".to_owned(),
                    t if is_list(t) => "Vec<SavedTensor>".to_owned(),
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
    fn formula_fn(&self) -> String {
        snake(node_type(&self.d.node))
    }
}

fn snake(camel: &str) -> String {
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
fn node_type(name: &str) -> &str {
    name.rsplit("::").next().unwrap_or(name)
}

/// Emits the node type and its formula function.
fn emit_node(w: &mut String, n: &NodeSpec<'_>) -> Result<(), String> {
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

/// A native function's kernel signature.
struct Sig {
    args: Vec<RustArg>,
    ret: String,
    /// The generated function's name, without `r#` (`where`, `add_scalar`).
    stem: String,
}

impl Sig {
    fn of(f: &NativeFunction) -> Result<Sig, String> {
        let args = f
            .schema
            .arguments()
            .iter()
            .map(RustArg::of)
            .collect::<Result<Vec<_>, String>>()
            .map_err(|e| format!("{}: {e}", f.schema_text))?;
        let ret = return_type(f.schema.returns()).map_err(|e| format!("{}: {e}", f.schema_text))?;
        // Kernel names: `add`, `add_scalar`, `add_inplace` (for `add_`), `where`.
        let name = f.api_name.trim_start_matches("r#");
        let stem = match name.strip_suffix('_') {
            Some(s) => format!("{s}_inplace"),
            None => name.to_owned(),
        };
        Ok(Sig { args, ret, stem })
    }

    fn params(&self) -> String {
        self.args
            .iter()
            .map(|a| {
                let p = if a.param == "Scalar" {
                    "PackedScalar"
                } else {
                    a.param.as_str()
                };
                format!(", {}: {p}", a.name)
            })
            .collect()
    }

    fn call(&self, f: &NativeFunction, ks: &str) -> String {
        let names: Vec<&str> = self.args.iter().map(|a| a.name.as_str()).collect();
        let sep = if names.is_empty() { "" } else { ", " };
        format!("rd::{}({ks}{sep}{})", f.api_name, names.join(", "))
    }
}

/// The `requires_grad` flags test of some arguments (Note [Generated kernel shape]).
fn hint_expr(args: &[&Argument], sig: &Sig, f: &NativeFunction) -> String {
    let parts: Vec<String> = args
        .iter()
        .map(|a| {
            let i = f
                .schema
                .argument_index(a.name())
                .expect("an argument of the schema");
            let name = &sig.args[i].name;
            match a.ty() {
                Type::Tensor => format!("hint({name})"),
                t if is_list(t) => format!("hint_list({name})"),
                t if is_optional_tensor(t) => format!("hint_optional({name})"),
                t => unreachable!("not a tensor type: {t}"),
            }
        })
        .collect();
    if parts.is_empty() {
        "false".to_owned()
    } else {
        parts.join(" | ")
    }
}

/// The `&[Option<&Tensor>]` of some tensor arguments (a list spreads into its elements).
fn edges_expr(args: &[&Argument], sig: &Sig, f: &NativeFunction) -> String {
    if let [a] = args {
        if is_list(a.ty()) {
            let i = f.schema.argument_index(a.name()).expect("argument");
            return format!(
                "&{}.iter().map(Some).collect::<Vec<Option<&Tensor>>>()",
                sig.args[i].name
            );
        }
    }
    let parts: Vec<String> = args
        .iter()
        .map(|a| {
            let i = f.schema.argument_index(a.name()).expect("argument");
            let name = &sig.args[i].name;
            if *a.ty() == Type::Tensor {
                format!("Some({name})")
            } else {
                name.clone()
            }
        })
        .collect();
    format!("&[{}]", parts.join(", "))
}

/// The tensor arguments of a schema.
fn tensor_args(f: &NativeFunction) -> Vec<&Argument> {
    f.schema
        .arguments()
        .iter()
        .filter(|a| a.ty().is_tensor_like())
        .collect()
}

/// Output bindings of a forward call: `result` or `(result0, result1)`.
fn result_pattern(f: &NativeFunction) -> (String, Vec<String>) {
    let n = f.schema.returns().len();
    if n == 1 {
        ("result".to_owned(), vec!["result".to_owned()])
    } else {
        let names: Vec<String> = (0..n).map(|i| format!("result{i}")).collect();
        (format!("({})", names.join(", ")), names)
    }
}

/// The ADInplaceOrView kernel of a function, if it writes an argument or returns a view.
fn emit_inplace_or_view(
    w: &mut String,
    reg: &mut String,
    f: &NativeFunction,
) -> Result<(), String> {
    let written: Vec<usize> = f.schema.written_arguments();
    let view = f
        .schema
        .returns()
        .iter()
        .any(|r| r.alias_info().is_some_and(|a| !a.is_write()));
    if written.is_empty() && !view {
        return Ok(());
    }
    if view && f.schema.returns().len() != 1 {
        return Err(format!(
            "{}: a view operator must return one tensor",
            f.schema_text
        ));
    }
    let sig = Sig::of(f)?;
    let stem = &sig.stem;
    let call = sig.call(f, "ks & AFTER_ADIV");
    writeln!(
        w,
        "pub(super) fn {stem}_inplace_or_view(ks: DispatchKeySet{}) -> Result<{}> {{\n    let result = {{\n        let _guard = AutoDispatchBelowADInplaceOrView::new();\n        {call}?\n    }};",
        sig.params(),
        sig.ret
    )
    .unwrap();
    for i in &written {
        let a = &sig.args[*i];
        if a.param == "&Tensor" {
            writeln!(w, "    {}.bump_version();", a.name).unwrap();
        } else if a.param == "&[Tensor]" {
            writeln!(
                w,
                "    for t in {} {{\n        t.bump_version();\n    }}",
                a.name
            )
            .unwrap();
        } else {
            return Err(format!(
                "{}: written argument of type {}",
                f.schema_text, a.param
            ));
        }
    }
    if view {
        let base = f
            .schema
            .arguments()
            .iter()
            .position(|a| a.alias_info().is_some_and(|i| !i.is_write()))
            .ok_or_else(|| format!("{}: a view without an aliased input", f.schema_text))?;
        writeln!(w, "    Ok(as_view({}, result))\n}}\n", sig.args[base].name).unwrap();
    } else {
        writeln!(w, "    Ok(result)\n}}\n").unwrap();
    }
    writeln!(
        reg,
        "    lib.impl_with_static_debug({:?}, None, KernelFunction::from_fn_with_keys(inplace_or_view_kernels::{stem}_inplace_or_view), \"switchboard_autograd::{stem} [ADInplaceOrView]\")?;",
        f.qualified()
    )
    .unwrap();
    Ok(())
}

/// Emits the Autograd kernel of a differentiable function.
fn emit_differentiable(
    w: &mut String,
    f: &NativeFunction,
    n: &NodeSpec<'_>,
    inplace: bool,
) -> Result<(), String> {
    let d = n.d;
    let sig = Sig::of(f)?;
    let stem = &sig.stem;
    let name_of = |a: &str| {
        let i = f.schema.argument_index(a).expect("argument");
        sig.args[i].name.clone()
    };
    let self_name = f
        .schema
        .argument_index("self")
        .map(|i| sig.args[i].name.clone())
        .unwrap_or_default();
    // Tensors checked by the fast path: the differentiable ones, and the others that must not
    // require grad (PyTorch's check_no_requires_grad).
    let checked: Vec<&Argument> = tensor_args(f)
        .into_iter()
        .filter(|a| {
            !n.inputs.iter().any(|i| i.name() == a.name())
                && !d.non_differentiable.iter().any(|x| x == a.name())
                && a.name() != "output"
        })
        .collect();
    let mut fast: Vec<&Argument> = n.inputs.clone();
    fast.extend(checked.iter().copied());
    let fast_hint = hint_expr(&fast, &sig, f);
    let diff_hint = hint_expr(&n.inputs, &sig, f);
    let call_fast = sig.call(f, "ks & AFTER_AD");
    let call = sig.call(f, "ks");
    writeln!(
        w,
        "#[inline(always)]\npub(super) fn {stem}_autograd(ks: DispatchKeySet{p}) -> Result<{r}> {{\n    if !({fast_hint}) {{\n        return {call_fast};\n    }}\n    {stem}_recording(ks{names})\n}}\n",
        p = sig.params(),
        r = sig.ret,
        names = sig.args.iter().map(|a| format!(", {}", a.name)).collect::<String>(),
    )
    .unwrap();
    writeln!(
        w,
        "#[inline(never)]\n#[allow(unused_variables, clippy::redundant_clone)]\nfn {stem}_recording(ks: DispatchKeySet{}) -> Result<{}> {{\n    let ks = ks & AFTER_AD;",
        sig.params(),
        sig.ret
    )
    .unwrap();
    if !checked.is_empty() {
        writeln!(w, "    if is_grad_enabled() {{").unwrap();
        for a in &checked {
            writeln!(
                w,
                "        check_no_requires_grad({}, {:?}, {:?})?;",
                if is_optional_tensor(a.ty()) || is_list(a.ty()) {
                    name_of(a.name())
                } else {
                    format!("Some({})", name_of(a.name()))
                },
                a.name(),
                f.name
            )
            .unwrap();
        }
        writeln!(w, "    }}").unwrap();
    }
    let ty = node_type(&d.node);
    let formula = n.formula_fn();
    // The saved state, made in the node (Note [Recording cost]).
    let save_field = |field: &Field, self_expr: &str| -> String {
        let value = match &field.kind {
            FieldKind::TensorArg => {
                let a = arg(d, &field.source).expect("tensor field");
                let p = if field.source == "self" {
                    self_expr.to_owned()
                } else {
                    name_of(&field.source)
                };
                match a.ty() {
                    Type::Tensor => format!("SavedTensor::input({p})"),
                    t if is_list(t) => format!("{p}.iter().map(SavedTensor::input).collect()"),
                    _ => format!("{p}.map(SavedTensor::input)"),
                }
            }
            FieldKind::Value => {
                let a = arg(d, &field.source).expect("value field");
                value_form(a.ty())
                    .expect("checked")
                    .save
                    .replace("{}", &name_of(&field.source))
            }
            FieldKind::Output(_) => "None".to_owned(),
            FieldKind::Derived(dv) => {
                let (p, optional) = match arg(d, &field.source) {
                    Some(a) => (name_of(&field.source), is_optional_tensor(a.ty())),
                    // An output's, read from the result after the call (`self` in place).
                    None if inplace => (name_of("self"), false),
                    None if d.schema.returns().len() == 1 => ("&result".to_owned(), false),
                    None => (format!("&{}", field.source), false),
                };
                let e = |x: &str| match dv {
                    Derived::Sizes => format!("SavedInts::from_slice({x}.sizes())"),
                    Derived::Strides => format!("SavedInts::from_slice({x}.strides())"),
                    Derived::StorageOffset => format!("{x}.storage_offset()"),
                    Derived::Dim => format!("{x}.dim()"),
                    Derived::Numel => format!("{x}.numel()"),
                    Derived::ScalarType => format!("{x}.dtype()"),
                    Derived::Device => format!("{x}.device()"),
                    Derived::ListSizes => {
                        format!("{x}.iter().map(|t| t.sizes().to_vec()).collect()")
                    }
                    Derived::ListScalarTypes => format!("{x}.iter().map(Tensor::dtype).collect()"),
                };
                if optional {
                    format!("{p}.map(|t| {})", e("t"))
                } else {
                    e(&p)
                }
            }
        };
        match &field.guard {
            Some(edges) => {
                let cond: Vec<String> = edges
                    .iter()
                    .map(|e| format!("edges_[{e}].is_valid()"))
                    .collect();
                format!("({}).then(|| {value})", cond.join(" || "))
            }
            None => value,
        }
    };
    let outputs_saved: Vec<&Field> = n
        .fields
        .iter()
        .filter(|f| matches!(f.kind, FieldKind::Output(_)))
        .collect();
    let edges = edges_expr(&n.inputs, &sig, f);
    if !inplace {
        let guard = if f.schema.is_view_op() {
            "AutoDispatchBelowAutograd"
        } else {
            "AutoDispatchBelowADInplaceOrView"
        };
        let (pat, results) = result_pattern(f);
        let ins: Vec<String> = tensor_args(f)
            .iter()
            .filter(|a| *a.ty() == Type::Tensor)
            .map(|a| name_of(a.name()))
            .collect();
        writeln!(
            w,
            "    if !(is_grad_enabled() && ({diff_hint})) {{\n        return {call};\n    }}\n    let {pat} = {{\n        let _guard = {guard}::new();\n        {call}?\n    }};"
        )
        .unwrap();
        for r in &results {
            writeln!(w, "    let {r} = fresh({r}, &[{}]);", ins.join(", ")).unwrap();
        }
        let outs: Vec<String> = results
            .iter()
            .enumerate()
            .map(|(i, r)| {
                if d.output_differentiable(i) {
                    format!("Some(&{r})")
                } else {
                    "None".to_owned()
                }
            })
            .collect();
        writeln!(w, "    record_function(\n        {:?},\n        {edges},\n        &[{}],\n        |edges_: &[Edge]| nodes::{ty} {{", d.node, outs.join(", ")).unwrap();
        for field in &n.fields {
            let v = match &field.kind {
                FieldKind::Output(nr) => {
                    let r = &results[*nr];
                    let s = if d.output_differentiable(*nr) {
                        format!("SavedTensor::output(&{r}, {nr}, {:?})", d.node)
                    } else {
                        format!("SavedTensor::input(&{r})")
                    };
                    format!("Some({s})")
                }
                _ => save_field(field, &self_name),
            };
            writeln!(w, "            {}: {v},", field.ident).unwrap();
        }
        writeln!(w, "        }},\n        nodes::{formula},\n    );").unwrap();
        if results.len() == 1 {
            writeln!(w, "    Ok(result)\n}}\n").unwrap();
        } else {
            writeln!(w, "    Ok(({}))\n}}\n", results.join(", ")).unwrap();
        }
    } else {
        if f.schema.returns().len() != 1 {
            return Err(format!(
                "{}: an in-place operator returns `self`",
                f.schema_text
            ));
        }
        let self_p = name_of("self");
        writeln!(
            w,
            "    let requires_grad_ = is_grad_enabled() && ({diff_hint});\n    check_inplace({self_p}, requires_grad_)?;\n    if !requires_grad_ {{\n        return {call};\n    }}"
        )
        .unwrap();
        // PyTorch's `original_self`: `self` before the call, for the formulas that read it.
        let self_field = n
            .fields
            .iter()
            .find(|x| x.kind == FieldKind::TensorArg && x.source == "self");
        let self_expr = match self_field {
            Some(sf) => {
                match &sf.guard {
                    Some(edges) => {
                        let names: Vec<&Argument> = edges.iter().map(|e| n.inputs[*e]).collect();
                        writeln!(
                            w,
                            "    let original_self_ = if {} {{ Some(ops::clone({self_p})?) }} else {{ None }};",
                            hint_expr(&names, &sig, f)
                        )
                        .unwrap();
                    }
                    None => writeln!(w, "    let original_self_ = Some(ops::clone({self_p})?);")
                        .unwrap(),
                }
                "original_self_.as_ref()"
            }
            None => "None",
        };
        writeln!(
            w,
            "    let node_ = record_inplace_begin(\n        {:?},\n        {edges},\n        {self_p},\n        |edges_: &[Edge]| nodes::{ty} {{",
            d.node
        )
        .unwrap();
        for field in &n.fields {
            let v = if field.kind == FieldKind::TensorArg && field.source == "self" {
                // Saved from the clone (guarded or not, the clone exists exactly when needed).
                if field.guard.is_some() {
                    format!("{self_expr}.map(SavedTensor::input)")
                } else {
                    format!("SavedTensor::input({self_expr}.expect(\"cloned\"))")
                }
            } else if matches!(field.kind, FieldKind::Output(_)) {
                "None".to_owned()
            } else {
                save_field(field, &self_p)
            };
            writeln!(w, "            {}: {v},", field.ident).unwrap();
        }
        writeln!(
            w,
            "        }},\n        nodes::{formula},\n    );\n    {{\n        let _guard = AutoDispatchBelowAutograd::new();\n        {call}?;\n    }}"
        )
        .unwrap();
        for field in &outputs_saved {
            writeln!(
                w,
                "    node_.with_saved(|s| s.{} = Some(SavedTensor::output({self_p}, 0, {:?})));",
                field.ident, d.node
            )
            .unwrap();
        }
        writeln!(
            w,
            "    rebase_history({self_p}, node_);\n    Ok({self_p}.clone())\n}}\n"
        )
        .unwrap();
    }
    Ok(())
}

/// Emits the kernel of an `out=` overload.
fn emit_out(w: &mut String, f: &NativeFunction) -> Result<(), String> {
    let sig = Sig::of(f)?;
    let stem = &sig.stem;
    let all = tensor_args(f);
    let hint = hint_expr(&all, &sig, f);
    writeln!(
        w,
        "#[inline(always)]\npub(super) fn {stem}_autograd(ks: DispatchKeySet{p}) -> Result<{r}> {{\n    if !({hint}) {{\n        return {call};\n    }}\n    {stem}_recording(ks{names})\n}}\n\n#[inline(never)]\nfn {stem}_recording(ks: DispatchKeySet{p}) -> Result<{r}> {{\n    if is_grad_enabled() {{\n        return Err(out_requires_grad_error({base:?}));\n    }}\n    let _guard = AutoDispatchBelowAutograd::new();\n    {call}\n}}\n",
        p = sig.params(),
        r = sig.ret,
        call = sig.call(f, "ks & AFTER_AD"),
        names = sig.args.iter().map(|a| format!(", {}", a.name)).collect::<String>(),
        base = f.name,
    )
    .unwrap();
    Ok(())
}

/// Emits the kernel of a function with no formula (Note [Which kernel an operator gets]).
fn emit_not_implemented(w: &mut String, f: &NativeFunction) -> Result<(), String> {
    let sig = Sig::of(f)?;
    let stem = &sig.stem;
    let all = tensor_args(f);
    let hint = hint_expr(&all, &sig, f);
    let call = sig.call(f, "ks");
    let edges = edges_expr(&all, &sig, f);
    let edges = if all.iter().any(|a| is_list(a.ty())) {
        // Lists and single tensors together: collect every tensor.
        let parts: Vec<String> = all
            .iter()
            .map(|a| {
                let i = f.schema.argument_index(a.name()).expect("argument");
                let name = &sig.args[i].name;
                match a.ty() {
                    Type::Tensor => format!("v.push(Some({name}));"),
                    t if is_list(t) => format!("v.extend({name}.iter().map(Some));"),
                    _ => format!("v.push({name});"),
                }
            })
            .collect();
        format!(
            "&{{ let mut v: Vec<Option<&Tensor>> = Vec::new(); {} v }}",
            parts.join(" ")
        )
    } else {
        edges
    };
    writeln!(
        w,
        "#[inline(always)]\npub(super) fn {stem}_autograd(ks: DispatchKeySet{p}) -> Result<{r}> {{\n    if !({hint}) {{\n        return {call_fast};\n    }}\n    {stem}_recording(ks{names})\n}}\n\n#[inline(never)]\nfn {stem}_recording(ks: DispatchKeySet{p}) -> Result<{r}> {{\n    let ks = ks & AFTER_AD;\n    if !is_grad_enabled() {{\n        return {call};\n    }}",
        p = sig.params(),
        r = sig.ret,
        call_fast = sig.call(f, "ks & AFTER_AD"),
        names = sig.args.iter().map(|a| format!(", {}", a.name)).collect::<String>(),
    )
    .unwrap();
    let qualified = format!("aten::{}", f.name);
    if crate::derivatives::is_inplace(f) {
        let self_p = &sig.args[0].name;
        writeln!(
            w,
            "    check_inplace({self_p}, true)?;\n    let node_ = record_not_implemented_inplace({qualified:?}, {edges}, {self_p});\n    {{\n        let _guard = AutoDispatchBelowAutograd::new();\n        {call}?;\n    }}\n    rebase_history({self_p}, node_);\n    Ok({self_p}.clone())\n}}\n"
        )
        .unwrap();
        return Ok(());
    }
    let guard = if f.schema.is_view_op() {
        "AutoDispatchBelowAutograd"
    } else {
        "AutoDispatchBelowADInplaceOrView"
    };
    let (pat, results) = result_pattern(f);
    writeln!(
        w,
        "    let {pat} = {{\n        let _guard = {guard}::new();\n        {call}?\n    }};"
    )
    .unwrap();
    let ins: Vec<String> = all
        .iter()
        .filter(|a| *a.ty() == Type::Tensor)
        .map(|a| {
            let i = f.schema.argument_index(a.name()).expect("argument");
            sig.args[i].name.clone()
        })
        .collect();
    let mut outs = Vec::new();
    for (i, r) in results.iter().enumerate() {
        if f.schema.returns()[i].ty() == &Type::Tensor {
            writeln!(w, "    let {r} = fresh({r}, &[{}]);", ins.join(", ")).unwrap();
            outs.push(format!("Some(&{r})"));
        } else {
            outs.push("None".to_owned());
        }
    }
    writeln!(
        w,
        "    record_not_implemented({qualified:?}, {edges}, &[{}]);",
        outs.join(", ")
    )
    .unwrap();
    if results.len() == 1 {
        writeln!(w, "    Ok(result)\n}}\n").unwrap();
    } else {
        writeln!(w, "    Ok(({}))\n}}\n", results.join(", ")).unwrap();
    }
    Ok(())
}

/// Generates the autograd crate's code from the operators and their derivatives: the
/// `nodes` module (one type and one formula function per entry), the Autograd kernels, the
/// ADInplaceOrView kernels, `register_autograd` / `register_inplace_or_view`, and the
/// `OPERATORS` table. The includer provides the `use` lines (see the autograd crate's
/// `generated.rs`).
pub fn autograd(funcs: &[NativeFunction], derivs: &[Derivative]) -> Result<String, String> {
    let p = plan(funcs, derivs)?;
    let mut nodes = String::new();
    let mut kernels = String::new();
    let mut adiv = String::new();
    let mut reg = String::new();
    let mut reg_adiv = String::new();
    let mut table = String::new();
    let mut specs: BTreeMap<String, NodeSpec<'_>> = BTreeMap::new();
    let mut emitted_nodes = BTreeSet::new();
    for d in derivs {
        if d.is_non_differentiable() {
            continue;
        }
        if specs.contains_key(&d.node) {
            return Err(format!(
                "derivatives.yaml: two entries name the node {}",
                d.node
            ));
        }
        specs.insert(d.node.clone(), NodeSpec::new(d)?);
    }
    for (f, kind) in &p.kinds {
        let q = f.qualified();
        let stem = match f.api_name.trim_start_matches("r#").strip_suffix('_') {
            Some(s) => format!("{s}_inplace"),
            None => f.api_name.trim_start_matches("r#").to_owned(),
        };
        let autograd_kernel = format!(
            "    lib.impl_with_static_debug({q:?}, None, KernelFunction::from_fn_with_keys(autograd_kernels::{stem}_autograd), \"switchboard_autograd::{stem} [Autograd]\")?;"
        );
        let (kind_name, node, inputs) = match kind {
            AutogradKind::Composite => ("Composite", None, Vec::new()),
            AutogradKind::NoTensors => ("NoTensors", None, Vec::new()),
            AutogradKind::Out => {
                emit_out(&mut kernels, f)?;
                writeln!(reg, "{autograd_kernel}").unwrap();
                ("Out", None, Vec::new())
            }
            AutogradKind::NonDifferentiable => {
                writeln!(
                    reg,
                    "    lib.impl_with_static_debug({q:?}, None, KernelFunction::fallthrough(), \"fallthrough [Autograd]\")?;"
                )
                .unwrap();
                ("NonDifferentiable", None, Vec::new())
            }
            AutogradKind::NotImplemented => {
                emit_not_implemented(&mut kernels, f)?;
                writeln!(reg, "{autograd_kernel}").unwrap();
                ("NotImplemented", None, Vec::new())
            }
            AutogradKind::Differentiable {
                derivative,
                inplace,
            } => {
                let spec = &specs[&derivative.node];
                if emitted_nodes.insert(derivative.node.clone()) {
                    emit_node(&mut nodes, spec)?;
                }
                emit_differentiable(&mut kernels, f, spec, *inplace)?;
                writeln!(reg, "{autograd_kernel}").unwrap();
                let inputs: Vec<String> = spec.inputs.iter().map(|a| a.name().to_owned()).collect();
                (
                    if *inplace { "Inplace" } else { "Formula" },
                    Some(derivative.node.clone()),
                    inputs,
                )
            }
        };
        if !matches!(kind, AutogradKind::Composite) {
            emit_inplace_or_view(&mut adiv, &mut reg_adiv, f)?;
        }
        writeln!(
            table,
            "    OperatorAutograd {{ operator: {q:?}, kind: AutogradKind::{kind_name}, node: {node:?}, differentiable_inputs: &[{}] }},",
            inputs
                .iter()
                .map(|i| format!("{i:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
        .unwrap();
    }
    let mut o = String::new();
    writeln!(
        o,
        "// @generated by switchboard-codegen from native_functions.yaml and derivatives.yaml: do not edit.\n"
    )
    .unwrap();
    writeln!(
        o,
        "/// The backward nodes of derivatives.yaml: one type (its saved state) and one formula\n/// function per entry, named as PyTorch names them.\npub(crate) mod nodes {{\n    use super::*;\n    use crate::formulas::*;\n    #[allow(unused_imports)]\n    use switchboard_ops::*;\n\n{}}}\n",
        indent(&nodes)
    )
    .unwrap();
    writeln!(
        o,
        "/// The Autograd kernels (Note [Which kernel an operator gets]).\nmod autograd_kernels {{\n    use super::*;\n\n{}}}\n",
        indent(&kernels)
    )
    .unwrap();
    writeln!(
        o,
        "/// The ADInplaceOrView kernels: writes bump versions, views record their base.\nmod inplace_or_view_kernels {{\n    use super::*;\n\n{}}}\n",
        indent(&adiv)
    )
    .unwrap();
    writeln!(
        o,
        "/// Registers the Autograd kernels into an `IMPL aten, Autograd` library.\npub(crate) fn register_autograd(lib: &mut Library) -> Result<()> {{\n{reg}    Ok(())\n}}\n"
    )
    .unwrap();
    writeln!(
        o,
        "/// Registers the ADInplaceOrView kernels into an `IMPL aten, ADInplaceOrView` library.\npub(crate) fn register_inplace_or_view(lib: &mut Library) -> Result<()> {{\n{reg_adiv}    Ok(())\n}}\n"
    )
    .unwrap();
    writeln!(
        o,
        "/// How every operator of native_functions.yaml takes part in autograd, in file order.\npub static OPERATORS: &[OperatorAutograd] = &[\n{table}];"
    )
    .unwrap();
    Ok(o)
}

fn indent(s: &str) -> String {
    s.lines()
        .map(|l| {
            if l.is_empty() {
                "\n".to_owned()
            } else {
                format!("    {l}\n")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::derivatives::parse_derivatives;
    use crate::model::parse_yaml;

    const FUNCS: &str = "
- func: mul.Tensor(Tensor self, Tensor other) -> Tensor
  dispatch:
    CPU: mul
- func: mul_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)
  dispatch:
    CPU: mul_
- func: mul.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)
  dispatch:
    CPU: mul_out
- func: view(Tensor(a) self, SymInt[] size) -> Tensor(a)
  dispatch:
    CompositeExplicitAutograd: view
- func: eq.Tensor(Tensor self, Tensor other) -> Tensor
  dispatch:
    CPU: eq
- func: sgn(Tensor self) -> Tensor
  dispatch:
    CPU: sgn
";
    const DERIVS: &str = "
- name: mul.Tensor(Tensor self, Tensor other) -> Tensor
  self: mul(grad, other)
  other: mul(grad, self)
- name: view(Tensor(a) self, SymInt[] size) -> Tensor(a)
  self: reshape(grad, self.sizes())
- name: eq.Tensor(Tensor self, Tensor other) -> Tensor
  output_differentiability: [False]
";

    fn generate() -> String {
        let f = parse_yaml(FUNCS).unwrap();
        let d = parse_derivatives(DERIVS).unwrap();
        autograd(&f, &d).unwrap()
    }

    #[test]
    fn nodes_save_what_formulas_read() {
        let code = generate();
        // `other` is read only by self's formula: saved only when self needs a gradient.
        assert!(code.contains("pub(crate) struct MulBackward0 {"), "{code}");
        assert!(code.contains("other: Option<SavedTensor>,"), "{code}");
        assert!(
            code.contains("other: (edges_[0].is_valid()).then(|| SavedTensor::input(other)),"),
            "{code}"
        );
        // A view saves its input's sizes, not the input.
        assert!(code.contains("self_sizes: SavedInts,"), "{code}");
        assert!(
            code.contains("grad_inputs_[0] = into_grad(reshape(grad,self_sizes))?;"),
            "{code}"
        );
    }

    #[test]
    fn kernels_of_every_kind() {
        let code = generate();
        for expected in [
            // fast path
            "pub(super) fn mul_autograd(ks: DispatchKeySet, self_: &Tensor, other: &Tensor) -> Result<Tensor> {\n        if !(hint(self_) | hint(other)) {\n            return rd::mul(ks & AFTER_AD, self_, other);",
            // in-place: checks, PyTorch's original_self, rebase
            "check_inplace(self_, requires_grad_)?;",
            "let original_self_ = if hint(other) { Some(ops::clone(self_)?) } else { None };",
            "rebase_history(self_, node_);",
            // out=
            "return Err(out_requires_grad_error(\"mul\"));",
            // no formula
            "record_not_implemented(\"aten::sgn\"",
            // non-differentiable
            "lib.impl_with_static_debug(\"eq.Tensor\", None, KernelFunction::fallthrough()",
            // ADInplaceOrView
            "self_.bump_version();",
            "out.bump_version();",
            "Ok(as_view(self_, result))",
        ] {
            assert!(code.contains(expected), "{expected}\n----\n{code}");
        }
    }
}
