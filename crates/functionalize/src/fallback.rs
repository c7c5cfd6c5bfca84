//! The boxed fallback of the `Functionalize` key (PyTorch's `functionalizeFallback` and the
//! kernels torchgen generates for views and mutations, as one boxed kernel reading the
//! operator's semantics).

use std::sync::Arc;

use switchboard_dispatcher::{
    stack_tensors, DispatchError, DispatchKey, DispatchKeySet, Dispatcher, IValue, OperatorHandle,
    OperatorSemantics, Provenance, Result, SchemaKind, SchemaRecord, Stack,
};
use switchboard_keys::DeviceType;
use switchboard_tensor::{DatalessTensor, Device, Tensor};

use crate::opted_in::device_opted_into_functionalization;
use crate::view_meta::ViewMeta;
use crate::wrapper::{call_plain, error, functional, new_base, Kind};

// Note [Functionalization above autograd]
// PyTorch's `torch.func.functionalize` is a transform: the function runs on functional tensors,
// and each operator it calls is called again on the tensors' values, where the other layers
// (autograd, autocast, a trace) see a program without views or writes. Switchboard's fallback
// does the same: functional tensors carry no Autograd, Autocast or ADInplaceOrView key, so a
// call on them comes here first; the fallback replaces each functional tensor by its value and
// calls the operator afresh (its functional form, for a write) with `Functionalize` excluded.
// Autograd records those calls on the values, so gradients through a functionalized function
// are those of the functional program, equal to eager's; autocast casts the values; a trace
// records the functional calls. Inside `functionalize` the key is also included on the thread,
// so that factories (calls without tensors) make functional tensors too. Persistent functional
// tensors (`to_functional_below_autograd`) are the other arrangement, PyTorch's own: the same
// fallback, reached after autograd has recorded on them (Note [Functional tensors below
// autograd]).
//
// What the fallback does with a call, by the operator's semantics (Note [One home for an
// operator's facts]):
// - CompositeImplicitAutograd (`reshape`, `flatten`, `contiguous`): decomposed over the
//   functional tensors, so that the views and writes it makes are functionalized;
// - a functional operator: called on the values, its tensors wrapped as new bases;
// - a view (`view`, `t`, `select.int`): called on the value (its `*_copy` form when views are
//   removed), the result wrapped as an alias sharing the input's storage, with the view
//   recorded to regenerate it (Note [Functional tensors]);
// - an in-place, out= or mutable operator: first run on Meta copies of the arguments, which
//   raises eager's errors (a broadcast the written tensor cannot hold, a result dtype it
//   cannot take), as torchgen's functionalization kernels do; then its functional counterpart
//   is called on the values and each written argument's storage takes the new value; the call
//   returns the written functional tensors, as eager returns its written arguments.

