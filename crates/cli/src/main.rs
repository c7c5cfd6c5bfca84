//! The `switchboard` command-line tool.

use clap::{Parser, Subcommand};

mod commands;

/// Switchboard: PyTorch's operator dispatcher, rebuilt in Rust.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print every dispatch key with its value, kind, key set and dispatch-table slot.
    Keys,
    /// Call a registered operator through the boxed path (for debugging and checking kernels).
    ///
    /// Tensors come from a safetensors file (`--in`, values `@KEY`), the other arguments are
    /// literals (`NAME=VALUE`); tensor outputs go to `--out` or are printed.
    Call(commands::call::CallArgs),
    /// List the registered operators with their schemas (with --key, those with a kernel
    /// registered at KEY).
    Ops(commands::ops::OpsArgs),
    /// Print an operator's computed dispatch table, as PyTorch's `_dispatch_dump_table` does.
    Table(commands::table::TableArgs),
    /// Train an MLP or a small ResNet on the embedded UCI handwritten digits (or a CSV file) through the
    /// dispatcher: per-epoch loss and accuracy, the test accuracy and a dispatch summary.
    Train(commands::train::TrainArgs),
    /// Run a remote worker: it runs the lazy graphs clients send it on its CPU backend and keeps
    /// their results for them (see `switchboard-remote`).
    Worker(commands::worker::WorkerArgs),
}

/// The environment variables the tool reads, checked before anything runs: a value they do
/// not accept is an error, not silently taken for something else.
fn check_environment() -> Result<(), String> {
    use switchboard_dispatcher::{env_flag, DISPATCH_TRACE_ENV};
    for name in [DISPATCH_TRACE_ENV, switchboard::lazy::LOG_INTERCEPTS_ENV] {
        env_flag(name)?;
    }
    switchboard_cli::train::options::check_rayon_env()
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = check_environment() {
        commands::report_error(&e);
        std::process::exit(2);
    }
    match cli.command {
        Command::Keys => std::process::exit(commands::keys::main()),
        Command::Call(args) => std::process::exit(commands::call::main(&args)),
        Command::Ops(args) => std::process::exit(commands::ops::main(&args)),
        Command::Table(args) => std::process::exit(commands::table::main(&args)),
        Command::Train(args) => {
            switchboard_tensor::tune_allocator();
            std::process::exit(commands::train::main(&args))
        }
        Command::Worker(args) => std::process::exit(commands::worker::main(&args)),
    }
}
