//! The ADInplaceOrView kernels (PyTorch's `gen_inplace_or_view_type.py`), read from the
//! schema's alias annotations.

use super::*;

/// The ADInplaceOrView kernel of a function, if it writes an argument or returns a view.
/// `differentiable`: whether any output is differentiable (a view whose outputs all are not,
/// `view.dtype`, is a non-differentiable view: see below).
pub(super) fn emit_inplace_or_view(
    w: &mut String,
    reg: &mut String,
    f: &NativeFunction,
    differentiable: bool,
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
            "{}: a view operator must return one tensor or one list of tensors",
            f.schema_text
        ));
    }
    // `Tensor(a)[]`: every element is a view of the base (PyTorch's multi-output views).
    let list_view = view && is_list(f.schema.returns()[0].ty());
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
    if view && !differentiable {
        // PyTorch's `make_variable_non_differentiable_view`: the result shares its base's
        // storage and version counter (the view's metadata already does) but is no view for
        // autograd (no `_base`, no history rebased by in-place writes through it), because
        // no gradient can flow through it (`view.dtype`: `output_differentiability: [False]`).
        writeln!(w, "    Ok(result)\n}}\n").unwrap();
    } else if view {
        let base = f
            .schema
            .arguments()
            .iter()
            .position(|a| a.alias_info().is_some_and(|i| !i.is_write()))
            .ok_or_else(|| format!("{}: a view without an aliased input", f.schema_text))?;
        if list_view {
            // PyTorch's CreationMeta::MULTI_OUTPUT_NODE: named after the function
            // (`SplitWithSizes`) in the error an in-place write through an element raises.
            writeln!(
                w,
                "    Ok(result\n        .into_iter()\n        .enumerate()\n        .map(|(i, t)| as_multi_output_view({}, t, {:?}, i as u32))\n        .collect())\n}}\n",
                sig.args[base].name,
                camel_case(&f.name)
            )
            .unwrap();
        } else {
            writeln!(w, "    Ok(as_view({}, result))\n}}\n", sig.args[base].name).unwrap();
        }
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

/// `split_with_sizes` -> `SplitWithSizes`.
fn camel_case(name: &str) -> String {
    name.split('_')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}
