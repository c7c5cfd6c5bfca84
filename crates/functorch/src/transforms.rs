//! The autograd-based transforms (`torch.func.grad`, `grad_and_value`, `vjp`, `jacrev`,
//! `hessian`), composing with `vmap` and with each other (Note [Dynamic layers]).

use switchboard_autograd::{
    alias_with_forward_grads_of, detach_keeping_forward_grads, enable_grad, AutogradTensor,
};
use switchboard_dispatcher::{DispatchError, DispatchErrorKind, Result};
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

use crate::batched_tensor::{batched_value, front_value_or_expand, make_batched};
use crate::layers;

pub(crate) fn runtime_error(message: String) -> DispatchError {
    DispatchError::from(DispatchErrorKind::Kernel(message))
}

/// The vmap layers further out: (level, batch size), outermost first.
type Levels = Vec<(u32, i64)>;

/// `t` as one physical tensor `[B1, ..., Bk, *sample]` carrying the batch of every level in
/// `levels` in front, outermost first (an expanded view where `t` is not batched at a level).
pub(crate) fn to_front_base(t: &Tensor, levels: &[(u32, i64)]) -> Result<Tensor> {
    let Some((&(level, batch_size), outer)) = levels.split_last() else {
        if batched_value(t).is_some() {
            return Err(runtime_error(
                "vmap: a tensor batched at a level that is no longer active was used \
                 (it escaped the vmap that made it)"
                    .into(),
            ));
        }
        return Ok(t.clone());
    };
    let front = front_value_or_expand(t, level, batch_size)?;
    to_front_base(&front, outer)
}

/// The inverse of [`to_front_base`]: `base` batched at every level, batch dimension 0 each.
pub(crate) fn rewrap(base: Tensor, levels: &[(u32, i64)]) -> Result<Tensor> {
    levels
        .iter()
        .try_fold(base, |t, &(level, _)| make_batched(t, 0, level))
}

/// An input made differentiable at this transform's level: the logical tensor `f` sees and the
/// physical leaf the gradient is taken for.
struct Lifted {
    logical: Tensor,
    leaf: Tensor,
}

/// Makes `t` a differentiable input: its physical tensor with every outer vmap's batch, through
/// an alias when an outer transform records it (so the gradient stays differentiable for that
/// one), detached and marked `requires_grad` otherwise.
fn lift(t: &Tensor, levels: &[(u32, i64)]) -> Result<Lifted> {
    let base = to_front_base(t, levels)?;
    if base.requires_grad() {
        let leaf = ops::view(&base, base.sizes())?;
        return Ok(Lifted {
            logical: rewrap(leaf.clone(), levels)?,
            leaf,
        });
    }
    // A dual input (under `jvp`) keeps its tangents on the leaf's view, so that the gradient
    // carries the tangents of the gradient (forward over reverse).
    let leaf = base.detach().requires_grad_(true)?;
    let input = alias_with_forward_grads_of(&leaf, &base)?;
    Ok(Lifted {
        logical: rewrap(input, levels)?,
        leaf,
    })
}

/// The physical gradients of `outputs` (given their cotangents) with respect to the leaves,
/// zeros where an output does not depend on one, re-wrapped at the outer vmap levels.
fn gradients(
    outputs: &[Tensor],
    cotangents: &[Tensor],
    leaves: &[Tensor],
    levels: &[(u32, i64)],
) -> Result<Vec<Tensor>> {
    let create_graph = layers::grad_layer_active();
    let (outputs, cotangents): (Vec<Tensor>, Vec<Option<Tensor>>) = outputs
        .iter()
        .zip(cotangents)
        .filter(|(o, _)| o.requires_grad())
        .map(|(o, c)| (o.clone(), Some(c.clone())))
        .unzip();
    let grads = if outputs.is_empty() {
        vec![None; leaves.len()]
    } else {
        switchboard_autograd::grad(&outputs, leaves, &cotangents, true, create_graph)?
    };
    grads
        .into_iter()
        .zip(leaves)
        .map(|(g, leaf)| {
            let g = match g {
                Some(g) => g,
                None => ops::zeros_like(leaf)?,
            };
            let g = if create_graph {
                g
            } else {
                detach_keeping_forward_grads(&g)?
            };
            rewrap(g, levels)
        })
        .collect()
}

