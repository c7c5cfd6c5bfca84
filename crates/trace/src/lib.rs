//! Graph capture, as PyTorch's `make_fx`: [`trace`] runs a function eagerly and records every
//! operator call below autograd into a [`switchboard_graph::Graph`] (the graph IR the lazy
//! backend uses too): nodes in execution order with their operator, their arguments (graph
//! values or constants) and the metadata of what they return. The result, a [`Traced`],
//! prints as code, exports as JSON and DOT, and re-runs through the dispatcher on new inputs.
//!
//! The tracer is a dispatch mode (Note \[Tracing\]): it sees the operators that run (a
//! composite operator such as `linear` as its decomposition, `t` and `addmm`, as make_fx
//! does), the calls autograd makes when backward runs inside the trace (a joint graph), and
//! factories. With no trace active it costs nothing.
//!
//! ```
//! use switchboard_autograd::AutogradTensor;
//! use switchboard_cpu as _; // links the CPU kernels
//! use switchboard_ops::{self as ops, TensorOps};
//! use switchboard_trace::trace;
//!
//! let x = ops::randn(&[4, 3])?;
//! let w = ops::randn(&[2, 3])?.requires_grad_(true)?;
//! let traced = trace(&[x.clone(), w.clone()], |xs| {
//!     let loss = ops::linear(&xs[0], &xs[1])?.relu()?.sum()?;
//!     loss.backward()?;
//!     Ok(vec![loss, xs[1].grad().unwrap()])
//! })?;
//! assert_eq!(traced.op_names(), [
//!     "aten::t", "aten::mm", "aten::relu", "aten::sum",                 // forward
//!     "aten::ones_like", "aten::expand", "aten::threshold_backward",   // backward
//!     "aten::t", "aten::mm", "aten::t", "aten::t",
//! ]);
//! println!("{traced}"); // def graph(arg0: "f32[4, 3]", arg1: "f32[2, 3]"):  t: "f32[3, 2]" = aten.t.default(arg1) ...
//! let out = traced.run(&[x.clone(), w.detach()])?;
//! assert_eq!(out[0].item()?.to_f64(), traced.run(&[x, w.detach()])?[0].item()?.to_f64());
//! # Ok::<(), switchboard_dispatcher::DispatchError>(())
//! ```
#![warn(missing_docs)]

mod mode;
mod traced;
mod tracer;
mod values;

pub use traced::Traced;
pub use tracer::{trace, Tracer};
