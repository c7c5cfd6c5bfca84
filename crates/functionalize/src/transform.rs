//! `functionalize(f, remove)`: `torch.func.functionalize`.

use std::cell::Cell;
use std::marker::PhantomData;

use switchboard_dispatcher::{
    tls_local_dispatch_key_set, DispatchKey, DispatchKeySet, Dispatcher, IValue,
    IncludeDispatchKeyGuard, LocalDispatchKeySet, Result,
};
use switchboard_tensor::Tensor;

use crate::wrapper::{from_functional, to_functional, was_mutated};

/// What functionalization removes (`torch.func.functionalize`'s `remove`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Remove {
    /// In-place and out= operators become functional; views stay views (`"mutations"`).
    #[default]
    Mutations,
    /// Views become their `*_copy` operators too (`"mutations_and_views"`).
    MutationsAndViews,
}

impl std::str::FromStr for Remove {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Remove, String> {
        match s {
            "mutations" => Ok(Remove::Mutations),
            "mutations_and_views" => Ok(Remove::MutationsAndViews),
            _ => Err(format!(
                "functionalize(f, remove='mutations'): received invalid argument for remove={s}. \
                 Valid options are:\n     remove='mutations': all inplace and out= operators \
                 will be removed from the program, and replaced with their out-of-place \
                 equivalents.\n     remove='mutations_and_views': In addition to the above, \
                 all aliasing operators {{view}} will be replaced with their non-aliasing \
                 counterparts, {{view}}_copy.\n"
            )),
        }
    }
}

thread_local! {
    /// Whether the innermost functionalization on this thread removes views.
    static REMOVE_VIEWS: Cell<bool> = const { Cell::new(false) };
    /// The thread's excluded keys where the innermost functionalization began.
    static ENTRY_EXCLUDED: Cell<Option<DispatchKeySet>> = const { Cell::new(None) };
}

/// The thread's excluded keys where the innermost functionalization began (Note [Autograd of
/// the values]); the default set outside one.
pub(crate) fn entry_excluded() -> DispatchKeySet {
    ENTRY_EXCLUDED
        .with(Cell::get)
        .unwrap_or_else(|| LocalDispatchKeySet::default().excluded)
}

/// Whether views are replaced by their `*_copy` forms now.
pub(crate) fn remove_views() -> bool {
    REMOVE_VIEWS.with(Cell::get)
}

/// Functionalization on this thread while it lives: the `Functionalize` key included (calls
/// without functional tensors, factories, make functional tensors) and views removed or not
/// (`torch._enable_functionalization(reapply_views=...)`).
#[must_use = "functionalization is on only while the guard lives"]
pub struct FunctionalizeGuard {
    _include: IncludeDispatchKeyGuard,
    previous: bool,
    previous_entry: Option<DispatchKeySet>,
    /// For a lifting guard, the lifting state before it (Note [Captured state]).
    previous_lifted: Option<Option<Vec<(Tensor, Tensor)>>>,
    _not_send: PhantomData<*const ()>,
}

impl FunctionalizeGuard {
    /// Turns functionalization on with `remove`.
    pub fn new(remove: Remove) -> FunctionalizeGuard {
        let previous = REMOVE_VIEWS.with(|r| r.replace(remove == Remove::MutationsAndViews));
        let excluded = tls_local_dispatch_key_set().excluded;
        let previous_entry = ENTRY_EXCLUDED.with(|e| e.replace(Some(excluded)));
        FunctionalizeGuard {
            _include: IncludeDispatchKeyGuard::new(DispatchKey::Functionalize),
            previous,
            previous_entry,
            previous_lifted: None,
            _not_send: PhantomData,
        }
    }

    /// Turns functionalization on with `remove`, lifting the captured tensors the program
    /// writes (Note [Captured state]); [`finish`](Self::finish) writes them back.
    pub fn lifting(remove: Remove) -> FunctionalizeGuard {
        let mut guard = FunctionalizeGuard::new(remove);
        guard.previous_lifted = Some(crate::captured::start());
        guard
    }

    /// Ends functionalization; a lifting guard writes each captured tensor the program wrote
    /// back (`copy_`), below functionalization.
    pub fn finish(mut self) -> Result<()> {
        match self.previous_lifted.take() {
            Some(previous) => {
                let lifted = crate::captured::stop(previous);
                drop(self);
                crate::captured::write_back(&lifted)
            }
            None => Ok(()),
        }
    }
}

impl Drop for FunctionalizeGuard {
    fn drop(&mut self) {
        REMOVE_VIEWS.with(|r| r.set(self.previous));
        ENTRY_EXCLUDED.with(|e| e.set(self.previous_entry));
        if let Some(previous) = self.previous_lifted.take() {
            // Dropped without `finish` (an error): the writes are discarded.
            crate::captured::stop(previous);
        }
    }
}

