//! Lazy tensors as users hold them: functional tensors below autograd over plain lazy tensors,
//! made where values enter a lazy device (Note [Lazy tensors are functional]).

use switchboard_dispatcher::{
    stack_tensors, tls_is_dispatch_key_excluded, DispatchKey, IValue, Result,
};
use switchboard_functionalize::to_functional_below_autograd;
use switchboard_tensor::Tensor;

use crate::backend::is_lazy_device_type;

// Note [Lazy tensors are functional]
// Every lazy tensor a user holds is a functional tensor below autograd (Note [Functional
// tensors below autograd] in switchboard-functionalize) whose value is a plain lazy tensor,
// as PyTorch's lazy tensor core and torch_xla hand out `FunctionalTensorWrapper`s. Autograd
// records on the wrappers; the functionalization layer calls every operator again on the
// values, with `Functionalize` excluded, as its functional form: views as `*_copy`, writes
// as the functional operator plus `*_scatter` into the base, the written tensor taking the
// new value. So the lazy kernels and the eager fallback see pure calls only, and a graph
// the backend runs is a program of pure operators.
// The wrapping happens at the device edge, in this crate's own kernels, as LTC's factory
// kernels do: a call reaching a lazy kernel with `Functionalize` *not* excluded and no lazy
// tensor argument came from outside the layer (a factory on a lazy device, the `empty` of
// `x.to("lazy")` before its `copy_`, a random operator run eagerly), so its lazy results are
// wrapped. A call with `Functionalize` excluded is the layer's, on values: its results stay
// plain and the layer wraps them. A copy back to the host (`x.to("cpu")`) returns a plain
// CPU tensor (Note [Results on another device] in switchboard-functionalize). No core crate
// knows about lazy tensors: the dispatcher's thread-local key sets tell the two cases apart.
// Below the layer, a lazy value is one whole tensor: no view of it and no write through one
// exists (Note [Lazy values]).

/// Whether a call with arguments `args` enters a lazy device from outside the
/// functionalization layer, so that its lazy results must be wrapped (Note [Lazy tensors are
/// functional]).
#[inline]
pub(crate) fn enters_device(args: &[IValue]) -> bool {
    !tls_is_dispatch_key_excluded(DispatchKey::Functionalize)
        && !stack_tensors(args).any(|t| is_lazy_device_type(t.device().ty))
}

/// Wraps each plain lazy tensor of `returns` as a functional tensor below autograd (Note
/// [Lazy tensors are functional]).
pub(crate) fn wrap_entering(returns: &mut [IValue]) -> Result<()> {
    for v in returns {
        v.try_map_tensors(wrap)?;
    }
    Ok(())
}

fn wrap(t: &Tensor) -> Result<Tensor> {
    if !is_lazy_device_type(t.device().ty) {
        return Ok(t.clone());
    }
    to_functional_below_autograd(t)
}
