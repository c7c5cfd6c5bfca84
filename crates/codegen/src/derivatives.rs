//! The declarations read from `derivatives.yaml` (PyTorch's format), matched with the operators
//! of `native_functions.yaml`.

use std::collections::HashMap;

use switchboard_schema::{Argument, FunctionSchema, Tag, Type};
use yaml_rust2::{Yaml, YamlLoader};

use crate::formula::{analyse, Analysis};
use crate::model::NativeFunction;

/// One gradient line: `self: formula` or `input, weight, bias: formula`.
#[derive(Debug, Clone)]
pub struct GradientFormula {
    /// The inputs it computes the gradients of, in the order written.
    pub inputs: Vec<String>,
    /// The formula as written.
    pub text: String,
    pub(crate) analysis: Analysis,
}

/// One forward-derivative line (`result: formula`, `result0:`, or an output's name): the
/// tangent of one output from the inputs' primals (`self_p`) and tangents (`self_t`).
#[derive(Debug, Clone)]
pub struct ForwardFormula {
    /// The output it computes the tangent of.
    pub output: usize,
    /// The formula as written: a Rust expression, `auto_linear` or `auto_element_wise`.
    pub text: String,
}

/// One `- name:` entry of `derivatives.yaml`.
#[derive(Debug, Clone)]
pub struct Derivative {
    /// The schema of `name:`.
    pub schema: FunctionSchema,
    /// The backward node's name (`AddBackward0`).
    pub node: String,
    /// The gradient lines, in file order.
    pub formulas: Vec<GradientFormula>,
    /// Arguments declared `non_differentiable`.
    pub non_differentiable: Vec<String>,
    /// `output_differentiability`, when given.
    pub output_differentiability: Option<Vec<bool>>,
    /// The forward derivatives, in file order.
    pub forward: Vec<ForwardFormula>,
}

impl Derivative {
    /// `name.overload` of the operator.
    pub fn qualified(&self) -> String {
        let o = self.schema.overload_name();
        if o.is_empty() {
            self.schema.base_name().to_owned()
        } else {
            format!("{}.{o}", self.schema.base_name())
        }
    }

    /// The differentiable inputs (those with a formula), in schema order.
    pub fn differentiable_inputs(&self) -> Vec<&Argument> {
        self.schema
            .arguments()
            .iter()
            .filter(|a| {
                self.formulas
                    .iter()
                    .any(|f| f.inputs.iter().any(|i| i == a.name()))
            })
            .collect()
    }

    /// Whether output `i` gets a gradient: `output_differentiability` when given; else every
    /// tensor output when a formula uses `grads`, and only the first when they use `grad` (as
    /// PyTorch's `derivatives.yaml` reads).
    pub fn output_differentiable(&self, i: usize) -> bool {
        if let Some(d) = &self.output_differentiability {
            return d.get(i).copied().unwrap_or(false);
        }
        let uses_grads = self
            .formulas
            .iter()
            .any(|f| f.analysis.vars.contains("grads"));
        uses_grads || i == 0
    }

    /// Whether no output is differentiable.
    pub fn is_non_differentiable(&self) -> bool {
        (0..self.schema.returns().len()).all(|i| !self.output_differentiable(i))
    }
}

/// PyTorch's node name prefix: the operator's base name in CamelCase, `Backward` appended,
/// `ForwardBackward` shortened to `Backward` (`nll_loss_forward` -> `NllLossBackward`,
/// `_softmax` -> `SoftmaxBackward`, `max_pool2d` -> `MaxPool2DBackward`).
pub fn node_prefix(base: &str) -> String {
    let mut camel = String::new();
    for part in base.split('_') {
        // Python's str.title(): upper-case a letter that follows a non-letter.
        let mut prev_letter = false;
        for c in part.chars() {
            if c.is_alphabetic() {
                if prev_letter {
                    camel.extend(c.to_lowercase());
                } else {
                    camel.extend(c.to_uppercase());
                }
                prev_letter = true;
            } else {
                camel.push(c);
                prev_letter = false;
            }
        }
    }
    (camel + "Backward").replace("ForwardBackward", "Backward")
}

fn names_of(key: &str) -> Vec<String> {
    key.split(',').map(|s| s.trim().to_owned()).collect()
}

