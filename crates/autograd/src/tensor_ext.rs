//! [`AutogradTensor`]: the autograd methods of `Tensor`.

use std::sync::Arc;

use switchboard_dispatcher::Result;
use switchboard_tensor::Tensor;

use crate::autograd_meta;
use crate::node::{err, lock, Hook, Node};

/// The defaulted arguments of [`AutogradTensor::backward_with`] (`Tensor.backward`'s keyword
/// arguments): `Default` gives PyTorch's defaults.
///
/// ```
/// use switchboard_autograd::{AutogradTensor, BackwardOptions};
/// use switchboard_cpu as _; // links the CPU kernels
/// use switchboard_ops as ops;
/// use switchboard_tensor::Tensor;
///
/// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2])?.requires_grad_(true)?;
/// let y = ops::mul(&x, &x)?;
/// let g = Tensor::from_vec(vec![1.0f32, 10.0], &[2])?;
/// y.backward_with(BackwardOptions::default().gradient(&g).retain_graph(true))?;
/// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, [2.0, 40.0]);
/// # Ok::<(), switchboard_autograd::DispatchError>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct BackwardOptions<'a> {
    /// The gradient of the tensor (`gradient=None`: ones, for a one-element tensor only).
    pub gradient: Option<&'a Tensor>,
    /// Keep the graph for another backward (`retain_graph=False`; `create_graph` implies it,
    /// as PyTorch's `retain_graph=None` does).
    pub retain_graph: bool,
    /// Record the backward computation so that it can be differentiated again
    /// (`create_graph=False`).
    pub create_graph: bool,
}

impl<'a> BackwardOptions<'a> {
    /// Sets `gradient`.
    #[must_use]
    pub fn gradient(mut self, gradient: &'a Tensor) -> Self {
        self.gradient = Some(gradient);
        self
    }

    /// Sets `retain_graph`.
    #[must_use]
    pub fn retain_graph(mut self, retain_graph: bool) -> Self {
        self.retain_graph = retain_graph;
        self
    }

    /// Sets `create_graph`.
    #[must_use]
    pub fn create_graph(mut self, create_graph: bool) -> Self {
        self.create_graph = create_graph;
        self
    }
}

/// The autograd methods of a tensor (`requires_grad`, `grad`, `backward`, ...).
pub trait AutogradTensor {
    /// Whether gradients flow to this tensor.
    fn requires_grad(&self) -> bool;
    /// Sets the leaf flag; returns a handle to `self`. Fails on non-leaves (unless setting
    /// true) and on non-floating dtypes, with PyTorch's messages.
    fn requires_grad_(&self, requires_grad: bool) -> Result<Tensor>;
    /// Whether the tensor has no grad_fn.
    fn is_leaf(&self) -> bool;
    /// The accumulated gradient (leaves, or non-leaves after `retain_grad`).
    fn grad(&self) -> Option<Tensor>;
    /// Replaces the gradient (`None`: `zero_grad(set_to_none=True)`).
    fn set_grad(&self, grad: Option<Tensor>);
    /// Makes a non-leaf keep its gradient in `.grad`.
    fn retain_grad(&self) -> Result<()>;
    /// Whether `retain_grad` was called (`retains_grad`).
    fn retains_grad(&self) -> bool;
    /// The node that produced this tensor.
    fn grad_fn(&self) -> Option<Arc<dyn Node>>;
    /// Which output of its grad_fn this tensor is.
    fn output_nr(&self) -> u32;
    /// Computes the gradients of this one-element tensor with respect to the leaves and
    /// accumulates them into their `.grad` (`loss.backward()`); the graph is freed.
    /// [`backward_with`](Self::backward_with) takes a gradient or keeps the graph (Note
    /// [Operator API defaults] in switchboard-codegen: the same design as the operators).
    fn backward(&self) -> Result<()>;
    /// [`backward`](Self::backward) with its defaulted arguments given:
    /// `t.backward_with(BackwardOptions::default().gradient(&g).retain_graph(true))`.
    fn backward_with(&self, options: BackwardOptions<'_>) -> Result<()>;
    /// A tensor sharing storage and version counter, without history.
    fn detach(&self) -> Tensor;
    /// Registers a hook called with the gradient of this tensor; it may return a
    /// replacement (`register_hook`).
    fn register_hook(
        &self,
        hook: impl Fn(&Tensor) -> Option<Tensor> + Send + Sync + 'static,
    ) -> Result<()>;
    /// Registers a hook called with this leaf after its gradient was accumulated into
    /// `.grad` (`register_post_accumulate_grad_hook`): the point where the gradient of a
    /// step is final, which data-parallel training uses to start communicating it.
    fn register_post_accumulate_grad_hook(
        &self,
        hook: impl Fn(&Tensor) + Send + Sync + 'static,
    ) -> Result<()>;
    /// The base of a view (`_base`).
    fn base(&self) -> Option<Tensor>;
}

impl AutogradTensor for Tensor {
    fn requires_grad(&self) -> bool {
        autograd_meta::requires_grad(self)
    }

