//! In-place operations on views (PyTorch's `CopySlices`) and the regeneration of a view's
//! grad_fn after its storage was modified in place.
//!
//! Note [CopySlices]
//! An in-place op on a view `v` of `base`, recorded as Note [In-place autograd] does, yields
//! `r = op(v.clone(), ...)`, copied into `v` below autograd. The new value of `base` is its
//! old value with the view's region replaced by `r`, so `base` gets a `CopySlices` node with
//! two edges: its old history, which receives the gradient with the region zeroed, and `r`'s
//! node, which receives the region of the gradient. (PyTorch's CopySlices runs the op's
//! backward itself on the region; here the op's own node does, and the gradient it sends to
//! the view's old value flows back through the view's old grad_fn into the base's old
//! history: the same sums.) The view's grad_fn is then regenerated from the base's.
//!
//! Note [View grad_fn regeneration]
//! Views share their base's version counter. A view created with grad mode on remembers the
//! version when its grad_fn was set; when the storage has been modified in place since (on
//! the base or any view of it), reading its grad_fn (`grad_fn`, recording an op on it)
//! replaces it by `AsStridedBackward0` of the base's current history, as PyTorch does. A view
//! of a base that did not take part in autograd when the view was created and joins it later
//! is not regenerated (it does not require grad): a known difference from PyTorch.

use switchboard_dispatcher::{AutoDispatchBelowAutograd, DispatchKeySet, Result};
use switchboard_ops::{self as ops, redispatch as rd};
use switchboard_tensor::Tensor;

use super::when;
use crate::autograd_meta;
use crate::grad_mode::GradModeGuard;
use crate::node::{err, Node};
use crate::recording::{grad_at, record_with};

/// Sets `t`'s grad_fn to `AsStridedBackward0` of its base's current history (when the base
/// requires grad), and marks it current.
pub(crate) fn regenerate(t: &Tensor) {
    let Some(base) = autograd_meta::read(t, |m| m.base.clone()).flatten() else {
        return;
    };
    let version = t.version();
    let node = if base.requires_grad_hint() {
        let _g = GradModeGuard::new(true);
        ops::as_strided_with(
            &base,
            t.sizes(),
            t.strides(),
            ops::AsStridedOptions::default().storage_offset(t.storage_offset()),
        )
        .ok()
        .and_then(|v| autograd_meta::grad_fn_of(&v))
    } else {
        None
    };
    autograd_meta::with(t, |m| {
        if let Some((n, nr)) = node {
            n.meta().set_input(nr as usize, t);
            m.grad_fn = Some(n);
            m.output_nr = nr;
            m.requires_grad = false;
        }
        m.bw_view = true;
        m.attr_version = version;
    });
}

/// For each element of `view` (in logical order), the logical flat index of the element of
/// `base` at the same storage position. `base` must not overlap itself.
fn region(base: &Tensor, view: &Tensor) -> Result<Vec<i64>> {
    // Base dims by decreasing stride: a storage offset decomposes greedily into indices.
    let mut dims: Vec<usize> = (0..base.dim()).filter(|&d| base.sizes()[d] > 1).collect();
    dims.sort_by_key(|&d| std::cmp::Reverse(base.strides()[d]));
    let mut contiguous = vec![1i64; base.dim()];
    for d in (0..base.dim().saturating_sub(1)).rev() {
        contiguous[d] = contiguous[d + 1] * base.sizes()[d + 1];
    }
    let outside =
        || err("in-place operation on a view: the view's elements are not elements of its base");
    let mut out = Vec::with_capacity(view.numel() as usize);
    let mut positions = vec![view.storage_offset()];
    for (&n, &s) in view.sizes().iter().zip(view.strides()) {
        positions = positions
            .iter()
            .flat_map(|&p| (0..n).map(move |i| p + i * s))
            .collect();
    }
    for p in positions {
        let mut rem = p - base.storage_offset();
        let mut flat = 0;
        for &d in &dims {
            let st = base.strides()[d];
            let i = if st > 0 { rem / st } else { 0 };
            if rem < 0 || i >= base.sizes()[d] {
                return Err(outside());
            }
            rem -= i * st;
            flat += i * contiguous[d];
        }
        if rem != 0 {
            return Err(outside());
        }
        out.push(flat);
    }
    Ok(out)
}

struct State {
    /// True on the view's region, base-shaped.
    mask: Tensor,
    /// The base's flat indices of the view's elements.
    idx: Tensor,
    view_sizes: Vec<i64>,
}

fn copy_slices_formula(
    st: &State,
    _: &std::sync::Arc<dyn Node>,
    grads: &[Option<Tensor>],
    need: &[bool],
) -> Result<Vec<Option<Tensor>>> {
    let g = grad_at(grads, 0)?;
    Ok(vec![
        when(need[0], || ops::masked_fill(&g, &st.mask, 0))?,
        when(need[1], || {
            let r = ops::index_select(&ops::reshape(&g, &[-1])?, 0, &st.idx)?;
            ops::reshape(&r, &st.view_sizes)
        })?,
    ])
}

/// The in-place op `fun` (out of place on its argument) on the view `v` of `base`, see
/// Note [CopySlices].
pub(crate) fn inplace_on_view(
    k: DispatchKeySet,
    v: &Tensor,
    base: &Tensor,
    fun: impl FnOnce(&Tensor) -> Result<Tensor>,
) -> Result<Tensor> {
    if base.requires_grad_hint() && autograd_meta::grad_fn_of(base).is_none() {
        return Err(err(
            "a view of a leaf Variable that requires grad is being used in an in-place \
             operation.",
        ));
    }
    let idx = region(base, v)?;
    let src = ops::clone(v)?;
    let r = fun(&src)?;
    {
        let _g = AutoDispatchBelowAutograd::new();
        rd::copy_(k, v, &r, false)?;
    }
    let mut mask = vec![false; base.numel() as usize];
    for &i in &idx {
        mask[i as usize] = true;
    }
    // The formula combines them with gradients on the base's device.
    let on_base_device = |t: Tensor| -> Result<Tensor> {
        if t.device() == base.device() {
            return Ok(t);
        }
        ops::_to_copy_with(&t, ops::ToCopyOptions::default().device(base.device()))
    };
    let mask = on_base_device(Tensor::from_vec(mask, base.sizes())?)?;
    let idx_t = on_base_device(Tensor::from_vec(idx.clone(), &[idx.len() as i64])?)?;
    let st = || State {
        mask,
        idx: idx_t,
        view_sizes: v.sizes().to_vec(),
    };
    record_with(
        "CopySlices",
        &[Some(base), Some(&r)],
        &[Some(base)],
        st,
        copy_slices_formula,
    );
    regenerate(v);
    Ok(v.clone())
}
