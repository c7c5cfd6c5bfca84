//! The declarations read from the YAML file.

use std::collections::HashMap;

use switchboard_schema::{Argument, FunctionSchema, Tag, Type};
use yaml_rust2::{Yaml, YamlLoader};

/// One `- func:` entry.
#[derive(Debug, Clone)]
pub struct NativeFunction {
    /// The schema text as written (with the `aten::` namespace added when missing).
    pub schema_text: String,
    /// The parsed schema.
    pub schema: FunctionSchema,
    /// Whether a free function is generated (`variants: function`, the default).
    pub function: bool,
    /// Whether a `TensorOps` method is generated (`variants: method`).
    pub method: bool,
    /// `(dispatch key, kernel name)` pairs, in file order.
    pub dispatch: Vec<(String, String)>,
    /// The name of the generated Rust function (`add`, `add_scalar`, `sum_dim_int_list`).
    pub api_name: String,
    /// The schema name without namespace and overload (`add_`).
    pub name: String,
    /// The overload name (`Tensor`).
    pub overload: String,
    /// The `out=` overloads this functional entry's `autogen:` line names (Note [Generated
    /// out= kernels]).
    pub autogen: Vec<String>,
    /// For an `out=` overload named by another entry's `autogen:`, that functional entry's
    /// index in the list: its kernel is generated (Note [Generated out= kernels]).
    pub out_of: Option<usize>,
    /// PyTorch's `tags:` as written (`generated`: a function torchgen writes from another's
    /// `autogen:`); the operator is registered with these and the ones torchgen adds (Note
    /// [Tags torchgen adds] in `tags.rs`).
    pub tags: Vec<Tag>,
    /// `structured: True`: an `out=` overload whose kernel computes into the outputs it is
    /// given, after the family's meta function (Note [Structured kernels] in switchboard-ops).
    pub structured: bool,
    /// `structured_delegate: NAME.out`: a functional or in-place overload of that structured
    /// family, as written.
    pub structured_delegate: Option<String>,
    /// For a member of a structured family (the structured overload or a delegate), its form
    /// and the family's meta function (resolved from the YAML).
    pub structured_form: Option<StructuredForm>,
}

/// The form of an overload in a structured family: which glue torchgen would write for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StructuredForm {
    /// Functional, in-place or `out=`.
    pub kind: StructuredKind,
    /// The family's meta function in `switchboard_ops::structured`: named after the
    /// functional overload (`add.Tensor` -> `add_tensor`, `maximum` -> `maximum`).
    pub meta: String,
    /// The number of outputs (Tensor returns): one, or several for a family such as
    /// `nll_loss_forward` (`output`, `total_weight`), whose meta function takes and returns
    /// arrays of them.
    pub outputs: usize,
}

/// The three forms of a structured family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StructuredKind {
    /// Allocates its output from the meta result.
    Functional,
    /// Writes `self`, which must be what the meta function describes.
    Inplace,
    /// Writes its `out` argument, resized to the meta result.
    Out,
}

impl NativeFunction {
    /// `name.overload` (or `name` without overload), as registrations refer to it.
    pub fn qualified(&self) -> String {
        if self.overload.is_empty() {
            self.name.clone()
        } else {
            format!("{}.{}", self.name, self.overload)
        }
    }

    /// Whether the function is a factory whose backend comes from its `device` argument: it
    /// has backend kernels, a `Device?` argument, and no tensor argument. PyTorch generates a
    /// BackendSelect kernel for those.
    pub fn needs_backend_select(&self) -> bool {
        let has_backend = self.dispatch.iter().any(|(k, _)| k == "CPU" || k == "Meta");
        let args = self.schema.arguments();
        has_backend
            && args.iter().any(|a| a.name() == "device")
            && !args.iter().any(|a| a.is_tensor_like())
    }
}

