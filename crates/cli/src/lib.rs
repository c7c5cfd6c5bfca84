//! The `switchboard` command-line tool's library half: the digit-training job ([`train`]) that
//! `switchboard train` and `examples/compute_bench/` run, the `--device` option's moves
//! between devices ([`device`]) and the options of the dispatch layers the subcommands share
//! ([`layers`]: `--autocast`, `--count-flops`). The subcommands themselves live in the binary
//! (`src/main.rs`, `src/commands/`).

pub mod device;
pub mod layers;
pub mod train;