// Note [Backward node names]
// A backward node is named as PyTorch's codegen names it: the operator's base name in
// CamelCase with `Backward` appended (`node_prefix`), numbered by the entries of that prefix
// that come before it in derivatives.yaml and compute a gradient (`eq_.Scalar` is
// `EqBackward0` although `eq.Scalar`, whose output is never differentiable, has an entry). An
// in-place form without an entry of its own records its functional form's node, and a
// `generated` functional form (`zero`) its in-place form's. `node:` names a node PyTorch
// numbers with entries we do not have (`BernoulliBackward2`) or writes by hand
// (`CopyBackwards`); it takes no number.

/// Parses `derivatives.yaml`. Node names follow PyTorch's rule (Note [Backward node names]);
/// `node:` overrides one.
pub fn parse_derivatives(text: &str) -> Result<Vec<Derivative>, String> {
    let docs = YamlLoader::load_from_str(text).map_err(|e| format!("derivatives.yaml: {e}"))?;
    let Some(Yaml::Array(entries)) = docs.into_iter().next() else {
        return Err("derivatives.yaml: expected a list of `- name:` entries".into());
    };
    let mut counters: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let Yaml::Hash(h) = e else {
            return Err(format!("derivatives.yaml entry {i}: expected a map"));
        };
        let name = e["name"]
            .as_str()
            .ok_or_else(|| format!("derivatives.yaml entry {i}: missing `name:`"))?;
        let text = if name.contains("::") {
            name.to_owned()
        } else {
            format!("aten::{name}")
        };
        let schema = FunctionSchema::parse(&text).map_err(|e| format!("{name}: {e}"))?;
        let mut node = None;
        let mut formulas = Vec::new();
        let mut non_differentiable = Vec::new();
        let mut output_differentiability = None;
        let mut forward = Vec::new();
        let outputs = output_names(&schema);
        for (k, v) in h {
            let key = k
                .as_str()
                .ok_or_else(|| format!("{name}: keys must be strings"))?;
            match key {
                "name" => {}
                "node" => {
                    node = Some(
                        v.as_str()
                            .ok_or_else(|| format!("{name}: `node:` must be a string"))?
                            .to_owned(),
                    );
                }
                "output_differentiability" => {
                    let Yaml::Array(items) = v else {
                        return Err(format!("{name}: `output_differentiability` must be a list"));
                    };
                    let flags = items
                        .iter()
                        .map(|b| {
                            b.as_bool().ok_or_else(|| {
                                format!("{name}: `output_differentiability` takes booleans")
                            })
                        })
                        .collect::<Result<Vec<bool>, String>>()?;
                    if flags.len() != schema.returns().len() {
                        return Err(format!(
                            "{name}: `output_differentiability` has {} entries for {} outputs",
                            flags.len(),
                            schema.returns().len()
                        ));
                    }
                    output_differentiability = Some(flags);
                }
                "dispatch" => {
                    return Err(format!(
                        "{name}: `{key}:` (per-key formulas) is not supported"
                    ))
                }
                out if outputs.iter().any(|names| names.iter().any(|n| n == out)) => {
                    let output = outputs
                        .iter()
                        .position(|names| names.iter().any(|n| n == out))
                        .expect("found above");
                    let Yaml::String(text) = v else {
                        return Err(format!("{name}: `{out}:` must be a formula"));
                    };
                    if forward.iter().any(|f: &ForwardFormula| f.output == output) {
                        return Err(format!("{name}: two forward formulas for `{out}`"));
                    }
                    forward.push(ForwardFormula {
                        output,
                        text: text.trim().to_owned(),
                    });
                }
                inputs => {
                    let f = match v {
                        Yaml::String(s) => s.clone(),
                        Yaml::Integer(n) => n.to_string(),
                        _ => return Err(format!("{name}: `{inputs}:` must be a formula")),
                    };
                    let names = names_of(inputs);
                    for n in &names {
                        if schema.argument_index(n).is_none() {
                            return Err(format!("{name}: `{n}` is not an argument"));
                        }
                    }
                    if f.trim() == "non_differentiable" {
                        non_differentiable.extend(names);
                    } else {
                        formulas.push(GradientFormula {
                            inputs: names,
                            text: f,
                            analysis: Analysis::default(),
                        });
                    }
                }
            }
        }
        // PyTorch numbers only the entries that compute a gradient (load_derivatives.py: "only
        // assign an op name if we are actually going to calculate a derivative"); a `node:`
        // override takes no number.
        let node = match node {
            Some(n) => n,
            None if formulas.is_empty() => String::new(),
            None => {
                let prefix = node_prefix(schema.base_name());
                let n = counters.entry(prefix.clone()).or_default();
                *n += 1;
                format!("{prefix}{}", *n - 1)
            }
        };
        let mut d = Derivative {
            schema,
            node,
            formulas,
            non_differentiable,
            output_differentiability,
            forward,
        };
        analyse_formulas(&mut d)?;
        out.push(d);
    }
    Ok(out)
}

