//! Autograd kernels of the in-place operators.
//!
//! Note [In-place autograd]
//! An in-place op on a tensor that takes part in autograd is recorded as its out-of-place
//! form applied to a clone of the old value (so saved tensors are never the ones being
//! overwritten); the result is copied into the tensor below autograd (the copy bumps its
//! version through ADInplaceOrView) and the tensor's history is rebased onto the result's
//! grad_fn. In-place ops on a leaf that requires grad fail as in PyTorch. In-place ops on
//! views rebase the view's base instead (Note [CopySlices]).

use switchboard_dispatcher::{
    AutoDispatchBelowAutograd, DispatchKeySet, KernelFunction, Library, Result,
};
use switchboard_ops::{self as ops, redispatch as rd, PackedScalar};
use switchboard_tensor::{Scalar, ScalarType, Tensor};

use crate::autograd_meta;
use crate::node::err;
use crate::recording::{any_hint, AFTER_AD};

fn rebase(
    k: DispatchKeySet,
    s: &Tensor,
    fun: impl FnOnce(&Tensor) -> Result<Tensor>,
) -> Result<Tensor> {
    if let Some(base) = autograd_meta::read(s, |m| m.base.clone()).flatten() {
        return super::copy_slices::inplace_on_view(k, s, &base, fun);
    }
    if s.requires_grad_hint() && autograd_meta::grad_fn_of(s).is_none() {
        return Err(err(
            "a leaf Variable that requires grad is being used in an in-place operation.",
        ));
    }
    let src = ops::clone(s)?;
    let r = fun(&src)?;
    {
        let _g = AutoDispatchBelowAutograd::new();
        rd::copy_(k, s, &r, false)?;
    }
    if let Some((node, nr)) = autograd_meta::grad_fn_of(&r) {
        node.meta().set_input(nr as usize, s);
        autograd_meta::set_grad_fn(s, node, nr);
    }
    Ok(s.clone())
}

fn all_true(x: &Tensor) -> Result<Tensor> {
    ops::ones_like_with(x, ops::OnesLikeOptions::default().dtype(ScalarType::Bool))
}

/// Defines in-place kernels: `name(params) [other grad inputs] => |src| out-of-place form;`.
/// Like `k!` in pointwise.rs, the pass-through path redispatches past autograd and the
/// recording path is a separate function (see Note [Autograd fast path]).
macro_rules! inplace {
    ($($f:ident ($($p:ident : $t:ty),*) [$($o:ident),*] => |$src:ident| $fun:expr;)*) => {$(
        #[inline(always)]
        fn $f(ks: DispatchKeySet, s: &Tensor, $($p: $t),*) -> Result<Tensor> {
            #[inline(never)]
            fn recording(k: DispatchKeySet, s: &Tensor, $($p: $t),*) -> Result<Tensor> {
                if !crate::is_grad_enabled() {
                    return rd::$f(k, s, $($p),*);
                }
                rebase(k, s, |$src: &Tensor| $fun)
            }
            let k = ks & AFTER_AD;
            if !any_hint(&[s $(, $o)*]) {
                return rd::$f(k, s, $($p),*);
            }
            recording(k, s, $($p),*)
        }
    )*};
}

