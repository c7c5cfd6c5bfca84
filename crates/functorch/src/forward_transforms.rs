//! The forward-mode transforms (`torch.func.jvp`, `jacfwd`), on the autograd crate's dual
//! tensors (Note [Forward-mode AD] there), composing with `vmap` and the reverse-mode
//! transforms.

use switchboard_autograd::{dual_level, DualLevel};
use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

use crate::layers;
use crate::transforms::{check_argnums, release, rewrap, runtime_error, to_front_base};
use crate::vmap::{Dims, Tree, Vmap};

// Note [jvp under the layers]
// `jvp` enters a dual level for the call of `f` and makes each primal a dual tensor whose
// tangent is the given one. Each `jvp` has its own level (a jvp layer on the dynamic layer
// stack): the outermost enters one as `torch.autograd.forward_ad.dual_level` does (so a `jvp`
// inside a raw `dual_level` is PyTorch's "Nested forward mode AD is not supported at the
// moment"), and an inner one nests its level in it, as functorch's `jvp` does, whose levels
// nest through its dynamic layer stack. The generated kernels compute the innermost level's
// tangent with operators the outer levels see (Note [Forward-mode AD] in
// switchboard-autograd), so `jvp(jvp(f))` and `jacfwd(jacfwd(f))` are second derivatives.
// As `grad` (Note [Dynamic layers]) it works on physical tensors: under outer `vmap`s the
// primal and the tangent are each brought to one physical tensor carrying every outer batch
// in front (an expanded view where one of them is not batched), the dual tensor is made of
// those and re-wrapped, and the outputs' primals and tangents are
// unwrapped the same way. The batching rules call operators on the physical dual tensors,
// whose Autograd kernels compute the tangents, so `vmap(jvp(f))` and `jvp(vmap(f))` need
// nothing more. Under `jvp`, `grad` keeps the tangent of its input on the leaf it
// differentiates and on the gradient it returns, so `jvp(grad(f))` is forward over reverse;
// under `grad`, the outputs of `jvp` keep their history, so `grad(jvp(f))` is reverse over
// forward.

/// `torch.func.jvp(f, primals, tangents)`: `f`'s outputs and their Jacobian-vector products
/// with `tangents` (one per primal, of its shape).
///
/// ```
/// use switchboard_cpu as _;
/// use switchboard_functorch::jvp;
/// use switchboard_ops as ops;
/// use switchboard_tensor::Tensor;
/// let x = Tensor::from_vec(vec![1.0f32, 2.], &[2])?;
/// let v = Tensor::from_vec(vec![1.0f32, -1.], &[2])?;
/// // d/dx (x * x) . v = 2 x v
/// let (out, tangent) = jvp(|a| Ok(vec![ops::mul(&a[0], &a[0])?]), &[x], &[v])?;
/// assert_eq!(out[0].to_vec::<f32>()?, [1., 4.]);
/// assert_eq!(tangent[0].to_vec::<f32>()?, [2., -4.]);
/// # Ok::<(), switchboard_dispatcher::DispatchError>(())
/// ```
pub fn jvp(
    f: impl Fn(&[Tensor]) -> Result<Vec<Tensor>>,
    primals: &[Tensor],
    tangents: &[Tensor],
) -> Result<(Vec<Tensor>, Vec<Tensor>)> {
    if primals.len() != tangents.len() {
        return Err(runtime_error(format!(
            "jvp(f, primals, tangents): Expected primals and tangents to have the same python \
             structure. For example, if primals is a tuple of 3 tensors, tangents also must be. \
             Got primals with {} tensors and tangents with {} tensors",
            primals.len(),
            tangents.len()
        )));
    }
    let levels = layers::vmap_levels();
    let level = if layers::jvp_layer_active() {
        DualLevel::nested()
    } else {
        dual_level()?
    };
    let _layer = layers::push_jvp();
    let mut inputs = Vec::with_capacity(primals.len());
    for (p, t) in primals.iter().zip(tangents) {
        let p = to_front_base(p, &levels)?;
        let t = to_front_base(t, &levels)?;
        inputs.push(rewrap(level.make_dual(&p, &t)?, &levels)?);
    }
    let outputs = f(&inputs)?;
    let mut primal_outs = Vec::with_capacity(outputs.len());
    let mut tangent_outs = Vec::with_capacity(outputs.len());
    for o in &outputs {
        let base = to_front_base(o, &levels)?;
        let (primal, tangent) = level.unpack_dual(&base)?;
        let tangent = match tangent {
            Some(t) => t,
            None => ops::zeros_like(&primal)?,
        };
        primal_outs.push(rewrap(primal, &levels)?);
        tangent_outs.push(rewrap(tangent, &levels)?);
    }
    drop(_layer);
    drop(level);
    let primal_outs = primal_outs
        .iter()
        .map(|o| release(o, &levels))
        .collect::<Result<Vec<_>>>()?;
    let tangent_outs = tangent_outs
        .iter()
        .map(|o| release(o, &levels))
        .collect::<Result<Vec<_>>>()?;
    Ok((primal_outs, tangent_outs))
}