    fn requires_grad_(&self, requires_grad: bool) -> Result<Tensor> {
        if !self.is_leaf() {
            if requires_grad {
                return Ok(self.clone());
            }
            return Err(err(
                "you can only change requires_grad flags of leaf variables. If you want to use \
                 a computed variable in a subgraph that doesn't require differentiation use \
                 var_no_grad = var.detach().",
            ));
        }
        if requires_grad && !(self.dtype().is_floating_point() || self.dtype().is_complex()) {
            return Err(err(
                "only Tensors of floating point and complex dtype can require gradients",
            ));
        }
        autograd_meta::set_requires_grad(self, requires_grad);
        Ok(self.clone())
    }

    fn is_leaf(&self) -> bool {
        autograd_meta::grad_fn_of(self).is_none()
    }

    fn grad(&self) -> Option<Tensor> {
        autograd_meta::read(self, |m| m.grad.clone()).flatten()
    }

    fn set_grad(&self, grad: Option<Tensor>) {
        if grad.is_none() && autograd_meta::get(self).is_none() {
            return;
        }
        autograd_meta::with(self, |m| m.grad = grad);
    }

    fn retain_grad(&self) -> Result<()> {
        if !self.requires_grad() {
            return Err(err(
                "can't retain_grad on Tensor that has requires_grad=False",
            ));
        }
        let Some((node, nr)) = autograd_meta::grad_fn_of(self) else {
            return Ok(()); // leaves keep their grad anyway
        };
        let already = autograd_meta::with(self, |m| std::mem::replace(&mut m.retains_grad, true));
        if !already {
            lock(&node.meta().retained).push((nr, self.downgrade()));
        }
        Ok(())
    }

    fn retains_grad(&self) -> bool {
        autograd_meta::read(self, |m| m.retains_grad).unwrap_or(false)
    }

    fn grad_fn(&self) -> Option<Arc<dyn Node>> {
        autograd_meta::grad_fn_of(self).map(|(n, _)| n)
    }

    fn output_nr(&self) -> u32 {
        autograd_meta::grad_fn_of(self).map_or(0, |(_, nr)| nr)
    }

    fn backward(&self) -> Result<()> {
        self.backward_with(BackwardOptions::default())
    }

    fn backward_with(&self, options: BackwardOptions<'_>) -> Result<()> {
        let BackwardOptions {
            gradient,
            retain_graph,
            create_graph,
        } = options;
        crate::engine::backward(self, gradient, retain_graph, create_graph)
    }

    fn detach(&self) -> Tensor {
        autograd_meta::alias(self)
    }

    fn register_hook(
        &self,
        hook: impl Fn(&Tensor) -> Option<Tensor> + Send + Sync + 'static,
    ) -> Result<()> {
        if !self.requires_grad() {
            return Err(err(
                "cannot register a hook on a tensor that doesn't require gradient",
            ));
        }
        let hook: Hook = Arc::new(hook);
        match autograd_meta::grad_fn_of(self) {
            Some((node, nr)) => lock(&node.meta().pre_hooks).push((nr, hook)),
            None => autograd_meta::with(self, |m| m.hooks.push(hook)),
        }
        Ok(())
    }

    fn register_post_accumulate_grad_hook(
        &self,
        hook: impl Fn(&Tensor) + Send + Sync + 'static,
    ) -> Result<()> {
        if !self.requires_grad() {
            return Err(err(
                "cannot register a hook on a tensor that doesn't require gradient",
            ));
        }
        if autograd_meta::grad_fn_of(self).is_some() {
            return Err(err(
                "post accumulate grad hooks cannot be registered on non-leaf tensors",
            ));
        }
        let hook: crate::PostAccumulateGradHook = Arc::new(hook);
        autograd_meta::with(self, |m| m.post_accumulate_grad_hooks.push(hook));
        Ok(())
    }

    fn base(&self) -> Option<Tensor> {
        autograd_meta::read(self, |m| m.base.clone()).flatten()
    }
}
