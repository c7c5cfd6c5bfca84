//! The output metadata of a captured call, as its Meta kernel computed it (Note [Output
//! metadata of a capture]).

use std::sync::Arc;

use smallvec::SmallVec;
use switchboard_dispatcher::IValue;
use switchboard_graph::TensorMeta;

// Note [Output metadata of a capture]
// A captured call's outputs get their metadata from the operator's Meta kernel, run on meta
// tensors standing for the lazy ones. For a structured operator that kernel is its meta
// function's glue (Note [Structured kernels] in switchboard-ops): a few hundred instructions
// for a 1-element `add`, where running the CPU kernel without data cost about 4,000. A
// process-wide cache of these results, keyed by the operator and its arguments' metadata,
// used to stand in front of the Meta kernel; it was removed because it did not pay where
// users feel it: a training step captures a few dozen calls, whose capture is a few percent
// of the step, and the lazy MLP step kept its ratio to eager without it (measured when it was
// removed). Errors are the Meta kernel's, so a call fails at capture with eager's message.

/// The metadata of a tensor a call returns (on the call's lazy device; shared by every node and
/// storage it describes), and the size of its storage.
pub(crate) type OutMeta = (Arc<TensorMeta>, usize);

/// One return of a call, as the Meta kernel computed it.
#[derive(Clone, Debug)]
pub(crate) enum MetaReturn {
    /// A tensor; `alias`: the argument whose storage it shares.
    Tensor { meta: OutMeta, alias: Option<u32> },
    /// A list of fresh tensors.
    List(Vec<OutMeta>),
    /// Anything else (`None`).
    Value(IValue),
}

/// The returns of a call.
pub(crate) type Shapes = SmallVec<[MetaReturn; 2]>;
