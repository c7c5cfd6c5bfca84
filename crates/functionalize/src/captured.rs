//! Captured state under functionalization: tensors a functionalized program writes without
//! having been given them (a model's parameters, an optimizer's buffers), lifted to functional
//! tensors on their first write and written back when the program ends.

use std::cell::RefCell;

use switchboard_dispatcher::{Dispatcher, IValue, Result};
use switchboard_tensor::Tensor;

use crate::wrapper::{below_functionalization, from_functional, functional, to_functional, Kind};

// Note [Captured state]
// `functionalize(f)` wraps `f`'s arguments; a tensor `f` reaches otherwise (captured) is a
// constant to it, and writing one is an error, as in PyTorch. A training step is such a
// program: the model's parameters and the optimizer's buffers are captured, and written by
// the optimizer. PyTorch's AOTAutograd passes them as arguments (`functional_call`); here a
// functionalization can instead *lift* captured tensors (`FunctionalizeGuard::lifting`): the
// first write to one makes it a functional tensor, later calls read that tensor's current
// value wherever the captured tensor is an argument, and `FunctionalizeGuard::finish` writes
// each lifted tensor back with `copy_`, as the mutated inputs of a functionalized program are.
// A view of a captured tensor made before it was lifted does not see the writes: lifting is
// by identity.

thread_local! {
    /// The tensors lifted by the innermost lifting functionalization: (captured, functional).
    static LIFTED: RefCell<Option<Vec<(Tensor, Tensor)>>> = const { RefCell::new(None) };
}

/// Starts lifting on this thread; the previous state, to restore.
pub(crate) fn start() -> Option<Vec<(Tensor, Tensor)>> {
    LIFTED.with(|l| l.replace(Some(Vec::new())))
}

/// Stops lifting and restores `previous`; the tensors lifted.
pub(crate) fn stop(previous: Option<Vec<(Tensor, Tensor)>>) -> Vec<(Tensor, Tensor)> {
    LIFTED.with(|l| l.replace(previous)).unwrap_or_default()
}

/// Whether a lifting functionalization is on.
pub(crate) fn is_lifting() -> bool {
    LIFTED.with(|l| l.borrow().is_some())
}

/// The functional tensor `t` was lifted to, if it was.
pub(crate) fn lifted(t: &Tensor) -> Option<Tensor> {
    LIFTED.with(|l| {
        l.borrow()
            .as_ref()?
            .iter()
            .find(|(captured, _)| captured.is_same(t))
            .map(|(_, f)| f.clone())
    })
}

/// `t` lifted (on its first write), if lifting is on.
pub(crate) fn lift(t: &Tensor) -> Result<Option<Tensor>> {
    // A persistent functional tensor is lifted as any other (Note [Functionalization over
    // functional tensors]).
    if functional(t).is_some_and(|f| f.kind() == Kind::AboveAutograd) {
        return Ok(Some(t.clone()));
    }
    if let Some(f) = lifted(t) {
        return Ok(Some(f));
    }
    if !is_lifting() {
        return Ok(None);
    }
    let f = to_functional(t)?;
    LIFTED.with(|l| {
        if let Some(list) = l.borrow_mut().as_mut() {
            list.push((t.clone(), f.clone()));
        }
    });
    Ok(Some(f))
}

/// Writes each lifted tensor's final value back into it.
pub(crate) fn write_back(lifted: &[(Tensor, Tensor)]) -> Result<()> {
    if lifted.is_empty() {
        return Ok(());
    }
    let _below = below_functionalization(Kind::AboveAutograd);
    let copy_ = Dispatcher::global().find_schema_or_throw("aten::copy_")?;
    for (captured, f) in lifted {
        let value = from_functional(f)?;
        let mut stack = vec![captured.into(), value.into(), IValue::Bool(false)];
        copy_.call_boxed(&mut stack)?;
    }
    Ok(())
}
