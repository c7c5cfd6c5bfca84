//! Switchboard's lazy backend: tensors on the `lazy` device hold a value of a captured graph
//! instead of data; every operator called on them is intercepted and recorded; the graph runs
//! when a value is needed. It is the system Genie describes (a lazy-tensor interception layer
//! on PyTorch's dispatcher), rebuilt on Switchboard's dispatcher from this crate alone: a
//! backend added without patching the dispatcher.
//!
//! ```
//! use switchboard_lazy as lazy;
//! use switchboard_ops as ops;
//!
//! let x = ops::ones_with(&[2, 3], ops::OnesOptions::default().device(lazy::DEVICE)).unwrap(); // captured
//! let y = ops::mul_scalar(&ops::relu(&x).unwrap(), 2).unwrap();                // captured
//! assert_eq!(y.device().to_string(), "lazy:0");
//! assert_eq!(y.sizes(), &[2, 3]);                  // metadata without running anything
//! assert_eq!(y.to_vec::<f32>().unwrap(), [2.0; 6]); // runs the pending graph
//! println!("{}", lazy::metrics_report());
//! ```
//!
//! # Interception
//!
//! Every call whose key set's highest backend is `Lazy` reaches this crate (autograd and
//! ADInplaceOrView run above it, so backward is captured too):
//! 1. operators with a dedicated kernel on `Lazy` ([`REGISTERED_OPS`]: arithmetic, matrix
//!    products, activations, convolutions, reductions, shape operators, copies, factories);
//! 2. every other operator through a boxed fallback on `Lazy`, its output metadata computed by
//!    its Meta kernel;
//! 3. operators that cannot be captured (no Meta kernel, host-value results, random results),
//!    operators left out by [`enable_ops`]' allow-list or sent away by [`disable_ops`], and
//!    every call while lazy mode is off ([`set_lazy_mode`]) run eagerly on CPU on their
//!    materialised inputs (or through the implementation [`register_op`] gave their
//!    operator), and their results are wrapped as lazy tensors.
//!
//! Layers 1 and 2 share one capture path; the counts of each are in [`stats`] (with Genie's
//! `get_stats` fields; [`stats_json`] has its keys). Operators can be registered at run time
//! ([`register_op`], [`is_operation_registered`], [`register_ops_from_trace`]).
//!
//! # Running
//!
//! Reading a value (`to_vec`, `item`, printing, `to(cpu)`, an eager fallback) or calling
//! [`sync`] / [`mark_step`] runs the pending graph: every live lazy tensor waiting for a value
//! gets it. The graph's structure keys a cache of prepared plans ([`Executor::compile`]), so
//! a training loop capturing the same step each iteration prepares it once. The default
//! [`CpuExecutor`] calls each operator on CPU through the dispatcher, drops the calls no live
//! tensor needs, runs identical pure calls once and frees each intermediate after its last
//! use.
//!
//! # Devices
//!
//! Each lazy device (`lazy:0` to `lazy:63`) is one [`LazyBackend`] ([`backend`]) with its own
//! pending graph, graph cache, executor, statistics, operator filter and profile: two devices
//! capture and run independently, and their tensors do not mix. The free functions of this
//! crate act on the default device, `lazy:0` ([`default_backend`]; Note [Lazy devices]).
//!
//! # Seeing what happens
//!
//! [`stats`] and [`metrics_report`]; `SWITCHBOARD_LOG_INTERCEPTS=1` (or
//! [`set_log_intercepts`]) prints a line per intercepted call in Genie's format, and Genie's
//! info lines (`Dispatcher lazy mode enabled`); an optional per-operator overhead profile
//! ([`set_profiling`], [`profile`]: Genie's `get_performance_stats`, with the execution time
//! an executor reports, [`LazyBackend::record_execution_time`]); the pending graph as code,
//! DOT or JSON ([`pending_graph`]).
#![warn(missing_docs)]

