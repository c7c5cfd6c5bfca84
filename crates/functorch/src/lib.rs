//! Switchboard's composable function transforms (PyTorch 2.15's `torch.func`): [`vmap`] with
//! batching rules and PyTorch's per-sample fallback, [`grad`], [`grad_and_value`], [`vjp`],
//! [`jacrev`] and [`hessian`], composing in any order (`vmap(grad(f))` for per-sample
//! gradients, `grad(vmap(f))`, `jacrev(jacrev(f))`). Linking this crate registers the batching
//! layer (`FuncTorchBatched`) and the randomness rules (`FuncTorchVmapMode`) in the global
//! dispatcher; no tensor carries those keys and no thread includes them unless a transform is
//! running, so they cost nothing otherwise.
//!
//! ```
//! use switchboard_cpu as _; // links the CPU kernels
//! use switchboard_functorch::{grad, vmap};
//! use switchboard_ops as ops;
//! use switchboard_tensor::Tensor;
//!
//! let x = Tensor::from_vec(vec![1.0f32, 2., 3., 4., 5., 6.], &[3, 2])?;
//! // Per-row sum of squares, and its per-row gradient (2x).
//! let sums = vmap(|xs| ops::sum(&ops::mul(&xs[0], &xs[0])?), &[Some(0)], &[x.clone()])?;
//! assert_eq!(sums.to_vec::<f32>()?, [5., 25., 61.]);
//! let grads = vmap(
//!     |xs| Ok(grad(|ys| ops::sum(&ops::mul(&ys[0], &ys[0])?), xs, &[0])?.remove(0)),
//!     &[Some(0)],
//!     &[x],
//! )?;
//! assert_eq!(grads.to_vec::<f32>()?, [2., 4., 6., 8., 10., 12.]);
//! # Ok::<(), switchboard_dispatcher::DispatchError>(())
//! ```
#![warn(missing_docs)]

mod batched_tensor;
mod fallback;
mod forward_transforms;
mod layers;
mod random;
mod rules;
mod transforms;
mod vmap;

pub use batched_tensor::{batched_value, is_batched_at, make_batched, BatchedValue};
pub use fallback::set_vmap_fallback_warning_enabled;
pub use forward_transforms::{jacfwd, jvp};
pub use layers::{transforms_active, Randomness};
pub use transforms::{grad, grad_and_value, hessian, jacrev, vjp, VjpFn};
pub use vmap::{vmap, Dims, Tree, Vmap};

use switchboard_dispatcher::KernelFunction;

switchboard_dispatcher::library!(IMPL _, FuncTorchBatched, |lib| lib.fallback(
    None,
    KernelFunction::from_boxed(fallback::batched_kernel)
));
/// The random operators (tagged `nondeterministic_seeded`), which meet the randomness rule
/// on `FuncTorchVmapMode`; every other operator falls through that key.
const RANDOM_OPERATORS: &[&str] = &[
    "dropout",
    "dropout_",
    "native_dropout",
    "rand",
    "rand.generator",
    "randn",
    "randn.generator",
    "randint",
    "randint.generator",
    "randint.low",
    "randint.low_generator",
    "uniform",
    "uniform_",
    "normal_",
    "normal_functional",
    "random_",
    "random_.from",
    "random_.to",
    "bernoulli",
    "bernoulli.p",
    "bernoulli.Tensor",
    "bernoulli_.float",
    "bernoulli_.Tensor",
];

switchboard_dispatcher::library!(IMPL aten, FuncTorchVmapMode, |lib| {
    for name in RANDOM_OPERATORS {
        lib.impl_(
            name,
            None,
            KernelFunction::from_boxed(random::vmap_mode_kernel),
        )?;
    }
    Ok(())
});
