//! The dynamic layer stack (functorch's `DynamicLayer.cpp`): the transforms active on this
//! thread, innermost last, each with its level.

use std::cell::RefCell;
use std::marker::PhantomData;

use switchboard_dispatcher::{DispatchError, DispatchErrorKind, IncludeDispatchKeyGuard, Result};
use switchboard_keys::DispatchKey;

// Note [Dynamic layers]
// Every active transform is a layer with a level, 1 for the outermost. A vmap layer holds its
// batch size and randomness mode; a grad layer marks that an autograd-based transform is
// recording further out. functorch dispatches through the layers with its own keys
// (`FuncTorchDynamicLayerFrontMode` / `BackMode`) and wraps tensors per grad level; here
// batching sits above autograd in the key order (`FuncTorchBatched` is above every autograd
// key), so the layers compose without wrappers for grad:
// - `grad(vmap(f))`: the batching rules call operators on physical tensors, which autograd
//   records as usual; the gradient flows back through the batched computation.
// - `vmap(grad(f))`: grad lifts each differentiated input to one physical leaf carrying the
//   batches of every vmap layer further out (an expanded view when the input is not batched
//   there), runs `f` on it re-wrapped, and takes the gradient of the summed physical output:
//   the samples are independent, so each sample's slice of the gradient is that sample's
//   gradient. Per-sample gradients of shared parameters come out of the same rule.
// - `grad(grad(f))`, `jacrev(jacrev(f))`: an inner grad sees inputs that an outer one
//   records; it lifts them through an alias (still connected) and builds its gradient with
//   `create_graph`, so that the outer one differentiates it again.
// The `FuncTorchVmapMode` key is included while a vmap layer is active, so that random
// operators (which may have no tensor argument) meet the randomness rule.

/// What random operators do under `vmap` (`randomness=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Randomness {
    /// A random operator is an error (the default).
    #[default]
    Error,
    /// Each sample draws its own numbers.
    Different,
    /// Every sample draws the same numbers.
    Same,
}

impl Randomness {
    /// Parses `"error"`, `"different"` or `"same"`, with PyTorch's error otherwise.
    pub fn parse(s: &str) -> Result<Randomness> {
        match s {
            "error" => Ok(Randomness::Error),
            "different" => Ok(Randomness::Different),
            "same" => Ok(Randomness::Same),
            _ => Err(DispatchError::from(DispatchErrorKind::Kernel(format!(
                "Only allowed values for randomness are 'error', 'different', or 'same'. Got {s}"
            )))),
        }
    }
}

/// One active transform.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Layer {
    Vmap {
        level: u32,
        batch_size: i64,
        randomness: Randomness,
    },
    Grad,
    /// A `jvp`: its dual level is nested in the outer `jvp`s' (Note [jvp under the layers]).
    Jvp,
}

thread_local! {
    static LAYERS: RefCell<Vec<Layer>> = const { RefCell::new(Vec::new()) };
}

/// Pops its layer when dropped.
pub(crate) struct LayerGuard {
    _vmap_mode: Option<IncludeDispatchKeyGuard>,
    _not_send: PhantomData<*const ()>,
}

impl Drop for LayerGuard {
    fn drop(&mut self) {
        LAYERS.with(|l| l.borrow_mut().pop());
    }
}

/// Pushes a vmap layer; returns its level and the guard that pops it.
pub(crate) fn push_vmap(batch_size: i64, randomness: Randomness) -> (u32, LayerGuard) {
    let level = LAYERS.with(|l| {
        let mut l = l.borrow_mut();
        let level = l.len() as u32 + 1;
        l.push(Layer::Vmap {
            level,
            batch_size,
            randomness,
        });
        level
    });
    let guard = LayerGuard {
        _vmap_mode: Some(IncludeDispatchKeyGuard::new(DispatchKey::FuncTorchVmapMode)),
        _not_send: PhantomData,
    };
    (level, guard)
}

/// Pushes a grad layer.
pub(crate) fn push_grad() -> LayerGuard {
    LAYERS.with(|l| l.borrow_mut().push(Layer::Grad));
    LayerGuard {
        _vmap_mode: None,
        _not_send: PhantomData,
    }
}

/// Pushes a jvp layer.
pub(crate) fn push_jvp() -> LayerGuard {
    LAYERS.with(|l| l.borrow_mut().push(Layer::Jvp));
    LayerGuard {
        _vmap_mode: None,
        _not_send: PhantomData,
    }
}

/// Whether a jvp layer is active: a new `jvp` nests its dual level in that one's.
pub(crate) fn jvp_layer_active() -> bool {
    LAYERS.with(|l| l.borrow().iter().any(|layer| matches!(layer, Layer::Jvp)))
}

/// The vmap layers (level, batch size), outermost first.
pub(crate) fn vmap_levels() -> Vec<(u32, i64)> {
    LAYERS.with(|l| {
        l.borrow()
            .iter()
            .filter_map(|layer| match *layer {
                Layer::Vmap {
                    level, batch_size, ..
                } => Some((level, batch_size)),
                Layer::Grad | Layer::Jvp => None,
            })
            .collect()
    })
}

/// The innermost vmap layer (level, batch size, randomness).
pub(crate) fn innermost_vmap() -> Option<(u32, i64, Randomness)> {
    LAYERS.with(|l| {
        l.borrow().iter().rev().find_map(|layer| match *layer {
            Layer::Vmap {
                level,
                batch_size,
                randomness,
            } => Some((level, batch_size, randomness)),
            Layer::Grad | Layer::Jvp => None,
        })
    })
}

/// Whether a grad layer is active: gradients computed now must stay differentiable.
pub(crate) fn grad_layer_active() -> bool {
    LAYERS.with(|l| l.borrow().iter().any(|layer| matches!(layer, Layer::Grad)))
}

/// Whether any transform is active on this thread.
pub fn transforms_active() -> bool {
    LAYERS.with(|l| !l.borrow().is_empty())
}
