//! Switchboard's functionalization layer (PyTorch's `Functionalize` key and
//! `torch.func.functionalize`): a program with views and in-place mutation runs as an
//! equivalent one of pure operators, so that graph capture and compilers see no aliasing and
//! no writes.
//!
//! [`functionalize`] runs a function on functional tensors (Note [Functional tensors]): every
//! operator it calls is called again on the tensors' values, in-place and out= operators as
//! their functional forms, views as views (`Remove::Mutations`) or as their `*_copy` forms
//! (`Remove::MutationsAndViews`); a write to any alias is seen by every other alias; inputs
//! the function wrote are written back with `copy_` at the end. Autograd, autocast and traces
//! see the functional program (Note [Functionalization above autograd]).
//!
//! [`to_functional_below_autograd`] makes the other kind, PyTorch's persistent
//! `FunctionalTensorWrapper` as XLA and lazy tensors use it: autograd records on the
//! functional tensors themselves, and the layer sits below it (Note [Functional tensors below
//! autograd]).
//!
//! ```
//! use switchboard_cpu as _; // links the CPU kernels
//! use switchboard_functionalize::{functionalize, Remove};
//! use switchboard_ops::{self as ops, TensorOps};
//!
//! let x = ops::zeros(&[2, 2])?;
//! let f = |xs: &[switchboard_tensor::Tensor]| {
//!     let row = xs[0].select(0, 1)?; // a view of the input
//!     row.add_(&ops::ones(&[2])?)?;   // written through the view
//!     Ok(vec![xs[0].sum()?])
//! };
//! let out = functionalize(f, Remove::MutationsAndViews)(&[x.clone()])?;
//! assert_eq!(out[0].item()?.to_f64(), 2.0);
//! assert_eq!(x.to_vec::<f32>()?, [0.0, 0.0, 1.0, 1.0]); // the input, written back
//! # Ok::<(), switchboard_dispatcher::DispatchError>(())
//! ```
#![warn(missing_docs)]

mod captured;
mod fallback;
mod functionalized_call;
mod opted_in;
mod transform;
mod view_inverse;
mod view_meta;
mod wrapper;

pub use functionalized_call::call_functionalized;
pub use opted_in::{device_opted_into_functionalization, opt_into_functionalization};
pub use transform::{functionalize, DisableFunctionalizationGuard, FunctionalizeGuard, Remove};
pub use wrapper::{
    from_functional, from_functionalized, functional_value, is_functional_tensor, replace_value,
    sync, to_functional, to_functional_below_autograd, was_mutated,
};

pub(crate) use transform::remove_views;

use switchboard_dispatcher::KernelFunction;

switchboard_dispatcher::library!(IMPL _, Functionalize, |lib| {
    lib.fallback(
        None,
        KernelFunction::from_boxed(fallback::functionalize_fallback),
    )
});

switchboard_dispatcher::library!(IMPL aten, Functionalize, |lib| {
    lib.impl_(
        "_unsafe_view",
        None,
        KernelFunction::from_boxed(fallback::unsafe_view_functionalize),
    )
});