/// The kernel: see Note [Functionalization above autograd].
pub(crate) fn functionalize_fallback(
    op: &OperatorHandle,
    keys: DispatchKeySet,
    stack: &mut Stack,
) -> Result<()> {
    let record = op.schema().ok_or_else(|| {
        error(format!(
            "functionalization: operator {} has no schema",
            op.name()
        ))
    })?;
    let below = keys.intersection(DispatchKeySet::full_after(DispatchKey::Functionalize));
    // A composite that writes its arguments is replaced as a whole by its functional form,
    // like any mutation: its decomposition would write them with kernels of its own. (Only an
    // operator with a CompositeImplicitAutograd kernel can run one: asking that first spares
    // the common call the resolution of its kernel.)
    if record.semantics.kind == SchemaKind::Functional
        && op.has_kernel_for_dispatch_key(DispatchKey::CompositeImplicitAutograd)
        && Dispatcher::global()
            .kernel_origin(op, below.highest_priority_type_id())
            .provenance
            == Provenance::Math
    {
        return op.redispatch_boxed(below, stack);
    }
    let n = record.schema.arguments().len();
    let start = stack.len().checked_sub(n).ok_or_else(|| {
        error(format!(
            "functionalization: {} expects {n} arguments, got {}",
            op.name(),
            stack.len()
        ))
    })?;
    let sem = &record.semantics;
    // Tensors from outside the program only (captured, constants): the call runs as it is,
    // as PyTorch's functionalization kernels do without functional inputs (a captured tensor
    // being written is lifted first when lifting: Note [Captured state]). A factory (no
    // tensor) makes a functional tensor.
    let (any_tensor, kind) = call_kind(&stack[start..]);
    if any_tensor && kind.is_none() && !(sem.is_mutating() && crate::captured::is_lifting()) {
        // Tensors from outside the program: autograd as for `functionalize(f)`'s.
        return call_plain_in_place(op, stack, Kind::AboveAutograd);
    }
    // A factory under `functionalize(f)`, or a write lifting a captured tensor: the transform's.
    let kind = kind.unwrap_or(Kind::AboveAutograd);
    if kind == Kind::BelowAutograd && decomposes_over_persistent(op, sem, below, &stack[start..]) {
        let _over = Over::enter(op, Run::Decomposed);
        return op.redispatch_boxed(below, stack);
    }
    if !sem.is_mutating() && !sem.is_view {
        // Note [Functional calls in place]
        // The common call (`add`, `mul`, `sum`) neither views nor writes: its arguments are
        // unwrapped where they lie on the stack, the call runs on that stack, and its returns
        // are wrapped where it left them, without copying the stack.
        // What decides is the schema's alias annotations, as for PyTorch's fallback, not the
        // name: an operator named in-place whose schema declares no write (`c10d::allreduce_`,
        // whose schema, as PyTorch's, has no annotation) comes here too, and a kernel that
        // writes its arguments all the same writes the values.
        // Only persistent functional tensors leave other devices' results plain.
        let device = match kind {
            Kind::BelowAutograd => functional_device(&stack[start..]),
            Kind::AboveAutograd => None,
        };
        for a in &mut stack[start..] {
            a.try_map_tensors(|t| unwrap(t, kind))?;
        }
        call_plain_in_place(op, stack, kind)?;
        for t in stack[start..].iter_mut().flat_map(IValue::tensors_mut) {
            if wraps(t, kind, device) {
                *t = new_base(t, kind);
            }
        }
        return Ok(());
    }
    let args: Stack = stack.drain(start..).collect();
    let returns = match sem.kind {
        SchemaKind::Functional => view_call(op, args, kind)?,
        _ => mutation_call(op, &record, args, kind, below)?,
    };
    stack.extend(returns);
    Ok(())
}

// Note [Composite kernels over persistent functional tensors]
// A backend that opted into functionalization (`opt_into_functionalization`: a lazy device,
// Note [Lazy values] in switchboard-lazy) takes pure calls on its values only, and has no
// views of them. A CompositeExplicitAutograd kernel is no such call: `embedding` reshapes its
// indices, `select_backward` writes a gradient into a slice of zeros. So on such a device, a
// functional operator whose kernel for the values would be a CompositeExplicitAutograd one
// (the backend has none of its own) runs that kernel over the persistent functional tensors,
// as a CompositeImplicitAutograd one does: each call it makes comes back through the layer,
// its views and writes functionalized; the factories it calls make functional tensors there,
// as that backend's factories do. The functional form of an out= call is run so too.
// (PyTorch's functional backends get the same effect per operator, re-entering
// functionalization from their kernels: `functionalize_aten_op`.) Views keep their own path,
// which gives them their `*_copy` forms; `functionalize(f)`'s tensors keep their calls as they
// are, so that its graphs show the operators the function called.
// A kernel calls its own out= form at times (`logical_and` is `logical_and.out` into a new
// tensor; `arange` is `arange.out` into an empty one), whose functional counterpart it is:
// inside its own run over functional tensors, as a decomposed call or as the functional form
// of an out= call, an operator runs on the values, as it would without this rule.

thread_local! {
    /// The operators whose composite kernel runs over functional tensors on this thread, as
    /// decomposed calls, and as the functional forms of out= calls.
    static OVER: [std::cell::RefCell<Vec<usize>>; 2] =
        const { [std::cell::RefCell::new(Vec::new()), std::cell::RefCell::new(Vec::new())] };
}

