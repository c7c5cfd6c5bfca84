//! Which `*_copy` calls of a plan may run as the view they copy (Note [Copies that run as
//! views]).

use std::sync::Arc;

use switchboard_dispatcher::{Dispatcher, OperatorHandle, OperatorSemantics};

use crate::{Graph, NodeId, Value};

// Note [Copies that run as views]
// A functionalized program has no views: each is its `*_copy` form (`t` -> `t_copy`), which
// copies its input into fresh contiguous memory. Run as written, that costs a copy per view,
// and it changes what follows: `mm` of a `t_copy` reads a contiguous operand where eager's `mm`
// read the transposed view, and a matrix product may round differently for the two layouts.
// So a plan runs a `*_copy` call as its view operator (`t_copy` as `t`) when no one can tell
// the result shares its input's memory:
// - no call of the graph writes the input's memory or the result's (through any alias);
// - the result is not an output of the graph (a caller may write an output later);
// - every call reading the result is a pure read: it writes nothing, returns no view (so the
//   shared memory never escapes the call) and is not given strides (`as_strided_copy` reads
//   its argument's storage, where a view would find its base's elements);
// - results are checked against their recorded metadata (`RunOptions::check_metadata`), which
//   puts each fresh result back into its recorded layout, so that only the views run for
//   copies have layouts the capture did not record.
// A view of such a view is a view of eager's view, as in eager (`t_copy(t_copy(w))` runs as
// `t(t(w))`, laid out as `w`). Two kinds of view care about their argument's layout: one that
// takes the strides to give (`as_strided`, `_reshape_alias`: it addresses the storage, so it
// runs as a view only when its argument has its recorded layout), and one that can refuse a
// layout (`view` of a transposed tensor): when the view fails, the copy runs instead.
// The values are the copy's in every case; what changes is the memory traffic, and that the
// calls reading the view compute as eager's calls did.

/// A `*_copy` call a plan may run as its view (Note [Copies that run as views]).
#[derive(Clone, Debug)]
pub(crate) struct CopyAsView {
    /// The view operator.
    pub view: OperatorHandle,
    /// It takes the strides to give (a `stride` argument), so it addresses its argument's
    /// storage and needs the argument's recorded layout.
    pub addresses_storage: bool,
}

/// For each node of a plan: the view its `*_copy` call may run as (Note [Copies that run as
/// views]).
///
/// `order` is the plan's calls (node indices); `slot(v)` a value's slot after merging; `written_slot(slot)` whether a call writes the memory of that slot's value;
/// `is_output(slot)` whether it is an output of the graph.
pub(crate) fn copies_as_views(
    graph: &Graph,
    semantics: &[Option<Arc<OperatorSemantics>>],
    order: &[usize],
    slot: &dyn Fn(Value) -> u32,
    written_slot: &dyn Fn(u32) -> bool,
    is_output: &dyn Fn(u32) -> bool,
    slots: usize,
) -> Vec<Option<CopyAsView>> {
    // Slots read by a call that writes something, returns a view or is given strides.
    let mut escapes = vec![false; slots];
    for &i in order {
        let node = graph.node(NodeId(i as u32));
        let reads_purely = semantics[i]
            .as_ref()
            .is_some_and(|s| s.written.is_empty() && !s.is_view)
            && !node.op().is_some_and(addresses_storage);
        if !reads_purely {
            for v in node.inputs() {
                escapes[slot(v) as usize] = true;
            }
        }
    }
    let mut as_view = vec![None; graph.len()];
    for &i in order {
        let node = graph.node(NodeId(i as u32));
        let Some(op) = node.op() else { continue };
        let results_private = (0..node.outputs().len() as u32).all(|j| {
            let s = slot(graph.value(NodeId(i as u32), j));
            !escapes[s as usize] && !written_slot(s) && !is_output(s)
        });
        let inputs_unwritten = node.inputs().all(|v| !written_slot(slot(v)));
        if results_private && inputs_unwritten {
            as_view[i] = Dispatcher::global()
                .view_of_copy_form(op)
                .map(|view| CopyAsView {
                    addresses_storage: addresses_storage(&view),
                    view,
                });
        }
    }
    as_view
}

/// Whether `op` is given the strides of a tensor to make (a `stride` argument: `as_strided`,
/// `as_strided_copy`, `_reshape_alias`), so that it reads its argument's storage rather than
/// its elements.
fn addresses_storage(op: &OperatorHandle) -> bool {
    op.schema()
        .is_some_and(|r| r.schema.arguments().iter().any(|a| a.name() == "stride"))
}
