//! `switchboard call --functionalize[=REMOVE]`: the call inside a functionalized function.

use std::cell::RefCell;

use switchboard::dispatcher::{
    stack_tensors, AutoDispatchBelowADInplaceOrView, OperatorHandle, Stack,
};
use switchboard::functionalize::{functionalize, Remove};
use switchboard::schema::FunctionSchema;
use switchboard::tensor::Tensor;

use super::{one_line, CallError};

/// What `--functionalize` removes, if given.
pub(super) fn remove(given: Option<&str>) -> Result<Option<Remove>, CallError> {
    given
        .map(|r| {
            r.parse::<Remove>()
                .map_err(|e| CallError::Functionalize(one_line(&e)))
        })
        .transpose()
}

/// [`super::call`] inside `functionalize(f, remove)`: the stack's tensors are the function's
/// inputs (each wrapped on its own, as `torch.func.functionalize` wraps its arguments), the
/// returns' tensors its outputs; inputs the call writes are written back.
pub(super) fn call(
    op: &OperatorHandle,
    schema: &FunctionSchema,
    op_name: &str,
    stack: Stack,
    with_autograd: bool,
    remove: Remove,
) -> Result<Stack, CallError> {
    // Below autograd as the plain call is, from where functionalization begins.
    let _below_autograd = (!with_autograd).then(AutoDispatchBelowADInplaceOrView::new);
    let inputs: Vec<Tensor> = stack_tensors(&stack).cloned().collect();
    let returns = RefCell::new(None);
    let f = |xs: &[Tensor]| {
        let mut call_stack = stack.clone();
        let mut given = xs.iter();
        for v in &mut call_stack {
            for t in v.tensors_mut() {
                if let Some(x) = given.next() {
                    *t = x.clone();
                }
            }
        }
        let r = super::call(op, schema, op_name, call_stack, with_autograd)
            .map_err(|e| switchboard::dispatcher::DispatchErrorKind::Kernel(e.to_string()))?;
        let tensors = stack_tensors(&r).cloned().collect();
        *returns.borrow_mut() = Some(r);
        Ok(tensors)
    };
    let values = functionalize(f, remove)(&inputs).map_err(|e| {
        // The inner call's error is already `op: message`.
        let message = one_line(&e.to_string());
        let prefix = format!("{op_name}: ");
        CallError::Kernel {
            op: op_name.to_owned(),
            message: message.strip_prefix(&prefix).unwrap_or(&message).to_owned(),
        }
    })?;
    let mut returns = returns.into_inner().unwrap_or_default();
    let mut values = values.into_iter();
    for v in &mut returns {
        for t in v.tensors_mut() {
            if let Some(value) = values.next() {
                *t = value;
            }
        }
    }
    Ok(returns)
}
