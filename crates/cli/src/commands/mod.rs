//! The subcommands of the `switchboard` binary.

pub mod call;
pub mod keys;
pub mod ops;
pub mod table;
pub mod train;
pub mod worker;

/// Prints `error: MESSAGE` on stderr; a closed stderr is ignored (`eprintln!` would panic).
pub fn report_error(message: &dyn std::fmt::Display) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "error: {message}");
}

/// The message of a failed write to stdout (`switchboard keys > /dev/full`): what failed, and
/// the system's reason.
pub fn cannot_write_output(e: &std::io::Error) -> String {
    format!("cannot write the output: {e}")
}
