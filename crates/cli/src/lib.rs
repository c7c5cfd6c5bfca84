//! The `switchboard` command-line tool's library half: the digit-training job ([`train`]) that
//! `switchboard train` and `examples/compute_bench.rs` run. The subcommands themselves live in
//! the binary (`src/main.rs`, `src/commands/`); [`layers`] holds the options of the dispatch
//! layers they share (`--autocast`, `--count-flops`).

pub mod devices;
pub mod layers;
pub mod train;
