//! `FunctionalTensorWrapper`: a tensor on the `Functionalize` key holding its current
//! functional value, the `FunctionalStorage` it shares with its aliases, and for a view the
//! chain of view operations from the storage's base.

use std::sync::{Arc, Mutex, MutexGuard};

use switchboard_dispatcher::{
    tls_is_dispatch_key_included, tls_local_dispatch_key_set, tls_set_dispatch_key_included,
    DispatchError, DispatchErrorKind, DispatchKey, DispatchKeySet, ExcludeDispatchKeyGuard, IValue,
    OperatorHandle, Result, Stack, ThreadLocalStateGuard,
};
use switchboard_keys::{AUTOCAST_DISPATCH_KEYSET, AUTOGRAD_DISPATCH_KEYSET};
use switchboard_tensor::{
    AnyArc, Device, Storage, Tensor, TensorBuilder, TensorImpl, VersionCounter,
};

use crate::view_meta::{repeats_elements, ViewMeta};

// Note [Functional tensors]
// A functional tensor (PyTorch's `FunctionalTensorWrapper`) stands for a tensor of the user's
// program; what it holds is a plain tensor, its current *value*, that no operator ever writes.
// A write to any alias of a tensor is recorded on the `FunctionalStorage` the aliases share:
// the storage's *base* value is replaced by a new one (for a write to a view, the base with
// the view's region replaced: Note [Writing through a view]) and its *generation* goes up. A
// view remembers the generation its value was computed at; a view used after a write to one
// of its aliases finds its generation old and regenerates its value by replaying its chain
// of views (`ViewMeta`s) on the new base (PyTorch's `sync`); the base's value is the
// storage's base value itself (Note [A base's payload is its storage]). So mutate a view and read
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

// Note [A base's payload is its storage]
// PyTorch's `FunctionalTensorWrapper` holds its value and a `FunctionalStorageImpl` it shares
// with its aliases. Here the tensor a storage was made for, its *base*, has no view chain, so
// its current value is always the storage's base value: it needs no value or generation of
// its own, and its payload is the `FunctionalStorage` itself. Its views (the only other
// aliases) hold the storage (an `Arc` of the base's payload) with their view chain, value and
// generation (`FunctionalView`). Most functional tensors are bases (every result of a
// functional call), and each is then one allocation less, with one lock and one value handle
// less each time its value is read.

// Note [Functional tensors below autograd]
// `functionalize(f)` is a transform: its functional tensors live for one call of `f`, carry no
// autograd key, and autograd records on their values (Note [Functionalization above
// autograd]). A backend that functionalizes everything it holds (PyTorch's XLA and lazy
// tensors) needs the other arrangement, PyTorch's own `FunctionalTensorWrapper`: *persistent*
// functional tensors (`to_functional_below_autograd`) whose key set is their value's Autograd,
// ADInplaceOrView, Autocast and backend keys plus `Functionalize`, which sits below
// ADInplaceOrView. Then:
// - autograd records on the functional tensors themselves: a leaf parameter is one
//   (`requires_grad_`, `.grad`), its saved tensors are, and ADInplaceOrView bumps their
//   version counter (shared by the aliases of a storage, as eager's views share their
//   base's), so that a write to a saved tensor after the forward raises autograd's error;
// - the values never require grad (a value given is detached) and every call the layer makes
//   on them runs with the Autograd and ADInplaceOrView keys excluded: autograd has seen the
//   call already, on the functional tensors;
// - every result of a call on such tensors is one (`Kind::BelowAutograd` is the storage's,
//   shared by its aliases), so the gradients backward computes are, and the calls of the
//   backward formulas and of an optimizer go through the layer as the forward's do;
// - views are always removed (the values see `*_copy` operators and the `*_scatter`
//   inverses), as for XLA: no in-place, out= or view operator reaches the values;
// - a write keeps the tensor and swaps its value: an optimizer's `p.sub_(..)` under no_grad
//   leaves the leaf parameter, its `.grad` and its autograd metadata where they are.
// A view of such a tensor has the sizes, strides and storage offset eager's view would have
// (the view operator run on its viewed tensor's geometry, over that tensor's data), not its
// value's (a `*_copy`, contiguous): autograd reads them when it rebuilds a view's history
// with `as_strided` (Note [CopySlices] in switchboard-autograd), which PyTorch avoids by
// replaying views for tensors that do not support `as_strided`.

/// Which of the two arrangements a functional tensor belongs to (Note [Functional tensors
/// below autograd]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `functionalize(f)`'s: no autograd keys, autograd records on the values.
    AboveAutograd,
    /// Persistent: the value's autograd keys, autograd records on the functional tensors.
    BelowAutograd,
}

