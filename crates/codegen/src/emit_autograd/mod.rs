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

mod forward;
mod inplace_or_view;
mod kernels;
mod nodes;
mod signature;

use forward::*;
use inplace_or_view::*;
use kernels::*;
use nodes::*;
use signature::*;

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
// The flags tested are the requires_grad and tangent bits of one word; the recording function
// hands an input that may carry a tangent to the operator's forward-mode function (Note
// [Forward formulas]), which comes back to it with tangent propagation off.

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
        let forward = matches!(kind, AutogradKind::Differentiable { derivative, .. } if !derivative.forward.is_empty());
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
                emit_forward(&mut kernels, f, spec, *inplace)?;
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
            let differentiable = !matches!(kind, AutogradKind::NonDifferentiable);
            emit_inplace_or_view(&mut adiv, &mut reg_adiv, f, differentiable)?;
        }
        writeln!(
            table,
            "    OperatorAutograd {{ operator: {q:?}, kind: AutogradKind::{kind_name}, node: {node:?}, differentiable_inputs: &[{}], forward_formula: {forward} }},",
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
        "/// The Autograd kernels (Note [Which kernel an operator gets]).\nmod autograd_kernels {{\n    use super::*;\n    #[allow(unused_imports)]\n    use crate::formulas::*;\n    #[allow(unused_imports)]\n    use switchboard_ops::*;\n\n{}}}\n",
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
  result: other_t * self_p + self_t * other_p
- name: view(Tensor(a) self, SymInt[] size) -> Tensor(a)
  self: reshape(grad, self.sizes())
  result: auto_linear
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
    fn forward_formulas() {
        let code = generate();
        for expected in [
            // the recording function hands dual inputs to the forward-mode function
            "if (fw_hint(self_) | fw_hint(other)) && forward_ad_enabled() {\n            return mul_forward_ad(ks, self_, other);",
            // an explicit formula, with zeros for an input without a tangent
            "let self_t_owned_ = tangent_or_zeros(&self_tr_, self_)?;",
            "into_grad(other_t*self_p+self_t*other_p)?",
            "set_forward_grad_at(&result, level_, t_)?;",
            // the innermost level with a tangent; the others are the operator's own business
            "let Some(level_) = tangent_level(self_).max(tangent_level(other)) else {",
            "let _outer_levels_ = outer_levels_only(level_);",
            // in place: `self` before the write, and the tangent updated in place
            "let original_self_p_ = ops::clone(self_)?;",
            "update_inplace_forward_grad_at(self_, level_, t_)?;",
            // auto_linear: the operator on the tangent
            "into_grad(rd::view(ks_full_, self_t, size))?",
            // no formula: PyTorch's error
            "return Err(forward_ad_not_implemented(\"sgn\"));",
            "return Err(forward_ad_out_error(\"mul_out\"));",
        ] {
            assert!(code.contains(expected), "{expected}\n----\n{code}");
        }
    }

    #[test]
    fn kernels_of_every_kind() {
        let code = generate();
        for expected in [
            // fast path
            "pub(super) fn mul_autograd(ks: DispatchKeySet, self_: &Tensor, other: &Tensor) -> Result<Tensor> {\n        if !(hint(self_) | hint(other)) {\n            return rd::mul(ks & AFTER_AD, self_, other);",
            // in-place: checks, PyTorch's original_self, rebase
            "check_inplace(self_, requires_grad_)?;",
            "let original_self_ = if rg_hint(other) { Some(ops::clone(self_)?) } else { None };",
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
