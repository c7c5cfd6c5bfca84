//! Kernel signatures, and the expressions the kernels share (the `requires_grad` flags test,
//! the edges, the result bindings).

use super::*;

/// A native function's kernel signature.
pub(super) struct Sig {
    pub(super) args: Vec<RustArg>,
    pub(super) ret: String,
    /// The generated function's name, without `r#` (`where`, `add_scalar`).
    pub(super) stem: String,
}

impl Sig {
    pub(super) fn of(f: &NativeFunction) -> Result<Sig, String> {
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

    pub(super) fn params(&self) -> String {
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

    pub(super) fn call(&self, f: &NativeFunction, ks: &str) -> String {
        let names: Vec<&str> = self.args.iter().map(|a| a.name.as_str()).collect();
        let sep = if names.is_empty() { "" } else { ", " };
        format!("rd::{}({ks}{sep}{})", f.api_name, names.join(", "))
    }
}

/// The autograd flags test of some arguments (Note [Generated kernel shape]): whether any may
/// require grad or carry a tangent.
pub(super) fn hint_expr(args: &[&Argument], sig: &Sig, f: &NativeFunction) -> String {
    flags_expr(args, sig, f, "hint")
}

/// The `requires_grad` flags test of some arguments.
pub(super) fn rg_hint_expr(args: &[&Argument], sig: &Sig, f: &NativeFunction) -> String {
    flags_expr(args, sig, f, "rg_hint")
}

/// The tangent flags test of some arguments (Note [Forward-mode AD] in the autograd crate).
pub(super) fn fw_hint_expr(args: &[&Argument], sig: &Sig, f: &NativeFunction) -> String {
    flags_expr(args, sig, f, "fw_hint")
}

fn flags_expr(args: &[&Argument], sig: &Sig, f: &NativeFunction, test: &str) -> String {
    let parts: Vec<String> = args
        .iter()
        .map(|a| {
            let i = f
                .schema
                .argument_index(a.name())
                .expect("an argument of the schema");
            let name = &sig.args[i].name;
            match a.ty() {
                Type::Tensor => format!("{test}({name})"),
                t if is_list(t) => format!("{test}_list({name})"),
                t if is_optional_list(t) => format!("{test}_optional_list({name})"),
                t if is_optional_tensor(t) => format!("{test}_optional({name})"),
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
pub(super) fn edges_expr(args: &[&Argument], sig: &Sig, f: &NativeFunction) -> String {
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

/// The `&[Option<&Tensor>]` of every tensor of some arguments, the elements of lists included.
pub(super) fn all_tensors_expr(all: &[&Argument], sig: &Sig, f: &NativeFunction) -> String {
    if !all
        .iter()
        .any(|a| is_list(a.ty()) || is_optional_list(a.ty()))
    {
        return edges_expr(all, sig, f);
    }
    let parts: Vec<String> = all
        .iter()
        .map(|a| {
            let i = f.schema.argument_index(a.name()).expect("argument");
            let name = &sig.args[i].name;
            match a.ty() {
                Type::Tensor => format!("v.push(Some({name}));"),
                t if is_list(t) => format!("v.extend({name}.iter().map(Some));"),
                t if is_optional_list(t) => {
                    format!("v.extend({name}.iter().map(Option::as_ref));")
                }
                _ => format!("v.push({name});"),
            }
        })
        .collect();
    format!(
        "&{{ let mut v: Vec<Option<&Tensor>> = Vec::new(); {} v }}",
        parts.join(" ")
    )
}

/// The tensor arguments of a schema.
pub(super) fn tensor_args(f: &NativeFunction) -> Vec<&Argument> {
    f.schema
        .arguments()
        .iter()
        .filter(|a| a.ty().is_tensor_like())
        .collect()
}

/// Output bindings of a forward call: `result` or `(result0, result1)`.
pub(super) fn result_pattern(f: &NativeFunction) -> (String, Vec<String>) {
    let n = f.schema.returns().len();
    if n == 1 {
        ("result".to_owned(), vec!["result".to_owned()])
    } else {
        let names: Vec<String> = (0..n).map(|i| format!("result{i}")).collect();
        (format!("({})", names.join(", ")), names)
    }
}
