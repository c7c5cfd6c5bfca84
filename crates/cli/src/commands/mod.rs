//! The subcommands of the `switchboard` binary.

pub mod call;
pub mod keys;
pub mod train;
