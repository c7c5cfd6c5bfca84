//! The `switchboard` command-line tool's library half: the digit-training job ([`train`]) that
//! `switchboard train` and `examples/compute_bench.rs` run, and the `--device` option's
//! moves between devices ([`device`]). The subcommands themselves live in
//! the binary (`src/main.rs`, `src/commands/`).

pub mod device;
pub mod train;