impl Kind {
    /// Whether views of such tensors are `*_copy` calls on the values.
    pub(crate) fn removes_views(self) -> bool {
        match self {
            Kind::AboveAutograd => crate::remove_views(),
            Kind::BelowAutograd => true,
        }
    }
}

/// The state shared by a tensor's aliases (PyTorch's `FunctionalStorageImpl`): the payload of
/// their base (Note [A base's payload is its storage]).
pub(crate) struct FunctionalStorage {
    kind: Kind,
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
// functional tensors used outside one). Functional tensors below autograd are the other case:
// autograd has seen the call, on them, so the calls on their values run with both excluded
// (Note [Functional tensors below autograd]).

/// The payload of a functional tensor that is a view of its storage's base.
pub(crate) struct FunctionalView {
    storage: Arc<FunctionalStorage>,
    /// How this tensor is made from the storage's base (never empty).
    view_metas: Box<[ViewMeta]>,
    state: Mutex<WrapperState>,
}

struct WrapperState {
    value: Tensor,
    /// The storage's generation `value` was computed at.
    generation: u64,
}

/// The wrapper state of a functional tensor, borrowed from its payload.
#[derive(Clone, Copy)]
pub(crate) enum Functional<'a> {
    /// The base of its storage; `payload` is the storage, as the tensor holds it.
    Base {
        storage: &'a FunctionalStorage,
        payload: &'a AnyArc,
    },
    /// A view of its storage's base.
    View(&'a FunctionalView),
}

/// The payload's mutexes guard plain values: a panic while one is held leaves a valid value.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The keys of a functional tensor over `value` (Note [Functional tensors], Note [Functional
/// tensors below autograd]).
fn wrapper_keys(value: &Tensor, kind: Kind) -> DispatchKeySet {
    let kept = match kind {
        Kind::AboveAutograd => DispatchKeySet::full_after(DispatchKey::Functionalize),
        Kind::BelowAutograd => DispatchKeySet::full_after(DispatchKey::Functionalize)
            .union(AUTOGRAD_DISPATCH_KEYSET)
            .union(AUTOCAST_DISPATCH_KEYSET)
            .add(DispatchKey::ADInplaceOrView),
    };
    value
        .key_set()
        .intersection(kept)
        .add(DispatchKey::Functionalize)
}

/// The functional tensor over `value` (Note [Wrapper tensors] in switchboard-tensor): a
/// shallow copy with its own version counter (the ADInplaceOrView kernels bump a written
/// functional tensor's counter, which must not be the value's: autograd checks the values'
/// counters).
fn make_wrapper(value: &Tensor, payload: AnyArc, kind: Kind) -> Tensor {
    make_wrapper_with_version(value, payload, kind, VersionCounter::new())
}

/// [`make_wrapper`] with the given version counter.
fn make_wrapper_with_version(
    value: &Tensor,
    payload: AnyArc,
    kind: Kind,
    version: VersionCounter,
) -> Tensor {
    let wrapper = value.wrapper_over(wrapper_keys(value, kind), payload, Some(version));
    // Above autograd, autograd records on the values; the wrapper reports whether its value
    // requires grad, as PyTorch's `functionalize` mirrors the autograd metadata onto its
    // wrappers (`_mirror_autograd_meta_to`), so that a composite deciding by it
    // (`scaled_dot_product_attention`'s kernel choice, `matmul`'s folding) decides as eager.
    if kind == Kind::AboveAutograd && value.requires_grad_hint() {
        wrapper.set_requires_grad_hint(true);
    }
    wrapper
}

/// The wrapper state of `t`, if it is a functional tensor.
pub(crate) fn functional(t: &TensorImpl) -> Option<Functional<'_>> {
    if !t.key_set().has(DispatchKey::Functionalize) {
        return None;
    }
    let payload = t.payload()?;
    match payload.downcast_ref::<FunctionalStorage>() {
        Some(storage) => Some(Functional::Base { storage, payload }),
        None => payload
            .downcast_ref::<FunctionalView>()
            .map(Functional::View),
    }
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
    // A persistent functional tensor may be wrapped: Note [Functionalization over functional
    // tensors].
    if functional(value).is_some_and(|f| f.kind() == Kind::AboveAutograd) {
        return Err(error(
            "to_functional: the tensor is already a functional tensor".to_string(),
        ));
    }
    Ok(new_base(value, Kind::AboveAutograd))
}

