//! Typed kernels on `Lazy` for the operators with a shape rule (Note [Unboxed capture]).

use std::sync::{Arc, OnceLock};

use switchboard_dispatcher::{IValue, KernelFunction, OperatorHandle, Result, Stack};
use switchboard_graph::Arg;
use switchboard_tensor::{Scalar, Tensor, TensorError};

use crate::backend::LazyBackend;
use crate::capture::record_ruled;
use crate::intercepted_op::{intercepted_op, Handling, InterceptedOp};
use crate::kernels::intercept;
use crate::log;
use crate::mode::lazy_mode;
use crate::rules::{self, ShapeRule};

// Note [Unboxed capture]
// The operators with a shape rule (Note [Shape rules]) make most of the calls a training step
// captures, and a capture's cost is mostly fixed: boxing the arguments onto a stack, and
// unboxing the result, was a tenth of it. So their kernels on `Lazy` are typed, one per
// signature (the tensor operands, then `Scalar`s): a call whose rule applies is recorded
// straight from its typed arguments, by the boxed path's own recording (`record_ruled`), and
// counted as a registered capture. Every other call (the rule does not apply, lazy mode is
// off, the operator is disabled, the intercept log or the overhead profile is on) is boxed
// and takes the general path (`intercept`), so results, errors, statistics and log lines are
// the same either way. Boxed calls reach these kernels through the dispatcher's unboxing.

/// An operator with a typed kernel: its handle, resolved when the kernel is registered, and
/// its information, made on the first call (it reads the dispatcher's tables, which are not
/// complete while kernels are being registered).
struct Site {
    op: OperatorHandle,
    info: OnceLock<Arc<InterceptedOp>>,
}

impl Site {
    #[inline]
    fn info(&self) -> &Arc<InterceptedOp> {
        self.info.get_or_init(|| intercepted_op(&self.op))
    }

    /// Captures a call on `first` (and `second`, for binary rules) and `scalars`.
    fn call(&self, first: &Tensor, second: Option<&Tensor>, scalars: &[Scalar]) -> Result<Tensor> {
        let info = self.info();
        let numbers = scalars.iter().all(|s| !matches!(s, Scalar::Bool(_)));
        if numbers {
            if let Some(call) = rules::infer_operands(first, second) {
                let backend = call.operands()[0].1.backend;
                if unobserved(backend, info) {
                    backend.stats.operations.inc();
                    let constants = scalars.iter().map(|s| Arg::Const(IValue::from(*s)));
                    let t = record_ruled(&self.op, call, constants)?;
                    backend.stats.unboxed_captures.inc();
                    return Ok(t);
                }
            }
        }
        let mut stack: Stack = Vec::with_capacity(2 + scalars.len());
        stack.push(IValue::Tensor(first.clone()));
        stack.extend(second.map(|t| IValue::Tensor(t.clone())));
        stack.extend(scalars.iter().map(|s| IValue::from(*s)));
        intercept(&self.op, info, true, &mut stack)?;
        match (stack.pop(), stack.is_empty()) {
            (Some(IValue::Tensor(t)), true) => Ok(t),
            _ => Err(TensorError::invalid(format!(
                "internal error: the lazy kernel of {} did not return one tensor",
                info.name
            ))
            .into()),
        }
    }
}

/// Whether a call of `info`'s operator on `backend`'s device is captured as is, with nothing to
/// log or profile.
#[inline]
fn unobserved(backend: &LazyBackend, info: &InterceptedOp) -> bool {
    lazy_mode()
        && info.handling == Handling::Capture
        && backend.filter.is_empty()
        && !backend.profiling()
        && !log::wanted()
}

/// The typed kernel of operator `op` whose shape rule is `rule` and which takes `scalars`
/// `Scalar` arguments after its tensor operands; `None` for a signature without a typed kernel.
pub(crate) fn typed_kernel(
    op: OperatorHandle,
    rule: ShapeRule,
    scalars: usize,
) -> Option<KernelFunction> {
    let site = Site {
        op,
        info: OnceLock::new(),
    };
    Some(match (rule, scalars) {
        (ShapeRule::Unary, 0) => KernelFunction::from_fn(move |a: &Tensor| site.call(a, None, &[])),
        (ShapeRule::Unary, 1) => {
            KernelFunction::from_fn(move |a: &Tensor, x: Scalar| site.call(a, None, &[x]))
        }
        (ShapeRule::Unary, 2) => {
            KernelFunction::from_fn(move |a: &Tensor, x: Scalar, y: Scalar| {
                site.call(a, None, &[x, y])
            })
        }
        (ShapeRule::Binary, 0) => {
            KernelFunction::from_fn(move |a: &Tensor, b: &Tensor| site.call(a, Some(b), &[]))
        }
        (ShapeRule::Binary, 1) => {
            KernelFunction::from_fn(move |a: &Tensor, b: &Tensor, x: Scalar| {
                site.call(a, Some(b), &[x])
            })
        }
        _ => return None,
    })
}
