//! [`cpu_fallback`]: runs any operator on the CPU for a backend that has no kernel for it
//! (PyTorch's `at::native::cpu_fallback`).

use switchboard_dispatcher::{
    AutoDispatchBelowADInplaceOrView, DispatchKey, DispatchKeySet, IValue, OperatorHandle, Result,
    Stack,
};
use switchboard_schema::{AliasInfo, Argument};
use switchboard_tensor::{Device, Storage, Tensor};

use crate::composite::error;

// Note [CPU fallback]
// A backend that implements a few operators natively covers all the others with one boxed
// fallback on its key that calls `cpu_fallback` (PyTorch's `at::native::cpu_fallback`, which
// XLA and out-of-tree PrivateUse1 backends use the same way):
// 1. every tensor argument not on the CPU (alone, in a `Tensor[]` or a `Tensor?[]`) is copied
//    to the CPU with `_to_copy`, and a `Device` argument becomes `cpu`;
// 2. the operator runs with the CPU key alone (`redispatch_boxed`);
// 3. arguments the schema marks written (`Tensor(a!)`: in-place and `out=` operators) get the
//    CPU result copied back into the original tensor with `copy_`;
// 4. each return is moved to the target device (the `Device` argument's, else the arguments'),
//    except a written alias of an argument, which returns that original argument, as the
//    operator's own kernel would.
// The copies go through the dispatcher, so the backend only needs `empty.memory_format`,
// `empty_strided` and a `copy_` that moves data to and from its device; it runs them below
// ADInplaceOrView, so they neither record autograd history nor bump version counters (the
// layers above did that for the call itself). Unlike PyTorch, which leaves device checks to
// the kernels, the fallback first checks that the arguments share a device, with
// TensorIterator's rule that 0-dim CPU tensors mix with any device: the CPU kernel would see
// only CPU copies and could not tell. A view operator (a returned read alias, `Tensor(a)`)
// cannot run this way, since a CPU result cannot share the argument's memory: that is an
// error, as with PyTorch's `error_on_views`, where a silent copy would break aliasing.

/// Where each argument's original tensors went (Note [CPU fallback]).
enum Moved {
    Tensor(Tensor, Tensor),
    List(Vec<Option<(Tensor, Tensor)>>),
}