/// Why a composite kernel runs over functional tensors.
#[derive(Clone, Copy)]
enum Run {
    Decomposed = 0,
    OutForm = 1,
}

/// The scope of a composite kernel running over functional tensors.
struct Over(Run);

impl Over {
    fn enter(op: &OperatorHandle, run: Run) -> Over {
        OVER.with(|o| o[run as usize].borrow_mut().push(op.id()));
        Over(run)
    }

    fn running(op: &OperatorHandle, run: Run) -> bool {
        OVER.with(|o| o[run as usize].borrow().contains(&op.id()))
    }
}

impl Drop for Over {
    fn drop(&mut self) {
        OVER.with(|o| o[self.0 as usize].borrow_mut().pop());
    }
}

/// Whether a call of `op` on persistent functional tensors runs its CompositeExplicitAutograd
/// kernel over them (Note [Composite kernels over persistent functional tensors]).
fn decomposes_over_persistent(
    op: &OperatorHandle,
    sem: &OperatorSemantics,
    below: DispatchKeySet,
    args: &[IValue],
) -> bool {
    !sem.is_view
        && !sem.is_mutating()
        && op.has_kernel_for_dispatch_key(DispatchKey::CompositeExplicitAutograd)
        && functional_device(args).is_some_and(device_opted_into_functionalization)
        && Dispatcher::global()
            .kernel_origin(op, below.highest_priority_type_id())
            .provenance
            == Provenance::DefaultBackend
        && !Over::running(op, Run::Decomposed)
}

/// Whether `op`'s kernel for a call with keys `below` is a composite one (a decomposition).
fn runs_composite(op: &OperatorHandle, below: DispatchKeySet) -> bool {
    let origin = Dispatcher::global().kernel_origin(op, below.highest_priority_type_id());
    matches!(
        origin.provenance,
        Provenance::Math | Provenance::DefaultBackend
    ) && !Over::running(op, Run::OutForm)
}

// Note [Results on another device]
// A call on persistent functional tensors (Note [Functional tensors below autograd]) whose
// result lands on another device type, `x.to("cpu")` of a lazy tensor, returns a plain
// tensor: functionalization belongs to the device whose tensors are functional, as PyTorch's
// `_to_copy` functionalization kernel leaves a copy to a device that does not functionalize
// unwrapped. The host then holds ordinary data, and a copy back (`to(lazy)`) is wrapped by
// that device's own kernels. Likewise a write to a plain tensor of another device type from
// functional ones (`cpu.copy_(lazy)`, valid code in PyTorch for XLA tensors) runs as it is on
// the values. `functionalize(f)`'s tensors wrap every result as before.

/// The device type of the first functional tensor of `args` (Note [Results on another
/// device]).
fn functional_device(args: &[IValue]) -> Option<DeviceType> {
    stack_tensors(args)
        .find(|t| functional(t).is_some())
        .map(|t| t.device().ty)
}

/// Whether result `t` of a call of `kind` on functional tensors of `device` is wrapped (Note
/// [Results on another device]).
fn wraps(t: &Tensor, kind: Kind, device: Option<DeviceType>) -> bool {
    kind == Kind::AboveAutograd || device.is_none_or(|d| d == t.device().ty)
}

/// Whether the tensors a call writes are all plain ones on another device type than its
/// functional tensors' (Note [Results on another device]).
fn writes_another_device(sem: &OperatorSemantics, args: &[IValue]) -> bool {
    let device = functional_device(args);
    let mut written = sem
        .written
        .iter()
        .flat_map(|&w| args[w].tensors())
        .peekable();
    written.peek().is_some()
        && written.all(|t| functional(t).is_none() && Some(t.device().ty) != device)
}

/// Whether `args` hold a tensor, and the kind of the call: `functionalize(f)`'s when a tensor
/// of it is among them (a captured tensor lifted to one: Note [Captured state]), a persistent
/// functional tensor then being a constant of `f` (Note [Functionalization over functional
/// tensors]); else the persistent tensors', or `None` without a functional tensor.
fn call_kind(args: &[IValue]) -> (bool, Option<Kind>) {
    let mut any_tensor = false;
    let mut kind = None;
    for t in stack_tensors(args) {
        any_tensor = true;
        let k = match functional(t) {
            Some(f) => f.kind(),
            None if crate::captured::lifted(t).is_some() => Kind::AboveAutograd,
            None => continue,
        };
        if k == Kind::AboveAutograd {
            return (true, Some(k));
        }
        kind = Some(k);
    }
    (any_tensor, kind)
}

