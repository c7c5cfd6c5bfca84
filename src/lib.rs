//! Switchboard: PyTorch's operator dispatcher rebuilt in Rust.
//!
//! This facade re-exports the public API of the workspace's crates; most users only need
//! [`prelude`].

pub use switchboard_keys as keys;
pub use switchboard_schema as schema;

/// The names most programs need.
pub mod prelude {
    pub use switchboard_keys::{BackendComponent, DeviceType, DispatchKey, DispatchKeySet};
}
