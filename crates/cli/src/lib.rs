//! The `switchboard` command-line tool's library half: the digit-training job ([`train`]) that
//! `switchboard train` and `examples/compute_bench.rs` run. The subcommands themselves live in
//! the binary (`src/main.rs`, `src/commands/`).

pub mod devices;
pub mod train;
