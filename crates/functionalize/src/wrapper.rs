//! `FunctionalTensorWrapper`: a tensor on the `Functionalize` key holding its current
//! functional value, the `FunctionalStorage` it shares with its aliases, and for a view the
//! chain of view operations from the storage's base.

use std::sync::{Arc, Mutex, MutexGuard};

use switchboard_dispatcher::{
    tls_local_dispatch_key_set, DispatchError, DispatchErrorKind, DispatchKey, DispatchKeySet,
    IValue, OperatorHandle, Result, Stack, ThreadLocalStateGuard,
};
use switchboard_keys::AUTOGRAD_DISPATCH_KEYSET;
use switchboard_tensor::{Tensor, VersionCounter};

use crate::view_meta::ViewMeta;

// Note [Functional tensors]
// A functional tensor (PyTorch's `FunctionalTensorWrapper`) stands for a tensor of the user's
// program; what it holds is a plain tensor, its current *value*, that no operator ever writes.
// A write to any alias of a tensor is recorded on the `FunctionalStorage` the aliases share:
// the storage's *base* value is replaced by a new one (for a write to a view, the base with
// the view's region replaced: Note [Writing through a view]) and its *generation* goes up. A
// wrapper remembers the generation its value was computed at; a wrapper used after a write
// to one of its aliases finds its generation old and regenerates its value by replaying its
// chain of views (`ViewMeta`s) on the new base (PyTorch's `sync`). So mutate a view and read
// the base, mutate the base and read a view, views of views: each alias sees every write the
// next time it is used, and the operators that run are pure functions of values.
//
// The wrapper is a shallow copy of its first value carrying the wrapper state as its payload,
// with the `Functionalize` key and the backend keys of the value but not the Autograd,
// Autocast and ADInplaceOrView keys: calls on functional tensors go straight to the
// functionalization fallback, which calls the operators again on the values, where autograd,
// autocast and modes (a trace) see them (Note [Functionalization above autograd]). Its sizes,
// strides and dtype are those of the tensor of the program; its data are not (reading them
// directly gives the first value): read a functional tensor through operators, or through
// `from_functional` / `sync`.

/// The state shared by a tensor's aliases (PyTorch's `FunctionalStorageImpl`).
pub(crate) struct FunctionalStorage {
    state: Mutex<StorageState>,
}

struct StorageState {
    /// The current value of the base of the aliases.
    base: Tensor,
    /// Raised by each write to any alias.
    generation: u64,
}

// Note [Autograd of the values]
// The operators called on the values must see autograd as the functionalized program does.
// But a call on functional tensors passes the ADInplaceOrView key first (it is on every
// thread's included set), whose kernel of an in-place or view operator excludes the Autograd
// keys for the rest of the call: it is written for tensors autograd has already seen. Here
// autograd has not seen them yet (it sees the values, Note [Functionalization above
// autograd]), so the fallback's calls run with the Autograd and ADInplaceOrView exclusions
// the thread had where functionalization began (`FunctionalizeGuard`; none excluded for
// functional tensors used outside one).

/// The payload of a functional tensor.
pub(crate) struct FunctionalTensor {
    storage: Arc<FunctionalStorage>,
    /// How this tensor is made from the storage's base: empty for the base itself (a `Box`,
    /// not an `Arc`: an empty one allocates nothing, and most wrappers are bases).
    view_metas: Box<[ViewMeta]>,
    state: Mutex<WrapperState>,
}

struct WrapperState {
    value: Tensor,
    /// The storage's generation `value` was computed at.
    generation: u64,
}

/// The payload's mutexes guard plain values: a panic while one is held leaves a valid value.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The keys of a functional tensor over `value` (Note [Functional tensors]).
fn wrapper_keys(value: &Tensor) -> DispatchKeySet {
    value
        .key_set()
        .intersection(DispatchKeySet::full_after(DispatchKey::Functionalize))
        .add(DispatchKey::Functionalize)
}

/// The functional tensor over `value`: a shallow copy with its own version counter (the
/// ADInplaceOrView kernels bump a written functional tensor's counter, which must not be the
/// value's: autograd checks the values' counters).
fn make_wrapper(value: Tensor, payload: FunctionalTensor) -> Result<Tensor> {
    Ok(value
        .to_builder()
        .key_set(wrapper_keys(&value))
        .payload(Arc::new(payload))
        .version_counter(VersionCounter::new())
        .build()?)
}

/// The wrapper state of `t`, if it is a functional tensor.
pub(crate) fn functional(t: &Tensor) -> Option<&FunctionalTensor> {
    if !t.key_set().has(DispatchKey::Functionalize) {
        return None;
    }
    t.payload_as::<FunctionalTensor>()
}

/// Whether `t` is a functional tensor (`torch._is_functional_tensor`).
pub fn is_functional_tensor(t: &Tensor) -> bool {
    functional(t).is_some()
}

/// A new functional tensor whose value is `value`, the base of a new storage
/// (`torch._to_functional_tensor`). Errors when `value` is already functional.
///
/// ```
/// use switchboard_cpu as _;
/// use switchboard_functionalize::{from_functional, is_functional_tensor, to_functional};
/// use switchboard_ops as ops;
/// let x = ops::ones(&[2])?;
/// let fx = to_functional(&x)?;
/// assert!(is_functional_tensor(&fx) && !is_functional_tensor(&x));
/// assert_eq!(from_functional(&fx)?.to_vec::<f32>()?, [1.0, 1.0]);
/// # Ok::<(), switchboard_dispatcher::DispatchError>(())
/// ```
pub fn to_functional(value: &Tensor) -> Result<Tensor> {
    if is_functional_tensor(value) {
        return Err(error(
            "to_functional: the tensor is already a functional tensor".to_string(),
        ));
    }
    new_base(value.clone())
}

