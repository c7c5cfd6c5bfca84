//! The `switchboard` command-line tool.

use clap::{Parser, Subcommand};

mod cli;

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
}

fn main() {
    let cli = Cli::parse();
    match cli.command {
        Command::Keys => cli::keys::run(&mut std::io::stdout().lock()),
    }
}