/// Calls `op` on the arguments at the top of `stack`, below functionalization (as
/// [`call_plain`]), leaving its returns there.
fn call_plain_in_place(op: &OperatorHandle, stack: &mut Stack, kind: Kind) -> Result<()> {
    let _below = crate::wrapper::below_functionalization(kind);
    op.call_boxed(stack)
}

/// The value a call of `kind` sees for `t`: the current value of a functional tensor of that
/// kind (a captured tensor lifted to one: Note [Captured state]), any other tensor itself (a
/// persistent functional tensor is a constant of `functionalize(f)`: Note [Functionalization
/// over functional tensors]).
fn unwrap(t: &Tensor, kind: Kind) -> Result<Tensor> {
    match functional(t) {
        Some(f) if f.kind() == kind => f.current_value(),
        Some(_) => Ok(t.clone()),
        None => match crate::captured::lifted(t) {
            Some(l) => crate::wrapper::from_functional(&l),
            None => Ok(t.clone()),
        },
    }
}

/// `args` with each functional tensor of `kind` (and captured tensor lifted to one: Note
/// [Captured state]) replaced by its current value.
fn unwrap_all(args: &[IValue], kind: Kind) -> Result<Stack> {
    args.iter()
        .map(|a| {
            let mut a = a.clone();
            a.try_map_tensors(|t| unwrap(t, kind))?;
            Ok(a)
        })
        .collect()
}

/// Each tensor of `values` wrapped as the base of a new storage of `kind`.
fn wrap_all(mut values: Stack, kind: Kind) -> Stack {
    for t in values.iter_mut().flat_map(IValue::tensors_mut) {
        *t = new_base(t, kind);
    }
    values
}

// Note [_unsafe_view is a view to functionalization]
// `_unsafe_view` (what `reshape` and `matmul` call on a tensor they have just made) returns
// an alias of its input that autograd treats as a new tensor: its schema declares no alias,
// so the fallback would call it on the value, and a backend below the layer would get a view
// of its value (Note [Lazy values] in switchboard-lazy). As PyTorch's functionalization
// kernel for it does, the layer handles it as the view it is: as `view`, whose `*_copy` form
// replaces it when views are removed, and whose aliasing every write then respects.

/// The `Functionalize` kernel of `aten::_unsafe_view` (Note [_unsafe_view is a view to
/// functionalization]).
pub(crate) fn unsafe_view_functionalize(
    _op: &OperatorHandle,
    keys: DispatchKeySet,
    stack: &mut Stack,
) -> Result<()> {
    static VIEW: std::sync::OnceLock<OperatorHandle> = std::sync::OnceLock::new();
    let view = match VIEW.get() {
        Some(v) => v,
        None => {
            let v = Dispatcher::global().find_schema_or_throw("aten::view")?;
            VIEW.get_or_init(|| v)
        }
    };
    functionalize_fallback(view, keys, stack)
}