/// A functional tensor over `value`, the base of a new storage.
pub(crate) fn new_base(value: Tensor) -> Result<Tensor> {
    let storage = Arc::new(FunctionalStorage {
        state: Mutex::new(StorageState {
            base: value.clone(),
            generation: 0,
        }),
    });
    let payload = FunctionalTensor {
        storage,
        view_metas: Box::default(),
        state: Mutex::new(WrapperState {
            value: value.clone(),
            generation: 0,
        }),
    };
    make_wrapper(value, payload)
}

/// The current value of functional tensor `t`, regenerated first if an alias was written
/// since (`torch._from_functional_tensor` after `torch._sync`); any other tensor as it is.
pub fn from_functional(t: &Tensor) -> Result<Tensor> {
    match functional(t) {
        Some(f) => f.current_value(),
        None => Ok(t.clone()),
    }
}

/// Brings functional tensor `t` up to date with the writes to its aliases (`torch._sync`);
/// nothing for any other tensor.
pub fn sync(t: &Tensor) -> Result<()> {
    from_functional(t).map(drop)
}

/// Replaces the value of functional tensor `t` by `value` (of `t`'s sizes), as a write to it
/// does: every alias of `t` sees it when next used (`torch._functionalize_replace` followed
/// by `torch._functionalize_commit_update`).
pub fn replace_value(t: &Tensor, value: &Tensor) -> Result<()> {
    let f = functional(t)
        .ok_or_else(|| error("replace_value: the tensor is not a functional tensor".to_string()))?;
    if value.sizes() != t.sizes() {
        return Err(error(format!(
            "replace_value: the new value has sizes {:?}, the functional tensor {:?}",
            value.sizes(),
            t.sizes()
        )));
    }
    f.commit_update(value.clone())
}

/// Whether some alias of functional tensor `t` was written since it was made
/// (`torch._functionalize_has_data_mutation`, counted on the shared storage).
pub fn was_mutated(t: &Tensor) -> bool {
    functional(t).is_some_and(|f| lock(&f.storage.state).generation > 0)
}

impl FunctionalTensor {
    /// The value, regenerated from the storage's base if an alias was written since it was
    /// computed (Note [Functional tensors]).
    pub(crate) fn current_value(&self) -> Result<Tensor> {
        let (base, generation) = {
            let storage = lock(&self.storage.state);
            let state = lock(&self.state);
            if state.generation == storage.generation {
                return Ok(state.value.clone());
            }
            (storage.base.clone(), storage.generation)
        };
        let value = crate::view_meta::replay(&base, &self.view_metas, crate::remove_views())?;
        let mut state = lock(&self.state);
        state.value = value.clone();
        state.generation = generation;
        Ok(value)
    }

    /// Records a write of `value` to this tensor (PyTorch's `replace_` + `commit_update`):
    /// the storage's base becomes the base with this tensor's region replaced.
    pub(crate) fn commit_update(&self, value: Tensor) -> Result<()> {
        let mut storage = lock(&self.storage.state);
        let base = if self.view_metas.is_empty() {
            value.clone()
        } else {
            crate::view_meta::write_through(&storage.base, &self.view_metas, &value)?
        };
        storage.base = base;
        storage.generation += 1;
        let mut state = lock(&self.state);
        state.value = value;
        state.generation = storage.generation;
        Ok(())
    }

    /// A functional tensor over `value`, a view of this one made by `meta`: an alias in the
    /// same storage.
    pub(crate) fn view(&self, value: Tensor, meta: ViewMeta) -> Result<Tensor> {
        let generation = lock(&self.storage.state).generation;
        let mut view_metas = self.view_metas.to_vec();
        view_metas.push(meta);
        let payload = FunctionalTensor {
            storage: self.storage.clone(),
            view_metas: view_metas.into_boxed_slice(),
            state: Mutex::new(WrapperState {
                value: value.clone(),
                generation,
            }),
        };
        make_wrapper(value, payload)
    }
}

/// An error of the layer.
pub(crate) fn error(msg: String) -> DispatchError {
    DispatchErrorKind::Kernel(msg).into()
}

/// Calls `op` on plain values, below functionalization (the values have no `Functionalize`
/// key, but a functionalized function includes it on the thread), with autograd as it was
/// where functionalization began (Note [Autograd of the values]).
pub(crate) fn call_plain(op: &OperatorHandle, mut stack: Stack) -> Result<Stack> {
    let _below = below_functionalization();
    op.call_boxed(&mut stack)?;
    Ok(stack)
}

/// Runs the rest of a scope below functionalization: `Functionalize` excluded, autograd as it
/// was where functionalization began (Note [Autograd of the values]).
pub(crate) fn below_functionalization() -> ThreadLocalStateGuard {
    let mut local = tls_local_dispatch_key_set();
    let autograd = AUTOGRAD_DISPATCH_KEYSET.add(DispatchKey::ADInplaceOrView);
    local.excluded = local
        .excluded
        .difference(autograd)
        .union(crate::transform::entry_excluded().intersection(autograd))
        .add(DispatchKey::Functionalize);
    ThreadLocalStateGuard::new(local)
}

/// The single tensor of a boxed return.
pub(crate) fn single_tensor(op: &OperatorHandle, mut stack: Stack) -> Result<Tensor> {
    match stack.pop() {
        Some(IValue::Tensor(t)) if stack.is_empty() => Ok(t),
        _ => Err(error(format!(
            "functionalization: {} did not return one tensor",
            op.name()
        ))),
    }
}
