//! Structured kernels in the YAML (`structured: True`, `structured_delegate:`) and the glue
//! torchgen writes for each form of a family from its meta function (Note [Structured
//! kernels] in switchboard-ops).

use std::collections::HashMap;

use crate::model::{snake, NativeFunction, StructuredForm, StructuredKind};

// Note [Structured glue]
// As torchgen's `RegisterDispatchKey` does for a structured family, the generator writes one
// kernel per form from the family's meta function (`switchboard_ops::structured::NAME`, which
// takes the functional arguments and the output when there is one):
// - functional: `NAME(args, None)?.allocate()`;
// - in-place: `NAME(args, Some(self))`, then `check_inplace(self, &meta)`, and `self` returned;
// - out=: `NAME(args, Some(out))`, then `resize_out(out, &meta)` (dtype and device checks,
//   resize with PyTorch's warning, restride), the resized `out` returned.
// The glue reads the outputs of the meta function's result through `MetaResult::into_outputs`,
// so that a meta function may also return values its CPU kernel reuses (Note [Precomputed
// values] in switchboard-ops).
// A family of several outputs (`nll_loss_forward`'s `output` and `total_weight`,
// `max_pool2d_with_indices`'s values and indices) has a meta function taking
// `Option<[&Tensor; N]>` and returning `[MetaOutput; N]`; each output is allocated or resized
// as above.
// The Meta backend registers these for every member of a structured family (torchgen registers
// the meta function for the Meta key without a `dispatch:` line, so a structured family's
// entries name no Meta kernel); the CPU backend registers the kernels its `dispatch:` lines
// name.

// Note [Meta functions outside structured families]
// PyTorch leaves some operators out of structured families (`nll_loss2d_forward`,
// `nll_loss2d_backward`) and gives their Meta key a meta registration of its own. Here such an
// operator has a meta function in `switchboard_ops::structured` all the same, which its CPU
// kernel runs for its checks, and its `dispatch:` names it for Meta as
// `Meta: structured::NAME`: the generator writes the functional glue for it (outputs allocated
// from the meta result, Note [Structured glue]). Only a functional overload may name one; its
// `out=` form, `autogen:`'d, calls the functional one.

/// The prefix of a `Meta:` kernel that is a meta function (Note [Meta functions outside
/// structured families]).
pub(crate) const META_FUNCTION: &str = "structured::";

/// Checks the structured families of `funcs` and records each member's form and meta
/// function: a `structured: True` entry is an `out=` overload with one output, a
/// `structured_delegate:` names a structured entry of the same operator, and every structured
/// entry has one functional delegate (which names the meta function).
pub(crate) fn resolve_structured(funcs: &mut [NativeFunction]) -> Result<(), String> {
    let index: HashMap<String, usize> = funcs
        .iter()
        .enumerate()
        .map(|(i, f)| (f.qualified(), i))
        .collect();
    let mut meta_of: HashMap<usize, String> = HashMap::new();
    for f in funcs.iter() {
        let Some(target) = &f.structured_delegate else {
            continue;
        };
        let Some(&t) = index.get(target) else {
            return Err(format!(
                "{}: `structured_delegate: {target}` names no declared overload",
                f.schema_text
            ));
        };
        if !funcs[t].structured {
            return Err(format!(
                "{}: `structured_delegate: {target}` names an overload without `structured: True`",
                f.schema_text
            ));
        }
        if f.structured {
            return Err(format!(
                "{}: an entry is `structured: True` or has a `structured_delegate:`, not both",
                f.schema_text
            ));
        }
        if !is_inplace(f) {
            let meta = if f.overload.is_empty() {
                f.name.clone()
            } else {
                format!("{}_{}", f.name, snake(&f.overload))
            };
            if meta_of.insert(t, meta).is_some() {
                return Err(format!("{target}: two functional overloads delegate to it"));
            }
        }
    }
    for f in funcs.iter() {
        let names_meta_function = f
            .dispatch
            .iter()
            .any(|(k, kernel)| k == "Meta" && kernel.starts_with(META_FUNCTION));
        let functional = !is_inplace(f) && !f.schema.arguments().iter().any(|a| a.is_out());
        if names_meta_function && (f.structured || f.structured_delegate.is_some() || !functional) {
            return Err(format!(
                "{}: only a functional overload outside structured families names its meta function for Meta (`Meta: {META_FUNCTION}NAME`)",
                f.schema_text
            ));
        }
    }
    for (i, f) in funcs.iter_mut().enumerate() {
        let (kind, family) = if f.structured {
            (StructuredKind::Out, i)
        } else if let Some(target) = &f.structured_delegate {
            let kind = if is_inplace(f) {
                StructuredKind::Inplace
            } else {
                StructuredKind::Functional
            };
            (kind, index[target])
        } else {
            continue;
        };
        let Some(meta) = meta_of.get(&family) else {
            return Err(format!(
                "{}: a structured overload needs a functional overload with `structured_delegate: {}`",
                f.schema_text,
                f.qualified()
            ));
        };
        let outs = f.schema.arguments().iter().filter(|a| a.is_out()).count();
        let returns = f.schema.returns();
        let tensors = !returns.is_empty()
            && returns
                .iter()
                .all(|r| matches!(r.ty(), switchboard_schema::Type::Tensor));
        let shape_ok = tensors
            && match kind {
                StructuredKind::Out => outs == returns.len(),
                StructuredKind::Inplace => outs == 0 && returns.len() == 1,
                StructuredKind::Functional => outs == 0,
            };
        if !shape_ok {
            return Err(format!(
                "{}: structured families here return Tensors, one per out argument of their out= overload (with `structured: True`), one for an in-place overload",
                f.schema_text
            ));
        }
        if f.dispatch.iter().any(|(k, _)| k == "Meta") {
            return Err(format!(
                "{}: a structured overload's Meta kernel is its family's meta function: drop `Meta` from `dispatch:`",
                f.schema_text
            ));
        }
        f.structured_form = Some(StructuredForm {
            kind,
            meta: meta.clone(),
            outputs: returns.len(),
        });
    }
    Ok(())
}