/// A view call: its results are aliases of the viewed functional tensor.
fn view_call(op: &OperatorHandle, args: Stack, kind: Kind) -> Result<Stack> {
    let self_index = op
        .schema()
        .and_then(|s| OperatorSemantics::viewed_argument(&s.schema));
    let viewed = self_index.and_then(|i| match &args[i] {
        IValue::Tensor(t) => functional(t)
            .filter(|f| f.kind() == kind)
            .map(|f| (i, f, t)),
        _ => None,
    });
    let Some((self_index, viewed, viewed_tensor)) = viewed else {
        // A view of a tensor from outside: a constant, whose views are new values.
        return Ok(wrap_all(
            call_plain(op, unwrap_all(&args, kind)?, kind)?,
            kind,
        ));
    };
    let plain = unwrap_all(&args, kind)?;
    let copy = if kind.removes_views() {
        Dispatcher::global().view_copy_form(op)
    } else {
        None
    };
    // The view's own checks come first (a `*_copy` may accept more: `view_copy` reshapes what
    // `view` refuses), as torchgen's functionalization kernels run the view on Meta copies.
    // For persistent tensors, running the view for their eager geometry (Note [Functional
    // tensors below autograd]) is that check; `functionalize(f)`'s run it on Meta copies.
    let eager = match kind {
        Kind::BelowAutograd => crate::wrapper::eager_views(op, &plain, self_index, viewed_tensor)?,
        Kind::AboveAutograd => {
            if copy.is_some() {
                check_on_meta(op, &args, kind)?;
            }
            Vec::new()
        }
    };
    let mut out = call_plain(copy.as_ref().unwrap_or(op), plain.clone(), kind)?;
    let mut meta_args = plain;
    meta_args[self_index] = IValue::None;
    let mut index = 0;
    for v in &mut out {
        for t in v.tensors_mut() {
            let meta = ViewMeta {
                op: op.clone(),
                args: meta_args.clone(),
                self_index,
                output: index,
            };
            *t = viewed.view(viewed_tensor, t.clone(), meta, eager.get(index))?;
            index += 1;
        }
    }
    Ok(out)
}