/// Runs `op` on CPU copies of its arguments and moves the results back (Note [CPU fallback]).
/// Meant to be called from a backend's boxed fallback:
///
/// ```
/// use switchboard_dispatcher::{DispatchKeySet, KernelFunction, Library, LibraryKind};
/// use switchboard_dispatcher::{Dispatcher, DispatchKey, OperatorHandle, Result, Stack};
///
/// fn my_fallback(op: &OperatorHandle, _ks: DispatchKeySet, stack: &mut Stack) -> Result<()> {
///     // (a backend could log or count `op` here)
///     switchboard_ops::cpu_fallback(op, stack)
/// }
/// let mut lib = Library::new(Dispatcher::global(), LibraryKind::Impl, "_",
///                            Some(DispatchKey::PrivateUse3))?;
/// lib.fallback(None, KernelFunction::from_boxed(my_fallback))?;
/// # Ok::<(), switchboard_dispatcher::DispatchError>(())
/// ```
pub fn cpu_fallback(op: &OperatorHandle, stack: &mut Stack) -> Result<()> {
    let record = op
        .schema()
        .ok_or_else(|| error(format!("cpu_fallback: {} has no schema", op.name())))?;
    let schema = &record.schema;
    let args = schema.arguments();
    let first = stack.len().checked_sub(args.len()).ok_or_else(|| {
        error(format!(
            "cpu_fallback: {} takes {} arguments, the stack holds {}",
            op.name(),
            args.len(),
            stack.len()
        ))
    })?;
    let mut target = common_device(op, args, &stack[first..])?;
    let _below = AutoDispatchBelowADInplaceOrView::new();

    // 1. CPU copies of the arguments.
    let mut moved: Vec<Option<Moved>> = Vec::with_capacity(args.len());
    for value in &mut stack[first..] {
        moved.push(match value {
            IValue::Tensor(t) => {
                let cpu = to_cpu(t)?;
                let original = std::mem::replace(t, cpu.clone());
                Some(Moved::Tensor(original, cpu))
            }
            IValue::TensorList(ts) => {
                let mut pairs = Vec::with_capacity(ts.len());
                for t in ts.iter_mut() {
                    let cpu = to_cpu(t)?;
                    pairs.push(Some((std::mem::replace(t, cpu.clone()), cpu)));
                }
                Some(Moved::List(pairs))
            }
            IValue::OptionalTensorList(ts) => {
                let mut pairs = Vec::with_capacity(ts.len());
                for t in ts.iter_mut() {
                    pairs.push(match t {
                        Some(t) => {
                            let cpu = to_cpu(t)?;
                            Some((std::mem::replace(t, cpu.clone()), cpu))
                        }
                        None => None,
                    });
                }
                Some(Moved::List(pairs))
            }
            IValue::Device(d) => {
                target = Some(*d);
                *d = Device::CPU;
                None
            }
            _ => None,
        });
    }

    // 2. The CPU kernel.
    op.redispatch_boxed(DispatchKeySet::from_key(DispatchKey::CPU), stack)?;

    // 3. Written arguments get the CPU results back.
    let semantics = &record.semantics;
    for m in semantics.written.iter().filter_map(|&k| moved.get(k)) {
        match m {
            Some(Moved::Tensor(original, cpu)) => copy_back(original, cpu)?,
            Some(Moved::List(pairs)) => {
                for (original, cpu) in pairs.iter().flatten() {
                    copy_back(original, cpu)?;
                }
            }
            None => {}
        }
    }

    // 4. The returns, on the target device.
    let returns = schema.returns();
    let first_return = stack.len().checked_sub(returns.len()).ok_or_else(|| {
        error(format!(
            "cpu_fallback: the CPU kernel of {} returned fewer values than its schema",
            op.name()
        ))
    })?;
    for (r, (ret, value)) in returns.iter().zip(&mut stack[first_return..]).enumerate() {
        if let Some(alias) = ret.alias_info() {
            if semantics.return_views[r] {
                return Err(error(format!(
                    "The operator {} appears to be a view operator, but it has no \
                     implementation for the backend \"{}\". View operators don't support \
                     falling back to run on the CPU, since the tensor's storage cannot be shared \
                     across devices.",
                    op.name(),
                    target.map_or("<none>".to_string(), |d| d.to_string())
                )));
            }
            if let Some(original) = written_argument(args, &moved, alias, value) {
                *value = original;
                continue;
            }
        }
        let Some(device) = target else { continue };
        match value {
            IValue::Tensor(t) => *t = to_device(t, device)?,
            IValue::TensorList(ts) => {
                for t in ts.iter_mut() {
                    *t = to_device(t, device)?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The device of the call's tensors, with TensorIterator's rule that 0-dim CPU tensors mix with
/// any device (`None` when there are only those, or no tensors).
fn common_device(
    op: &OperatorHandle,
    args: &[Argument],
    values: &[IValue],
) -> Result<Option<Device>> {
    let mut common: Option<Device> = None;
    for (arg, value) in args.iter().zip(values) {
        for t in value.tensors() {
            if t.is_cpu() && t.dim() == 0 {
                continue;
            }
            match common {
                None => common = Some(t.device()),
                Some(d) if d != t.device() => {
                    return Err(error(format!(
                        "Expected all tensors to be on the same device, but found at least two \
                         devices, {d} and {}! (when checking argument for argument {} in method \
                         {})",
                        t.device(),
                        arg.name(),
                        op.name()
                    )))
                }
                Some(_) => {}
            }
        }
    }
    Ok(common)
}

fn to_cpu(t: &Tensor) -> Result<Tensor> {
    if t.is_cpu() {
        return Ok(t.clone());
    }
    crate::_to_copy_with(t, crate::ToCopyOptions::default().device(Device::CPU))
}

fn to_device(t: &Tensor, device: Device) -> Result<Tensor> {
    if t.device() == device {
        return Ok(t.clone());
    }
    crate::_to_copy_with(t, crate::ToCopyOptions::default().device(device))
}

/// Writes the CPU copy of a written argument back into the original.
fn copy_back(original: &Tensor, cpu: &Tensor) -> Result<()> {
    if Tensor::ptr_eq(original, cpu) {
        return Ok(());
    }
    crate::copy_(original, cpu)?;
    Ok(())
}

/// The original argument a written return aliases (`Tensor(a!)` on both), when the CPU kernel
/// returned that argument's CPU copy itself (same memory and geometry); `None` when it returned
/// other memory (an `out=` tensor it resized), which then goes to the device as a new tensor.
fn written_argument(
    args: &[Argument],
    moved: &[Option<Moved>],
    alias: &AliasInfo,
    value: &IValue,
) -> Option<IValue> {
    let same = |a: &Tensor, b: &Tensor| {
        Storage::ptr_eq(a.storage(), b.storage())
            && a.sizes() == b.sizes()
            && a.strides() == b.strides()
            && a.storage_offset() == b.storage_offset()
    };
    for (arg, m) in args.iter().zip(moved) {
        if arg.alias_info() != Some(alias) {
            continue;
        }
        match (m, value) {
            (Some(Moved::Tensor(original, cpu)), IValue::Tensor(r)) if same(cpu, r) => {
                return Some(IValue::Tensor(original.clone()));
            }
            (Some(Moved::List(pairs)), IValue::TensorList(rs))
                if pairs.len() == rs.len()
                    && pairs
                        .iter()
                        .zip(rs)
                        .all(|(p, r)| p.as_ref().is_some_and(|(_, cpu)| same(cpu, r))) =>
            {
                return Some(IValue::TensorList(
                    pairs.iter().flatten().map(|(o, _)| o.clone()).collect(),
                ));
            }
            _ => {}
        }
    }
    None
}