pub(crate) fn snake(overload: &str) -> String {
    let mut out = String::new();
    let chars: Vec<char> = overload.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() {
            let prev_lower =
                i > 0 && (chars[i - 1].is_ascii_lowercase() || chars[i - 1].is_ascii_digit());
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
            let prev_upper = i > 0 && chars[i - 1].is_ascii_uppercase();
            if i > 0 && chars[i - 1] != '_' && (prev_lower || (prev_upper && next_lower)) {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Parses the YAML text into declarations, naming each generated function.
///
/// Naming (Rust has no overloading): within one schema name, the first overload listed is
/// the primary one (unless it is an `out` overload) and is named after the operator; the others append the overload in
/// snake case before an in-place operator's trailing `_` (`add_.Scalar` -> `add_scalar_`).
pub fn parse_yaml(text: &str) -> Result<Vec<NativeFunction>, String> {
    let docs = YamlLoader::load_from_str(text).map_err(|e| format!("YAML: {e}"))?;
    let Some(Yaml::Array(entries)) = docs.into_iter().next() else {
        return Err("YAML: expected a list of `- func:` entries".into());
    };
    let mut out: Vec<NativeFunction> = Vec::new();
    let mut primary_taken: HashMap<String, String> = HashMap::new();
    let mut api_names: HashMap<String, String> = HashMap::new();
    for (i, e) in entries.iter().enumerate() {
        let func = e["func"]
            .as_str()
            .ok_or_else(|| format!("entry {i}: missing `func:`"))?;
        let text = if func.contains("::") {
            func.to_owned()
        } else {
            format!("aten::{func}")
        };
        let schema = FunctionSchema::parse(&text).map_err(|e| format!("{func}: {e}"))?;
        let name = schema.base_name().to_owned();
        let overload = schema.overload_name().to_owned();
        let (function, method) = match &e["variants"] {
            Yaml::BadValue => (true, false),
            v => {
                let s = v
                    .as_str()
                    .ok_or_else(|| format!("{func}: bad `variants:`"))?;
                let parts: Vec<&str> = s.split(',').map(str::trim).collect();
                for p in &parts {
                    if *p != "function" && *p != "method" {
                        return Err(format!("{func}: unknown variant `{p}`"));
                    }
                }
                (parts.contains(&"function"), parts.contains(&"method"))
            }
        };
        let mut dispatch = Vec::new();
        let mut default_composite = false;
        match &e["dispatch"] {
            Yaml::BadValue => default_composite = true,
            Yaml::Hash(h) => {
                for (k, v) in h {
                    let (Some(keys), Some(kernel)) = (k.as_str(), v.as_str()) else {
                        return Err(format!("{func}: bad `dispatch:` entry"));
                    };
                    for key in keys.split(',').map(str::trim) {
                        dispatch.push((key.to_owned(), kernel.to_owned()));
                    }
                }
            }
            _ => return Err(format!("{func}: `dispatch:` must be a map")),
        }
        let tag_names: Vec<&str> = match &e["tags"] {
            Yaml::BadValue => Vec::new(),
            Yaml::String(t) => t.split(',').map(str::trim).collect(),
            Yaml::Array(items) => items
                .iter()
                .map(Yaml::as_str)
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| format!("{func}: `tags:` takes names"))?,
            _ => return Err(format!("{func}: bad `tags:`")),
        };
        // torchgen's "illegal tag", naming the operator too.
        let tags = tag_names
            .into_iter()
            .map(|t| Tag::parse_for(&schema.operator_name().to_string(), t))
            .collect::<Result<Vec<Tag>, _>>()
            .map_err(|e| format!("{func}: {e}"))?;
        let inplace = name.ends_with('_') && !name.ends_with("__");
        let stem = if inplace {
            &name[..name.len() - 1]
        } else {
            &name[..]
        };
        let is_out =
            overload == "out" || overload.starts_with("out_") || overload.ends_with("_out");
        let api_name = match primary_taken.get(&name) {
            None if !is_out => {
                primary_taken.insert(name.clone(), overload.clone());
                crate::types::rust_ident(&name)
            }
            _ => {
                // The default overload listed after another one is `default` (`random_` after
                // `random_.from`: `random_default_`).
                let suffix = if overload.is_empty() {
                    "default".to_owned()
                } else {
                    snake(&overload)
                };
                if inplace {
                    format!("{stem}_{suffix}_")
                } else {
                    format!("{stem}_{suffix}")
                }
            }
        };
        if default_composite {
            // PyTorch names the kernel after the function; ours must be unique per overload.
            dispatch.push((
                "CompositeImplicitAutograd".to_owned(),
                api_name.trim_start_matches("r#").to_owned(),
            ));
        }
        let autogen = match &e["autogen"] {
            Yaml::BadValue => Vec::new(),
            Yaml::String(names) => names.split(',').map(|n| n.trim().to_owned()).collect(),
            _ => {
                return Err(format!(
                    "{func}: `autogen:` must be a list of overload names"
                ))
            }
        };
        if let Some(prev) = api_names.insert(api_name.clone(), func.to_owned()) {
            return Err(format!(
                "{func}: generated name `{api_name}` is already taken by {prev}"
            ));
        }
        out.push(NativeFunction {
            schema_text: text,
            schema,
            function,
            method,
            dispatch,
            api_name,
            name,
            overload,
            autogen,
            out_of: None,
            tags,
            structured: matches!(e["structured"], Yaml::Boolean(true)),
            structured_delegate: e["structured_delegate"].as_str().map(str::to_owned),
            structured_form: None,
        });
    }
    resolve_autogen(&mut out)?;
    crate::structured::resolve_structured(&mut out)?;
    for f in &out {
        crate::tags::check_nondeterministic_seeded(f)?;
    }
    Ok(out)
}

// Note [Generated out= kernels]
// PyTorch's native_functions.yaml writes `autogen: NAME.out` on a functional entry, and
// torchgen generates the `out=` overload's kernel for every backend at once
// (CompositeExplicitAutograd): call the functional operator, resize each `out` argument to the
// result (`resize_output`), check the dtype and device match exactly, and copy. We do the same,
// with one difference: the `out=` overload is still declared as an entry of its own, because
// PyTorch's own `out=` schemas name their outputs (`output`, `total_weight`, `grad_input`,
// `max`, `max_values`) and ours must be PyTorch's; the entry takes no `dispatch:`. Kernels
// whose `out=` rules differ (TensorIterator ops cast into an `out` of another dtype) stay
// hand-written. A factory's `out=` overload drops the TensorOptions arguments (`dtype`,
// `layout`, `device`, `pin_memory`): the kernel takes the dtype and device from `out`, as
// torchgen's does (`zeros_like.out` into a double `out` makes double zeros). We also generate
// the `out=` kernels PyTorch writes by hand where they compute exactly this (`rand.out`,
// `empty.out`, `linear.out`, `matmul.out`).
fn resolve_autogen(funcs: &mut [NativeFunction]) -> Result<(), String> {
    let index: HashMap<String, usize> = funcs
        .iter()
        .enumerate()
        .map(|(i, f)| (f.qualified(), i))
        .collect();
    for functional in 0..funcs.len() {
        for name in funcs[functional].autogen.clone() {
            let owner = &funcs[functional];
            let Some(&i) = index.get(&name) else {
                return Err(format!(
                    "{}: `autogen: {name}` names no declared overload",
                    owner.schema_text
                ));
            };
            let out = &funcs[i];
            let outs = out.schema.arguments().iter().filter(|a| a.is_out()).count();
            let inputs = &out.schema.arguments()[..out.schema.arguments().len() - outs];
            let functional_inputs: Vec<_> = owner
                .schema
                .arguments()
                .iter()
                .filter(|a| !is_tensor_option(a))
                .collect();
            let same_inputs = outs > 0
                && out.name == owner.name
                && outs == owner.schema.returns().len()
                && inputs.len() == functional_inputs.len()
                && inputs.iter().zip(functional_inputs).all(|(a, b)| {
                    a.name() == b.name()
                        && a.ty() == b.ty()
                        && a.default_value() == b.default_value()
                });
            if !same_inputs {
                return Err(format!(
                    "{}: `autogen: {name}` must name an out= overload with the same inputs (defaults included; a factory's TensorOptions aside) and one out argument per return",
                    owner.schema_text
                ));
            }
            let declared_default = out.dispatch.len() == 1
                && out.dispatch[0].0 == "CompositeImplicitAutograd"
                && out.dispatch[0].1 == out.api_name.trim_start_matches("r#");
            if !declared_default || out.out_of.is_some() {
                return Err(format!(
                    "{}: an autogen'd out= overload takes no `dispatch:`",
                    out.schema_text
                ));
            }
            let kernel = format!("{}_autogen", out.api_name.trim_start_matches("r#"));
            let out = &mut funcs[i];
            out.dispatch = vec![("CompositeExplicitAutograd".to_owned(), kernel)];
            out.out_of = Some(functional);
        }
    }
    Ok(())
}

/// The TensorOptions arguments of a factory (`ScalarType? dtype`, `Layout? layout`,
/// `Device? device`, `bool? pin_memory`), which its `out=` overload takes from `out`.
pub fn is_tensor_option(a: &Argument) -> bool {
    let optional = |t: Type| *a.ty() == Type::Optional(Box::new(t));
    match a.name() {
        "dtype" => optional(Type::ScalarType),
        "layout" => optional(Type::Layout),
        "device" => optional(Type::Device),
        "pin_memory" => optional(Type::Bool),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snake_case_overloads() {
        assert_eq!(snake("Tensor"), "tensor");
        assert_eq!(snake("dim_IntList"), "dim_int_list");
        assert_eq!(snake("IntList_out"), "int_list_out");
        assert_eq!(snake("Tensor_Tensor"), "tensor_tensor");
        assert_eq!(snake("ScalarSelf"), "scalar_self");
        assert_eq!(snake("using_ints"), "using_ints");
    }

    #[test]
    fn names_and_dispatch() {
        let y = "
- func: add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
  variants: function, method
  dispatch:
    CPU, Meta: add_tensor
- func: add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor
- func: add_.Scalar(Tensor(a!) self, Scalar other, Scalar alpha=1) -> Tensor(a!)
- func: sum.IntList_out(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None, Tensor(a!) out) -> Tensor(a!)
";
        let f = parse_yaml(y).unwrap();
        let names: Vec<&str> = f.iter().map(|f| f.api_name.as_str()).collect();
        assert_eq!(names, ["add", "add_scalar", "add_", "sum_int_list_out"]);
        assert!(f[0].method && f[0].function && !f[1].method);
        assert_eq!(
            f[0].dispatch,
            [
                ("CPU".into(), "add_tensor".into()),
                ("Meta".into(), "add_tensor".into())
            ]
        );
        assert_eq!(f[1].dispatch[0].0, "CompositeImplicitAutograd");
    }

    #[test]
    fn errors_name_the_entry() {
        assert!(parse_yaml("- func: add(Tensor self -> Tensor")
            .unwrap_err()
            .contains("add("));
        let dup = "- func: a(Tensor x) -> Tensor\n- func: a.b(Tensor x) -> Tensor\n- func: a_b(Tensor x) -> Tensor\n";
        assert!(parse_yaml(dup).unwrap_err().contains("already taken"));
    }

    /// Note [Generated out= kernels]: the out= overload named by `autogen:` gets a
    /// CompositeExplicitAutograd kernel; a mismatched or dispatched one is an error.
    #[test]
    fn autogen_out_overloads() {
        let y = "
- func: max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)
  dispatch:
    CPU: max_dim
  autogen: max.dim_max
- func: max.dim_max(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) max, Tensor(b!) max_values) -> (Tensor(a!) values, Tensor(b!) indices)
";
        let f = parse_yaml(y).unwrap();
        assert_eq!(f[1].out_of, Some(0));
        assert_eq!(
            f[1].dispatch,
            [(
                "CompositeExplicitAutograd".into(),
                "max_dim_max_autogen".into()
            )]
        );
        let missing = "- func: a(Tensor x) -> Tensor\n  autogen: a.out\n";
        assert!(parse_yaml(missing)
            .unwrap_err()
            .contains("names no declared overload"));
        let other_inputs = "- func: a(Tensor x) -> Tensor\n  autogen: a.out\n- func: a.out(Tensor y, *, Tensor(a!) out) -> Tensor(a!)\n";
        assert!(parse_yaml(other_inputs)
            .unwrap_err()
            .contains("same inputs"));
        let options = "- func: a(int[] size, *, ScalarType? dtype=None, Device? device=None) -> Tensor\n  autogen: a.out\n- func: a.out(int[] size, *, Tensor(a!) out) -> Tensor(a!)\n";
        assert_eq!(parse_yaml(options).unwrap()[1].out_of, Some(0));
        let dropped_other = "- func: a(int[] size, *, int dtype=1) -> Tensor\n  autogen: a.out\n- func: a.out(int[] size, *, Tensor(a!) out) -> Tensor(a!)\n";
        assert!(parse_yaml(dropped_other)
            .unwrap_err()
            .contains("same inputs"));
        let other_default = "- func: a(Tensor x, float p) -> Tensor\n  autogen: a.out\n- func: a.out(Tensor x, float p=0.5, *, Tensor(a!) out) -> Tensor(a!)\n";
        assert!(parse_yaml(other_default)
            .unwrap_err()
            .contains("same inputs"));
        let dispatched = "- func: a(Tensor x) -> Tensor\n  autogen: a.out\n- func: a.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)\n  dispatch:\n    CPU: a_out\n";
        assert!(parse_yaml(dispatched)
            .unwrap_err()
            .contains("takes no `dispatch:`"));
    }
}
