//! Checking a typed kernel's inferred schema against an operator's declared schema.

use switchboard_schema::{FunctionSchema, OperatorName};

use crate::debug::RegistrationDebug;
use crate::error::{DispatchError, DispatchErrorKind, Result, SchemaMismatch};
use crate::kernel::KernelFunction;
use crate::operator::{AnnotatedKernel, SchemaRecord};

/// The schema PyTorch infers for a typed kernel, printed: `(Tensor _0, int _1) -> Tensor _0`.
pub(crate) fn inferred_schema_string(kernel: &KernelFunction) -> Option<String> {
    let (args, rets) = kernel.inferred_signature()?;
    Some(format_inferred(args, rets))
}

pub(crate) fn format_inferred(args: &[&str], rets: &[&str]) -> String {
    let named = |types: &[&str]| -> Vec<String> {
        types
            .iter()
            .enumerate()
            .map(|(i, t)| format!("{t} _{i}"))
            .collect()
    };
    let args = named(args).join(", ");
    let rets = match rets.len() {
        1 => named(rets).remove(0),
        _ => format!("({})", named(rets).join(", ")),
    };
    format!("({args}) -> {rets}")
}

/// Writes a declared type into `buf` as the check compares it: the schema's type without alias
/// annotations, with `SymInt` read as `int` (Rust kernels take plain integers). One buffer
/// serves a whole check, so that registering a kernel does not allocate per argument.
fn declared_type(buf: &mut String, t: &switchboard_schema::Type) {
    buf.clear();
    t.write_schema(buf);
    // A byte scan: `str::contains` sets up a two-way searcher, a hundred instructions for a
    // type name of a few bytes.
    if buf.as_bytes().windows(6).any(|w| w == b"SymInt") {
        *buf = buf.replace("SymInt", "int");
    }
}

// Note [Checking kernel types without formatting]
// Every typed kernel registered to a defined operator is checked against its schema
// (`OperatorEntry::checkSchema`), which compares each declared type, printed without alias
// annotations and with `SymInt` read as `int`, to the type inferred from the kernel's Rust
// signature. Printing every type into a string cost over a thousand instructions per kernel at
// start-up. `declared_type_is` instead matches the common types (builtins, their lists and
// optionals) against the inferred text in place, as prefixes; only the rare types it does not
// know (type variables, tuples, unions, ...) and actual mismatches, whose error quotes the
// declared type, print it. The result is the same comparison either way.

/// Whether `t`, written as `declared_type` writes it, is exactly `inferred`; `None` when `t`
/// is a type this fast comparison leaves to the printed form (Note [Checking kernel types
/// without formatting]).
fn declared_type_is(t: &switchboard_schema::Type, inferred: &str) -> Option<bool> {
    Some(strip_declared(t, inferred)?.is_some_and(str::is_empty))
}

/// What follows the spelling of `t` in `s` (`Some(None)`: `s` does not start with it).
fn strip_declared<'a>(t: &switchboard_schema::Type, s: &'a str) -> Option<Option<&'a str>> {
    use switchboard_schema::Type;
    Some(match t {
        Type::SymInt => s.strip_prefix("int"),
        Type::List(inner) => strip_declared(inner, s)?.and_then(|r| r.strip_prefix("[]")),
        Type::Optional(inner) => strip_declared(inner, s)?.and_then(|r| r.strip_prefix('?')),
        other => s.strip_prefix(other.builtin_name()?),
    })
}

/// Why an inferred signature does not fit a schema (`findSchemaDifferences`), if it does not.
pub(crate) fn schema_difference(
    schema: &FunctionSchema,
    args: &[&str],
    rets: &[&str],
) -> Option<String> {
    let (dargs, drets) = (schema.arguments(), schema.returns());
    if dargs.len() != args.len() {
        return Some(format!(
            "The number of arguments is different. {} vs {}.",
            dargs.len(),
            args.len()
        ));
    }
    if drets.len() != rets.len() {
        return Some(format!(
            "The number of returns is different. {} vs {}.",
            drets.len(),
            rets.len()
        ));
    }
    // Only allocated when a type needs printing (Note [Checking kernel types without
    // formatting]).
    let mut d = String::new();
    for (i, (arg, t)) in dargs.iter().zip(args).enumerate() {
        if declared_type_is(arg.ty(), t) == Some(true) {
            continue;
        }
        declared_type(&mut d, arg.ty());
        if d != *t {
            return Some(format!("Type mismatch in argument {}: {d} vs {t}.", i + 1));
        }
    }
    for (i, (ret, t)) in drets.iter().zip(rets).enumerate() {
        if declared_type_is(ret.ty(), t) == Some(true) {
            continue;
        }
        declared_type(&mut d, ret.ty());
        if d != *t {
            return Some(format!("Type mismatch in return {}: {d} vs {t}.", i + 1));
        }
    }
    None
}

