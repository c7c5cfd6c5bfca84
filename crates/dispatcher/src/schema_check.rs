//! Checking a typed kernel's inferred schema against an operator's declared schema.

use switchboard_schema::{FunctionSchema, OperatorName};

use crate::debug::RegistrationDebug;
use crate::error::{DispatchError, DispatchErrorKind, Result, SchemaMismatch};
use crate::kernel::KernelFunction;
use crate::operator::AnnotatedKernel;

/// The schema PyTorch infers for a typed kernel, printed: `(Tensor _0, int _1) -> Tensor _0`.
pub(crate) fn inferred_schema_string(kernel: &KernelFunction) -> Option<String> {
    let (args, rets) = kernel.inferred_signature()?;
    Some(format_inferred(&args, &rets))
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
    let mut d = String::with_capacity(32);
    for (i, (arg, t)) in dargs.iter().zip(args).enumerate() {
        declared_type(&mut d, arg.ty());
        if d != *t {
            return Some(format!("Type mismatch in argument {}: {d} vs {t}.", i + 1));
        }
    }
    for (i, (ret, t)) in drets.iter().zip(rets).enumerate() {
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
    match schema_difference(schema, &args, &rets) {
        None => Ok(()),
        Some(reason) => Err(DispatchError::from(DispatchErrorKind::SchemaMismatch(
            Box::new(SchemaMismatch {
                op: name.to_string(),
                expected: schema.to_string(),
                expected_debug: schema_debug.to_string(),
                inferred: format_inferred(&args, &rets),
                inferred_debug: kernel.debug.to_string(),
                reason,
            }),
        ))),
    }
}