fn is_inplace(f: &NativeFunction) -> bool {
    f.name.ends_with('_') && !f.name.ends_with("__")
}

/// The body of the Meta kernel of a structured family member (Note [Structured glue]);
/// `names` are its parameters in schema order. A family of several outputs has a meta
/// function taking `Option<[&Tensor; N]>` and returning `[MetaOutput; N]`.
pub(crate) fn meta_glue(form: &StructuredForm, names: &[&str]) -> String {
    let meta = format!("switchboard_ops::structured::{}", form.meta);
    // The outputs of the meta function's result (Note [Precomputed values] in switchboard-ops).
    let outputs = |args: String| {
        format!("switchboard_ops::structured::MetaResult::into_outputs({meta}({args})?)")
    };
    let n = form.outputs;
    let metas: Vec<String> = (0..n).map(|i| format!("meta{i}")).collect();
    match (form.kind, n) {
        (StructuredKind::Functional, 1) => {
            format!("    Ok({}.allocate()?)", outputs(format!("{}, None", names.join(", "))))
        }
        (StructuredKind::Functional, _) => {
            let allocated: Vec<String> = metas.iter().map(|m| format!("{m}.allocate()?")).collect();
            format!(
                "    let [{}] = {};\n    Ok(({}))",
                metas.join(", "),
                outputs(format!("{}, None", names.join(", "))),
                allocated.join(", ")
            )
        }
        (StructuredKind::Inplace, _) => format!(
            "    let meta = {};\n    switchboard_ops::structured::check_inplace({1}, &meta)?;\n    Ok({1}.clone())",
            outputs(format!("{}, Some({})", names.join(", "), names[0])),
            names[0]
        ),
        (StructuredKind::Out, 1) => {
            let (out, inputs) = names.split_last().expect("an out= overload has an out argument");
            format!(
                "    let meta = {};\n    Ok(switchboard_ops::structured::resize_out({out}, &meta)?)",
                outputs(format!("{}, Some({out})", inputs.join(", ")))
            )
        }
        (StructuredKind::Out, _) => {
            let (inputs, outs) = names.split_at(names.len() - n);
            let resized: Vec<String> = outs
                .iter()
                .zip(&metas)
                .map(|(o, m)| format!("switchboard_ops::structured::resize_out({o}, &{m})?"))
                .collect();
            format!(
                "    let [{}] = {};\n    Ok(({}))",
                metas.join(", "),
                outputs(format!("{}, Some([{}])", inputs.join(", "), outs.join(", "))),
                resized.join(", ")
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::model::{parse_yaml, StructuredKind};

    const FAMILY: &str = "
- func: add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
  structured_delegate: add.out
  dispatch:
    CPU: add_tensor
- func: add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)
  structured: True
  dispatch:
    CPU: add_out
- func: add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)
  structured_delegate: add.out
";

    #[test]
    fn families_resolve() {
        let f = parse_yaml(FAMILY).unwrap();
        let forms: Vec<_> = f
            .iter()
            .map(|f| {
                let s = f.structured_form.as_ref().unwrap();
                (s.kind, s.meta.as_str())
            })
            .collect();
        assert_eq!(
            forms,
            [
                (StructuredKind::Functional, "add_tensor"),
                (StructuredKind::Out, "add_tensor"),
                (StructuredKind::Inplace, "add_tensor"),
            ]
        );
        let code = crate::backend(&f, "Meta", "switchboard_cpu", "switchboard_cpu").unwrap();
        assert!(code
            .contains("switchboard_ops::structured::add_tensor(self_, other, alpha, Some(out))"));
        assert!(code.contains("check_inplace(self_, &meta)"));
        assert!(code.contains("\"add.Tensor\""), "{code}");
    }

    #[test]
    fn families_of_two_outputs() {
        let family = "
- func: nll_loss_forward(Tensor self, Tensor target, Tensor? weight, int reduction, SymInt ignore_index) -> (Tensor output, Tensor total_weight)
  structured_delegate: nll_loss_forward.output
- func: nll_loss_forward.output(Tensor self, Tensor target, Tensor? weight, int reduction, SymInt ignore_index, *, Tensor(a!) output, Tensor(b!) total_weight) -> (Tensor(a!), Tensor(b!))
  structured: True
";
        let f = parse_yaml(family).unwrap();
        assert_eq!(f[0].structured_form.as_ref().unwrap().outputs, 2);
        let code = crate::backend(&f, "Meta", "switchboard_cpu", "switchboard_cpu").unwrap();
        assert!(code.contains("let [meta0, meta1] = switchboard_ops::structured::MetaResult::into_outputs(switchboard_ops::structured::nll_loss_forward(self_, target, weight, reduction, ignore_index, None)?);\n    Ok((meta0.allocate()?, meta1.allocate()?))"), "{code}");
        assert!(code.contains("nll_loss_forward(self_, target, weight, reduction, ignore_index, Some([output, total_weight]))?);\n    Ok((switchboard_ops::structured::resize_out(output, &meta0)?, switchboard_ops::structured::resize_out(total_weight, &meta1)?))"), "{code}");
        let mismatched = family.replace(
            ", Tensor(b!) total_weight) -> (Tensor(a!), Tensor(b!))",
            ") -> (Tensor(a!), Tensor(b!))",
        );
        assert!(parse_yaml(&mismatched)
            .unwrap_err()
            .contains("one per out argument"));
    }

    #[test]
    fn meta_functions_outside_families() {
        let entry = "
- func: nll_loss2d_forward(Tensor self, Tensor target, Tensor? weight, int reduction, SymInt ignore_index) -> (Tensor output, Tensor total_weight)
  dispatch:
    CPU: nll_loss2d_forward
    Meta: structured::nll_loss2d_forward
";
        let f = parse_yaml(entry).unwrap();
        assert!(f[0].structured_form.is_none());
        let code = crate::backend(&f, "Meta", "switchboard_cpu", "switchboard_cpu").unwrap();
        assert!(code.contains("let [meta0, meta1] = switchboard_ops::structured::MetaResult::into_outputs(switchboard_ops::structured::nll_loss2d_forward(self_, target, weight, reduction, ignore_index, None)?);\n    Ok((meta0.allocate()?, meta1.allocate()?))"), "{code}");
        assert!(
            code.contains("\"switchboard_ops::structured::nll_loss2d_forward [Meta]\""),
            "{code}"
        );
        let cpu = crate::backend(&f, "CPU", "crate", "switchboard_cpu").unwrap();
        assert!(cpu.contains("crate::nll_loss2d_forward(self_"), "{cpu}");
        let in_place = "- func: relu_(Tensor(a!) self) -> Tensor(a!)\n  dispatch:\n    Meta: structured::relu\n";
        assert!(parse_yaml(in_place)
            .unwrap_err()
            .contains("only a functional overload"));
    }

    #[test]
    fn malformed_families_fail() {
        let no_target = FAMILY.replace(
            "structured_delegate: add.out\n  dispatch",
            "structured_delegate: add.outt\n  dispatch",
        );
        assert!(parse_yaml(&no_target)
            .unwrap_err()
            .contains("names no declared overload"));
        let not_structured = FAMILY.replace("  structured: True\n", "");
        assert!(parse_yaml(&not_structured)
            .unwrap_err()
            .contains("without `structured: True`"));
        let meta_named = FAMILY.replace("CPU: add_out", "CPU, Meta: add_out");
        assert!(parse_yaml(&meta_named).unwrap_err().contains("drop `Meta`"));
        let orphan =
            "- func: neg.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)\n  structured: True\n";
        assert!(parse_yaml(orphan)
            .unwrap_err()
            .contains("needs a functional overload"));
    }
}
