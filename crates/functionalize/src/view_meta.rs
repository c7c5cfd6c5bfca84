//! `ViewMeta`: one view operation of a functional tensor's chain, replayed forward to
//! regenerate a view from its base, and used backward to write a view's new value into the
//! base.

use switchboard_dispatcher::{
    DispatchKey, Dispatcher, ExcludeDispatchKeyGuard, IValue, OperatorHandle, Result, Stack,
};
use switchboard_tensor::Tensor;

use crate::wrapper::{call_plain, error, single_tensor};

// Note [Writing through a view]
// A write of `value` to a view replaces the view's region of the base: the new base is a copy
// of the old one with that region overwritten. PyTorch expresses it with the `*_scatter`
// operators, the view chain's inverses (`select_scatter`, `slice_scatter`,
// `as_strided_scatter`); Switchboard's registry has none yet, so the layer writes the region
// with the view chain applied to a fresh `clone` of the base and `copy_` of the value into it.
// The clone is the layer's own, reached by nothing else, so the program stays a function of
// values; a graph captured under functionalization shows these `clone`, view and `copy_`
// calls where a view is written (the `*_scatter` operators would make them one call each).

/// One view operation: `op` called with `args`, whose argument `self_index` is the tensor
/// viewed, returning the view as its tensor output number `output` (0 for a single tensor;
/// the list item of `split`-like views).
#[derive(Clone)]
pub(crate) struct ViewMeta {
    pub op: OperatorHandle,
    /// The call's arguments, the viewed tensor's slot left `None`.
    pub args: Stack,
    pub self_index: usize,
    pub output: usize,
}

impl ViewMeta {
    /// Calls `op` (this view operation or its `*_copy` form) on `base`.
    fn apply(&self, op: &OperatorHandle, base: &Tensor) -> Result<Tensor> {
        let mut stack = self.args.clone();
        stack[self.self_index] = IValue::Tensor(base.clone());
        let out = call_plain(op, stack)?;
        let view = out
            .iter()
            .flat_map(IValue::tensors)
            .nth(self.output)
            .cloned();
        view.ok_or_else(|| {
            error(format!(
                "functionalization: {} returned no tensor {}",
                op.name(),
                self.output
            ))
        })
    }
}

/// The `*_copy` form of view operator `op` (`transpose.int` -> `transpose_copy.int`), if the
/// dispatcher has it.
pub(crate) fn copy_form(op: &OperatorHandle) -> Option<OperatorHandle> {
    let name = op.name();
    let base = name.name();
    let qualified = match name.overload_name() {
        "" => format!("{base}_copy"),
        overload => format!("{base}_copy.{overload}"),
    };
    Dispatcher::global().find_schema(&qualified)
}

/// The value of the view made by `metas` from `base`: with the `*_copy` forms when views are
/// removed (a fresh tensor), with the view operators themselves otherwise.
pub(crate) fn replay(base: &Tensor, metas: &[ViewMeta], remove_views: bool) -> Result<Tensor> {
    let mut value = base.clone();
    for meta in metas {
        let copy = if remove_views {
            copy_form(&meta.op)
        } else {
            None
        };
        value = meta.apply(copy.as_ref().unwrap_or(&meta.op), &value)?;
    }
    Ok(value)
}

/// `base` with the region `metas` view replaced by `value` (Note [Writing through a view]).
pub(crate) fn write_through(base: &Tensor, metas: &[ViewMeta], value: &Tensor) -> Result<Tensor> {
    let _below = ExcludeDispatchKeyGuard::new(DispatchKey::Functionalize);
    let d = Dispatcher::global();
    let clone = d.find_schema_or_throw("aten::clone")?;
    let fresh = single_tensor(
        &clone,
        call_plain(&clone, vec![base.clone().into(), IValue::None])?,
    )?;
    let mut region = fresh.clone();
    for meta in metas {
        region = meta.apply(&meta.op, &region)?;
    }
    let copy_ = d.find_schema_or_throw("aten::copy_")?;
    call_plain(
        &copy_,
        vec![region.into(), value.clone().into(), IValue::Bool(false)],
    )?;
    Ok(fresh)
}
