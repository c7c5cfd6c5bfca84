//! The subcommands of the `switchboard` binary.

pub mod keys;
