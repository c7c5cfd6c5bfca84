//! User dispatch modes (PyTorch's `TorchDispatchMode`), in Rust: a [`DispatchMode`] pushed on
//! the thread's mode stack sees every operator call below autograd and autocast, boxed, and
//! runs it (or replaces it). Modes are entered through the Python and PythonTLSSnapshot keys
//! with PyTorch's fallback semantics (Note [Modes run popped]); with no mode pushed those keys
//! are in no call's key set and cost nothing (Note [Modes switch the Python keys]).
//!
//! Two modes ship here: [`LoggingMode`] (each call with its arguments' and outputs' shapes)
//! and [`FlopCounterMode`] (PyTorch's FLOP formulas, per operator).
//!
//! ```
//! use std::rc::Rc;
//! use switchboard_cpu as _; // links the CPU kernels
//! use switchboard_modes::{push_mode, LoggingMode};
//! use switchboard_ops as ops;
//!
//! let log = Rc::new(LoggingMode::new());
//! {
//!     let _mode = push_mode(log.clone());
//!     let x = ops::ones(&[2, 2])?;
//!     ops::add(&x, &x)?;
//! }
//! assert_eq!(log.lines()[1], "aten::add.Tensor(f32[2, 2], f32[2, 2], 1) -> f32[2, 2]");
//! # Ok::<(), switchboard_dispatcher::DispatchError>(())
//! ```
#![warn(missing_docs)]

mod fallback;
mod flop_counter;
mod logging;
mod stack;

pub use fallback::RestoreDispatchSnapshot;
pub use flop_counter::{FlopCounterMode, FlopFormula};
pub use logging::{short_dtype, LoggingMode};
pub use stack::{mode_stack_len, push_mode, with_mode, DispatchMode, ModeGuard};

pub(crate) use stack::push;

use switchboard_dispatcher::KernelFunction;

switchboard_dispatcher::library!(IMPL _, PythonTLSSnapshot, |lib| {
    lib.fallback(None, KernelFunction::from_boxed(fallback::tls_snapshot_fallback))
});
switchboard_dispatcher::library!(IMPL _, Python, |lib| {
    lib.fallback(None, KernelFunction::from_boxed(fallback::python_fallback))
});