/// Checks a registered kernel against a declared schema (`OperatorEntry::checkSchema`); kernels
/// without an inferred schema (boxed, fallthrough) always fit.
pub(crate) fn check_schema(
    name: &OperatorName,
    schema: &FunctionSchema,
    schema_debug: &RegistrationDebug,
    kernel: &AnnotatedKernel,
) -> Result<()> {
    let Some((args, rets)) = kernel.kernel.inferred_signature() else {
        return Ok(());
    };
    match schema_difference(schema, args, rets) {
        None => Ok(()),
        Some(reason) => Err(DispatchError::from(DispatchErrorKind::SchemaMismatch(
            Box::new(SchemaMismatch {
                op: name.to_string(),
                expected: schema.to_string(),
                expected_debug: schema_debug.to_string(),
                inferred: format_inferred(args, rets),
                inferred_debug: kernel.debug.to_string(),
                reason,
            }),
        ))),
    }
}

// Note [Schema checks remembered per signature]
// The kernels of one operator (CPU, Meta, composite, Autograd) usually share their Rust
// calling convention, and the check's outcome depends only on the schema and that convention,
// which the kernel's signature id identifies exactly (Note [Signature ids]: equal ids, equal
// argument and return types). A defined schema therefore remembers the last signature id that
// passed, and a kernel with that id is not checked again. The memo lives in the `SchemaRecord`,
// so a schema defined anew starts without one.

/// [`check_schema`] against a defined schema, skipped for a kernel whose signature already passed
/// against it (Note [Schema checks remembered per signature]).
pub(crate) fn check_against_record(
    name: &OperatorName,
    record: &SchemaRecord,
    kernel: &AnnotatedKernel,
) -> Result<()> {
    use std::sync::atomic::Ordering;
    let sig = kernel.kernel.signature_id();
    if sig != 0 && record.fitting_signature.load(Ordering::Relaxed) == sig {
        return Ok(());
    }
    check_schema(name, &record.schema, &record.debug, kernel)?;
    record.fitting_signature.store(sig, Ordering::Relaxed);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(s: &str) -> FunctionSchema {
        FunctionSchema::parse(s).unwrap()
    }

    #[test]
    fn fast_comparison_agrees_with_the_printed_types() {
        let s = schema(
            "f(Tensor(a!) self, SymInt n, SymInt[] s, int[]? o, Tensor?[] l, Scalar? x, t v, \
             (int, int) p) -> Tensor(a!)",
        );
        let inferred = [
            "Tensor",
            "int",
            "int[]",
            "int[]?",
            "Tensor?[]",
            "Scalar?",
            "t",
            "(int, int)",
        ];
        let mut d = String::new();
        for (arg, t) in s.arguments().iter().zip(inferred) {
            declared_type(&mut d, arg.ty());
            assert_eq!(d, t);
            // Known types compare in place; type variables and tuples are left to the printed
            // form.
            let fast = declared_type_is(arg.ty(), t);
            assert!(fast == Some(true) || fast.is_none(), "{t}");
            for other in ["Tensor", "int", "int[", "int[]?x", "Tensor?", "", "SymInt"] {
                if other != t {
                    assert_ne!(declared_type_is(arg.ty(), other), Some(true), "{t} {other}");
                }
            }
        }
        assert_eq!(schema_difference(&s, &inferred, &["Tensor"]), None);
    }

    #[test]
    fn mismatches_keep_the_declared_type_in_the_message() {
        let s = schema("f(Tensor a, SymInt[] b) -> Tensor");
        assert_eq!(
            schema_difference(&s, &["Tensor", "int"], &["Tensor"]).as_deref(),
            Some("Type mismatch in argument 2: int[] vs int.")
        );
        assert_eq!(
            schema_difference(&s, &["Tensor", "int[]"], &["int"]).as_deref(),
            Some("Type mismatch in return 1: Tensor vs int.")
        );
    }
}
