//! The Autograd and ADInplaceOrView kernels of the aten operators, one file per family.

use std::sync::Arc;

use switchboard_dispatcher::Result;
use switchboard_tensor::Tensor;

use crate::node::{Node, SavedTensor};
use crate::recording::{grad_at, record_with};

/// An autograd kernel's fast path: `pass_through!(fn name(ks: DispatchKeySet, params) -> R;
/// [inputs] => redispatch, else recording)` defines `name`, which redispatches
/// (`rd::redispatch(ks & AFTER_AD, params...)`) when none of `inputs` may require grad (their
/// flags only) and calls `recording(ks, params...)` otherwise. `recording` is the kernel's
/// whole body, an ordinary function marked `#[inline(never)]`, which tests again with grad
/// mode. `name` is inlined into its entry point, which then ends in a jump (Note [Autograd fast
/// path] in pointwise.rs). For kernels defined inside other macros, the second form wraps the
/// body itself: `pass_through!([inputs] => redispatch; fn name(...) -> R { body })`.
macro_rules! pass_through {
    (fn $f:ident($ks:ident: DispatchKeySet $(, $p:ident : $t:ty)* $(,)?) -> $r:ty;
     [$($i:ident),+] => $rd:ident, else $full:ident) => {
        #[inline(always)]
        #[allow(clippy::too_many_arguments)] // the operator's own parameters
        fn $f($ks: DispatchKeySet $(, $p: $t)*) -> $r {
            if !$crate::recording::any_hint(&[$($i),+]) {
                return rd::$rd($ks & $crate::recording::AFTER_AD $(, $p)*);
            }
            $full($ks $(, $p)*)
        }
    };
    ([$($i:ident),+] => $rd:ident;
     $(#[$m:meta])*
     fn $f:ident($ks:ident: DispatchKeySet $(, $p:ident : $t:ty)* $(,)?) -> $r:ty $body:block) => {
        #[inline(always)]
        fn $f($ks: DispatchKeySet $(, $p: $t)*) -> $r {
            #[inline(never)]
            $(#[$m])*
            fn full($ks: DispatchKeySet $(, $p: $t)*) -> $r $body
            if !$crate::recording::any_hint(&[$($i),+]) {
                return rd::$rd($ks & $crate::recording::AFTER_AD $(, $p)*);
            }
            full($ks $(, $p)*)
        }
    };
}

pub(crate) mod ad_inplace_or_view;
pub(crate) mod copy_slices;
pub(crate) mod double_backward;
pub(crate) mod double_backward_nn;
pub(crate) mod inplace;
pub(crate) mod nn;
pub(crate) mod out;
pub(crate) mod pointwise;
pub(crate) mod pointwise_recording;
pub(crate) mod reduce;
pub(crate) mod shape;

/// A formula over unpacked saved tensors and op parameters `P`: (params, saved, grad of
/// output 0, all grads, which inputs need a gradient) -> one gradient per input.
pub(crate) type BagFn<P> =
    fn(&P, &[Tensor], &Tensor, &[Option<Tensor>], &[bool]) -> Result<Vec<Option<Tensor>>>;

/// Saved tensors of a bag: most ops save at most two, kept inline in the node (one
/// allocation and its free less per recorded op).
type SavedVec = smallvec::SmallVec<[SavedTensor; 2]>;

struct Bag<P> {
    saved: SavedVec,
    p: P,
    f: BagFn<P>,
}

/// The saved tensors of `inputs`, in order.
fn save_inputs(inputs: &[&Tensor]) -> SavedVec {
    let mut saved = SavedVec::new();
    for t in inputs {
        saved.push(SavedTensor::input(t));
    }
    saved
}

/// The saved tensors, unpacked for the formula (checking their versions).
fn unpack_all(saved: &SavedVec, node: &Arc<dyn Node>) -> Result<smallvec::SmallVec<[Tensor; 2]>> {
    saved.iter().map(|s| s.unpack(node)).collect()
}

fn bag_formula<P: Send + 'static>(
    st: &Bag<P>,
    node: &Arc<dyn Node>,
    grads: &[Option<Tensor>],
    mask: &[bool],
) -> Result<Vec<Option<Tensor>>> {
    let saved = unpack_all(&st.saved, node)?;
    let g = grad_at(grads, 0)?;
    (st.f)(&st.p, &saved, &g, grads, mask)
}

/// Records a node saving `saved_in` (inputs) then `saved_out` (outputs, by position in
/// `outputs`), with parameters `p` and formula `f`.
pub(crate) fn rec<P: Send + 'static>(
    name: &'static str,
    inputs: &[Option<&Tensor>],
    outputs: &[&Tensor],
    saved_in: &[&Tensor],
    saved_out: &[(&Tensor, u32)],
    p: P,
    f: BagFn<P>,
) -> Arc<dyn Node> {
    let outs: smallvec::SmallVec<[Option<&Tensor>; 3]> = outputs.iter().map(|o| Some(*o)).collect();
    // The bag is made in the node's memory (see Note [Recording cost]).
    let bag = move || {
        let mut saved = save_inputs(saved_in);
        for (t, nr) in saved_out {
            saved.push(SavedTensor::output(t, *nr, name));
        }
        Bag { saved, p, f }
    };
    record_with(name, inputs, &outs, bag, bag_formula::<P>)
}

/// A formula of an op with several outputs, any of whose gradients may be missing:
/// (params, saved, gradients of the outputs, which inputs need a gradient).
pub(crate) type MultiFn<P> =
    fn(&P, &[Tensor], &[Option<Tensor>], &[bool]) -> Result<Vec<Option<Tensor>>>;

struct MultiBag<P> {
    saved: SavedVec,
    p: P,
    f: MultiFn<P>,
}

fn multi_formula<P: Send + 'static>(
    st: &MultiBag<P>,
    node: &Arc<dyn Node>,
    grads: &[Option<Tensor>],
    mask: &[bool],
) -> Result<Vec<Option<Tensor>>> {
    let saved = unpack_all(&st.saved, node)?;
    (st.f)(&st.p, &saved, grads, mask)
}

/// Like [`rec`] for ops with several outputs, some of which (`None`) are not recorded;
/// saves inputs only.
pub(crate) fn rec_multi<P: Send + 'static>(
    name: &'static str,
    inputs: &[Option<&Tensor>],
    outputs: &[Option<&Tensor>],
    saved_in: &[&Tensor],
    p: P,
    f: MultiFn<P>,
) -> Arc<dyn Node> {
    let bag = move || MultiBag {
        saved: save_inputs(saved_in),
        p,
        f,
    };
    record_with(name, inputs, outputs, bag, multi_formula::<P>)
}

/// `Some(f())` when `cond`.
pub(crate) fn when(cond: bool, f: impl FnOnce() -> Result<Tensor>) -> Result<Option<Tensor>> {
    if cond {
        f().map(Some)
    } else {
        Ok(None)
    }
}