/// An in-place, out= or mutable call (Note [Functionalization above autograd]).
fn mutation_call(
    op: &OperatorHandle,
    record: &Arc<SchemaRecord>,
    mut args: Stack,
    kind: Kind,
    below: DispatchKeySet,
) -> Result<Stack> {
    let sem = &record.semantics;
    if kind == Kind::BelowAutograd && writes_another_device(sem, &args) {
        // `cpu.copy_(lazy)`: the write is the host's (Note [Results on another device]).
        return call_plain(op, unwrap_all(&args, kind)?, kind);
    }
    for &w in sem.written.iter() {
        if kind == Kind::AboveAutograd {
            args[w].try_map_tensors(|t| {
                Ok::<_, DispatchError>(crate::captured::lift(t)?.unwrap_or_else(|| t.clone()))
            })?;
        }
        for t in args[w].tensors() {
            if !functional(t).is_some_and(|f| f.kind() == kind) {
                return Err(error(
                    "mutating a non-functional tensor with a functional tensor is not allowed. \
                     Please ensure that all of your inputs are wrapped inside \
                     torch._to_functional_tensor."
                        .to_string(),
                ));
            }
        }
    }
    let plain = unwrap_all(&args, kind)?;
    let d = Dispatcher::global();
    let counterpart = d.functional_counterpart(op);
    // No Meta kernel can tell a data-dependent result (`nonzero`): the values decide.
    let data_dependent = sem.is_data_dependent
        || counterpart
            .as_ref()
            .and_then(OperatorHandle::semantics)
            .is_some_and(|s| s.is_data_dependent);
    if !data_dependent {
        check_on_meta(op, &args, kind)?;
    }
    let first_out = record
        .schema
        .arguments()
        .iter()
        .position(|a| a.is_out())
        .and_then(|i| match &plain[i] {
            IValue::Tensor(t) => Some(t.clone()),
            _ => None,
        });
    let (results, new_values) = match &counterpart {
        Some(functional_op) => {
            let schema = &record.schema;
            let theirs = functional_op.schema().expect("a counterpart has a schema");
            // A composite counterpart runs over the functional tensors (Note [Composite kernels
            // over persistent functional tensors]), its results' values taken.
            let over = kind == Kind::BelowAutograd
                && functional_device(&args).is_some_and(device_opted_into_functionalization)
                && runs_composite(functional_op, below);
            let from = if over { &args } else { &plain };
            let mut call = Stack::with_capacity(theirs.schema.arguments().len());
            for a in theirs.schema.arguments() {
                let ours = schema.arguments().iter().position(|b| b.name() == a.name());
                let value = match ours {
                    Some(i) => from[i].clone(),
                    // A factory's out= form takes its dtype and device from `out`, as torchgen's
                    // functionalization kernels pass `out.options()`.
                    None => match (a.name(), &first_out) {
                        ("dtype", Some(out)) => IValue::ScalarType(out.dtype()),
                        ("device", Some(out)) => IValue::Device(out.device()),
                        _ => a
                            .default_value()
                            .and_then(|dv| IValue::from_schema_default(dv, a.ty(), a.n()))
                            .unwrap_or(IValue::None),
                    },
                };
                call.push(value);
            }
            let out: Vec<IValue> = if over {
                let _over = Over::enter(functional_op, Run::OutForm);
                functional_op.call_boxed(&mut call)?;
                unwrap_all(&call, kind)?
            } else {
                call_plain(functional_op, call, kind)?
            };
            let n_written = sem.written.len();
            match sem.kind {
                SchemaKind::Mutable => {
                    let n_returns = schema.returns().len();
                    let new = out[n_returns..].to_vec();
                    (Some(out[..n_returns].to_vec()), new)
                }
                _ => {
                    if out.len() != n_written {
                        return Err(error(format!(
                            "functionalization: {} returned {} values for {n_written} written \
                             arguments of {}",
                            functional_op.name(),
                            out.len(),
                            op.name()
                        )));
                    }
                    (None, out)
                }
            }
        }
        None if sem.kind == SchemaKind::Inplace => {
            // No functional form (`copy_`, `zero_`, `dropout_`): the write happens on a fresh
            // clone of the value, which nothing else reaches.
            let clone = d.find_schema_or_throw("aten::clone")?;
            let mut call = plain.clone();
            let self_value = match &plain[0] {
                IValue::Tensor(t) => t.clone(),
                _ => {
                    return Err(error(format!(
                        "functionalization: {} writes no tensor self",
                        op.name()
                    )))
                }
            };
            let fresh = crate::wrapper::single_tensor(
                &clone,
                call_plain(&clone, vec![self_value.into(), IValue::None], kind)?,
            )?;
            call[0] = IValue::Tensor(fresh.clone());
            call_plain(op, call, kind)?;
            (None, vec![IValue::Tensor(fresh)])
        }
        None => {
            return Err(error(format!(
                "functionalization: {} mutates its inputs and has no functional variant; only \
                 operators with a functional variant (torchgen's NativeFunctionsGroup) can be \
                 functionalized",
                op.name()
            )))
        }
    };
    // Commit each written argument's new value; out= results of other sizes are new tensors
    // (Note [Functional resize] in switchboard-tensor).
    let mut written_now: Vec<Option<Tensor>> = vec![None; args.len()];
    for (&w, new) in sem.written.iter().zip(new_values) {
        let (IValue::Tensor(target), IValue::Tensor(value)) = (&args[w], new) else {
            return Err(error(format!(
                "functionalization: {} writes a tensor list, which is not supported",
                op.name()
            )));
        };
        let f = functional(target).expect("checked above");
        let value = if value.dtype() != target.dtype() {
            cast_to_dtype_of(&value, target, kind)?
        } else {
            value
        };
        if value.sizes() == target.sizes() {
            f.commit_update(value)?;
            written_now[w] = Some(target.clone());
        } else if let Some(resized) = resized_within(target, &value, kind)? {
            functional(&resized)
                .expect("a view of a functional tensor is one")
                .commit_update(value)?;
            written_now[w] = Some(resized);
        } else {
            let version = target.version_counter();
            written_now[w] = Some(crate::wrapper::new_base_with_version(&value, kind, version));
        }
    }
    let mut returns = Stack::with_capacity(sem.return_aliases.len());
    let mut plain_results = results
        .map(|r| wrap_all(r, kind))
        .unwrap_or_default()
        .into_iter();
    for (alias, is_write) in sem.return_aliases.iter().zip(sem.return_writes.iter()) {
        match (alias, is_write) {
            (Some(i), true) => returns.push(IValue::Tensor(
                written_now[*i]
                    .clone()
                    .expect("a written return's argument is written"),
            )),
            _ => returns.push(plain_results.next().unwrap_or(IValue::None)),
        }
    }
    Ok(returns)
}

