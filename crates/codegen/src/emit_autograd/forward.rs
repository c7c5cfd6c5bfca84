//! The forward-mode part of the Autograd kernels (PyTorch's `gen_variable_type.py` forward
//! derivatives): read the input tangents, run the operator, evaluate the `result:` formulas
//! of derivatives.yaml and attach the output tangents.

use super::*;
use crate::derivatives::ForwardFormula;
use crate::formula::{analyse, substitute};

// Note [Forward formulas]
// A `result:` (or `result0:`, or an output's name) line of derivatives.yaml gives the tangent
// of that output, as in PyTorch: a Rust expression over the inputs' primals (`self_p`) and
// tangents (`self_t`: zeros for an input without one, PyTorch's `_efficientzerotensor`), the
// other arguments and the outputs (`result`: for an in-place operator, `self` after the
// write; `self_p` is then `self` before it, a clone). Two shorthands are expanded here, as
// PyTorch's `load_derivatives.py` does:
// - `auto_element_wise` (one differentiable input): the Jacobian is diagonal, so the tangent
//   is the backward formula of that input with `grad` replaced by its tangent and the input by
//   its primal.
// - `auto_linear`: the operator is linear in its differentiable inputs, so the tangent is the
//   operator applied to their tangents (a view operator gives a view of the tangent).
// An operator with an entry but no forward formula raises PyTorch's "Trying to use forward AD
// with {op} that does not support it" when an input carries a tangent.

/// The expression computing one output's tangent, and whether it reads `self_p`.
struct Tangent {
    output: usize,
    code: String,
    reads: BTreeSet<String>,
}

fn expand(
    d: &Derivative,
    f: &NativeFunction,
    sig: &Sig,
    inputs: &[&Argument],
    fw: &ForwardFormula,
) -> Result<Tangent, String> {
    let schema = &d.schema;
    let outputs = output_names(schema);
    let tensor_arg = |n: &str| {
        schema
            .argument_index(n)
            .is_some_and(|i| schema.arguments()[i].ty().is_tensor_like())
    };
    let text = match fw.text.as_str() {
        "auto_linear" => {
            let args: Vec<String> = f
                .schema
                .arguments()
                .iter()
                .zip(&sig.args)
                .map(|(a, r)| {
                    if inputs.iter().any(|i| i.name() == a.name()) {
                        format!("{}_t", a.name())
                    } else {
                        r.name.clone()
                    }
                })
                .collect();
            let sep = if args.is_empty() { "" } else { ", " };
            let reads = inputs.iter().map(|a| format!("{}_t", a.name())).collect();
            return Ok(Tangent {
                output: fw.output,
                code: format!("rd::{}(ks_full_{sep}{})", f.api_name, args.join(", ")),
                reads,
            });
        }
        "auto_element_wise" => {
            let [input] = inputs else {
                return Err(format!(
                    "{}: auto_element_wise works for functions with a single differentiable \
                     input",
                    d.schema
                ));
            };
            let backward = d
                .formulas
                .iter()
                .find(|g| g.inputs.iter().any(|i| i == input.name()))
                .ok_or_else(|| {
                    format!("{}: auto_element_wise needs a backward formula", d.schema)
                })?;
            let name = input.name();
            substitute(&backward.text, &|v| match v {
                "grad" => Some(format!("{name}_t")),
                v if v == name => Some(format!("{name}_p")),
                _ => None,
            })?
        }
        text => text.to_owned(),
    };
    let is_var = |n: &str| {
        schema.argument_index(n).is_some()
            || outputs.iter().any(|names| names.iter().any(|m| m == n))
            || n.strip_suffix("_p")
                .or_else(|| n.strip_suffix("_t"))
                .is_some_and(tensor_arg)
    };
    let a = analyse(&text, &is_var, &|_| false, &|_| false)
        .map_err(|e| format!("{}: {e}", d.schema))?;
    Ok(Tangent {
        output: fw.output,
        code: a.code,
        reads: a.vars,
    })
}