/// A value returned out of a transform: detached from its graph unless an outer transform
/// records it.
pub(crate) fn release(t: &Tensor, levels: &[(u32, i64)]) -> Result<Tensor> {
    if layers::grad_layer_active() {
        return Ok(t.clone());
    }
    let base = to_front_base(t, levels)?;
    rewrap(detach_keeping_forward_grads(&base)?, levels)
}

pub(crate) fn check_argnums(argnums: &[usize], n: usize) -> Result<()> {
    for &a in argnums {
        if a >= n {
            return Err(runtime_error(format!(
                "Got argnum={a}, but only {n} positional inputs"
            )));
        }
    }
    Ok(())
}

/// `torch.func.grad_and_value(f, argnums)(*args)`: the gradient of `f`'s scalar output with
/// respect to the arguments in `argnums`, and the output.
pub fn grad_and_value(
    f: impl Fn(&[Tensor]) -> Result<Tensor>,
    args: &[Tensor],
    argnums: &[usize],
) -> Result<(Vec<Tensor>, Tensor)> {
    check_argnums(argnums, args.len())?;
    let levels: Levels = layers::vmap_levels();
    let _grad_mode = enable_grad();
    let (value, cotangent, leaves) = {
        let _layer = layers::push_grad();
        let mut inputs = args.to_vec();
        let mut leaves = Vec::with_capacity(argnums.len());
        for &a in argnums {
            let lifted = lift(&args[a], &levels)?;
            inputs[a] = lifted.logical;
            leaves.push(lifted.leaf);
        }
        let value = f(&inputs)?;
        if value.dim() != 0 {
            return Err(runtime_error(format!(
                "grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got \
                 tensor with {} dims. Maybe you wanted to use the vjp or jacrev APIs instead?",
                value.dim()
            )));
        }
        let value_base = to_front_base(&value, &levels)?;
        let cotangent = ops::ones_like(&value_base)?;
        (value_base, cotangent, leaves)
    };
    let grads = gradients(
        std::slice::from_ref(&value),
        std::slice::from_ref(&cotangent),
        &leaves,
        &levels,
    )?;
    let value = release(&rewrap(value, &levels)?, &levels)?;
    Ok((grads, value))
}

/// `torch.func.grad(f, argnums)(*args)`: the gradient of `f`'s scalar output with respect to
/// the arguments in `argnums`.
///
/// ```
/// use switchboard_cpu as _;
/// use switchboard_functorch::grad;
/// use switchboard_ops as ops;
/// use switchboard_tensor::Tensor;
/// let x = Tensor::from_vec(vec![1.0f32, 2.], &[2])?;
/// let g = grad(|a| ops::sum(&ops::mul(&a[0], &a[0])?), &[x], &[0])?;
/// assert_eq!(g[0].to_vec::<f32>()?, [2., 4.]);
/// # Ok::<(), switchboard_dispatcher::DispatchError>(())
/// ```
pub fn grad(
    f: impl Fn(&[Tensor]) -> Result<Tensor>,
    args: &[Tensor],
    argnums: &[usize],
) -> Result<Vec<Tensor>> {
    Ok(grad_and_value(f, args, argnums)?.0)
}

/// The function `vjp` returns: the vector-Jacobian product of the recorded outputs.
pub struct VjpFn {
    outputs: Vec<Tensor>,
    leaves: Vec<Tensor>,
    levels: Levels,
}

impl VjpFn {
    /// The cotangents' products with the Jacobian, one per primal.
    pub fn call(&self, cotangents: &[Tensor]) -> Result<Vec<Tensor>> {
        if cotangents.len() != self.outputs.len() {
            return Err(runtime_error(format!(
                "Expected pytree structure of cotangents to be the same as pytree structure of \
                 outputs to the function. cotangents: {} tensors, primal output: {} tensors",
                cotangents.len(),
                self.outputs.len()
            )));
        }
        let bases: Vec<Tensor> = cotangents
            .iter()
            .map(|c| to_front_base(c, &self.levels))
            .collect::<Result<_>>()?;
        for (c, o) in bases.iter().zip(&self.outputs) {
            if c.sizes() != o.sizes() {
                return Err(runtime_error(format!(
                    "Mismatch in shape: grad_output[0] has a shape of {:?} and output[0] has a \
                     shape of {:?}.",
                    c.sizes(),
                    o.sizes()
                )));
            }
        }
        let _grad_mode = enable_grad();
        gradients(&self.outputs, &bases, &self.leaves, &self.levels)
    }
}