/// Turns the functionalization of `functionalize(f)` off until dropped (PyTorch's
/// `torch._disable_functionalization`): calls made meanwhile run on the tensors they are given,
/// as the transform's own calls on values do, with autograd as at the transform's entry;
/// persistent functional tensors keep their layer (Note [Functionalization over functional
/// tensors]). For running `backward` on a functionalized step's loss value.
#[must_use = "functionalization is off only while the guard lives"]
pub struct DisableFunctionalizationGuard {
    _below: crate::wrapper::BelowFunctionalization,
    _not_send: PhantomData<*const ()>,
}

impl DisableFunctionalizationGuard {
    /// Turns functionalization off for the guard's life.
    pub fn new() -> DisableFunctionalizationGuard {
        DisableFunctionalizationGuard {
            _below: crate::wrapper::below_functionalization(crate::wrapper::Kind::AboveAutograd),
            _not_send: PhantomData,
        }
    }
}

impl Default for DisableFunctionalizationGuard {
    fn default() -> Self {
        Self::new()
    }
}

// Note [Functionalization over functional tensors]
// `functionalize(f)` may be given, or may capture, persistent functional tensors (Note
// [Functional tensors below autograd]): a lazy device's tensors are such. As PyTorch's
// functorch wraps an XLA tensor, which is functional already, at its own level, the transform
// wraps them like any other tensor, and the two layers nest: a call on the transform's tensors
// is called again on their values, which are then the persistent tensors, and those reach
// their own layer through the `Functionalize` key they carry. For that, below the transform
// `Functionalize` is only taken out of the thread's included keys (which made factories
// functional) rather than excluded; on plain values the two are the same. A call is the
// transform's as soon as one of its tensors is (a persistent tensor among them being a
// constant of `f`, passed to the call as it is), and a persistent tensor the transform writes
// is lifted as a captured one (Note [Captured state]). The transform's results are its own
// tensors' values: persistent functional tensors stay functional.

/// `torch.func.functionalize(f, remove=...)`: a function that runs `f` on functional tensors
/// over its inputs, returns the values of `f`'s results, and writes back (`copy_`) each input
/// whose storage `f` wrote, as PyTorch's does.
///
/// ```
/// use switchboard_cpu as _;
/// use switchboard_functionalize::{functionalize, Remove};
/// use switchboard_ops::{self as ops, TensorOps};
/// let x = ops::ones(&[3])?;
/// let out = functionalize(|xs: &[switchboard_tensor::Tensor]| {
///     let y = xs[0].mul_scalar(2.0)?;
///     y.add_(&xs[0])?; // in place, on a tensor the function made
///     Ok(vec![y])
/// }, Remove::Mutations)(&[x.clone()])?;
/// assert_eq!(out[0].to_vec::<f32>()?, [3.0, 3.0, 3.0]);
/// assert_eq!(x.to_vec::<f32>()?, [1.0, 1.0, 1.0]); // not written: not copied back
/// # Ok::<(), switchboard_dispatcher::DispatchError>(())
/// ```
pub fn functionalize<F>(mut f: F, remove: Remove) -> impl FnMut(&[Tensor]) -> Result<Vec<Tensor>>
where
    F: FnMut(&[Tensor]) -> Result<Vec<Tensor>>,
{
    move |inputs: &[Tensor]| {
        let wrapped = inputs
            .iter()
            .map(to_functional)
            .collect::<Result<Vec<_>>>()?;
        let outputs = {
            let _on = FunctionalizeGuard::new(remove);
            f(&wrapped)?
        };
        let outputs = outputs
            .iter()
            .map(crate::wrapper::from_functionalized)
            .collect::<Result<Vec<_>>>()?;
        write_back(inputs, &wrapped)?;
        Ok(outputs)
    }
}

/// Copies the final value of each written input into it (the `copy_` of mutated inputs at the
/// end of a functionalized program).
pub(crate) fn write_back(inputs: &[Tensor], wrapped: &[Tensor]) -> Result<()> {
    // The inputs' own layers see the `copy_` (a persistent functional input takes it as a
    // write: Note [Functionalization over functional tensors]); the transform's no longer does.
    let _below = crate::wrapper::NotIncluded::new();
    let mut copy_ = None;
    for (input, w) in inputs.iter().zip(wrapped) {
        if !was_mutated(w) {
            continue;
        }
        let value = from_functional(w)?;
        let op = match &copy_ {
            Some(op) => op,
            None => copy_.insert(Dispatcher::global().find_schema_or_throw("aten::copy_")?),
        };
        let mut stack = vec![input.into(), value.into(), IValue::Bool(false)];
        op.call_boxed(&mut stack)?;
    }
    Ok(())
}
