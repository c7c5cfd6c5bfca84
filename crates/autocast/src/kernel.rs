//! The autocast kernels: one boxed kernel per cast policy, serving every operator of a policy
//! table (see Note [Autocast policies are data]).

use switchboard_autograd::AutogradTensor;
use switchboard_dispatcher::{
    DispatchError, DispatchErrorKind, ExcludeDispatchKeyGuard, IValue, KernelFunction,
    OperatorHandle, Result, Stack,
};
use switchboard_schema::Type;
use switchboard_tensor::{ScalarType, Tensor};

use crate::cache;
use crate::policy::{BackendPolicy, CastPolicy};
use crate::state::{get_autocast_dtype, is_autocast_cache_enabled};

/// The kernel of `policy`'s operators of kind `cast`.
pub(crate) fn autocast_kernel(policy: &'static BackendPolicy, cast: CastPolicy) -> KernelFunction {
    KernelFunction::from_boxed(move |op, _keys, stack| run(policy, cast, op, stack))
}

fn error(msg: String) -> DispatchError {
    DispatchErrorKind::Kernel(msg).into()
}

/// Casts the arguments on `stack` as `cast` says, then calls the operator again with the
/// backend's Autocast key excluded (PyTorch's wrappers call the operator, not redispatch: the
/// casts and the call are seen by autograd and every layer above the backend).
fn run(
    policy: &'static BackendPolicy,
    cast: CastPolicy,
    op: &OperatorHandle,
    stack: &mut Stack,
) -> Result<()> {
    let _no_autocast = ExcludeDispatchKeyGuard::new(policy.key);
    let record = op
        .schema()
        .ok_or_else(|| error(format!("autocast: operator {} has no schema", op.name())))?;
    let args = record.schema.arguments();
    let start = stack.len().checked_sub(args.len()).ok_or_else(|| {
        DispatchError::from(DispatchErrorKind::ArgumentCount {
            op: op.name().to_string(),
            expected: args.len(),
            got: stack.len(),
        })
    })?;
    let values = &mut stack[start..];
    let lower = get_autocast_dtype(policy.device_type)?;
    match cast {
        CastPolicy::LowerPrecisionFp => cast_all(policy, lower, lower, values)?,
        CastPolicy::Fp32 => cast_all(policy, ScalarType::Float, lower, values)?,
        CastPolicy::Promote => {
            let mut to = lower;
            for (arg, value) in args.iter().zip(values.iter()) {
                // Only `Tensor` and `Tensor[]` arguments take part (an optional tensor does not,
                // as in PyTorch's `prioritize` overloads).
                match (arg.ty(), value) {
                    (Type::Tensor, IValue::Tensor(t)) => to = prioritize(policy, to, lower, t)?,
                    (Type::List(inner), IValue::TensorList(ts)) if **inner == Type::Tensor => {
                        for t in ts.iter() {
                            to = prioritize(policy, to, lower, t)?;
                        }
                    }
                    _ => {}
                }
            }
            cast_all(policy, to, lower, values)?
        }
        CastPolicy::Fp32SetOptDtype => {
            let first_eligible =
                matches!(values.first(), Some(IValue::Tensor(t)) if is_eligible(policy, t));
            if first_eligible {
                let dtype_arg = args.iter().position(
                    |a| matches!(a.ty(), Type::Optional(inner) if **inner == Type::ScalarType),
                );
                if let Some(i) = dtype_arg {
                    if values[i].is_none() {
                        values[i] = IValue::ScalarType(ScalarType::Float);
                    }
                }
            }
        }
    }
    op.call_boxed(stack)
}

/// Whether autocast casts `t` (`at::autocast::is_eligible`): a floating tensor other than
/// float64 on one of the policy's devices.
fn is_eligible(policy: &BackendPolicy, t: &Tensor) -> bool {
    t.dtype().is_floating_point()
        && t.dtype() != ScalarType::Double
        && policy.eligible_devices.contains(&t.device().ty)
}

/// The widest dtype so far (`at::autocast::prioritize`): float32 wins over the lower-precision
/// dtype; float64 tensors are left out; any other floating dtype is an error.
fn prioritize(
    policy: &BackendPolicy,
    current: ScalarType,
    lower: ScalarType,
    next: &Tensor,
) -> Result<ScalarType> {
    if current == ScalarType::Double {
        return Err(error(
            "promote type is double in at::autocast::prioritize".into(),
        ));
    }
    if !policy.eligible_devices.contains(&next.device().ty) || !next.dtype().is_floating_point() {
        return Ok(current);
    }
    let next = next.dtype();
    if next == ScalarType::Double {
        Ok(current)
    } else if current == ScalarType::Float || next == ScalarType::Float {
        Ok(ScalarType::Float)
    } else if current == lower && next == lower {
        Ok(lower)
    } else {
        Err(error(
            "Unexpected floating ScalarType in at::autocast::prioritize".into(),
        ))
    }
}

fn cast_all(
    policy: &BackendPolicy,
    to: ScalarType,
    lower: ScalarType,
    values: &mut [IValue],
) -> Result<()> {
    for value in values {
        value.try_map_tensors(|t| cached_cast(policy, to, lower, t))?;
    }
    Ok(())
}

/// `arg` cast to `to` if it is eligible and of another dtype (`at::autocast::cached_cast`);
/// lower-precision casts of float32 leaves that require grad are cached (Note [Autocast cast
/// cache]).
fn cached_cast(
    policy: &BackendPolicy,
    to: ScalarType,
    lower: ScalarType,
    arg: &Tensor,
) -> Result<Tensor> {
    if !is_eligible(policy, arg) || arg.dtype() == to {
        return Ok(arg.clone());
    }
    let can_cache = to == lower
        && arg.dtype() == ScalarType::Float
        && arg.requires_grad()
        && arg.is_leaf()
        && arg.base().is_none()
        && is_autocast_cache_enabled();
    if !can_cache {
        return cast(arg, to);
    }
    if let Some(hit) = cache::lookup(arg) {
        return Ok(hit);
    }
    let casted = cast(arg, to)?;
    cache::insert(arg, casted.clone());
    Ok(casted)
}

/// `arg.to(to)`, through the dispatcher (autograd records the cast).
fn cast(arg: &Tensor, to: ScalarType) -> Result<Tensor> {
    switchboard_ops::to(arg, to)
}