/// `torch.func.vjp(f, *primals)`: `f`'s outputs and the function of their vector-Jacobian
/// products.
pub fn vjp(
    f: impl Fn(&[Tensor]) -> Result<Vec<Tensor>>,
    primals: &[Tensor],
) -> Result<(Vec<Tensor>, VjpFn)> {
    let levels: Levels = layers::vmap_levels();
    let _grad_mode = enable_grad();
    let (outputs, leaves) = {
        let _layer = layers::push_grad();
        let mut inputs = Vec::with_capacity(primals.len());
        let mut leaves = Vec::with_capacity(primals.len());
        for p in primals {
            let lifted = lift(p, &levels)?;
            inputs.push(lifted.logical);
            leaves.push(lifted.leaf);
        }
        (f(&inputs)?, leaves)
    };
    let bases: Vec<Tensor> = outputs
        .iter()
        .map(|o| to_front_base(o, &levels))
        .collect::<Result<_>>()?;
    let released = outputs
        .iter()
        .map(|o| release(o, &levels))
        .collect::<Result<_>>()?;
    Ok((
        released,
        VjpFn {
            outputs: bases,
            leaves,
            levels,
        },
    ))
}

/// `torch.func.jacrev(f, argnums)(*args)`: the Jacobian of `f`'s output with respect to each
/// argument in `argnums` (shape: the output's, then the argument's), one vector-Jacobian
/// product per output element.
pub fn jacrev(
    f: impl Fn(&[Tensor]) -> Result<Tensor>,
    args: &[Tensor],
    argnums: &[usize],
) -> Result<Vec<Tensor>> {
    check_argnums(argnums, args.len())?;
    let picked: Vec<Tensor> = argnums.iter().map(|&a| args[a].clone()).collect();
    let (outputs, vjp_fn) = vjp(
        |xs| {
            let mut all = args.to_vec();
            for (&a, x) in argnums.iter().zip(xs) {
                all[a] = x.clone();
            }
            Ok(vec![f(&all)?])
        },
        &picked,
    )?;
    let out = &outputs[0];
    let numel = out.numel();
    let out_sizes = out.sizes().to_vec();
    let mut rows: Vec<Vec<Tensor>> = vec![Vec::new(); picked.len()];
    let positions = ops::arange(numel)?;
    for i in 0..numel {
        let one_hot = ops::eq_scalar(&positions, i)?;
        let e = ops::_to_copy_with(&one_hot, ops::ToCopyOptions::default().dtype(out.dtype()))?;
        let e = ops::reshape(&e, &out_sizes)?;
        for (row, g) in rows.iter_mut().zip(vjp_fn.call(&[e])?) {
            row.push(g);
        }
    }
    rows.into_iter()
        .zip(&picked)
        .map(|(row, p)| {
            let mut sizes = out_sizes.clone();
            sizes.extend_from_slice(p.sizes());
            if row.is_empty() {
                return ops::zeros_like(&ops::expand(&ops::unsqueeze(p, 0)?, &sizes)?);
            }
            ops::reshape(&ops::stack(&row)?, &sizes)
        })
        .collect()
}

/// `torch.func.hessian(f, argnums)(*args)`: `jacfwd(jacrev(f))` for the argument `argnum`, as
/// PyTorch computes it (forward over reverse).
pub fn hessian(
    f: impl Fn(&[Tensor]) -> Result<Tensor>,
    args: &[Tensor],
    argnum: usize,
) -> Result<Tensor> {
    let inner = |xs: &[Tensor]| -> Result<Tensor> { Ok(jacrev(&f, xs, &[argnum])?.remove(0)) };
    Ok(crate::forward_transforms::jacfwd(inner, args, &[argnum])?.remove(0))
}