/// The names formulas may use for the outputs: `result` (one output) or `result0`, `result1`,
/// ..., and the outputs' own names.
pub(crate) fn output_names(schema: &FunctionSchema) -> Vec<Vec<String>> {
    let n = schema.returns().len();
    schema
        .returns()
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut names = vec![if n == 1 {
                "result".to_owned()
            } else {
                format!("result{i}")
            }];
            if !r.name().is_empty() {
                names.push(r.name().to_owned());
            }
            names
        })
        .collect()
}

fn is_tensor_type(t: &Type) -> bool {
    match t {
        Type::Tensor => true,
        Type::Optional(e) => **e == Type::Tensor,
        _ => false,
    }
}

fn analyse_formulas(d: &mut Derivative) -> Result<(), String> {
    let schema = d.schema.clone();
    let outputs = output_names(&schema);
    let is_output = |n: &str| outputs.iter().any(|names| names.iter().any(|m| m == n));
    let is_arg = |n: &str| schema.argument_index(n).is_some();
    let is_var =
        |n: &str| is_arg(n) || is_output(n) || matches!(n, "grad" | "grads" | "grad_input_mask");
    let is_tensor = |n: &str| {
        is_output(n)
            || n == "grad"
            || schema
                .argument_index(n)
                .is_some_and(|i| is_tensor_type(schema.arguments()[i].ty()))
    };
    let is_list = |n: &str| {
        schema.argument_index(n).is_some_and(
            |i| matches!(schema.arguments()[i].ty(), Type::List(e) if **e == Type::Tensor),
        )
    };
    for f in &mut d.formulas {
        f.analysis = analyse(&f.text, &is_var, &is_tensor, &is_list)
            .map_err(|e| format!("{}: {e}", d.schema.name()))?;
    }
    let uses_grad = d.formulas.iter().any(|f| f.analysis.vars.contains("grad"));
    let uses_grads = d.formulas.iter().any(|f| f.analysis.vars.contains("grads"));
    if uses_grad && uses_grads {
        return Err(format!(
            "{}: formulas use both `grad` and `grads` (PyTorch's rule: one or the other)",
            d.schema.name()
        ));
    }
    Ok(())
}

/// How a native function takes part in autograd (what the generator emits for it).
#[derive(Debug, Clone)]
pub enum AutogradKind<'a> {
    /// Differentiated through its decomposition (CompositeImplicitAutograd): no kernel.
    Composite,
    /// No tensor argument: never reaches the Autograd key.
    NoTensors,
    /// Records a node with the formulas of `derivative` (`inplace`: of the out-of-place form).
    Differentiable {
        /// The formulas.
        derivative: &'a Derivative,
        /// Whether the function writes `self` in place.
        inplace: bool,
    },
    /// An `out=` overload: refuses inputs or outputs that require grad.
    Out,
    /// Outputs that are never differentiable (`output_differentiability: [False]`, or PyTorch's
    /// `DONT_REQUIRE_DERIVATIVE` list): the Autograd key is skipped.
    NonDifferentiable,
    /// A function with a kernel and no formula: its outputs get a node that fails in backward
    /// (PyTorch's `autogradNotImplementedFallback`).
    NotImplemented,
}

/// PyTorch's `DONT_REQUIRE_DERIVATIVE` (gen_variable_type.py), the names our operators use:
/// functions whose outputs never require grad (they read only shapes, or return integers).
pub const DONT_REQUIRE_DERIVATIVE: &[&str] = &[
    "empty_like",
    "ones_like",
    "full_like",
    "zeros_like",
    "rand_like",
    "randn_like",
    "new_empty_strided",
    "argmax",
    "argmin",
    "argsort",
    "searchsorted",
    "bucketize",
    "isnan",
    "isinf",
    "logical_and",
    "logical_or",
    "logical_not",
    "logical_xor",
];

