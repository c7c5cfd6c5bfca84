//! `switchboard call --jvp`: the call in forward mode, its outputs' tangents.
//!
//! Note [switchboard call --jvp]
//! Inside a dual level (`torch.autograd.forward_ad.dual_level()`), every floating-point tensor
//! argument (also inside `Tensor[]` and `Tensor?[]`) becomes a dual tensor whose tangent is
//! the input file's `tangent.NAME` (`tangent.NAME.J` for list items; cast to the argument's
//! dtype, its shape must be the argument's, as `make_dual` requires) or, when the file has
//! none, ones. The call runs through autograd, whose kernels compute the output tangents from
//! the `result:` formulas of derivatives.yaml; each floating-point tensor output `outI`
//! (`outI.J` in lists) has its tangent written as `tangent_outI` after the outputs (zeros
//! where it does not depend on a dual input). An operator without a forward formula is
//! PyTorch's error "Trying to use forward AD with NAME that does not support it ...".

use switchboard::autograd::{make_dual, unpack_dual, DualLevel};
use switchboard::dispatcher::{DispatchError, IValue, Stack};
use switchboard::ops;
use switchboard::tensor::Tensor;

use super::value::Inputs;
use super::{one_line, CallError};

fn fail(op_name: &str) -> impl Fn(DispatchError) -> CallError + '_ {
    move |e| CallError::Kernel {
        op: op_name.to_owned(),
        message: one_line(&e.to_string()),
    }
}

/// `t` made dual with its tangent from `inputs` (`tangent.NAME`), or ones.
fn dual(
    t: &Tensor,
    name: &str,
    inputs: &Inputs,
    level: &DualLevel,
    op_name: &str,
) -> Result<Tensor, CallError> {
    let key = format!("tangent.{name}");
    let tangent = match inputs.as_ref().and_then(|m| m.get(&key)) {
        Some(given) if given.sizes() != t.sizes() => {
            return Err(CallError::Kernel {
                op: op_name.to_owned(),
                message: format!(
                    "{key} has shape {:?}, but argument '{name}' has shape {:?}",
                    given.sizes(),
                    t.sizes()
                ),
            })
        }
        Some(given) if given.dtype() != t.dtype() => {
            ops::_to_copy_with(given, ops::ToCopyOptions::default().dtype(t.dtype()))
                .map_err(fail(op_name))?
        }
        Some(given) => given.clone(),
        None => ops::ones_like(t).map_err(fail(op_name))?,
    };
    make_dual(t, &tangent, level.level()).map_err(fail(op_name))
}

/// Makes the floating-point tensor arguments of `stack` dual (see Note [switchboard call
/// --jvp]).
pub(super) fn make_duals(
    schema: &switchboard::schema::FunctionSchema,
    op_name: &str,
    stack: &mut Stack,
    inputs: &Inputs,
    level: &DualLevel,
) -> Result<(), CallError> {
    for (arg, v) in schema.arguments().iter().zip(stack.iter_mut()) {
        let name = arg.name();
        match v {
            IValue::Tensor(t) if t.dtype().is_floating_point() => {
                *t = dual(t, name, inputs, level, op_name)?;
            }
            IValue::TensorList(ts) => {
                for (j, t) in ts.iter_mut().enumerate() {
                    if t.dtype().is_floating_point() {
                        *t = dual(t, &format!("{name}.{j}"), inputs, level, op_name)?;
                    }
                }
            }
            IValue::OptionalTensorList(ts) => {
                for (j, t) in ts.iter_mut().enumerate() {
                    if let Some(t) = t.as_mut().filter(|t| t.dtype().is_floating_point()) {
                        *t = dual(t, &format!("{name}.{j}"), inputs, level, op_name)?;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The tangents of the floating-point tensor outputs, `(tangent_outI, tangent)`, and the
/// returns replaced by their primals.
pub(super) fn tangents(
    returns: &mut Stack,
    level: &DualLevel,
    op_name: &str,
) -> Result<Vec<(String, Tensor)>, CallError> {
    let mut out = Vec::new();
    let mut split = |t: &mut Tensor, name: String| -> Result<(), CallError> {
        if !t.dtype().is_floating_point() {
            return Ok(());
        }
        let (primal, tangent) = unpack_dual(t, level.level()).map_err(fail(op_name))?;
        let tangent = match tangent {
            Some(tangent) => tangent,
            None => ops::zeros_like(&primal).map_err(fail(op_name))?,
        };
        *t = primal;
        out.push((name, tangent));
        Ok(())
    };
    for (i, v) in returns.iter_mut().enumerate() {
        match v {
            IValue::Tensor(t) => split(t, format!("tangent_out{i}"))?,
            IValue::TensorList(ts) => {
                for (j, t) in ts.iter_mut().enumerate() {
                    split(t, format!("tangent_out{i}.{j}"))?;
                }
            }
            _ => {}
        }
    }
    Ok(out)
}
