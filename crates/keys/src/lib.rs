//! PyTorch's dispatch keys, in Rust: [`DispatchKey`], [`BackendComponent`] and
//! [`DispatchKeySet`], with PyTorch 2.15's names, numeric values, bit layout, priorities and
//! dispatch-table indexing.
//!
//! A tensor carries a key set (a dense CPU tensor: `CPU, ADInplaceOrView, AutogradCPU,
//! AutocastCPU`); the dispatcher unions the key sets of a call's tensors, applies the
//! thread-local included and excluded sets, and runs the kernel of the highest-priority key:
//!
//! ```
//! use switchboard_keys::{DispatchKey as K, DispatchKeySet, DEFAULT_EXCLUDED_SET};
//! let tensor = DispatchKeySet::from_keys(&[K::CPU, K::ADInplaceOrView, K::AutogradCPU, K::AutocastCPU]);
//! let call = tensor - DEFAULT_EXCLUDED_SET;
//! assert_eq!(call.highest_priority_type_id(), K::AutogradCPU);
//! // The autograd kernel redispatches below itself:
//! let below = call & DispatchKeySet::full_after(K::AutogradCPU);
//! assert_eq!(below.highest_priority_type_id(), K::ADInplaceOrView);
//! ```
//!
//! The crate also holds the two pieces of c10 every crate above may need: warnings ([`warn`],
//! c10's `TORCH_WARN`; device-string parsing warns) and the stack of guards of a thread-local
//! setting ([`GuardStack`]).
#![warn(missing_docs)]

mod alias;
mod backend;
mod device;
mod guard_stack;
mod key;
mod keyset;
mod private_use;
mod warning;

pub use alias::*;
pub use backend::{BackendComponent, FULL_BACKEND_MASK, NUM_BACKENDS};
pub use device::{parse_device, DeviceType, MKLDNN_DEPRECATION};
pub use guard_stack::{GuardFrame, GuardStack};
pub use key::{DispatchKey, KeyError, NUM_FUNCTIONALITY_KEYS, PER_BACKEND_FUNCTIONALITIES};
pub use keyset::{
    DispatchKeySet, FunctionalityOffsetAndMask, Iter, NUM_RUNTIME_ENTRIES, OFFSETS_AND_MASKS,
};
pub use private_use::rename_privateuse1_backend;
pub use warning::{set_warning_handler, warn, warn_once, WarningHandler, WarningHandlerGuard};