mod args;
mod backend;
mod cache;
mod capture;
mod composite_scope;
mod eager;
mod executor;
mod functional;
mod install;
mod intercepted_op;
mod kernels;
mod log;
mod mode;
mod op_filter;
mod pending;
mod pending_graph;
mod profile;
mod registration;
mod rules;
mod shapes;
mod stats;
mod storage;
mod unboxed;

pub use backend::{backend, default_backend, is_lazy_device_type, LazyBackend, MAX_LAZY_DEVICES};
pub use cache::clear as clear_cache;
pub use executor::{
    captured_device_type, current as executor, set_executor, CpuExecutor, Executable, Executor,
};
pub use install::install;
pub use intercepted_op::StaticCoverage;
pub use kernels::REGISTERED_OPS;
pub use log::{capture_intercept_log, log_intercepts, set_log_intercepts, LOG_INTERCEPTS_ENV};
pub use mode::{lazy_mode, set_lazy_mode, LazyModeGuard};
pub use op_filter::{disable_ops, disabled_ops, enable_all_ops, enable_ops, enabled_ops};
pub use profile::{profile, profile_json, set_profiling, OpProfile};
pub use registration::{
    is_operation_registered, register_op, register_ops_from_trace, OpImplementation,
};
pub use rules::operators_with_shape_rules;
pub use stats::{metrics_report, registration_coverage, reset_stats, stats, stats_json, LazyStats};
pub use storage::{is_lazy, lazy_storage, LazyStorage, DEVICE};

use switchboard_dispatcher::Result;
use switchboard_graph::Graph;
// The Meta kernels are the shape functions of captured calls; the CPU kernels run them.
use switchboard_cpu as _;
use switchboard_meta as _;
use switchboard_ops as _;

use crate::storage::Contents;

// Note [Lazy tensors]
// A lazy tensor a user holds is a functional tensor (Note [Lazy tensors are functional] in
// functional.rs) whose value is a plain lazy tensor: an ordinary `TensorImpl` on a lazy device
// (key set `Lazy, ADInplaceOrView, AutogradLazy`) with real sizes, strides, offset and dtype
// over a storage without data, and a backend payload (the core's general slot for backend
// data): an `Arc<LazyStorage>`. A `LazyStorage` holds either a pending value of the current
// graph or materialised data (a CPU tensor), plus a meta tensor with its geometry that shape
// functions run on.

// Note [Lazy values]
// A lazy value is one whole tensor, as a `LazyTensor` of PyTorch's lazy tensor core is: the
// functionalization layer above it calls only pure operators on values (views as their
// `*_copy` counterparts, writes as functional operators whose results the written functional
// tensor takes), and lazy devices opt into functionalization, so that a composite kernel
// with no lazy kernel of its own runs over the functional tensors, its views and writes
// functionalized too (Note [Composite kernels over persistent functional tensors] in
// switchboard-functionalize). No view of a value, and no write through one, reaches this
// backend.
// - Reading a value gives its storage's current graph value.
// - The writes left are of whole values: a factory's decomposition filling the memory it has
//   just made (`zeros` is `empty` then `zero_`), captured as a node whose output becomes the
//   storage's value (Note [Graph IR] in switchboard-graph); an out= kernel run on values
//   (`logical_and` is `logical_and.out` into a new tensor), whose resized result is a new
//   value keeping the out tensor's version counter; and an eager call (layer 3) writing the
//   data of a materialised storage (`c10d::allreduce_`).
// - A call that would make a view of a value is an error naming the operator: a backend
//   below functionalization takes no view operators (PyTorch's lazy tensor core registers
//   their `*_copy` counterparts only, as lazy_native_functions.yaml does here).
// - Version counters, `_base`, and autograd's checks of saved tensors live on the
//   functional tensors, in the layers above.
// This backend once kept its own model of views and writes (views read as `as_strided` of the
// storage's value, writes through them scattered back, storages grown for resized outputs);
// the functionalization layer does that work for every backend now, and the graphs a device
// runs hold pure calls only.

