//! `switchboard keys`: the dispatch-key table.

use std::io::Write;

use switchboard::keys::{DispatchKey, DispatchKeySet, NUM_RUNTIME_ENTRIES};

/// What kind of key `k` is, in the words of Note [Kinds of dispatch keys].
fn kind(k: DispatchKey) -> &'static str {
    if k.is_alias() {
        "alias"
    } else if k.is_per_backend_functionality() {
        "per-backend functionality"
    } else if k == DispatchKey::Undefined || k == DispatchKey::EndOfFunctionalityKeys {
        "sentinel"
    } else if k.is_functionality() {
        "functionality"
    } else if k.to_backend_component() == switchboard::keys::BackendComponent::InvalidBit {
        "invalid-backend slot"
    } else {
        "runtime per-backend"
    }
}

/// Writes one line per key: value, name, kind, the slot a set holding only that key dispatches
/// to, and for alias keys the number of runtime keys they cover.
pub fn run(out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "{:>5}  {:<40} {:<26} {:>5}  covers",
        "value", "name", "kind", "slot"
    )?;
    for k in DispatchKey::ALL {
        let slot = if k.is_alias() || k == DispatchKey::EndOfFunctionalityKeys {
            "-".to_string()
        } else {
            DispatchKeySet::from_key(k)
                .dispatch_table_index()
                .to_string()
        };
        let covers = if k.is_alias() {
            let n = DispatchKey::ALL
                .iter()
                .filter(|r| !r.is_alias() && r.is_included_in_alias(k))
                .count();
            format!("{n} runtime keys")
        } else {
            String::new()
        };
        writeln!(
            out,
            "{:>5}  {:<40} {:<26} {:>5}  {covers}",
            k as u8,
            k.name(),
            kind(k),
            slot
        )?;
    }
    writeln!(
        out,
        "{} dispatch keys, {NUM_RUNTIME_ENTRIES} dispatch-table slots",
        DispatchKey::ALL.len()
    )?;
    out.flush()
}

/// Runs `switchboard keys` to stdout. Returns the exit status: 0, or 2 after one line
/// `error: cannot write the output: ...` on stderr.
pub fn main() -> i32 {
    match run(&mut std::io::stdout().lock()) {
        Ok(()) => 0,
        // A closed pipe (`switchboard keys | head`) is not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            super::report_error(&super::cannot_write_output(&e));
            2
        }
    }
}
