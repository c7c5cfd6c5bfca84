//! `switchboard ops [--key KEY]`: the registered operators with their schemas, or those with a
//! kernel registered at KEY (PyTorch's `torch._C._dispatch_get_registrations_for_dispatch_key`).

use std::io::Write;

use switchboard::dispatcher::Dispatcher;
use switchboard::keys::DispatchKey;

/// The arguments of `switchboard ops`.
#[derive(clap::Args, Debug, Clone, Default)]
#[command(after_help = "\
One line per operator, sorted by name: its schema, or `NAME (no schema)` for an operator that
has kernels but was never defined. With --key, only the operators with a kernel registered at
exactly KEY: an alias key (CompositeImplicitAutograd, Autograd, ...) lists the kernels registered
at that alias key, not those of its runtime keys. Errors are one line on stderr, `error: ...`,
with exit status 2.")]
pub struct OpsArgs {
    /// Only operators with a kernel registered at this dispatch key (`CPU`, `Meta`,
    /// `CompositeImplicitAutograd`, `AutogradCPU`, ...).
    #[arg(long, value_name = "KEY")]
    pub key: Option<String>,
}

/// Why `switchboard ops` failed.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// `--key` names no dispatch key.
    #[error("{0}")]
    BadKey(String),
    /// Writing to stdout failed.
    #[error("cannot write the output: {0}")]
    Stdout(#[from] std::io::Error),
}

/// Writes the operator list of `d` (see the module docs) to `out`.
pub fn run(d: &Dispatcher, args: &OpsArgs, out: &mut dyn Write) -> Result<(), OpsError> {
    let key = match &args.key {
        Some(text) => Some(
            DispatchKey::parse(text.trim()).map_err(|e| OpsError::BadKey(e.message().into()))?,
        ),
        None => None,
    };
    let mut lines: Vec<(String, String)> = d
        .registrations_for_dispatch_key(key)
        .into_iter()
        .map(|name| {
            let name = name.to_string();
            let line = match d.find_schema(&name).and_then(|op| op.schema()) {
                Some(record) => record.schema.to_string(),
                None => format!("{name} (no schema)"),
            };
            (name, line)
        })
        .collect();
    lines.sort();
    for (_, line) in lines {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// Runs `switchboard ops` on the global dispatcher. Returns the exit status: 0, or 2 after one
/// line `error: ...` on stderr.
pub fn main(args: &OpsArgs) -> i32 {
    let mut out = std::io::stdout().lock();
    match run(Dispatcher::global(), args, &mut out).and_then(|()| Ok(out.flush()?)) {
        Ok(()) => 0,
        Err(OpsError::Stdout(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            super::report_error(&super::call::one_line(&e.to_string()));
            2
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard::dispatcher::{KernelFunction, Library, LibraryKind, Result};
    use switchboard::tensor::Tensor;

    fn id(x: &Tensor) -> Result<Tensor> {
        Ok(x.clone())
    }

    fn listing(d: &Dispatcher, key: Option<&str>) -> Result<String, OpsError> {
        let mut out = Vec::new();
        let args = OpsArgs {
            key: key.map(str::to_owned),
        };
        run(d, &args, &mut out)?;
        Ok(String::from_utf8(out).unwrap())
    }

    #[test]
    fn lists_schemas_sorted_and_filters_by_key() -> Result<()> {
        let d = Dispatcher::new();
        let mut lib = Library::new(&d, LibraryKind::Def, "cli_ops", None)?;
        lib.def("zeta(Tensor x) -> Tensor")?;
        lib.def("alpha.out(Tensor x) -> Tensor")?;
        lib.impl_("zeta", Some(DispatchKey::CPU), KernelFunction::from_fn(id))?;
        lib.impl_(
            "alpha.out",
            Some(DispatchKey::CompositeExplicitAutograd),
            KernelFunction::from_fn(id),
        )?;
        let mut meta = Library::new(&d, LibraryKind::Impl, "cli_ops", Some(DispatchKey::Meta))?;
        meta.impl_("undefined", None, KernelFunction::from_fn(id))?;

        assert_eq!(
            listing(&d, None).unwrap(),
            "cli_ops::alpha.out(Tensor x) -> Tensor\n\
             cli_ops::undefined (no schema)\n\
             cli_ops::zeta(Tensor x) -> Tensor\n"
        );
        assert_eq!(
            listing(&d, Some("CPU")).unwrap(),
            "cli_ops::zeta(Tensor x) -> Tensor\n"
        );
        assert_eq!(
            listing(&d, Some("CompositeExplicitAutograd")).unwrap(),
            "cli_ops::alpha.out(Tensor x) -> Tensor\n"
        );
        assert_eq!(
            listing(&d, Some("Meta")).unwrap(),
            "cli_ops::undefined (no schema)\n"
        );
        assert_eq!(listing(&d, Some("CUDA")).unwrap(), "");
        let err = listing(&d, Some("NotAKey")).unwrap_err();
        assert_eq!(err.to_string(), "could not parse dispatch key: NotAKey");
        Ok(())
    }
}
