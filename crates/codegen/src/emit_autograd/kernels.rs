//! The Autograd kernels (PyTorch's `gen_variable_type.py`): recording ones for entries of
//! derivatives.yaml, `out=` ones, and those of operators without a formula.

use super::*;

/// The tensor arguments an entry gives no formula and does not declare non-differentiable:
/// they must not require grad (PyTorch's `check_no_requires_grad`, which takes no
/// `Tensor?[]`).
fn unlisted_inputs<'a>(f: &'a NativeFunction, n: &NodeSpec<'_>) -> Vec<&'a Argument> {
    tensor_args(f)
        .into_iter()
        .filter(|a| {
            !n.inputs.iter().any(|i| i.name() == a.name())
                && !n.d.non_differentiable.iter().any(|x| x == a.name())
                && !is_optional_list(a.ty())
                && a.name() != "output"
        })
        .collect()
}

/// The inputs whose tangents forward mode reads (Note [Forward formulas]): those with a
/// formula; for an entry without forward formulas, every differentiable input, formula or not,
/// since a tangent on any of them raises PyTorch's error (`gen_variable_type.py` checks all
/// its `differentiable_inputs` then).
pub(super) fn tangent_inputs<'a>(f: &'a NativeFunction, n: &NodeSpec<'a>) -> Vec<&'a Argument> {
    let mut inputs = n.inputs.clone();
    if n.d.forward.is_empty() {
        inputs.extend(unlisted_inputs(f, n));
    }
    inputs
}

