//! [`FirstUseHandle`]: a generated operator's typed handle, looked up on first use.

use std::sync::OnceLock;

use switchboard_dispatcher::{
    ArgList, DispatchKeySet, Invoke, KernelReturn, Result, TypedOperatorHandle,
};

// Note [First-use handles keep the first call out of line]
// The generated functions call through handles looked up in the global dispatcher on first
// use. With `OnceLock::get_or_init` inline, the look-up is a call in the middle of the
// function, so the arguments must survive it: the compiler keeps them in callee-saved
// registers, and every call pays their saves and restores. That matters most in the kernels
// that wrap others (autograd's pass-through path is a redispatch and little else), so the
// generated `redispatch::` functions go through `FirstUseHandle::redispatch`, which branches on
// "looked up yet?" and sends the first call, whole, to an out-of-line function: on the hot path
// nothing is live across a call. (The top-level functions keep `get_or_init`: their callers are
// user code, and there building the argument tuple for the out-of-line path costs more than
// it saves.) See also Note [Autograd fast path].

/// A typed operator handle of the global dispatcher, looked up on first use (Note [First-use
/// handles keep the first call out of line]). The generated `handles::first_use` module holds one
/// per operator.
pub struct FirstUseHandle<A: ArgList, R: KernelReturn> {
    name: &'static str,
    cell: OnceLock<TypedOperatorHandle<A, R>>,
}

impl<A: ArgList, R: KernelReturn> FirstUseHandle<A, R> {
    /// The handle of the operator `name` (`ns::name.overload`), not looked up yet.
    pub const fn new(name: &'static str) -> Self {
        FirstUseHandle {
            name,
            cell: OnceLock::new(),
        }
    }

    /// The handle (looked up now if it was not yet).
    ///
    /// # Panics
    /// As [`crate::lookup`]: if the generated code and the registered schemas disagree.
    #[inline(always)]
    pub fn get(&self) -> &TypedOperatorHandle<A, R> {
        // Not `get_or_init` inline: the compiler would load `name` for the look-up before
        // testing whether it is needed.
        match self.cell.get() {
            Some(h) => h,
            None => self.init(),
        }
    }

    #[cold]
    #[inline(never)]
    fn init(&self) -> &TypedOperatorHandle<A, R> {
        self.cell.get_or_init(|| crate::lookup(self.name))
    }

    /// [`TypedOperatorHandle::redispatch`] through this handle.
    #[inline]
    pub fn redispatch(&self, ks: DispatchKeySet, args: A::Refs<'_>) -> Result<R> {
        match self.cell.get() {
            Some(h) => h.redispatch(ks, args),
            // The first call goes through this handle's entry point, with the arguments spread
            // in registers as the kernels take them (Note [Typed calls end in one jump]): a
            // cold function taking the argument tuple would make the hot path store them.
            // SAFETY: `A::entry::<Self>()` is an entry point for `(A, R)` whose kernel object is
            // a `Self`; `self` is one, and outlives the call.
            None => unsafe {
                A::call_entry::<R>(
                    A::entry::<Self>(),
                    self as *const Self as *const (),
                    ks,
                    args,
                )
            },
        }
    }
}

/// The first redispatch through a handle, as a kernel object (see `FirstUseHandle::redispatch`):
/// looks the operator up, then calls it.
impl<A: ArgList, R: KernelReturn> Invoke for FirstUseHandle<A, R> {
    type Args = A;
    type Ret = R;
    #[inline(always)]
    fn invoke(&self, ks: DispatchKeySet, args: A::Refs<'_>) -> Result<R> {
        self.init().redispatch(ks, args)
    }
}
