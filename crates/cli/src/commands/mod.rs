//! The subcommands of the `switchboard` binary.

pub mod call;
pub mod keys;
pub mod ops;
pub mod table;
pub mod train;