/// Emits `{stem}_forward_ad`, which the recording function calls when an input may carry a
/// tangent (Note [Forward formulas]).
pub(super) fn emit_forward(
    w: &mut String,
    f: &NativeFunction,
    n: &NodeSpec<'_>,
    inplace: bool,
) -> Result<(), String> {
    let d = n.d;
    let sig = Sig::of(f)?;
    let stem = &sig.stem;
    let names: String = sig.args.iter().map(|a| format!(", {}", a.name)).collect();
    let param_of = |a: &str| -> String {
        let i = f.schema.argument_index(a).expect("argument");
        sig.args[i].name.clone()
    };
    writeln!(
        w,
        "#[inline(never)]\n#[allow(unused_variables, unused_mut, clippy::redundant_clone, clippy::let_unit_value)]\nfn {stem}_forward_ad(ks_full_: DispatchKeySet{}) -> Result<{}> {{",
        sig.params(),
        sig.ret
    )
    .unwrap();
    // The innermost visible level at which an input has a tangent (Note [Forward-mode AD] in
    // switchboard-autograd), and the inputs' tangents at that level.
    let mut levels = Vec::new();
    let mut raws = Vec::new();
    for a in &super::kernels::tangent_inputs(f, n) {
        let p = param_of(a.name());
        let raw = format!("{}_tr_", a.name());
        match a.ty() {
            Type::Tensor => {
                levels.push(format!("tangent_level({p})"));
                raws.push(format!("    let {raw} = forward_grad_at({p}, level_);"));
            }
            t if is_optional_tensor(t) => {
                levels.push(format!("tangent_level_optional({p})"));
                raws.push(format!(
                    "    let {raw} = {p}.and_then(|t| forward_grad_at(t, level_));"
                ));
            }
            t if is_list(t) => {
                levels.push(format!("tangent_level_list({p})"));
                raws.push(format!("    let {raw}: Vec<Option<Tensor>> = {p}.iter().map(|t| forward_grad_at(t, level_)).collect();"));
            }
            _ => {
                // `Tensor?[]` inputs take no tangent.
                continue;
            }
        }
    }
    let level = match levels.split_first() {
        None => "None::<u64>".to_owned(),
        Some((first, rest)) => rest
            .iter()
            .fold(first.clone(), |acc, l| format!("{acc}.max({l})")),
    };
    writeln!(
        w,
        "    let Some(level_) = {level} else {{\n        return without_forward_grad(|| {stem}_recording(ks_full_{names}));\n    }};"
    )
    .unwrap();
    for r in &raws {
        writeln!(w, "{r}").unwrap();
    }
    if d.forward.is_empty() {
        writeln!(w, "    Err(forward_ad_not_implemented({:?}))\n}}\n", f.name).unwrap();
        return Ok(());
    }
    let tangents: Vec<Tangent> = d
        .forward
        .iter()
        .map(|fw| expand(d, f, &sig, &n.inputs, fw))
        .collect::<Result<_, _>>()?;
    let reads_original_self = inplace
        && tangents
            .iter()
            .any(|t| t.reads.contains("self_p") || t.reads.contains("self"));
    // The operator and the formula run with this level hidden: their operators compute the
    // outer levels' tangents.
    writeln!(w, "    let _outer_levels_ = outer_levels_only(level_);").unwrap();
    if reads_original_self {
        writeln!(
            w,
            "    let original_self_p_ = ops::clone({})?;",
            param_of("self")
        )
        .unwrap();
    }
    let (pat, results) = result_pattern(f);
    writeln!(w, "    let {pat} = {stem}_recording(ks_full_{names})?;").unwrap();
    let list_result = f.schema.returns().len() == 1 && is_list(f.schema.returns()[0].ty());
    if !inplace && !list_result {
        let ins: Vec<String> = tensor_args(f)
            .iter()
            .filter(|a| *a.ty() == Type::Tensor)
            .map(|a| param_of(a.name()))
            .collect();
        for r in &results {
            writeln!(w, "    let {r} = fresh({r}, &[{}]);", ins.join(", ")).unwrap();
        }
    }
    writeln!(w, "    let tangents_ = {{").unwrap();
    // Bindings of everything the formulas read.
    let mut reads: BTreeSet<String> = BTreeSet::new();
    for t in &tangents {
        reads.extend(t.reads.iter().cloned());
    }
    let outputs = output_names(&d.schema);
    for v in &reads {
        let id = var_ident(v);
        if let Some(nr) = outputs
            .iter()
            .position(|names| names.iter().any(|m| m == v))
        {
            let r = if inplace {
                param_of("self")
            } else {
                format!("&{}", results[nr])
            };
            writeln!(w, "        let {id} = {r};").unwrap();
            continue;
        }
        if let Some(a) = arg(d, v) {
            let p = param_of(v);
            if *a.ty() == Type::Scalar {
                writeln!(w, "        let {id}: Scalar = {p}.get();").unwrap();
            } else if id != p {
                writeln!(w, "        let {id} = {p};").unwrap();
            }
            continue;
        }
        if let Some(name) = v.strip_suffix("_p") {
            if inplace && name == "self" {
                writeln!(w, "        let {id} = &original_self_p_;").unwrap();
            } else {
                writeln!(w, "        let {id} = {};", param_of(name)).unwrap();
            }
            continue;
        }
        if let Some(name) = v.strip_suffix("_t") {
            let a = arg(d, name).expect("checked by expand");
            let p = param_of(name);
            let raw = format!("{name}_tr_");
            let is_input = n.inputs.iter().any(|i| i.name() == name);
            match a.ty() {
                Type::Tensor if is_input => writeln!(
                    w,
                    "        let {id}_owned_ = tangent_or_zeros(&{raw}, {p})?;\n        let {id} = &{id}_owned_;"
                ),
                Type::Tensor => writeln!(
                    w,
                    "        let {id}_owned_ = tangent_or_zeros(&None, {p})?;\n        let {id} = &{id}_owned_;"
                ),
                t if is_optional_tensor(t) && is_input => writeln!(
                    w,
                    "        let {id}_owned_ = match {p} {{ Some(p) => Some(tangent_or_zeros(&{raw}, p)?), None => None }};\n        let {id} = {id}_owned_.as_ref();"
                ),
                t if is_list(t) && is_input => writeln!(
                    w,
                    "        let {id}_owned_: Vec<Tensor> = {p}.iter().zip(&{raw}).map(|(p, t)| tangent_or_zeros(t, p)).collect::<Result<_>>()?;\n        let {id} = &{id}_owned_[..];"
                ),
                t => {
                    return Err(format!(
                        "{}: a forward formula reads the tangent of `{name}` ({t}), which has none",
                        d.schema
                    ))
                }
            }
            .unwrap();
            continue;
        }
        return Err(format!("{}: forward formula variable `{v}`", d.schema));
    }
    if list_result {
        let [t] = &tangents[..] else {
            return Err(format!(
                "{}: one forward formula for a list output",
                d.schema
            ));
        };
        writeln!(
            w,
            "        let t_: Vec<Tensor> = {}?;\n        t_\n    }};",
            t.code
        )
        .unwrap();
        writeln!(
            w,
            "    for (r_, t_) in result.iter().zip(tangents_) {{\n        set_forward_grad_at(r_, level_, t_)?;\n    }}\n    Ok(result)\n}}\n"
        )
        .unwrap();
        return Ok(());
    }
    let mut slots = vec!["None".to_owned(); results.len()];
    for t in &tangents {
        slots[t.output] = format!("into_grad({})?", t.code);
    }
    writeln!(w, "        [{}]\n    }};", slots.join(", ")).unwrap();
    writeln!(
        w,
        "    let [{}] = tangents_;",
        (0..results.len())
            .map(|i| format!("t{i}_"))
            .collect::<Vec<_>>()
            .join(", ")
    )
    .unwrap();
    for (i, r) in results.iter().enumerate() {
        if !tangents.iter().any(|t| t.output == i) {
            continue;
        }
        if inplace {
            writeln!(
                w,
                "    if let Some(t_) = t{i}_ {{\n        update_inplace_forward_grad_at({}, level_, t_)?;\n    }}",
                param_of("self")
            )
            .unwrap();
        } else {
            writeln!(
                w,
                "    if let Some(t_) = t{i}_ {{\n        set_forward_grad_at(&{r}, level_, t_)?;\n    }}"
            )
            .unwrap();
        }
    }
    if inplace || results.len() == 1 {
        writeln!(w, "    Ok(result)\n}}\n").unwrap();
    } else {
        writeln!(w, "    Ok(({}))\n}}\n", results.join(", ")).unwrap();
    }
    Ok(())
}
