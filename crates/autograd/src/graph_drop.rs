//! Freeing a graph without recursing once per node (Note [Dropping deep graphs]).

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use smallvec::SmallVec;

use crate::node::{Edge, Node};

// Note [Dropping deep graphs]
// A node owns its next nodes through its edges, so dropping the last handle of a long chain
// (a million `add`s, one tensor holding the last of them) would drop each node from inside
// the drop of the one after it: a recursion as deep as the graph, which overflows the stack.
// As PyTorch's `deleteNode`, a node being dropped does not drop the next nodes it holds the
// last handle of: it hands them to a per-thread list, and the outermost such drop on the
// thread empties the list one node at a time (each node's drop adds its own next nodes), so
// the stack depth stays constant whatever the depth of the graph.
// The next nodes it shares are only released (their count goes down; someone else still holds
// them). That is exact only if nothing else in the node still holds them when its edges are
// released, so a node drops its saved state (saved tensors keep their `grad_fn`, usually a
// next node) before its `NodeMeta`: every node type of this crate does so in its `Drop`.
// A shallow graph pays a reference-count check per edge; the list is touched only for nodes
// the drop frees.

thread_local! {
    /// Nodes whose drop was deferred by a node being dropped on this thread.
    static DEFERRED: RefCell<Vec<Arc<dyn Node>>> = const { RefCell::new(Vec::new()) };
    /// Whether a drop on this thread is emptying `DEFERRED`.
    static DRAINING: Cell<bool> = const { Cell::new(false) };
}

/// Releases `edges`, the next edges of a node being dropped, without dropping the nodes they
/// hold the last handle of from inside this drop (Note [Dropping deep graphs]).
#[inline]
pub(crate) fn release_edges(edges: &mut SmallVec<[Edge; 2]>) {
    // The usual case, a next node someone else holds, leaves the edge to the normal drop.
    for e in edges.iter_mut() {
        if e.node.as_ref().is_some_and(|n| Arc::strong_count(n) == 1) {
            defer(e.node.take().expect("checked"));
        }
    }
}

/// Drops `node` (whose last handle this is) from the outermost node drop of the thread.
#[cold]
#[inline(never)]
fn defer(node: Arc<dyn Node>) {
    let mut node = Some(node);
    // At thread exit the list may be gone: the node is then dropped here (recursively).
    let _ = DRAINING.try_with(|draining| {
        let node = node.take().expect("taken once");
        DEFERRED.with(|d| d.borrow_mut().push(node));
        if draining.get() {
            return; // the outermost drop frees them
        }
        draining.set(true);
        let _reset = ResetOnExit(draining);
        // The borrow ends before each drop, which may defer more nodes.
        while let Some(node) = DEFERRED.with(|d| d.borrow_mut().pop()) {
            drop(node);
        }
        DEFERRED.with(|d| {
            let mut d = d.borrow_mut();
            // Do not keep a wide graph's worth of capacity for the thread's lifetime.
            if d.capacity() > 1024 {
                *d = Vec::new();
            }
        });
    });
}

/// Clears the draining flag even if a drop panics.
struct ResetOnExit<'a>(&'a Cell<bool>);

impl Drop for ResetOnExit<'_> {
    fn drop(&mut self) {
        self.0.set(false);
    }
}