/// Whether two schemas take the same arguments (names and types, alias annotations and
/// defaults aside): how an in-place function finds the formulas of its out-of-place form.
fn same_signature(a: &FunctionSchema, b: &FunctionSchema) -> bool {
    a.arguments().len() == b.arguments().len()
        && a.arguments()
            .iter()
            .zip(b.arguments())
            .all(|(x, y)| x.name() == y.name() && x.ty() == y.ty())
}

/// The derivative entries by operator, and how each native function takes part in autograd.
#[derive(Debug)]
pub struct AutogradPlan<'a> {
    /// One item per native function, in file order.
    pub kinds: Vec<(&'a NativeFunction, AutogradKind<'a>)>,
}

/// Matches every native function with its derivative entry (Note [Which kernel an operator
/// gets]); fails on an entry that names no operator, or one of a composite operator.
pub fn plan<'a>(
    funcs: &'a [NativeFunction],
    derivs: &'a [Derivative],
) -> Result<AutogradPlan<'a>, String> {
    let mut by_name: HashMap<String, &Derivative> = HashMap::new();
    for d in derivs {
        let q = d.qualified();
        let f = funcs.iter().find(|f| f.qualified() == q).ok_or_else(|| {
            format!("derivatives.yaml: `{q}` is not an operator of native_functions.yaml")
        })?;
        if !same_signature(&f.schema, &d.schema)
            || f.schema.returns().len() != d.schema.returns().len()
        {
            return Err(format!(
                "derivatives.yaml: `{}` does not match native_functions.yaml's `{}`",
                d.schema, f.schema
            ));
        }
        if is_composite_implicit(f) {
            return Err(format!(
                "derivatives.yaml: `{q}` is CompositeImplicitAutograd: it is differentiated \
                 through its decomposition"
            ));
        }
        if by_name.insert(q.clone(), d).is_some() {
            return Err(format!("derivatives.yaml: `{q}` has two entries"));
        }
    }
    let mut kinds = Vec::new();
    for f in funcs {
        let kind = if is_composite_implicit(f) {
            AutogradKind::Composite
        } else if !f.schema.arguments().iter().any(|a| a.is_tensor_like()) {
            AutogradKind::NoTensors
        } else if !f.schema.out_arguments().is_empty() {
            AutogradKind::Out
        } else if let Some(d) = by_name.get(&f.qualified()) {
            if d.is_non_differentiable() {
                AutogradKind::NonDifferentiable
            } else {
                AutogradKind::Differentiable {
                    derivative: d,
                    inplace: is_inplace(f),
                }
            }
        } else if is_inplace(f) {
            // An in-place function without its own entry takes its out-of-place form's.
            let stem = f.name.trim_end_matches('_');
            let functional = derivs.iter().find(|d| {
                d.schema.base_name() == stem
                    && d.schema.arguments().len() == f.schema.arguments().len()
                    && same_signature(&d.schema, &f.schema)
            });
            match functional {
                Some(d) if d.is_non_differentiable() => AutogradKind::NonDifferentiable,
                Some(d) => AutogradKind::Differentiable {
                    derivative: d,
                    inplace: true,
                },
                None if DONT_REQUIRE_DERIVATIVE.contains(&stem) => AutogradKind::NonDifferentiable,
                None => AutogradKind::NotImplemented,
            }
        } else if let Some(d) = generated_functional_entry(f, derivs) {
            // A functional form torchgen generates from an in-place one (`zero` from `zero_`'s
            // `autogen:`) takes the in-place form's formulas (gen_variable_type.py's
            // match_differentiability_info, case 3).
            AutogradKind::Differentiable {
                derivative: d,
                inplace: false,
            }
        } else if DONT_REQUIRE_DERIVATIVE.contains(&f.name.as_str()) {
            AutogradKind::NonDifferentiable
        } else {
            AutogradKind::NotImplemented
        };
        kinds.push((f, kind));
    }
    Ok(AutogradPlan { kinds })
}

/// The entry of the in-place form of `f`, when `f` is a `generated` functional form.
fn generated_functional_entry<'a>(
    f: &NativeFunction,
    derivs: &'a [Derivative],
) -> Option<&'a Derivative> {
    if !f.tags.contains(&Tag::Generated) {
        return None;
    }
    let inplace = format!("{}_", f.name);
    derivs.iter().find(|d| {
        d.schema.base_name() == inplace
            && !d.is_non_differentiable()
            && same_signature(&d.schema, &f.schema)
    })
}

