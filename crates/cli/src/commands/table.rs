//! `switchboard table OPERATOR`: an operator's computed dispatch table, as PyTorch's
//! `torch._C._dispatch_dump_table` prints it: one line per runtime key whose slot has a kernel,
//! `KEY: [fallthrough ]DEBUG [KIND]`, `Undefined` first, then the keys in dispatch-table order.

use std::io::Write;

use switchboard::dispatcher::Dispatcher;
use switchboard::schema::OperatorName;

use super::call::{one_line, parse_error_reason, unknown_operator, CallError};

/// The arguments of `switchboard table`.
#[derive(clap::Args, Debug, Clone, Default)]
#[command(after_help = "\
Each line is `KEY: [fallthrough ]DEBUG [KIND]`: the kernel a call dispatching to KEY runs, where
it was registered, and why it is there (`kernel`, `math kernel`, `default backend kernel`,
`autograd kernel`, `backend fallback`, `ambiguous autogradother`, ...). Keys without a kernel are
not printed. Errors are one line on stderr, `error: ...`, with exit status 2.")]
pub struct TableArgs {
    /// The operator: `aten::add.Tensor`, `add.Tensor` (namespace aten) or `add` (no overload).
    /// Operators with kernels but no schema are accepted.
    #[arg(value_name = "OPERATOR")]
    pub operator: String,
}

/// Writes the dispatch table of `args.operator` in `d` to `out`.
pub fn run(d: &Dispatcher, args: &TableArgs, out: &mut dyn Write) -> Result<(), CallError> {
    let text = args.operator.trim();
    let parsed = OperatorName::parse(text).map_err(|e| CallError::InvalidOperatorName {
        name: args.operator.clone(),
        reason: parse_error_reason(&e.to_string()),
    })?;
    let full = match parsed.namespace() {
        Some(_) => parsed,
        None => OperatorName::new(format!("aten::{}", parsed.name()), parsed.overload_name()),
    };
    if d.find_op(&full).is_none() {
        let e = d.find_schema_or_throw(&full.to_string()).err();
        return Err(unknown_operator(d, &full, e));
    }
    out.write_all(d.dump_table(&full.to_string()).as_bytes())?;
    Ok(())
}

/// Runs `switchboard table` on the global dispatcher. Returns the exit status: 0, or 2 after one
/// line `error: ...` on stderr.
pub fn main(args: &TableArgs) -> i32 {
    let mut out = std::io::stdout().lock();
    match run(Dispatcher::global(), args, &mut out).and_then(|()| Ok(out.flush()?)) {
        Ok(()) => 0,
        Err(CallError::Stdout(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            super::report_error(&one_line(&e.to_string()));
            2
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard::dispatcher::{KernelFunction, Library, LibraryKind, Result};
    use switchboard::keys::DispatchKey;
    use switchboard::tensor::Tensor;

    fn id(x: &Tensor) -> Result<Tensor> {
        Ok(x.clone())
    }

    fn table(d: &Dispatcher, op: &str) -> Result<String, CallError> {
        let mut out = Vec::new();
        run(
            d,
            &TableArgs {
                operator: op.into(),
            },
            &mut out,
        )?;
        Ok(String::from_utf8(out).unwrap())
    }

    #[test]
    fn prints_pytorchs_dump_table() -> Result<()> {
        let d = Dispatcher::with_builtin_fallbacks();
        let mut lib = Library::with_location(&d, LibraryKind::Def, "cli_t", None, "lib.rs", 1)?;
        lib.def("op(Tensor x) -> Tensor")?;
        lib.impl_with_debug(
            "op",
            Some(DispatchKey::CPU),
            KernelFunction::from_fn(id),
            Some("fn_cpu"),
        )?;
        lib.impl_with_debug(
            "op",
            Some(DispatchKey::CompositeImplicitAutograd),
            KernelFunction::from_fn(id),
            Some("fn_math"),
        )?;
        let printed = table(&d, "cli_t::op").unwrap();
        assert_eq!(printed, d.dump_table("cli_t::op"));
        let lines: Vec<&str> = printed.lines().collect();
        assert_eq!(lines[0], "Undefined: fn_math [math kernel]");
        assert!(lines.contains(&"CPU: fn_cpu [kernel]"), "{printed}");
        assert!(lines.contains(&"CUDA: fn_math [math kernel]"), "{printed}");
        assert!(
            lines.contains(
                &"BackendSelect: fallthrough registered by the dispatcher [backend fallback]"
            ),
            "{printed}"
        );
        Ok(())
    }

    #[test]
    fn unknown_and_malformed_names_are_errors() {
        let d = Dispatcher::new();
        let e = table(&d, "cli_t::nope").unwrap_err().to_string();
        assert!(e.starts_with("unknown operator 'cli_t::nope'"), "{e}");
        let e = table(&d, "nope").unwrap_err().to_string();
        assert!(e.starts_with("unknown operator 'aten::nope'"), "{e}");
        let e = table(&d, "a::b::c").unwrap_err().to_string();
        assert!(e.starts_with("invalid operator name"), "{e}");
    }
}