/// `torch.func.jacfwd(f, argnums)(*args)`: the Jacobian of `f`'s output with respect to each
/// argument in `argnums` (shape: the output's, then the argument's), as functorch computes it:
/// `vmap` over the basis tangents of one `jvp`.
pub fn jacfwd(
    f: impl Fn(&[Tensor]) -> Result<Tensor>,
    args: &[Tensor],
    argnums: &[usize],
) -> Result<Vec<Tensor>> {
    check_argnums(argnums, args.len())?;
    let picked: Vec<Tensor> = argnums.iter().map(|&a| args[a].clone()).collect();
    let numels: Vec<i64> = picked.iter().map(|p| p.numel()).collect();
    let total: i64 = numels.iter().sum();
    let dtype = picked
        .first()
        .map(|p| p.dtype())
        .unwrap_or(switchboard_tensor::ScalarType::Float);
    // The basis: row j of the identity is the tangent of input element j, split per argument.
    let positions = ops::arange(total)?;
    let eye = ops::eq(
        &ops::unsqueeze(&positions, 1)?,
        &ops::unsqueeze(&positions, 0)?,
    )?;
    let eye = ops::_to_copy_with(&eye, ops::ToCopyOptions::default().dtype(dtype))?;
    let mut basis = Vec::with_capacity(picked.len());
    let mut offset = 0;
    for (p, &n) in picked.iter().zip(&numels) {
        let columns = ops::narrow(&eye, 1, offset, n)?;
        let mut sizes = vec![total];
        sizes.extend_from_slice(p.sizes());
        basis.push(Tree::Tensor(ops::reshape(&columns, &sizes)?));
        offset += n;
    }
    let column = |tangents: &[Tree]| -> Result<Tree> {
        let tangents: Vec<Tensor> = tangents
            .iter()
            .map(|t| match t {
                Tree::Tensor(t) => Ok(t.clone()),
                _ => Err(runtime_error("jacfwd: expected tensor tangents".into())),
            })
            .collect::<Result<_>>()?;
        let (_, out) = jvp(
            |xs| {
                let mut all = args.to_vec();
                for (&a, x) in argnums.iter().zip(xs) {
                    all[a] = x.clone();
                }
                Ok(vec![f(&all)?])
            },
            &picked,
            &tangents,
        )?;
        Ok(Tree::Tensor(out.into_iter().next().expect("one output")))
    };
    let columns = Vmap::new()
        .in_dims(Dims::Dim(Some(0)))
        .call(column, &basis)?;
    let Tree::Tensor(columns) = columns else {
        return Err(runtime_error("jacfwd: expected one tensor output".into()));
    };
    // `columns` is [total, *out]: the output's derivative along each input element.
    let out_dims = columns.dim() as i64 - 1;
    let out_sizes = columns.sizes()[1..].to_vec();
    let mut permutation: Vec<i64> = (1..=out_dims).collect();
    permutation.push(0);
    let mut jacobians = Vec::with_capacity(picked.len());
    let mut offset = 0;
    for (p, &n) in picked.iter().zip(&numels) {
        let rows = ops::narrow(&columns, 0, offset, n)?;
        let mut sizes = out_sizes.clone();
        sizes.extend_from_slice(p.sizes());
        jacobians.push(ops::reshape(&ops::permute(&rows, &permutation)?, &sizes)?);
        offset += n;
    }
    Ok(jacobians)
}