/// Whether the function's only kernel is CompositeImplicitAutograd.
pub(crate) fn is_composite_implicit(f: &NativeFunction) -> bool {
    f.dispatch
        .iter()
        .any(|(k, _)| k == "CompositeImplicitAutograd")
}

/// Whether the function writes its `self` in place and returns it (`add_`, `copy_`).
pub(crate) fn is_inplace(f: &NativeFunction) -> bool {
    f.schema.out_arguments().is_empty()
        && f.schema
            .arguments()
            .first()
            .is_some_and(|a| a.name() == "self" && a.is_write())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::parse_yaml;

    #[test]
    fn node_names_follow_pytorch() {
        assert_eq!(node_prefix("add"), "AddBackward");
        assert_eq!(node_prefix("nll_loss_forward"), "NllLossBackward");
        assert_eq!(node_prefix("_softmax"), "SoftmaxBackward");
        assert_eq!(
            node_prefix("_log_softmax_backward_data"),
            "LogSoftmaxBackwardDataBackward"
        );
        assert_eq!(
            node_prefix("max_pool2d_with_indices"),
            "MaxPool2DWithIndicesBackward"
        );
        assert_eq!(node_prefix("_to_copy"), "ToCopyBackward");
        let d = parse_derivatives(
            "- name: div.Tensor(Tensor self, Tensor other) -> Tensor\n  self: div(grad, other)\n\
             - name: div.Scalar(Tensor self, Scalar other) -> Tensor\n  self: div_scalar(grad, other)\n\
             - name: fill_.Scalar(Tensor(a!) self, Scalar value) -> Tensor(a!)\n  node: FillBackward2\n  self: zeros_like(grad)\n",
        )
        .unwrap();
        let names: Vec<&str> = d.iter().map(|d| d.node.as_str()).collect();
        assert_eq!(names, ["DivBackward0", "DivBackward1", "FillBackward2"]);
    }

    #[test]
    fn differentiable_outputs() {
        let d = parse_derivatives(
            "- name: max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)\n  self: value_selecting_reduction_backward(grad, dim, indices, self.sizes(), keepdim)\n\
             - name: eq.Tensor(Tensor self, Tensor other) -> Tensor\n  output_differentiability: [False]\n",
        )
        .unwrap();
        assert!(d[0].output_differentiable(0) && !d[0].output_differentiable(1));
        assert!(d[0].formulas[0].analysis.vars.contains("indices"));
        assert!(d[1].is_non_differentiable());
    }

    #[test]
    fn plan_matches_inplace_forms_and_refuses_strangers() {
        let funcs = parse_yaml(
            "- func: mul.Tensor(Tensor self, Tensor other) -> Tensor\n  dispatch:\n    CPU: mul\n\
             - func: mul_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)\n  dispatch:\n    CPU: mul_\n\
             - func: mul.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)\n  dispatch:\n    CPU: mul_out\n\
             - func: sgn(Tensor self) -> Tensor\n  dispatch:\n    CPU: sgn\n\
             - func: linear(Tensor input, Tensor weight) -> Tensor\n\
             - func: zeros(int[] size) -> Tensor\n  dispatch:\n    CPU: zeros\n",
        )
        .unwrap();
        let derivs = parse_derivatives(
            "- name: mul.Tensor(Tensor self, Tensor other) -> Tensor\n  self: mul(grad, other)\n  other: mul(grad, self)\n",
        )
        .unwrap();
        let p = plan(&funcs, &derivs).unwrap();
        let kinds: Vec<String> = p
            .kinds
            .iter()
            .map(|(_, k)| match k {
                AutogradKind::Differentiable { inplace, .. } => format!("diff{inplace}"),
                k => format!("{k:?}"),
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "difffalse",
                "difftrue",
                "Out",
                "NotImplemented",
                "Composite",
                "NoTensors"
            ]
        );
        let bad = parse_derivatives(
            "- name: linear(Tensor input, Tensor weight) -> Tensor\n  input: grad\n",
        )
        .unwrap();
        assert!(plan(&funcs, &bad)
            .unwrap_err()
            .contains("CompositeImplicitAutograd"));
        let bad = parse_derivatives("- name: nope(Tensor self) -> Tensor\n  self: grad\n").unwrap();
        assert!(plan(&funcs, &bad).unwrap_err().contains("not an operator"));
    }
}