/// A persistent functional tensor over `value`, the base of a new storage, on which autograd
/// records (Note [Functional tensors below autograd]): PyTorch's `FunctionalTensorWrapper` as
/// XLA and lazy tensors use it. It does not require grad (`requires_grad_(true)` makes it a
/// leaf parameter); the value is kept detached. Errors when `value` is already functional.
///
/// ```
/// use switchboard_autograd::AutogradTensor;
/// use switchboard_cpu as _;
/// use switchboard_functionalize::{from_functional, to_functional_below_autograd};
/// use switchboard_ops::{self as ops, TensorOps};
/// let w = to_functional_below_autograd(&ops::ones(&[2])?)?.requires_grad_(true)?;
/// w.mul_scalar(3.0)?.sum()?.backward()?; // recorded on `w`
/// let g = w.grad().unwrap(); // a functional tensor too
/// {
///     let _no_grad = switchboard_autograd::no_grad();
///     w.sub_(&g)?; // the same tensor, a new value
/// }
/// assert_eq!(from_functional(&w)?.to_vec::<f32>()?, [-2.0, -2.0]);
/// assert!(w.requires_grad() && w.is_leaf());
/// # Ok::<(), switchboard_dispatcher::DispatchError>(())
/// ```
pub fn to_functional_below_autograd(value: &Tensor) -> Result<Tensor> {
    if is_functional_tensor(value) {
        return Err(error(
            "to_functional_below_autograd: the tensor is already a functional tensor".to_string(),
        ));
    }
    // A shallow copy without autograd metadata (`detach`): autograd lives on the wrapper.
    let detached = value.with_key_set(value.key_set());
    Ok(new_base(&detached, Kind::BelowAutograd))
}

/// A functional tensor of `kind` over `value`, the base of a new storage.
pub(crate) fn new_base(value: &Tensor, kind: Kind) -> Tensor {
    make_wrapper(value, new_storage(value, kind), kind)
}

/// [`new_base`] sharing `version` (an out= tensor resized into a new storage keeps its
/// version counter, as eager's does: Note [Functional resize] in switchboard-tensor).
pub(crate) fn new_base_with_version(value: &Tensor, kind: Kind, version: VersionCounter) -> Tensor {
    make_wrapper_with_version(value, new_storage(value, kind), kind, version)
}

fn new_storage(value: &Tensor, kind: Kind) -> AnyArc {
    Arc::new(FunctionalStorage {
        kind,
        state: Mutex::new(StorageState {
            base: value.clone(),
            generation: 0,
        }),
    })
}

/// The current value of functional tensor `t`, regenerated first if an alias was written
/// since (`torch._from_functional_tensor` after `torch._sync`); any other tensor as it is.
pub fn from_functional(t: &Tensor) -> Result<Tensor> {
    match functional(t) {
        Some(f) => f.current_value(),
        None => Ok(t.clone()),
    }
}

/// The current value of a tensor of `functionalize(f)` (as [`from_functional`]); any other
/// tensor as it is, a persistent functional one included (Note [Functionalization over
/// functional tensors]): what code running functionalized reads a result with, whatever
/// tensors it was given.
pub fn from_functionalized(t: &Tensor) -> Result<Tensor> {
    match functional(t) {
        Some(f) if f.kind() == Kind::AboveAutograd => f.current_value(),
        _ => Ok(t.clone()),
    }
}

/// The current value of `t` when it is a functional tensor ([`from_functional`] for code that
/// holds a `TensorImpl`, such as a backend's host-copy hook); `None` for any other tensor.
pub fn functional_value(t: &TensorImpl) -> Option<Result<Tensor>> {
    functional(t).map(Functional::current_value)
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
    functional(t).is_some_and(|f| lock(&f.storage().state).generation > 0)
}

impl<'a> Functional<'a> {
    /// Which arrangement the tensor belongs to (its storage's).
    pub(crate) fn kind(self) -> Kind {
        self.storage().kind
    }

