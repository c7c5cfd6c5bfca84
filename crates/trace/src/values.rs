//! Which graph value each tensor of a trace is (Note [Tensor identity in a trace]).

use std::collections::HashMap;

use switchboard_graph::{TensorMeta, Value};
use switchboard_tensor::{Storage, Tensor, TensorImpl, WeakTensor};

// Note [Tensor identity in a trace]
// A tracer must know, for each tensor an operator reads, which graph value it is. make_fx
// attaches a proxy to each tensor object; here a table maps each tensor (its `TensorImpl`)
// to its current value, holding the tensor weakly: a strong handle would change what code
// under trace observes (AccumulateGrad keeps a gradient without copying it only when nothing
// else holds it, `use_count() == 1`). A weak handle keeps the tensor's block from being
// reused, so an address whose weak handle is still alive is the same tensor.
//
// A call's results become the values of the tensors it returns; an in-place call's result is
// the *new* value of the tensor it wrote (Note [Graph IR] in switchboard-graph), so readers
// after it read the new value. Autograd also makes tensors without calling an operator: a
// saved output is kept as a shallow alias without history (PyTorch dispatches a `detach`
// there, which make_fx records as `alias`), `detach()` is such an alias too. Those share a
// traced tensor's storage, so the table also indexes values by storage: an unknown tensor
// with the storage, sizes, strides, offset and dtype of a traced one is that value (the newest
// one, after in-place writes); with another layout it is an `as_strided` view of it. That
// index holds the storages (not the tensors: nothing reads a storage's count), since a saved
// alias may outlive every traced tensor on its memory (`_log_softmax`'s result inside
// `cross_entropy`): memory the program frees is freed when the trace finishes. A tensor
// that shares no storage with the trace came from outside (or was made without any operator):
// it becomes a constant, as make_fx makes `_tensor_constant` attributes.

/// A traced tensor, held weakly, and its value.
struct Known {
    tensor: WeakTensor,
    value: Value,
}

/// A traced view of a storage: the storage (held: an alias may outlive every traced tensor
/// on it), the layout and the newest value with that layout.
struct StorageView {
    storage: Storage,
    layout: TensorMeta,
    value: Value,
}

/// What the table knows about a tensor.
pub(crate) enum Lookup {
    /// The tensor is this value.
    Value(Value),
    /// The tensor is unknown, but shares its storage with this value, laid out differently:
    /// an `as_strided` of it.
    ViewOf(Value),
    /// The tensor shares no storage with the trace.
    Unknown,
}

/// The tensor-to-value table of a trace.
#[derive(Default)]
pub(crate) struct Values {
    by_tensor: HashMap<usize, Known>,
    /// The traced layouts of each storage, by the address of its bytes (or, for storages
    /// without data, their size): entries are told apart with `Storage::ptr_eq`.
    by_storage: HashMap<usize, Vec<StorageView>>,
}

fn tensor_key(t: &Tensor) -> usize {
    let imp: &TensorImpl = t;
    imp as *const TensorImpl as usize
}

fn storage_key(t: &Tensor) -> usize {
    let s = t.storage();
    match s.data_ptr() as usize {
        0 => s.nbytes() | (1 << (usize::BITS - 1)),
        p => p,
    }
}

impl Values {
    /// Records `t` as `value` (a new tensor, or a tensor an in-place call wrote).
    pub fn record(&mut self, t: &Tensor, value: Value) {
        self.by_tensor.insert(
            tensor_key(t),
            Known {
                tensor: t.downgrade(),
                value,
            },
        );
        let bucket = self.by_storage.entry(storage_key(t)).or_default();
        match bucket
            .iter_mut()
            .find(|v| Storage::ptr_eq(&v.storage, t.storage()) && v.layout.matches_layout(t))
        {
            Some(v) => v.value = value,
            None => bucket.push(StorageView {
                storage: t.storage().clone(),
                layout: TensorMeta::of(t),
                value,
            }),
        }
    }

    /// The value of `t` (see [`Lookup`]).
    pub fn lookup(&self, t: &Tensor) -> Lookup {
        if let Some(k) = self.by_tensor.get(&tensor_key(t)) {
            if !k.tensor.expired() {
                return Lookup::Value(k.value);
            }
        }
        let Some(bucket) = self.by_storage.get(&storage_key(t)) else {
            return Lookup::Unknown;
        };
        let mut newest: Option<Value> = None;
        for v in bucket {
            if !Storage::ptr_eq(&v.storage, t.storage()) {
                continue;
            }
            if v.layout.matches_layout(t) {
                return Lookup::Value(v.value);
            }
            if v.layout.dtype == t.dtype() && newest.is_none_or(|n| v.value > n) {
                newest = Some(v.value);
            }
        }
        newest.map_or(Lookup::Unknown, Lookup::ViewOf)
    }
}
