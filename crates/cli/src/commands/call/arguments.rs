//! The call's operator and arguments: the operator found by name (or the closest names when
//! it is unknown), the `NAME=VALUE` arguments matched to its schema, and the boxed stack built
//! from them.

use std::path::Path;

use switchboard::dispatcher::{
    DispatchError, DispatchErrorKind, Dispatcher, IValue, OperatorHandle, SchemaRecord, Stack,
};
use switchboard::schema::{Argument, FunctionSchema, OperatorName};

use super::value::{self, Inputs, ValueError};
use super::{one_line, CallError};

/// Finds the operator: the namespace defaults to `aten`.
pub(super) fn resolve(
    d: &Dispatcher,
    text: &str,
) -> Result<(OperatorHandle, std::sync::Arc<SchemaRecord>), CallError> {
    let parsed = OperatorName::parse(text.trim()).map_err(|e| CallError::InvalidOperatorName {
        name: text.to_owned(),
        reason: parse_error_reason(&e.to_string()),
    })?;
    let full = match parsed.namespace() {
        Some(_) => parsed,
        None => OperatorName::new(format!("aten::{}", parsed.name()), parsed.overload_name()),
    };
    let found = d
        .find_schema_or_throw(&full.to_string())
        .map(|op| op.schema().map(|record| (op, record)));
    match found {
        Ok(Some(found)) => Ok(found),
        // Deregistered between the lookup and now.
        Ok(None) => Err(unknown_operator(d, &full, None)),
        Err(e) => Err(unknown_operator(d, &full, Some(e))),
    }
}

/// A schema parser message in one line: `expected eof but found ':' here:\n<input>\n  ~ <--- HERE`
/// becomes `expected eof but found ':' at column 3`.
pub(crate) fn parse_error_reason(message: &str) -> String {
    let mut lines = message.lines();
    let first = lines.next().unwrap_or_default();
    let Some(what) = first.strip_suffix(" here:") else {
        return one_line(message);
    };
    match lines.find_map(|l| l.contains("<--- HERE").then(|| l.find('~'))) {
        Some(Some(col)) => format!("{what} at column {}", col + 1),
        _ => what.to_owned(),
    }
}

pub(crate) fn unknown_operator(
    d: &Dispatcher,
    full: &OperatorName,
    e: Option<DispatchError>,
) -> CallError {
    let all = d.list_operators();
    let overloads: Vec<String> = all
        .iter()
        .filter(|n| n.name() == full.name() && *n != full)
        .filter(|n| d.find_schema(&n.to_string()).is_some())
        .map(ToString::to_string)
        .collect();
    let hint = match e.as_ref().map(DispatchError::kind) {
        _ if !overloads.is_empty() => format!("; its overloads are: {}", overloads.join(", ")),
        Some(DispatchErrorKind::UnknownOperator { suggestions, .. }) => {
            match suggestions.trim_start() {
                "" if all.is_empty() => " (no operators are registered)".into(),
                "" => String::new(),
                s if s.starts_with("Did you mean") => format!(". {s}"),
                s => format!(" {s}"),
            }
        }
        Some(_) => format!(
            ": {}",
            one_line(&e.map(|e| e.to_string()).unwrap_or_default())
        ),
        None => String::new(),
    };
    CallError::UnknownOperator {
        name: full.to_string(),
        hint,
    }
}

/// The value text given for each schema argument, by position.
pub(super) fn named_values<'a>(
    schema: &FunctionSchema,
    op_name: &str,
    args: &'a [String],
) -> Result<Vec<Option<&'a str>>, CallError> {
    let params = schema.arguments();
    let mut given: Vec<Option<&str>> = vec![None; params.len()];
    for a in args {
        let (name, text) = a
            .split_once('=')
            .filter(|(name, _)| !name.trim().is_empty())
            .ok_or_else(|| CallError::MalformedArgument(a.clone()))?;
        let name = name.trim();
        let Some(i) = params.iter().position(|p| p.name() == name) else {
            let known: Vec<&str> = params.iter().map(Argument::name).collect();
            return Err(CallError::UnknownArgument {
                op: op_name.to_owned(),
                name: name.to_owned(),
                known: if known.is_empty() {
                    "(none)".into()
                } else {
                    known.join(", ")
                },
            });
        };
        if given[i].replace(text).is_some() {
            return Err(CallError::DuplicateArgument(name.to_owned()));
        }
    }
    Ok(given)
}

/// Every argument without value or default, named in one error.
pub(super) fn check_missing(
    schema: &FunctionSchema,
    given: &[Option<&str>],
) -> Result<(), CallError> {
    let missing: Vec<String> = schema
        .arguments()
        .iter()
        .zip(given)
        .filter(|(a, g)| g.is_none() && a.default_value().is_none())
        .map(|(a, _)| format!("'{}' ({})", a.name(), a.type_string()))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(CallError::MissingArgument {
        missing: missing.join(", "),
        schema: schema.to_string(),
    })
}

/// The boxed arguments in schema order: the values given, else the defaults.
pub(super) fn build_stack(
    schema: &FunctionSchema,
    given: &[Option<&str>],
    inputs: &Inputs,
    input_path: Option<&Path>,
) -> Result<Stack, CallError> {
    let mut stack = Stack::with_capacity(given.len());
    for (arg, text) in schema.arguments().iter().zip(given) {
        let name = || arg.name().to_owned();
        let v = match text {
            Some(text) => {
                value::parse_value(text, arg.ty(), arg.n(), inputs).map_err(|e| match e {
                    ValueError::Type(reason) => CallError::BadValue {
                        name: name(),
                        expected: arg.type_string(),
                        value: (*text).to_owned(),
                        reason,
                    },
                    ValueError::NoInputFile(key) => CallError::NoInputFile { name: name(), key },
                    ValueError::UnknownTensor(key) => CallError::UnknownTensor {
                        name: name(),
                        key,
                        path: input_path
                            .map(|p| p.display().to_string())
                            .unwrap_or_default(),
                        available: inputs
                            .as_ref()
                            .filter(|m| !m.is_empty())
                            .map_or_else(|| "nothing".into(), |m| capped_list(m.keys())),
                    },
                    ValueError::Unsupported => CallError::UnsupportedType {
                        name: name(),
                        ty: arg.type_string(),
                    },
                })?
            }
            None => {
                // `check_missing` ran: an argument without value has a default.
                let d = arg
                    .default_value()
                    .ok_or_else(|| CallError::MissingArgument {
                        missing: format!("'{}' ({})", arg.name(), arg.type_string()),
                        schema: schema.to_string(),
                    })?;
                IValue::from_schema_default(d, arg.ty(), arg.n()).ok_or_else(|| {
                    CallError::UnsupportedDefault {
                        name: name(),
                        default: arg.default_string().unwrap_or_default(),
                    }
                })?
            }
        };
        stack.push(v);
    }
    Ok(stack)
}

/// At most this many names are listed in a message; a file can hold any number of tensors.
pub(crate) const MAX_LISTED_NAMES: usize = 20;

/// `a, b, c`, or the first [`MAX_LISTED_NAMES`] names and `... and N more`.
fn capped_list<S: AsRef<str>>(names: impl ExactSizeIterator<Item = S>) -> String {
    let total = names.len();
    let listed: Vec<S> = names.take(MAX_LISTED_NAMES).collect();
    let mut text = listed
        .iter()
        .map(AsRef::as_ref)
        .collect::<Vec<_>>()
        .join(", ");
    if total > listed.len() {
        text += &format!(", ... and {} more", total - listed.len());
    }
    text
}