    /// The storage this tensor shares with its aliases.
    fn storage(self) -> &'a FunctionalStorage {
        match self {
            Functional::Base { storage, .. } => storage,
            Functional::View(v) => &v.storage,
        }
    }

    /// The value, regenerated from the storage's base if an alias was written since it was
    /// computed (Note [Functional tensors]).
    pub(crate) fn current_value(self) -> Result<Tensor> {
        let view = match self {
            Functional::Base { storage, .. } => return Ok(lock(&storage.state).base.clone()),
            Functional::View(view) => view,
        };
        let (base, generation) = {
            let storage = lock(&view.storage.state);
            let state = lock(&view.state);
            if state.generation == storage.generation {
                return Ok(state.value.clone());
            }
            (storage.base.clone(), storage.generation)
        };
        let kind = view.storage.kind;
        let value = crate::view_meta::replay(&base, &view.view_metas, kind)?;
        let mut state = lock(&view.state);
        state.value = value.clone();
        state.generation = generation;
        Ok(value)
    }

    /// Records a write of `value` to this tensor (PyTorch's `replace_` + `commit_update`):
    /// the storage's base becomes the base with this tensor's region replaced.
    pub(crate) fn commit_update(self, value: Tensor) -> Result<()> {
        let view = match self {
            Functional::Base { storage, .. } => {
                let mut storage = lock(&storage.state);
                storage.base = value;
                storage.generation += 1;
                return Ok(());
            }
            Functional::View(view) => view,
        };
        let mut storage = lock(&view.storage.state);
        storage.base = crate::view_meta::write_through(
            &storage.base,
            &view.view_metas,
            &value,
            view.storage.kind,
        )?;
        storage.generation += 1;
        // Note [Reading a view after writing it]
        // The view written is up to date with the write, as PyTorch's `sync` after
        // `commit_update` makes it, unless its chain repeats elements of its base (`expand`,
        // `as_strided` with overlapping strides): there the write sums into the base (each
        // element takes every update of its copies) and the view must be regenerated from it,
        // as PyTorch regenerates it.
        if !view.view_metas.iter().any(|m| repeats_elements(&m.op)) {
            let mut state = lock(&view.state);
            state.value = value;
            state.generation = storage.generation;
        }
        Ok(())
    }

    /// A functional tensor over `value`, a view of this one (`viewed`) made by `meta`: an
    /// alias in the same storage. Below autograd, `eager` is the view eager's operator makes of
    /// `viewed`'s geometry, whose geometry the new tensor takes (Note [Functional tensors below
    /// autograd]), with `viewed`'s version counter.
    pub(crate) fn view(
        self,
        viewed: &Tensor,
        value: Tensor,
        meta: ViewMeta,
        eager: Option<&Tensor>,
    ) -> Result<Tensor> {
        let (storage, mut view_metas) = match self {
            Functional::Base { payload, .. } => {
                let storage = Arc::downcast::<FunctionalStorage>(payload.clone())
                    .map_err(|_| error("functionalization: a base without storage".to_string()))?;
                (storage, Vec::with_capacity(1))
            }
            Functional::View(v) => (v.storage.clone(), v.view_metas.to_vec()),
        };
        view_metas.push(meta);
        let generation = lock(&storage.state).generation;
        let payload = FunctionalView {
            storage,
            view_metas: view_metas.into_boxed_slice(),
            state: Mutex::new(WrapperState {
                value: value.clone(),
                generation,
            }),
        };
        let kind = self.kind();
        Ok(match (kind, eager) {
            (Kind::BelowAutograd, Some(eager)) => eager.wrapper_over(
                wrapper_keys(&value, kind),
                Arc::new(payload),
                Some(viewed.version_counter()),
            ),
            _ => make_wrapper(&value, Arc::new(payload), kind),
        })
    }
}

/// The view `op` makes of `viewed`'s geometry over `viewed`'s data, as eager's operator would
/// (Note [Functional tensors below autograd]): `op` called on a plain tensor of `viewed`'s
/// storage and geometry, the other arguments being `plain`'s; its tensor outputs in order.
pub(crate) fn eager_views(
    op: &OperatorHandle,
    plain: &[IValue],
    self_index: usize,
    viewed: &Tensor,
) -> Result<Vec<Tensor>> {
    let backend = viewed
        .key_set()
        .intersection(DispatchKeySet::full_after(DispatchKey::Python));
    let geometry = TensorBuilder::new(viewed.storage().clone(), viewed.dtype())
        .sizes(viewed.sizes())
        .strides(viewed.strides())
        .storage_offset(viewed.storage_offset())
        .device(viewed.device())
        .key_set(backend)
        .build()?;
    let mut stack: Stack = plain.to_vec();
    stack[self_index] = IValue::Tensor(geometry);
    // The backend's kernel only: no layer, mode or trace sees this call (nor any it makes).
    let _plain =
        ExcludeDispatchKeyGuard::new(AUTOGRAD_DISPATCH_KEYSET.union(DispatchKeySet::from_keys(&[
            DispatchKey::ADInplaceOrView,
            DispatchKey::Functionalize,
            DispatchKey::Python,
            DispatchKey::PythonTLSSnapshot,
        ])));
    if viewed.has_data() {
        op.redispatch_boxed(backend, &mut stack)?;
        return Ok(stack.iter().flat_map(IValue::tensors).cloned().collect());
    }
    // A tensor without data (a lazy backend's) may need state of its backend that this plain
    // tensor lacks; a view's geometry is the same on every device, so the Meta kernel gives
    // it, over a meta storage of the same size, and the views are rebuilt over `viewed`'s.
    let meta = TensorBuilder::new(
        Storage::zeros_for(Device::META, viewed.storage().nbytes(), viewed.dtype())?,
        viewed.dtype(),
    )
    .sizes(viewed.sizes())
    .strides(viewed.strides())
    .storage_offset(viewed.storage_offset())
    .build()?;
    stack[self_index] = IValue::Tensor(meta);
    op.redispatch_boxed(DispatchKeySet::from_key(DispatchKey::Meta), &mut stack)?;
    stack
        .iter()
        .flat_map(IValue::tensors)
        .map(|m| {
            Ok(TensorBuilder::new(viewed.storage().clone(), m.dtype())
                .sizes(m.sizes())
                .strides(m.strides())
                .storage_offset(m.storage_offset())
                .device(viewed.device())
                .key_set(backend)
                .build()?)
        })
        .collect()
}