// Note [Answers to the layout questions]
// - What a backend needs from `TensorImpl` to keep its own data: the existing `payload` slot
//   (an `Arc<dyn Any>` set when the tensor is built, copied by views) and a storage without
//   data on its device; nothing lazy-specific was added. Reading values needed one general
//   hook, per device type, for host copies (Note [Host copies of tensors without data] in
//   switchboard-tensor), and moving data between devices needed `_to_copy` to be
//   CompositeExplicitAutograd as in PyTorch (an `empty_like` on the target device, then a
//   `copy_` dispatched on both tensors).
// - How a recording layer sees arguments uniformly: on the boxed path. Both interception
//   layers capture boxed calls (the typed kernels of the operators with a shape rule record
//   the one case their rule covers from typed arguments and box every other call, Note
//   [Unboxed capture]); a call's arguments are `IValue`s in schema order, which become graph
//   values (tensors) and constants (the rest), and aliasing comes from the schema's
//   annotations, read from `switchboard_dispatcher::OperatorSemantics`.
// - Where in-place/view semantics live for a backend that cannot alias memory: in the
//   functionalization layer above it (Note [Lazy tensors are functional]); the graph IR keeps
//   writes as explicit nodes with SSA outputs, which a tracer can reuse as they are.

/// Runs everything pending on the default lazy device: every live lazy tensor waiting for a
/// value gets it (PyTorch's `torch._lazy.sync`). Does nothing when nothing is pending.
pub fn sync() -> Result<()> {
    default_backend().sync()
}

/// Marks the end of a step on the default lazy device and runs everything pending ([`sync`];
/// torch_xla's `mark_step`).
pub fn mark_step() -> Result<()> {
    default_backend().mark_step()
}

/// The default lazy device's pending graph as it would run now (see
/// [`LazyBackend::pending_graph`]).
///
/// ```
/// use switchboard_lazy as lazy;
/// use switchboard_ops as ops;
/// let x = ops::zeros_with(&[2], ops::ZerosOptions::default().device(lazy::DEVICE)).unwrap();
/// let y = ops::exp(&x).unwrap();
/// let g = lazy::pending_graph();
/// assert!(g.to_string().contains("aten.exp.default"));
/// assert!(g.to_dot().contains("aten::exp"));
/// # drop(y);
/// ```
pub fn pending_graph() -> Graph {
    default_backend().pending_graph()
}

/// The number of calls captured on the default lazy device since its last sync (dead ones
/// included).
pub fn pending_calls() -> usize {
    default_backend().pending_calls()
}

impl LazyBackend {
    /// Runs everything pending on this device: every live lazy tensor of it waiting for a value
    /// gets it. Does nothing when nothing is pending.
    pub fn sync(&self) -> Result<()> {
        self.stats.explicit_syncs.inc();
        self.as_static().run_pending()
    }

    /// Marks the end of a step and runs everything pending ([`sync`](Self::sync)).
    pub fn mark_step(&self) -> Result<()> {
        self.sync()
    }

    /// The pending graph as it would run now: the live lazy tensors waiting for a value are its
    /// outputs, the calls none of them needs are left out. Print it (`Display`: code), or export
    /// it with [`Graph::to_dot`] and [`Graph::to_json`].
    pub fn pending_graph(&self) -> Graph {
        let ctx = self.as_static().lock_pending_graph();
        let mut outputs = Vec::new();
        for ls in ctx.pending.live() {
            let contents = ls.lock().contents.clone();
            if let Contents::Pending { value, epoch } = contents {
                if epoch == ctx.epoch {
                    outputs.push(value);
                }
            }
        }
        let mut g = ctx.graph.clone();
        if g.set_outputs(outputs).is_err() {
            return Graph::new();
        }
        g.eliminate_dead_code().0
    }

    /// The number of calls captured since the last sync (dead ones included).
    pub fn pending_calls(&self) -> usize {
        self.as_static().lock_pending_graph().graph.num_calls()
    }
}
