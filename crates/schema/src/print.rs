//! Printing arguments and schemas exactly as PyTorch's `operator<<` does.
//!
//! Note [Argument printing]
//! PyTorch prints an argument's *real* type with these rules:
//! * a top-level `T?` prints as `T`, then the annotation, then `?`
//!   (`Tensor(a!)?`), because `T?(a!)` would not parse;
//! * a (possibly optional) list prints its element type, the element's
//!   annotation (`contained_types()[0]`), then `[N]` or `[]`;
//! * the argument's own annotation is printed only if it has sets;
//! * a string default on a `str`/`str?` argument is quoted and escaped, an
//!   `int[]` default whose elements are all equal prints as that element
//!   (`int[2] stride=1`, but also `int[] x=1` for `[1, 1]`), and any other
//!   default prints as its `IValue` (strings unquoted).

use crate::argument::Argument;
use crate::default::{write_quoted, DefaultValue};
use crate::schema::FunctionSchema;
use crate::types::Type;

pub(crate) fn write_arg_type(out: &mut String, arg: &Argument) {
    let ty = arg.ty();
    let (is_opt, unopt) = match ty {
        Type::Optional(inner) => (true, &**inner),
        other => (false, other),
    };
    if let Type::List(elem) = unopt {
        elem.write_schema(out);
        if let Some(contained) = arg.alias_info().and_then(|a| a.contained_types().first()) {
            out.push_str(&contained.to_string());
        }
        out.push('[');
        if let Some(n) = arg.n() {
            use std::fmt::Write;
            let _ = write!(out, "{n}");
        }
        out.push(']');
    } else {
        unopt.write_schema(out);
    }
    if let Some(alias) = arg.alias_info() {
        if !alias.before_set_is_empty() {
            out.push_str(&alias.to_string());
        }
    }
    if is_opt {
        out.push('?');
    }
}

pub(crate) fn write_default(out: &mut String, ty: &Type, value: &DefaultValue) {
    let unopt = ty.optional_element().unwrap_or(ty);
    match value {
        DefaultValue::Str(bytes) if *ty == Type::Str || *unopt == Type::Str => {
            write_quoted(out, bytes)
        }
        DefaultValue::List(items) if ty.list_element() == Some(&Type::Int) && items.len() > 1 => {
            if items.iter().all(|v| v == &items[0]) {
                items[0].write(out);
            } else {
                value.write(out);
            }
        }
        other => other.write(out),
    }
}

pub(crate) fn write_argument(out: &mut String, arg: &Argument) {
    write_arg_type(out, arg);
    if !arg.name().is_empty() {
        out.push(' ');
        out.push_str(arg.name());
    }
    if let Some(d) = arg.default_value() {
        out.push('=');
        write_default(out, arg.ty(), d);
    }
}

pub(crate) fn write_schema(out: &mut String, schema: &FunctionSchema) {
    out.push_str(schema.name());
    if !schema.overload_name().is_empty() {
        out.push('.');
        out.push_str(schema.overload_name());
    }
    out.push('(');
    let mut seen_kwarg_only = false;
    for (i, arg) in schema.arguments().iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        if arg.kwarg_only() && !seen_kwarg_only {
            out.push_str("*, ");
            seen_kwarg_only = true;
        }
        write_argument(out, arg);
    }
    if schema.is_vararg() {
        if !schema.arguments().is_empty() {
            out.push_str(", ");
        }
        out.push_str("...");
    }
    out.push_str(") -> ");

    let returns = schema.returns();
    let varret = schema.is_varret();
    // Parentheses are skipped for exactly one return (no `...`) or for a
    // lone `...`; a single return that itself starts with `(` (a tuple
    // type) keeps them so that it reparses as one return.
    let mut need_paren = !((returns.len() == 1 && !varret) || (returns.is_empty() && varret));
    let mut body = String::new();
    for (i, ret) in returns.iter().enumerate() {
        if i > 0 {
            body.push_str(", ");
        }
        write_argument(&mut body, ret);
    }
    if returns.len() == 1 && !varret && body.starts_with('(') {
        need_paren = true;
    }
    if varret {
        if !returns.is_empty() {
            body.push_str(", ");
        }
        body.push_str("...");
    }
    if need_paren {
        out.push('(');
        out.push_str(&body);
        out.push(')');
    } else {
        out.push_str(&body);
    }
}