/// An error of the layer.
pub(crate) fn error(msg: String) -> DispatchError {
    DispatchErrorKind::Kernel(msg).into()
}

/// Calls `op` on plain values, below functionalization (the values have no `Functionalize`
/// key, but a functionalized function includes it on the thread), with autograd as
/// [`below_functionalization`] sets it for `kind`.
pub(crate) fn call_plain(op: &OperatorHandle, mut stack: Stack, kind: Kind) -> Result<Stack> {
    let _below = below_functionalization(kind);
    op.call_boxed(&mut stack)?;
    Ok(stack)
}

/// Runs the rest of a scope below functionalization, with autograd as it was where
/// functionalization began for the tensors of `functionalize(f)` (Note [Autograd of the
/// values]), excluded for the persistent ones (Note [Functional tensors below autograd]).
/// Below persistent functional tensors `Functionalize` is excluded; below `functionalize(f)`'s
/// it is only no longer included on the thread, so that persistent functional tensors among the
/// values still reach their own layer (Note [Functionalization over functional tensors]).
pub(crate) fn below_functionalization(kind: Kind) -> BelowFunctionalization {
    let autograd = AUTOGRAD_DISPATCH_KEYSET.add(DispatchKey::ADInplaceOrView);
    if kind == Kind::BelowAutograd {
        return BelowFunctionalization {
            _exclude: Some(ExcludeDispatchKeyGuard::new(
                autograd.add(DispatchKey::Functionalize),
            )),
            _not_included: None,
            _replace: None,
        };
    }
    let mut local = tls_local_dispatch_key_set();
    let at_entry = crate::transform::entry_excluded().intersection(autograd);
    // Every call on functional tensors comes here, mostly with autograd as it was at the
    // entry: then only the included `Functionalize` needs removing, with a guard of one word
    // rather than a saved copy of the thread's sets.
    if local.excluded.intersection(autograd) == at_entry {
        return BelowFunctionalization {
            _exclude: None,
            _not_included: Some(NotIncluded::new()),
            _replace: None,
        };
    }
    local.excluded = local.excluded.difference(autograd).union(at_entry);
    local.included = local.included.remove(DispatchKey::Functionalize);
    BelowFunctionalization {
        _exclude: None,
        _not_included: None,
        _replace: Some(ThreadLocalStateGuard::new(local)),
    }
}

/// Removes `Functionalize` from the thread's included keys until dropped, when it was there.
pub(crate) struct NotIncluded {
    was_included: bool,
}

impl NotIncluded {
    pub(crate) fn new() -> NotIncluded {
        let was_included = tls_is_dispatch_key_included(DispatchKey::Functionalize);
        if was_included {
            tls_set_dispatch_key_included(DispatchKey::Functionalize, false);
        }
        NotIncluded { was_included }
    }
}

impl Drop for NotIncluded {
    fn drop(&mut self) {
        if self.was_included {
            tls_set_dispatch_key_included(DispatchKey::Functionalize, true);
        }
    }
}

/// The guard of [`below_functionalization`]: restores the thread's sets when dropped.
#[must_use = "the call is below functionalization only while the guard lives"]
pub(crate) struct BelowFunctionalization {
    /// When only `Functionalize` (and autograd) were excluded.
    _exclude: Option<ExcludeDispatchKeyGuard>,
    /// When only the included `Functionalize` was removed.
    _not_included: Option<NotIncluded>,
    /// When the autograd exclusions were replaced too.
    _replace: Option<ThreadLocalStateGuard>,
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