// Note [Resized out= tensors under functionalization]
// An out= kernel resizes a wrongly shaped out tensor into a new handle (Note [Functional
// resize] in switchboard-tensor): over the same storage when it is large enough, so the
// caller's handle sees the result's elements, else over a new storage. A functional out
// tensor does the same: when its storage holds the result, the returned tensor is an
// `as_strided` view of it (contiguous, at its offset) that takes the result as a write
// through a view, which the caller's handle then reads; else it is a new base. Only a base
// of a storage is resized in place this way (its value has its geometry, so the view's
// chain replays on it); a resized view of one becomes a new base.

/// The tensor an out= call resizing functional base `target` to `value`'s sizes returns
/// when `target`'s storage holds them (Note [Resized out= tensors under functionalization]):
/// an `as_strided` view of `target`, not yet written; `None` otherwise.
fn resized_within(target: &Tensor, value: &Tensor, kind: Kind) -> Result<Option<Tensor>> {
    let Some(crate::wrapper::Functional::Base { .. }) = functional(target) else {
        return Ok(None);
    };
    let numel: i64 = value.sizes().iter().product();
    let needed = (target.storage_offset() + numel) as usize * target.dtype().element_size();
    if numel == 0 || !target.is_contiguous() || needed > target.storage().nbytes() {
        return Ok(None);
    }
    let op = Dispatcher::global().find_schema_or_throw("aten::as_strided")?;
    let strides = switchboard_tensor::contiguous_strides(value.sizes());
    let args: Stack = vec![
        IValue::Tensor(target.clone()),
        IValue::IntList(value.sizes().to_vec().into()),
        IValue::IntList(strides.to_vec().into()),
        IValue::Int(target.storage_offset()),
    ];
    let mut out = view_call(&op, args, kind)?;
    match out.pop() {
        Some(IValue::Tensor(t)) if out.is_empty() => Ok(Some(t)),
        _ => Err(error(
            "functionalization: as_strided did not return one tensor".to_string(),
        )),
    }
}

/// `value` converted to `like`'s dtype (eager writes a result into its out= tensor's dtype).
fn cast_to_dtype_of(value: &Tensor, like: &Tensor, kind: Kind) -> Result<Tensor> {
    let op = Dispatcher::global().find_schema_or_throw("aten::_to_copy")?;
    let mut stack: Stack = vec![value.clone().into(), IValue::ScalarType(like.dtype())];
    let n = op.schema().expect("schema").schema.arguments().len();
    stack.resize(n, IValue::None);
    // `non_blocking` is a bool.
    stack[5] = IValue::Bool(false);
    crate::wrapper::single_tensor(&op, call_plain(&op, stack, kind)?)
}

/// Runs the mutating call on Meta copies of its arguments, for eager's errors (torchgen's
/// functionalization kernels do the same); skipped when the operator has no Meta kernel.
/// The copies have the geometry of the tensors of the program (the functional tensors', as
/// torchgen's `to_meta` takes the wrapper's), not their values': a write to an expanded view
/// raises eager's internal-overlap error although its value, a `*_copy`, is dense.
fn check_on_meta(op: &OperatorHandle, args: &[IValue], kind: Kind) -> Result<()> {
    let d = Dispatcher::global();
    if !d.kernel_origin(op, DispatchKey::Meta).is_operator_kernel() {
        return Ok(());
    }
    let mut stack: Stack = Vec::with_capacity(args.len());
    for a in args {
        let mut a = a.clone();
        a.try_map_tensors(meta_copy)?;
        stack.push(a);
    }
    // The Meta kernel's own calls (an autogen out= kernel's `copy_`) are plain calls too.
    let _below = crate::wrapper::below_functionalization(kind);
    op.redispatch_boxed(DispatchKeySet::from_key(DispatchKey::Meta), &mut stack)
}

/// A Meta tensor with `t`'s sizes, strides, offset and dtype.
fn meta_copy(t: &Tensor) -> Result<Tensor> {
    let spec = DatalessTensor {
        sizes: t.sizes(),
        strides: t.strides(),
        storage_offset: t.storage_offset(),
        dtype: t.dtype(),
        device: Device::META,
        key_set: Device::META.dense_key_set()?,
        storage_nbytes: t.storage().nbytes(),
        payload_tag: 0,
    };
    Ok(Tensor::without_data(&spec, None, None)?)
}
