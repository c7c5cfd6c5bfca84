//! Custom autograd functions (`torch.autograd.Function`).

use std::any::Any;
use std::sync::{Arc, Mutex};

use switchboard_dispatcher::Result;
use switchboard_tensor::Tensor;

use crate::autograd_meta;
use crate::grad_mode::no_grad;
use crate::node::{err, lock, Node, NodeMeta, SavedTensor, FREED_MSG};
use crate::recording::{differentiable, fresh};

/// A custom differentiable function: `forward` computes the outputs (grad mode is off
/// inside), `backward` maps the gradients of the outputs to those of the inputs.
///
/// ```
/// use switchboard_autograd::{apply, AutogradTensor, Function, FunctionCtx, Result};
/// use switchboard_cpu as _; // links the CPU kernels
/// use switchboard_ops as ops;
/// use switchboard_tensor::Tensor;
///
/// struct Square;
/// impl Function for Square {
///     fn forward(&self, ctx: &mut FunctionCtx, x: &[Tensor]) -> Result<Vec<Tensor>> {
///         ctx.save_for_backward(&[x[0].clone()]);
///         Ok(vec![ops::mul(&x[0], &x[0])?])
///     }
///     fn backward(&self, ctx: &FunctionCtx, g: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
///         let x = &ctx.saved_tensors()?[0];
///         Ok(vec![Some(ops::mul_scalar(&ops::mul(&g[0], x)?, 2)?)])
///     }
/// }
/// let x = Tensor::from_vec(vec![3.0f32], &[1])?.requires_grad_(true)?;
/// let y = apply(Square, &[x.clone()])?;
/// assert_eq!(y[0].to_vec::<f32>()?, [9.0]);
/// y[0].backward()?;
/// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, [6.0]);
/// # Ok::<(), switchboard_autograd::DispatchError>(())
/// ```
pub trait Function: Send + Sync + 'static {
    /// The node's name (PyTorch: the class name + `Backward`).
    fn name(&self) -> String {
        let full = std::any::type_name::<Self>();
        format!("{}Backward", full.rsplit("::").next().unwrap_or(full))
    }
    /// Computes the outputs.
    fn forward(&self, ctx: &mut FunctionCtx, inputs: &[Tensor]) -> Result<Vec<Tensor>>;
    /// The gradients of the inputs (one per input; `None` for none) from those of the
    /// outputs (missing ones are zeros).
    fn backward(&self, ctx: &FunctionCtx, grad_outputs: &[Tensor]) -> Result<Vec<Option<Tensor>>>;
}

/// The context of a custom function (`ctx`).
#[derive(Default)]
pub struct FunctionCtx {
    to_save: Vec<Tensor>,
    saved: Vec<SavedTensor>,
    unpacked: Option<Vec<Tensor>>,
    needs_input_grad: Vec<bool>,
    /// Anything else the forward wants to keep for backward.
    pub data: Option<Box<dyn Any + Send + Sync>>,
}

impl FunctionCtx {
    /// Saves tensors for backward (`ctx.save_for_backward`); checked for in-place
    /// modification when unpacked.
    pub fn save_for_backward(&mut self, ts: &[Tensor]) {
        self.to_save.extend(ts.iter().cloned());
    }

    /// The saved tensors (in backward).
    pub fn saved_tensors(&self) -> Result<Vec<Tensor>> {
        self.unpacked.clone().ok_or_else(|| err(FREED_MSG))
    }

    /// Whether input `i` needs a gradient (`ctx.needs_input_grad`).
    pub fn needs_input_grad(&self, i: usize) -> bool {
        self.needs_input_grad.get(i).copied().unwrap_or(false)
    }
}

struct CustomNode<F: Function> {
    meta: NodeMeta,
    f: F,
    ctx: Mutex<Option<FunctionCtx>>,
}

impl<F: Function> Drop for CustomNode<F> {
    fn drop(&mut self) {
        // The saved tensors first (Note [Dropping deep graphs]).
        drop(self.ctx.get_mut().unwrap_or_else(|e| e.into_inner()).take());
    }
}

impl<F: Function> Node for CustomNode<F> {
    fn meta(&self) -> &NodeMeta {
        &self.meta
    }

    fn apply(
        &self,
        this: &Arc<dyn Node>,
        grads: Vec<Option<Tensor>>,
    ) -> Result<Vec<Option<Tensor>>> {
        let mut guard = lock(&self.ctx);
        let ctx = guard.as_mut().ok_or_else(|| err(FREED_MSG))?;
        let unpacked = ctx
            .saved
            .iter()
            .map(|s| s.unpack(this))
            .collect::<Result<Vec<_>>>()?;
        ctx.unpacked = Some(unpacked);
        let grads: Vec<Tensor> = grads
            .into_iter()
            .map(|g| g.ok_or_else(|| err("custom function: missing gradient")))
            .collect::<Result<_>>()?;
        let r = self.f.backward(ctx, &grads);
        ctx.unpacked = None;
        let mut r = r?;
        let n = self.meta.next_edges().len();
        if r.len() != n {
            return Err(err(format!(
                "function {} returned an incorrect number of gradients (expected {n}, got {})",
                self.meta.name(),
                r.len()
            )));
        }
        for (g, e) in r.iter_mut().zip(self.meta.next_edges()) {
            if !e.is_valid() {
                *g = None;
            }
        }
        Ok(r)
    }

    fn release_variables(&self) {
        lock(&self.ctx).take();
    }

    fn materialize_grads(&self) -> bool {
        true
    }
}

/// Runs a custom function on `inputs` and records it (`Function.apply`).
pub fn apply<F: Function>(f: F, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
    let needs = crate::is_grad_enabled() && inputs.iter().any(|t| t.requires_grad_hint());
    let mut ctx = FunctionCtx {
        needs_input_grad: inputs
            .iter()
            .map(|t| needs && t.requires_grad_hint())
            .collect(),
        ..Default::default()
    };
    let outs = {
        let _ng = no_grad();
        f.forward(&mut ctx, inputs)?
    };
    if !needs {
        return Ok(outs);
    }
    let ins: Vec<&Tensor> = inputs.iter().collect();
    let outs: Vec<Tensor> = outs.into_iter().map(|o| fresh(o, &ins)).collect();
    let name = f.name();
    let leaked: &'static str = Box::leak(name.clone().into_boxed_str());
    ctx.saved = std::mem::take(&mut ctx.to_save)
        .iter()
        .map(|t| match outs.iter().position(|o| o.is_same(t)) {
            Some(nr) => SavedTensor::output(t, nr as u32, leaked),
            None => SavedTensor::input(t),
        })
        .collect();
    let edges: Vec<_> = inputs.iter().map(autograd_meta::gradient_edge).collect();
    let node: Arc<dyn Node> = Arc::new(CustomNode {
        meta: NodeMeta::new(name, outs.len(), edges),
        f,
        ctx: Mutex::new(Some(ctx)),
    });
    for (i, o) in outs.iter().enumerate() {
        if differentiable(o) {
            node.meta().set_input(i, o);
            autograd_meta::set_grad_fn(o, node.clone(), i as u32);
        }
    }
    Ok(outs)
}
