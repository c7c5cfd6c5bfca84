//! Which pure calls of a plan may write their result into their first argument's memory (Note
//! [Writing into a dying argument]).

use std::sync::Arc;

use switchboard_dispatcher::{Dispatcher, OperatorHandle, OperatorSemantics, SchemaKind};

use crate::node::{Arg, Source};
use crate::{Graph, NodeId, Value};

// Note [Writing into a dying argument]
// A functional program allocates a fresh tensor for every result: an optimizer's `p.add_(u)`
// becomes `p2 = add(p, u)`, and a training step writes new parameter memory where eager wrote
// into the old. When the call is the last reader of `p` and nothing else holds `p`'s memory,
// the old memory is dead after the call, and the call may write its result there: a plan runs
// `add(p, u)` as `add_(p, u)` (XLA calls this donating the input buffer). The in-place overload
// is the one whose functional counterpart is the call's operator (torchgen's grouping, the
// one functionalization uses the other way), so it computes the same values. A call qualifies
// when:
// - it is pure (nothing written, nothing random, no view) and its operator has such an
//   in-place overload;
// - it is the last reader of its first argument, which is not an output of the graph;
// - its one result is recorded with the first argument's recorded layout (sizes, strides,
//   offset, dtype), and that layout is dense: the in-place result is laid out as the fresh
//   one would be. (Not the device: a lazy graph's inputs are recorded with their data's
//   device, its results with the lazy device the run maps to it);
// - when it runs, the argument's tensor has its recorded layout and is held by the plan's slot
//   alone: no other tensor, view or weak handle shares its memory, so no one can see it
//   written. A caller keeping a graph input keeps it from being written (the lazy backend hands
//   over the inputs of values that died).
// If the in-place call fails, the functional one runs instead.

/// For each node of a plan: the in-place overload its call may run as (Note [Writing into a
/// dying argument]).
///
/// `order` is the plan's calls with, for each, the slots freed after it; `slot(v)` a value's
/// slot after merging.
pub(crate) fn in_place_forms(
    graph: &Graph,
    semantics: &[Option<Arc<OperatorSemantics>>],
    order: &[(usize, &[u32])],
    slot: &dyn Fn(Value) -> u32,
) -> Vec<Option<OperatorHandle>> {
    let mut forms = vec![None; graph.len()];
    for &(i, freed) in order {
        let node = graph.node(NodeId(i as u32));
        let Some(op) = node.op() else { continue };
        let pure = semantics[i]
            .as_ref()
            .is_some_and(|s| s.is_pure && !s.is_view && s.kind == SchemaKind::Functional);
        let (Some(Arg::Value(first)), [out]) = (node.args().first(), node.outputs()) else {
            continue;
        };
        if !pure || out.source != Source::Return(0) || !freed.contains(&slot(*first)) {
            continue;
        }
        let (m, r) = (graph.meta(*first), &out.meta);
        let same_layout = m.sizes == r.sizes
            && m.strides == r.strides
            && m.storage_offset == r.storage_offset
            && m.dtype == r.dtype;
        if same_layout && m.is_contiguous() {
            forms[i] = Dispatcher::global().inplace_form(op);
        }
    }
    forms
}
