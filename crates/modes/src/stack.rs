//! The [`DispatchMode`] trait and the thread's mode stack.

use std::cell::RefCell;
use std::marker::PhantomData;
use std::rc::Rc;

use switchboard_dispatcher::{
    tls_set_dispatch_key_included, DispatchKey, DispatchKeySet, OperatorHandle, Result, Stack,
};

/// A user dispatch mode (PyTorch's `TorchDispatchMode.__torch_dispatch__`): while it is on the
/// thread's mode stack, every operator call that reaches the Python key (below autograd and
/// autocast, above the backends) is handed to it with its arguments boxed on `stack`; it leaves
/// the returns there.
///
/// The mode is popped while it runs (Note [Modes run popped]): calling the operator, or any
/// other, from `dispatch` goes to the next mode down or to the backend, not back to this mode.
/// `keys` is the call's key set as it reached the mode (PyTorch passes the tensor subclasses,
/// `types`, there); most modes simply call `op.call_boxed(stack)`.
///
/// ```
/// use std::cell::Cell;
/// use std::rc::Rc;
/// use switchboard_cpu as _; // links the CPU kernels
/// use switchboard_dispatcher::{DispatchKeySet, OperatorHandle, Result, Stack};
/// use switchboard_modes::{push_mode, DispatchMode};
/// use switchboard_ops as ops;
///
/// /// Counts the calls it sees, and runs them.
/// struct Count(Cell<u32>);
/// impl DispatchMode for Count {
///     fn dispatch(&self, op: &OperatorHandle, _keys: DispatchKeySet, stack: &mut Stack) -> Result<()> {
///         self.0.set(self.0.get() + 1);
///         op.call_boxed(stack)
///     }
/// }
///
/// let count = Rc::new(Count(Cell::new(0)));
/// {
///     let _mode = push_mode(count.clone());
///     let x = ops::ones(&[2])?;
///     ops::add(&x, &x)?;
/// }
/// assert_eq!(count.0.get(), 2); // ones, add
/// # Ok::<(), switchboard_dispatcher::DispatchError>(())
/// ```
pub trait DispatchMode {
    /// Runs (or replaces) the call of `op` whose arguments are on `stack`.
    fn dispatch(&self, op: &OperatorHandle, keys: DispatchKeySet, stack: &mut Stack) -> Result<()>;
}

/// A closure is a mode.
impl<F> DispatchMode for F
where
    F: Fn(&OperatorHandle, DispatchKeySet, &mut Stack) -> Result<()>,
{
    fn dispatch(&self, op: &OperatorHandle, keys: DispatchKeySet, stack: &mut Stack) -> Result<()> {
        self(op, keys, stack)
    }
}

thread_local! {
    static MODES: RefCell<Vec<Rc<dyn DispatchMode>>> = const { RefCell::new(Vec::new()) };
}

// Note [Modes switch the Python keys]
// As in PyTorch (`TorchDispatchModeTLS::push_onto_stack` / `pop_stack`), the Python and
// PythonTLSSnapshot keys are in the thread's included set exactly while the mode stack is not
// empty. With no mode, no call carries them, so modes cost nothing; with one, every call
// reaches the PythonTLSSnapshot fallback at the top and the Python fallback below autograd.

fn set_python_keys(on: bool) {
    tls_set_dispatch_key_included(DispatchKey::Python, on);
    tls_set_dispatch_key_included(DispatchKey::PythonTLSSnapshot, on);
}

pub(crate) fn push(mode: Rc<dyn DispatchMode>) {
    MODES.with(|m| {
        let mut m = m.borrow_mut();
        if m.is_empty() {
            set_python_keys(true);
        }
        m.push(mode);
    });
}

/// Removes `mode` (its last occurrence; the top one when guards are dropped in order).
fn remove(mode: &Rc<dyn DispatchMode>) {
    MODES.with(|m| {
        let mut m = m.borrow_mut();
        if let Some(i) = m.iter().rposition(|x| Rc::ptr_eq(x, mode)) {
            m.remove(i);
        }
        if m.is_empty() {
            set_python_keys(false);
        }
    });
}

pub(crate) fn pop() -> Option<Rc<dyn DispatchMode>> {
    MODES.with(|m| {
        let mut m = m.borrow_mut();
        let top = m.pop();
        if top.is_some() && m.is_empty() {
            set_python_keys(false);
        }
        top
    })
}

/// The number of modes on this thread's stack (`torch._C._len_torch_dispatch_stack`).
pub fn mode_stack_len() -> usize {
    MODES.with(|m| m.borrow().len())
}

/// Keeps a mode on this thread's stack until dropped; see [`push_mode`].
#[must_use = "the mode is active only while the guard lives"]
pub struct ModeGuard {
    mode: Rc<dyn DispatchMode>,
    _not_send: PhantomData<*const ()>,
}

/// Pushes `mode` on this thread's mode stack until the guard is dropped (`with mode:`). The
/// last mode pushed sees a call first; when it calls an operator, the one below it sees that.
pub fn push_mode(mode: Rc<dyn DispatchMode>) -> ModeGuard {
    push(mode.clone());
    ModeGuard {
        mode,
        _not_send: PhantomData,
    }
}

impl Drop for ModeGuard {
    fn drop(&mut self) {
        remove(&self.mode);
    }
}

/// Runs `f` with `mode` pushed.
pub fn with_mode<R>(mode: Rc<dyn DispatchMode>, f: impl FnOnce() -> R) -> R {
    let _guard = push_mode(mode);
    f()
}

/// Pops the top mode if it is `mode`.
pub(crate) fn pop_if(mode: &Rc<dyn DispatchMode>) -> bool {
    let top_is_mode = MODES.with(|m| m.borrow().last().is_some_and(|t| Rc::ptr_eq(t, mode)));
    if top_is_mode {
        pop();
    }
    top_is_mode
}