/// Emits the Autograd kernel of a differentiable function.
pub(super) fn emit_differentiable(
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
    let checked = unlisted_inputs(f, n);
    let mut fast: Vec<&Argument> = n.inputs.clone();
    fast.extend(checked.iter().copied());
    let fast_hint = hint_expr(&fast, &sig, f);
    let diff_hint = rg_hint_expr(&n.inputs, &sig, f);
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
    // Note [Forward formulas]: an input that may carry a tangent goes through the forward-mode
    // function, which comes back here with propagation off to run and record the operator.
    writeln!(
        w,
        "#[inline(never)]\n#[allow(unused_variables, clippy::redundant_clone)]\nfn {stem}_recording(ks: DispatchKeySet{}) -> Result<{}> {{\n    if ({}) && forward_ad_enabled() {{\n        return {stem}_forward_ad(ks{});\n    }}\n    let ks = ks & AFTER_AD;",
        sig.params(),
        sig.ret,
        fw_hint_expr(&tangent_inputs(f, n), &sig, f),
        sig.args.iter().map(|a| format!(", {}", a.name)).collect::<String>(),
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
                    t if is_optional_list(t) => {
                        format!("{p}.iter().map(|t| t.as_ref().map(SavedTensor::input)).collect()")
                    }
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
                    // Method calls on the output itself (`&result.dtype()` would borrow the
                    // value read, not the output).
                    None if d.schema.returns().len() == 1 => ("result".to_owned(), false),
                    None => (field.source.clone(), false),
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
        // One `Tensor[]` return: its elements are the node's outputs, as many as the call made.
        let list_result = f.schema.returns().len() == 1 && is_list(f.schema.returns()[0].ty());
        if list_result && !outputs_saved.is_empty() {
            return Err(format!(
                "{}: a formula reads an output of a list-returning operator",
                f.schema_text
            ));
        }
        for r in &results {
            if list_result {
                writeln!(
                    w,
                    "    let {r}: Vec<Tensor> = {r}.into_iter().map(|t| fresh(t, &[{}])).collect();",
                    ins.join(", ")
                )
                .unwrap();
            } else {
                writeln!(w, "    let {r} = fresh({r}, &[{}]);", ins.join(", ")).unwrap();
            }
        }
        // An output that `bool[N] output_mask` does not ask for is PyTorch's undefined tensor
        // (an empty placeholder here): it gets no history.
        let masked = f
            .schema
            .arguments()
            .iter()
            .any(|a| a.name() == "output_mask" && a.n() == Some(results.len() as i32));
        let outs: Vec<String> = results
            .iter()
            .enumerate()
            .map(|(i, r)| {
                if !d.output_differentiable(i) {
                    "None".to_owned()
                } else if masked {
                    format!("output_mask[{i}].then_some(&{r})")
                } else {
                    format!("Some(&{r})")
                }
            })
            .collect();
        let outs = if list_result {
            "&result.iter().map(Some).collect::<Vec<Option<&Tensor>>>()".to_owned()
        } else {
            format!("&[{}]", outs.join(", "))
        };
        writeln!(w, "    record_function(\n        {:?},\n        {edges},\n        {outs},\n        |edges_: &[Edge]| nodes::{ty} {{", d.node).unwrap();
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
                            rg_hint_expr(&names, &sig, f)
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
pub(super) fn emit_out(w: &mut String, f: &NativeFunction) -> Result<(), String> {
    let sig = Sig::of(f)?;
    let stem = &sig.stem;
    let all = tensor_args(f);
    let hint = hint_expr(&all, &sig, f);
    writeln!(
        w,
        "#[inline(always)]\npub(super) fn {stem}_autograd(ks: DispatchKeySet{p}) -> Result<{r}> {{\n    if !({hint}) {{\n        return {call};\n    }}\n    {stem}_recording(ks{names})\n}}\n\n#[inline(never)]\nfn {stem}_recording(ks: DispatchKeySet{p}) -> Result<{r}> {{\n    if is_grad_enabled() && ({rg}) {{\n        return Err(out_requires_grad_error({base:?}));\n    }}\n    if forward_ad_enabled() && any_forward_grad({tensors}) {{\n        return Err(forward_ad_out_error({fw_base:?}));\n    }}\n    let _guard = AutoDispatchBelowAutograd::new();\n    {call}\n}}\n",
        p = sig.params(),
        r = sig.ret,
        call = sig.call(f, "ks & AFTER_AD"),
        names = sig.args.iter().map(|a| format!(", {}", a.name)).collect::<String>(),
        base = f.name,
        fw_base = format!("{}_out", f.name),
        rg = rg_hint_expr(&all, &sig, f),
        tensors = all_tensors_expr(&all, &sig, f),
    )
    .unwrap();
    Ok(())
}

/// Emits the kernel of a function with no formula (Note [Which kernel an operator gets]).
pub(super) fn emit_not_implemented(w: &mut String, f: &NativeFunction) -> Result<(), String> {
    let sig = Sig::of(f)?;
    let stem = &sig.stem;
    let all = tensor_args(f);
    let hint = hint_expr(&all, &sig, f);
    let call = sig.call(f, "ks");
    let edges = all_tensors_expr(&all, &sig, f);
    writeln!(
        w,
        "#[inline(always)]\npub(super) fn {stem}_autograd(ks: DispatchKeySet{p}) -> Result<{r}> {{\n    if !({hint}) {{\n        return {call_fast};\n    }}\n    {stem}_recording(ks{names})\n}}\n\n#[inline(never)]\nfn {stem}_recording(ks: DispatchKeySet{p}) -> Result<{r}> {{\n    let ks = ks & AFTER_AD;\n    if forward_ad_enabled() && any_forward_grad({tensors}) {{\n        return Err(forward_ad_not_implemented({base:?}));\n    }}\n    if !(is_grad_enabled() && ({rg})) {{\n        return {call};\n    }}",
        p = sig.params(),
        r = sig.ret,
        call_fast = sig.call(f, "ks & AFTER_AD"),
        names = sig.args.iter().map(|a| format!(", {}", a.name)).collect::<String>(),
        base = f.name,
        rg = rg_hint_expr(&all, &sig, f),
        tensors = all_tensors_expr(&all, &sig, f),
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
