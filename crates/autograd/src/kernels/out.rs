//! The Autograd kernel of every `out=` overload.
//!
//! Note [out= and autograd]
//! As PyTorch's generated VariableType code (`throw_error_out_requires_grad`): with grad mode
//! on, an `out=` call whose inputs require grad fails, since its result could not carry a
//! history; so does one whose `out` tensor requires grad (it would be overwritten outside
//! autograd). Otherwise the call continues below autograd unchanged (ADInplaceOrView bumps
//! the version of `out`). One boxed kernel serves every overload with out arguments in the
//! operator list of switchboard-ops, so new `.out` schemas are covered without code here.

use switchboard_dispatcher::{FunctionSchema, IValue, KernelFunction, Library, Result};
use switchboard_ops as ops;

use crate::node::err;
use crate::recording::AFTER_AD;

/// Whether a boxed argument holds a tensor that requires grad.
fn requires_grad(v: &IValue) -> bool {
    match v {
        IValue::Tensor(t) => t.requires_grad_hint(),
        IValue::TensorList(ts) => ts.iter().any(|t| t.requires_grad_hint()),
        IValue::OptionalTensorList(ts) => ts.iter().flatten().any(|t| t.requires_grad_hint()),
        IValue::Tuple(vs) | IValue::GenericList(vs) => vs.iter().any(requires_grad),
        _ => false,
    }
}

/// PyTorch's message for `name` (the operator's base name, `add` for `add.out`).
pub(crate) fn out_requires_grad_error(name: &str) -> switchboard_dispatcher::DispatchError {
    err(format!(
        "{name}(): functions with out=... arguments don't support automatic differentiation, \
         but one of the arguments requires grad."
    ))
}

/// Registers the kernel for every out= overload of `ops::SCHEMAS`.
pub(crate) fn register(lib: &mut Library) -> Result<()> {
    for s in ops::SCHEMAS {
        // out= arguments are mutable (`Tensor(a!)`): a schema without `!` has none, and
        // skipping its parse saves most of this function's start-up time.
        if !s.contains('!') {
            continue;
        }
        // Start-up registers DEF libraries before IMPL ones, so the operator is usually defined
        // already: its parsed schema saves parsing the text again (most of this function's
        // cost). Only an operator not defined yet is parsed here.
        let name = s.split_once('(').map_or(*s, |(name, _)| name);
        let record = lib
            .dispatcher()
            .find_schema(name)
            .and_then(|op| op.schema());
        let parsed;
        let schema = match &record {
            Some(record) => &record.schema,
            None => {
                parsed = FunctionSchema::parse(s).map_err(|e| err(e.to_string()))?;
                &parsed
            }
        };
        let outs = schema.out_arguments();
        if outs.is_empty() {
            continue;
        }
        let n = schema.arguments().len();
        let is_out: Vec<bool> = (0..n).map(|i| outs.contains(&i)).collect();
        let base = schema.base_name().to_owned();
        let kernel = KernelFunction::from_boxed(move |op, ks, stack| {
            if crate::is_grad_enabled() {
                let args = &stack[stack.len().saturating_sub(n)..];
                let (mut ins, mut out) = (false, false);
                for (v, &o) in args.iter().zip(&is_out) {
                    if requires_grad(v) {
                        if o {
                            out = true;
                        } else {
                            ins = true;
                        }
                    }
                }
                if ins || out {
                    return Err(out_requires_grad_error(&base));
                }
            }
            op.redispatch_boxed(ks & AFTER_AD, stack)
        });
        lib.impl_with_static_debug(
            name,
            None,
            kernel,
            "switchboard_autograd::out_overload [Autograd]",
        )?;
    }
    Ok(())
}