inplace! {
    add_(o: &Tensor, a: PackedScalar) [o] => |x| ops::add_with(x, o, ops::AddOptions::default().alpha(a));
    add_scalar_(o: PackedScalar, a: PackedScalar) [] => |x| ops::add_scalar_with(x, o, ops::AddScalarOptions::default().alpha(a));
    sub_(o: &Tensor, a: PackedScalar) [o] => |x| ops::sub_with(x, o, ops::SubOptions::default().alpha(a));
    sub_scalar_(o: PackedScalar, a: PackedScalar) [] => |x| ops::sub_scalar_with(x, o, ops::SubScalarOptions::default().alpha(a));
    mul_(o: &Tensor) [o] => |x| ops::mul(x, o);
    mul_scalar_(o: PackedScalar) [] => |x| ops::mul_scalar(x, o);
    div_(o: &Tensor) [o] => |x| ops::div(x, o);
    div_scalar_(o: PackedScalar) [] => |x| ops::div_scalar(x, o);
    pow_(o: PackedScalar) [] => |x| ops::pow_tensor_scalar(x, o);
    pow_tensor_(o: &Tensor) [o] => |x| ops::pow(x, o);
    neg_() [] => |x| ops::neg(x);
    exp_() [] => |x| ops::exp(x);
    log_() [] => |x| ops::log(x);
    sqrt_() [] => |x| ops::sqrt(x);
    rsqrt_() [] => |x| ops::rsqrt(x);
    abs_() [] => |x| ops::abs(x);
    relu_() [] => |x| ops::relu(x);
    sigmoid_() [] => |x| ops::sigmoid(x);
    tanh_() [] => |x| ops::tanh(x);
    gelu_(a: &str) [] => |x| ops::gelu_with(x, ops::GeluOptions::default().approximate(a));
    silu_() [] => |x| ops::silu(x);
    masked_fill_(m: &Tensor, v: PackedScalar) [] => |x| ops::masked_fill(x, m, v);
    masked_fill_tensor_(m: &Tensor, v: &Tensor) [v] => |x| ops::masked_fill_tensor(x, m, v);
    clamp_(lo: Option<Scalar>, hi: Option<Scalar>) [] => |x| ops::clamp_with(x, ops::ClampOptions { min: lo, max: hi });
    addmm_(a: &Tensor, b: &Tensor, be: PackedScalar, al: PackedScalar) [a, b] => |x| ops::addmm_with(x, a, b, ops::AddmmOptions::default().beta(be).alpha(al));
    // Filling: masked_fill with an all-true mask gives the value with a zero gradient to the
    // old history (multiplying by 0 would turn infinities into NaN).
    fill_(v: PackedScalar) [] => |x| ops::masked_fill(x, &all_true(x)?, v);
    fill_tensor_(v: &Tensor) [v] => |x| ops::masked_fill_tensor(x, &all_true(x)?, v);
    zero_() [] => |x| ops::masked_fill(x, &all_true(x)?, 0);
    copy_(src: &Tensor, nb: bool) [src] => |x| {
        let _ = nb;
        let e = ops::expand(src, x.sizes())?;
        ops::_to_copy_with(&e, ops::ToCopyOptions::default().dtype(x.dtype()).device(x.device()))
    };
}

/// Registers this file's kernels.
pub(crate) fn register(lib: &mut Library) -> Result<()> {
    macro_rules! reg {
        ($($name:literal => $f:ident),* $(,)?) => {
            $(lib.impl_with_static_debug($name, None, KernelFunction::from_fn_with_keys($f), concat!("switchboard_autograd::", stringify!($f), " [Autograd]"))?;)*
        };
    }
    reg! {
        "add_.Tensor" => add_, "add_.Scalar" => add_scalar_, "sub_.Tensor" => sub_,
        "sub_.Scalar" => sub_scalar_, "mul_.Tensor" => mul_, "mul_.Scalar" => mul_scalar_,
        "div_.Tensor" => div_, "div_.Scalar" => div_scalar_, "pow_.Scalar" => pow_,
        "pow_.Tensor" => pow_tensor_, "neg_" => neg_, "exp_" => exp_, "log_" => log_,
        "sqrt_" => sqrt_, "rsqrt_" => rsqrt_, "abs_" => abs_, "relu_" => relu_,
        "sigmoid_" => sigmoid_, "tanh_" => tanh_, "gelu_" => gelu_, "silu_" => silu_,
        "masked_fill_.Scalar" => masked_fill_, "masked_fill_.Tensor" => masked_fill_tensor_,
        "clamp_" => clamp_, "addmm_" => addmm_, "copy_" => copy_, "fill_.Scalar" => fill_,
        "fill_.Tensor" => fill_tensor_, "zero_" => zero_,
    }
    Ok(())
}
