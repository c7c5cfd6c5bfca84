//! Switchboard's graph IR: a list of operator calls captured from real programs, shared by
//! every component that records calls (the lazy backend; tracing).
//!
//! - [`Graph`]: input nodes and call nodes in execution order; a call holds its operator's
//!   handle, its arguments in schema order (tensors as [`Value`]s, everything else as constant
//!   `IValue`s) and the metadata of each tensor it produces (Note [Graph IR]).
//! - Printing as code in the style of `torch.fx` (`Display`), [`Graph::to_json`] and
//!   [`Graph::to_dot`] (Graphviz).
//! - [`StructuralKey`]: the graph's structure, for caches of prepared graphs.
//! - [`Plan`]: a graph prepared to run: dead nodes dropped, identical pure calls merged (Note
//!   [Merging identical nodes]), `*_copy` calls no one can tell from views run as views (Note
//!   [Copies that run as views]), a pure call on a dying argument written into its memory
//!   (Note [Writing into a dying argument]), every intermediate freed after its last use; it
//!   replays the calls through the dispatcher ([`Graph::replay`] for a one-off run).
//! - [`output_root`], [`is_pure`], [`is_random`] and [`unreturned_writes`]: the graph's reading
//!   of an operator's semantics (`switchboard_dispatcher::OperatorSemantics`: writes, views,
//!   purity).
//! - The wire format ([`Graph::to_bytes`], [`Graph::from_bytes`], [`WireGraph`]): a graph sent
//!   to another process, checked on arrival (Note [Graph wire format]).
//! - The recording API the lazy backend and the tracer share: [`Graph::add_input`],
//!   [`Graph::add_call`], [`Graph::add_as_strided`] for a view no value stands for, and
//!   [`unreturned_writes`] for the outputs of written arguments.
//!
//! ```
//! use switchboard_dispatcher::{Dispatcher, IValue};
//! use switchboard_graph::{Arg, Graph, Output, TensorMeta};
//! use switchboard_tensor::Tensor;
//! use switchboard_cpu as _;
//! use switchboard_ops as _;
//!
//! let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
//! let mm = Dispatcher::global().find_schema_or_throw("aten::mm").unwrap();
//! let mut g = Graph::new();
//! let x = g.add_input(TensorMeta::of(&a));
//! let n = g.add_call(mm, vec![Arg::Value(x), Arg::Value(x)], vec![Output::ret(0, TensorMeta::of(&a))]).unwrap();
//! g.set_outputs(vec![g.value(n, 0)]).unwrap();
//! println!("{g}");   // def graph(arg0: "f32[2, 2]"):  mm: "f32[2, 2]" = aten.mm.default(arg0, arg0) ...
//! let y = g.replay(vec![a]).unwrap();
//! assert_eq!(y[0].to_vec::<f32>().unwrap(), [7.0, 10.0, 15.0, 22.0]);
//! assert!(g.to_dot().contains("aten::mm"));
//! ```
#![warn(missing_docs)]

mod aliasing;
mod copy_as_view;
mod export;
mod graph;
mod in_place;
mod key;
mod node;
mod plan;
mod print;
mod record;
mod wire;
mod wire_decode;

pub use aliasing::{is_pure, is_random, output_root};
pub use graph::{Graph, GraphError};
pub use key::StructuralKey;
pub use node::{snapshot, Arg, Node, NodeId, NodeKind, Output, Source, TensorMeta, Value};
pub use plan::{Plan, RunOptions};
pub use print::{const_code, meta_annotation, op_path, short_dtype};
pub use record::unreturned_writes;
pub use wire::{
    WireArg, WireCall, WireConst, WireGraph, WireItem, WireMeta, WireNode, WireOutput, WireSource,
    WireValue, WIRE_VERSION,
};
pub use wire_decode::{check_geometry, MAX_WIRE_DIMS};

use switchboard_dispatcher::{AutoDispatchBelowADInplaceOrView, Result};
use switchboard_tensor::Tensor;

impl Graph {
    /// Runs the graph once on `inputs` through the dispatcher ([`Plan::new`] and
    /// [`Plan::run`] with default options), below the autograd and ADInplaceOrView layers:
    /// replaying records no gradient history and bumps no version.
    pub fn replay(&self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        let _below = AutoDispatchBelowADInplaceOrView::new();
        Plan::new(self.clone()).run(inputs, &RunOptions::default())
    }

    /// The graph's [`StructuralKey`].
    pub fn structural_key(&self) -> StructuralKey {
        StructuralKey::of(self, None)
    }
}
