//! A kernel called on plain values as a call on functional tensors over them (PyTorch's
//! `functionalize_aten_op`).

use switchboard_dispatcher::{
    tls_local_dispatch_key_set, DispatchKey, DispatchKeySet, IValue, OperatorHandle, Result, Stack,
    ThreadLocalStateGuard,
};
use switchboard_tensor::Tensor;

use crate::wrapper::{call_plain, functional_value, new_base, was_mutated, Kind};

// Note [Functionalized calls on values]
// A backend below persistent functional tensors (Note [Functional tensors below autograd])
// sees calls on its values, and a kernel it runs for them may make views of them or write
// through views (a composite kernel: `linear` transposes its weight). Such a backend calls the
// kernel through `call_functionalized`: each tensor argument is wrapped as a new functional
// tensor, the kernel runs with `Functionalize` no longer excluded, so that every call it
// makes comes back through the layer (views as their `*_copy` forms, writes as functional
// operators), and the results are values again. An argument the kernel wrote takes its new
// value with one `copy_` of the whole tensor, the only write the values see.

/// Calls `op`'s kernel for `keys` on `stack`, whose tensors are values below persistent
/// functional tensors, as a call on functional tensors over them (Note [Functionalized calls
/// on values]).
///
/// ```
/// use switchboard_cpu as _;
/// use switchboard_dispatcher::{Dispatcher, DispatchKeySet, IValue};
/// use switchboard_ops as ops;
///
/// let linear = Dispatcher::global().find_schema_or_throw("aten::linear")?;
/// let (x, w) = (ops::ones(&[2, 3])?, ops::ones(&[4, 3])?);
/// let mut stack = vec![IValue::from(x), IValue::from(w), IValue::None];
/// // The composite kernel (the `Undefined` slot), its `t` functionalized as `t_copy`.
/// switchboard_functionalize::call_functionalized(&linear, DispatchKeySet::default(), &mut stack)?;
/// let y = stack[0].as_tensor().expect("a tensor").clone();
/// assert!(!switchboard_functionalize::is_functional_tensor(&y));
/// assert_eq!(y.to_vec::<f32>()?, [3.0; 8]);
/// # Ok::<(), switchboard_dispatcher::DispatchError>(())
/// ```
pub fn call_functionalized(
    op: &OperatorHandle,
    keys: DispatchKeySet,
    stack: &mut Stack,
) -> Result<()> {
    let mut inputs: Vec<(Tensor, Tensor)> = Vec::new();
    for v in stack.iter_mut() {
        v.try_map_tensors(|t| {
            let wrapper = new_base(t, Kind::BelowAutograd);
            inputs.push((t.clone(), wrapper.clone()));
            Ok::<_, switchboard_dispatcher::DispatchError>(wrapper)
        })?;
    }
    {
        let mut state = tls_local_dispatch_key_set();
        state.excluded = state.excluded.remove(DispatchKey::Functionalize);
        let _layer = ThreadLocalStateGuard::new(state);
        op.redispatch_boxed(keys, stack)?;
    }
    for (value, wrapper) in inputs.iter().filter(|(_, w)| was_mutated(w)) {
        let copy_ =
            switchboard_dispatcher::Dispatcher::global().find_schema_or_throw("aten::copy_")?;
        let args = vec![
            value.clone().into(),
            value_of(wrapper)?.into(),
            IValue::Bool(false),
        ];
        call_plain(&copy_, args, Kind::BelowAutograd)?;
    }
    for v in stack.iter_mut() {
        v.try_map_tensors(value_of)?;
    }
    Ok(())
}

/// The value of `t` if it is a functional tensor, else `t`.
fn value_of(t: &Tensor) -> Result<Tensor> {
    functional_value(t).unwrap_or_else(|| Ok(t.clone()))
}
