//! Autograd kernels of the pointwise operators (derivatives.yaml formulas).

use switchboard_dispatcher::{
    AutoDispatchBelowADInplaceOrView, DispatchKeySet, KernelFunction, Library, PackedScalar, Result,
};
use switchboard_ops::{self as ops, redispatch as rd};
use switchboard_tensor::{Scalar, Tensor};

use crate::recording::Unpack;

use super::pointwise_recording::{Args, Pw, A, B, C, G2, R};
use super::{rec, when};
use crate::recording::{any_hint, any_rg, fresh, scale, AFTER_AD};

fn g1(g: &Tensor) -> G2 {
    Ok([Some(g.clone()), None])
}

// Note [Autograd fast path]
// Dense tensors carry the Autograd keys, so every call runs an autograd kernel, and almost
// always nothing requires grad. The kernel then tests the inputs' `requires_grad_hint` flags
// (one relaxed load each, before the grad-mode thread-local, which is not read at all when
// no flag is set) and redispatches with `ks & AFTER_AD`: the key set itself skips the
// Autograd keys, so no exclusion guard (two TLS writes) is set. That is sound here because
// nothing below can record anything: kernels below that call other ops re-enter autograd for
// those calls (they are not excluded), but the inner calls see inputs that do not require
// grad either and pass through the same way. The recording path keeps PyTorch's
// AutoDispatchBelowADInplaceOrView guard (see `Pw::run`), because there inner calls on
// inputs that require grad must not record. The recording code lives in a separate function
// so the pass-through path does not pay for its stack frame; it also reads the grad-mode
// thread-local (the fast path tests the flags only and ends in the redispatch or a jump to
// it): a thread-local read in a library crate compiles to a call (the linker turns it into a
// plain load later), and a call with arguments live across it costs the whole fast path a
// frame of callee-saved registers. The redispatch itself goes through a `LazyHandle` for the
// same reason (Note [Lazy handles keep the first call out of line]). The kernel is inlined
// into its entry point, its scalars arrive and leave packed in registers (Note [Packed
// scalars]) and the redispatch ends in a jump (Note [Typed calls end in one jump]): with
// nothing requiring grad, the layer is the flags test, a table look-up and a jump, with no
// stack frame. `k!` here, `inplace!`, `view!` and `pass_through!` (kernels/mod.rs, for the
// other families) give every autograd kernel that shape.

/// Defines a kernel: `k!(fn name(a: &Tensor, ...) [grad inputs] => fast redispatch, slow)`.
/// The recording path is a separate function (see Note [Autograd fast path]).
macro_rules! k {
    ($f:ident ($($p:ident : $t:ty),*) [$($i:ident),+] => $rd:ident($($arg:expr),*) ; $slow:expr) => {
        #[inline(always)]
        fn $f(ks: DispatchKeySet, $($p: $t),*) -> Result<Tensor> {
            #[inline(never)]
            fn recording(k: DispatchKeySet, $($p: $t),*) -> Result<Tensor> {
                if !crate::is_grad_enabled() {
                    return rd::$rd(k, $($arg),*);
                }
                // The formulas see scalars unpacked.
                $(let $p = Unpack::unpack($p);)*
                let fwd = || rd::$rd(k, $($arg),*);
                ($slow)(fwd)
            }
            let k = ks & AFTER_AD;
            if !any_hint(&[$($i),+]) {
                return rd::$rd(k, $($arg),*);
            }
            recording(k, $($p),*)
        }
    };
}

k!(add_t(a: &Tensor, b: &Tensor, alpha: PackedScalar) [a, b] => add(a, b, alpha);
|fwd| Pw::new(a, Some(b)).s(alpha).run("AddBackward0", 0, fwd, |g, x: &Args| {
    Ok([when(x.need[0], || Ok(g.clone()))?, when(x.need[1], || scale(g, x.s))?])
}));
k!(add_s(a: &Tensor, b: PackedScalar, alpha: PackedScalar) [a] => add_scalar(a, b, alpha);
    |fwd| Pw::new(a, None).run("AddBackward1", 0, fwd, |g, _| g1(g)));
k!(sub_t(a: &Tensor, b: &Tensor, alpha: PackedScalar) [a, b] => sub(a, b, alpha);
|fwd| Pw::new(a, Some(b)).s(alpha).run("SubBackward0", 0, fwd, |g, x: &Args| {
    Ok([when(x.need[0], || Ok(g.clone()))?, when(x.need[1], || scale(g, -x.s))?])
}));
k!(sub_s(a: &Tensor, b: PackedScalar, alpha: PackedScalar) [a] => sub_scalar(a, b, alpha);
    |fwd| Pw::new(a, None).run("SubBackward1", 0, fwd, |g, _| g1(g)));
k!(rsub_t(a: &Tensor, b: &Tensor, alpha: PackedScalar) [a, b] => rsub(a, b, alpha);
|fwd| Pw::new(a, Some(b)).s(alpha).run("RsubBackward0", 0, fwd, |g, x: &Args| {
    Ok([when(x.need[0], || scale(g, -x.s))?, when(x.need[1], || Ok(g.clone()))?])
}));
k!(mul_t(a: &Tensor, b: &Tensor) [a, b] => mul(a, b);
|fwd| Pw::new(a, Some(b)).run("MulBackward0", A | B, fwd, |g, x: &Args| {
    Ok([when(x.need[0], || ops::mul(g, x.b()))?, when(x.need[1], || ops::mul(g, x.a()))?])
}));
k!(mul_s(a: &Tensor, b: PackedScalar) [a] => mul_scalar(a, b);
|fwd| Pw::new(a, None).s(b).run("MulBackward1", 0, fwd, |g, x: &Args| {
    Ok([Some(ops::mul_scalar(g, x.s)?), None])
}));
fn div_formula(g: &Tensor, x: &Args) -> G2 {
    Ok([
        when(x.need[0], || ops::div(g, x.b()))?,
        when(x.need[1], || {
            let q = ops::div(&ops::div(x.a(), x.b())?, x.b())?;
            ops::neg(&ops::mul(g, &q)?)
        })?,
    ])
}
k!(div_t(a: &Tensor, b: &Tensor) [a, b] => div(a, b);
    |fwd| Pw::new(a, Some(b)).run("DivBackward0", A | B, fwd, div_formula));
k!(div_tm(a: &Tensor, b: &Tensor, mode: Option<&str>) [a, b] => div_tensor_mode(a, b, mode);
|fwd| {
    if mode.is_some() {
        Pw::new(a, Some(b)).run("DivBackward2", 0, fwd, |g, x: &Args| {
            let z = |t: &Tensor| ops::zeros_like(t);
            Ok([when(x.need[0], || z(g))?, when(x.need[1], || z(g))?])
        })
    } else {
        Pw::new(a, Some(b)).run("DivBackward2", A | B, fwd, div_formula)
    }
});
k!(div_s(a: &Tensor, b: PackedScalar) [a] => div_scalar(a, b);
|fwd| Pw::new(a, None).s(b).run("DivBackward1", 0, fwd, |g, x: &Args| {
    Ok([Some(ops::div_scalar(g, x.s)?), None])
}));
k!(neg(a: &Tensor) [a] => neg(a);
    |fwd| Pw::new(a, None).run("NegBackward0", 0, fwd, |g, _| Ok([Some(ops::neg(g)?), None])));
k!(exp(a: &Tensor) [a] => exp(a);
|fwd| Pw::new(a, None).run("ExpBackward0", R, fwd, |g, x: &Args| {
    Ok([Some(ops::mul(g, x.r())?), None])
}));
k!(log(a: &Tensor) [a] => log(a);
|fwd| Pw::new(a, None).run("LogBackward0", A, fwd, |g, x: &Args| {
    Ok([Some(ops::div(g, x.a())?), None])
}));
k!(sqrt(a: &Tensor) [a] => sqrt(a);
|fwd| Pw::new(a, None).run("SqrtBackward0", R, fwd, |g, x: &Args| {
    Ok([Some(ops::div(g, &ops::mul_scalar(x.r(), 2)?)?), None])
}));
k!(rsqrt(a: &Tensor) [a] => rsqrt(a);
|fwd| Pw::new(a, None).run("RsqrtBackward0", R, fwd, |g, x: &Args| {
    let r3 = ops::pow_tensor_scalar(x.r(), 3)?;
    Ok([Some(ops::mul_scalar(&ops::mul(g, &r3)?, -0.5)?), None])
}));
k!(abs(a: &Tensor) [a] => abs(a);
|fwd| Pw::new(a, None).run("AbsBackward0", A, fwd, |g, x: &Args| {
    // grad * sgn(self), as two selects so that it stays differentiable in grad.
    let neg = ops::where_scalar_other(&ops::lt_scalar(x.a(), 0)?, &ops::neg(g)?, 0)?;
    Ok([Some(ops::r#where(&ops::gt_scalar(x.a(), 0)?, g, &neg)?), None])
}));
k!(relu(a: &Tensor) [a] => relu(a);
|fwd| Pw::new(a, None).run("ReluBackward0", R, fwd, |g, x: &Args| {
    Ok([Some(ops::threshold_backward(g, x.r(), 0)?), None])
}));
k!(sigmoid(a: &Tensor) [a] => sigmoid(a);
|fwd| Pw::new(a, None).run("SigmoidBackward0", R, fwd, |g, x: &Args| {
    Ok([Some(ops::sigmoid_backward(g, x.r())?), None])
}));
k!(tanh(a: &Tensor) [a] => tanh(a);
|fwd| Pw::new(a, None).run("TanhBackward0", R, fwd, |g, x: &Args| {
    Ok([Some(ops::tanh_backward(g, x.r())?), None])
}));
k!(gelu(a: &Tensor, approximate: &str) [a] => gelu(a, approximate);
|fwd| {
    let m = if approximate == "tanh" { "tanh" } else { "none" };
    Pw::new(a, None).mode(m).run("GeluBackward0", A, fwd, |g, x: &Args| {
        Ok([Some(ops::gelu_backward_with(g, x.a(), ops::GeluBackwardOptions::default().approximate(x.mode))?), None])
    })
});
k!(silu(a: &Tensor) [a] => silu(a);
|fwd| Pw::new(a, None).run("SiluBackward0", A, fwd, |g, x: &Args| {
    Ok([Some(ops::silu_backward(g, x.a())?), None])
}));

fn pow_ts_formula(g: &Tensor, x: &Args) -> G2 {
    let e = x.s.to_f64();
    if e == 0.0 {
        return Ok([Some(ops::zeros_like(g)?), None]);
    }
    let p = ops::pow_tensor_scalar(x.a(), e - 1.0)?;
    Ok([Some(ops::mul_scalar(&ops::mul(g, &p)?, x.s)?), None])
}
k!(pow_ts(a: &Tensor, e: PackedScalar) [a] => pow_tensor_scalar(a, e);
    |fwd| Pw::new(a, None).s(e).run("PowBackward0", A, fwd, pow_ts_formula));
k!(pow_tt(a: &Tensor, b: &Tensor) [a, b] => pow(a, b);
|fwd| Pw::new(a, Some(b)).run("PowBackward1", A | B | R, fwd, |g, x: &Args| {
    let ga = when(x.need[0], || {
        let p = ops::pow(x.a(), &ops::sub_scalar(x.b(), 1)?)?;
        let v = ops::mul(&ops::mul(g, x.b())?, &p)?;
        ops::where_scalar_self(&ops::eq_scalar(x.b(), 0)?, 0.0, &v)
    })?;
    let gb = when(x.need[1], || {
        let v = ops::mul(g, &ops::mul(x.r(), &ops::log(x.a())?)?)?;
        let zero_base = ops::where_scalar_self(&ops::ge_scalar(x.b(), 0)?, 0.0, &v)?;
        ops::r#where(&ops::eq_scalar(x.a(), 0)?, &zero_base, &v)
    })?;
    Ok([ga, gb])
}));
k!(pow_s(base: PackedScalar, e: &Tensor) [e] => pow_scalar(base, e);
|fwd| Pw::new(e, None).s(base).run("PowBackward2", R, fwd, |g, x: &Args| {
    let lnb = x.s.to_f64().ln();
    Ok([Some(ops::mul_scalar(&ops::mul(g, x.r())?, lnb)?), None])
}));

/// maximum/minimum: `grad` where `a` wins, half of it on ties.
fn extremum(g: &Tensor, x: &Args, a_wins: Tensor, b_wins: Tensor) -> G2 {
    let tie = ops::eq(x.a(), x.b())?;
    let split = ops::r#where(&tie, &ops::div_scalar(g, 2)?, g)?;
    Ok([
        when(x.need[0], || ops::masked_fill(&split, &b_wins, 0))?,
        when(x.need[1], || ops::masked_fill(&split, &a_wins, 0))?,
    ])
}
k!(maximum(a: &Tensor, b: &Tensor) [a, b] => maximum(a, b);
|fwd| Pw::new(a, Some(b)).run("MaximumBackward0", A | B, fwd, |g, x: &Args| {
    extremum(g, x, ops::gt(x.a(), x.b())?, ops::lt(x.a(), x.b())?)
}));
k!(minimum(a: &Tensor, b: &Tensor) [a, b] => minimum(a, b);
|fwd| Pw::new(a, Some(b)).run("MinimumBackward0", A | B, fwd, |g, x: &Args| {
    extremum(g, x, ops::lt(x.a(), x.b())?, ops::gt(x.a(), x.b())?)
}));

k!(where_t(c: &Tensor, a: &Tensor, b: &Tensor) [a, b] => r#where(c, a, b);
|fwd| Pw::new(a, Some(b)).c(c).run("WhereBackward0", C, fwd, |g, x: &Args| Ok([
    when(x.need[0], || ops::where_scalar_other(x.c(), g, 0.0))?,
    when(x.need[1], || ops::where_scalar_self(x.c(), 0.0, g))?,
])));
k!(where_ss(c: &Tensor, a: PackedScalar, b: &Tensor) [b] => where_scalar_self(c, a, b);
|fwd| Pw::new(b, None).c(c).run("WhereBackward1", C, fwd, |g, x: &Args| {
    Ok([Some(ops::where_scalar_self(x.c(), 0.0, g)?), None])
}));
k!(where_so(c: &Tensor, a: &Tensor, b: PackedScalar) [a] => where_scalar_other(c, a, b);
|fwd| Pw::new(a, None).c(c).run("WhereBackward2", C, fwd, |g, x: &Args| {
    Ok([Some(ops::where_scalar_other(x.c(), g, 0.0)?), None])
}));
k!(masked_fill_s(a: &Tensor, m: &Tensor, v: PackedScalar) [a] => masked_fill(a, m, v);
|fwd| Pw::new(a, None).c(m).run("MaskedFillBackward0", C, fwd, |g, x: &Args| {
    Ok([Some(ops::masked_fill(g, x.c(), 0)?), None])
}));
k!(masked_fill_t(a: &Tensor, m: &Tensor, v: &Tensor) [a, v] => masked_fill_tensor(a, m, v);
|fwd| Pw::new(a, Some(v)).c(m).run("MaskedFillBackward1", C, fwd, |g, x: &Args| Ok([
    when(x.need[0], || ops::masked_fill(g, x.c(), 0))?,
    when(x.need[1], || ops::sum(&ops::where_scalar_other(x.c(), g, 0.0)?))?,
])));

/// `grad` where `lo <= a <= hi`, else 0.
fn clamp_formula(g: &Tensor, x: &Args) -> G2 {
    let mut r = g.clone();
    if let Some(lo) = x.lo {
        r = ops::where_scalar_other(&ops::ge_scalar(x.a(), lo)?, &r, 0.0)?;
    }
    if let Some(hi) = x.hi {
        r = ops::where_scalar_other(&ops::le_scalar(x.a(), hi)?, &r, 0.0)?;
    }
    Ok([Some(r), None])
}
k!(clamp(a: &Tensor, lo: Option<Scalar>, hi: Option<Scalar>) [a] => clamp(a, lo, hi);
    |fwd| Pw::new(a, None).range(lo, hi).run("ClampBackward1", A, fwd, clamp_formula));
k!(clamp_min(a: &Tensor, lo: PackedScalar) [a] => clamp_min(a, lo);
    |fwd| Pw::new(a, None).range(Some(lo), None).run("ClampMinBackward0", A, fwd, clamp_formula));
k!(clamp_max(a: &Tensor, hi: PackedScalar) [a] => clamp_max(a, hi);
    |fwd| Pw::new(a, None).range(None, Some(hi)).run("ClampMaxBackward0", A, fwd, clamp_formula));

k!(mse_loss(a: &Tensor, b: &Tensor, red: i64) [a, b] => mse_loss(a, b, red);
|fwd| Pw::new(a, Some(b)).n(red).run("MseLossBackward0", A | B, fwd, |g, x: &Args| Ok([
    when(x.need[0], || ops::mse_loss_backward(g, x.a(), x.b(), x.n))?,
    when(x.need[1], || ops::mse_loss_backward(g, x.b(), x.a(), x.n))?,
])));

// Backward ops with their own (first-order) formulas, for double backward.
// `self` gets a zero gradient (derivatives.yaml: zeros_like), so that the gradient of relu
// taken with create_graph has history as in PyTorch.
k!(threshold_backward(g: &Tensor, s: &Tensor, t: PackedScalar) [g, s] => threshold_backward(g, s, t);
|fwd| Pw::new(g, Some(s)).s(t).run("ThresholdBackwardBackward0", B, fwd, |gg, x: &Args| Ok([
    when(x.need[0], || ops::threshold_backward(gg, x.b(), x.s))?,
    when(x.need[1], || ops::zeros_like(x.b()))?,
])));
k!(sigmoid_backward(g: &Tensor, o: &Tensor) [g, o] => sigmoid_backward(g, o);
|fwd| Pw::new(g, Some(o)).run("SigmoidBackwardBackward0", A | B, fwd, |gg, x: &Args| Ok([
    when(x.need[0], || ops::sigmoid_backward(gg, x.b()))?,
    when(x.need[1], || {
        let d = ops::add_scalar(&ops::mul_scalar(x.b(), -2)?, 1)?;
        ops::mul(&ops::mul(gg, x.a())?, &d)
    })?,
])));
k!(tanh_backward(g: &Tensor, o: &Tensor) [g, o] => tanh_backward(g, o);
|fwd| Pw::new(g, Some(o)).run("TanhBackwardBackward0", A | B, fwd, |gg, x: &Args| Ok([
    when(x.need[0], || ops::tanh_backward(gg, x.b()))?,
    when(x.need[1], || {
        ops::mul_scalar(&ops::mul(&ops::mul(gg, x.a())?, x.b())?, -2)
    })?,
])));

/// `clamp.Tensor` (`clamp_backward` and `clamp_backward_min_max`): `self` gets the gradient
/// where `min <= self <= max`; `min` where `self < min` (and `min < max` when both are
/// given); `max` where `self > max`, or everywhere `max < min` (the result is then `max`).
/// Ties go to `self` (the subgradient 1 of derivatives.yaml). Broadcast bounds get their
/// gradient summed back to their shape by the engine.
fn clamp_t(
    ks: DispatchKeySet,
    a: &Tensor,
    lo: Option<&Tensor>,
    hi: Option<&Tensor>,
) -> Result<Tensor> {
    let k = ks & AFTER_AD;
    let mut ins = vec![a];
    ins.extend(lo);
    ins.extend(hi);
    if !any_rg(&ins) {
        return rd::clamp_tensor(k, a, lo, hi);
    }
    let out = fresh(
        {
            let _g = AutoDispatchBelowADInplaceOrView::new();
            rd::clamp_tensor(k, a, lo, hi)?
        },
        &ins,
    );
    rec(
        "ClampBackward0",
        &[Some(a), lo, hi],
        &[&out],
        &ins,
        &[],
        (lo.is_some(), hi.is_some()),
        |(has_lo, has_hi), s, g, _, m| -> Result<Vec<Option<Tensor>>> {
            let x = &s[0];
            let lo = has_lo.then(|| &s[1]);
            let hi = has_hi.then(|| &s[if *has_lo { 2 } else { 1 }]);
            // Boolean and / or through where (no logical ops needed).
            let and = |p: &Tensor, q: &Tensor| ops::r#where(p, q, p);
            let or = |p: &Tensor, q: &Tensor| ops::r#where(p, p, q);
            let keep = |mask: &Tensor| ops::where_scalar_other(mask, g, 0.0);
            let gx = when(m[0], || match (lo, hi) {
                (Some(l), Some(h)) => keep(&and(&ops::ge(x, l)?, &ops::le(x, h)?)?),
                (Some(l), None) => keep(&ops::ge(x, l)?),
                (None, Some(h)) => keep(&ops::le(x, h)?),
                (None, None) => Ok(g.clone()),
            })?;
            let gl = match lo {
                Some(l) if m[1] => Some(match hi {
                    Some(h) => keep(&and(&ops::lt(x, l)?, &ops::lt(l, h)?)?)?,
                    None => keep(&ops::lt(x, l)?)?,
                }),
                _ => None,
            };
            let gh = match hi {
                Some(h) if m[2] => Some(match lo {
                    Some(l) => keep(&or(&ops::gt(x, h)?, &ops::lt(h, l)?)?)?,
                    None => keep(&ops::gt(x, h)?)?,
                }),
                _ => None,
            };
            Ok(vec![gx, gl, gh])
        },
    );
    Ok(out)
}

/// `div.Scalar_mode`: zero gradient with a rounding mode (the result is piecewise constant),
/// else `grad / other` as `div.Scalar`.
fn div_sm(ks: DispatchKeySet, a: &Tensor, b: Scalar, mode: Option<&str>) -> Result<Tensor> {
    let k = ks & AFTER_AD;
    if !any_rg(&[a]) {
        return rd::div_scalar_mode(k, a, b, mode);
    }
    let fwd = || rd::div_scalar_mode(k, a, b, mode);
    if mode.is_some() {
        Pw::new(a, None).run("DivBackward3", 0, fwd, |g, _| {
            Ok([Some(ops::zeros_like(g)?), None])
        })
    } else {
        Pw::new(a, None)
            .s(b)
            .run("DivBackward3", 0, fwd, |g, x: &Args| {
                Ok([Some(ops::div_scalar(g, x.s)?), None])
            })
    }
}

/// Registers this file's kernels.
pub(crate) fn register(lib: &mut Library) -> Result<()> {
    macro_rules! reg {
        ($($name:literal => $f:ident),* $(,)?) => {
            $(lib.impl_with_static_debug($name, None, KernelFunction::from_fn_with_keys($f), concat!("switchboard_autograd::", stringify!($f), " [Autograd]"))?;)*
        };
    }
    reg! {
        "add.Tensor" => add_t, "add.Scalar" => add_s, "sub.Tensor" => sub_t,
        "sub.Scalar" => sub_s, "rsub.Tensor" => rsub_t, "mul.Tensor" => mul_t,
        "mul.Scalar" => mul_s, "div.Tensor" => div_t, "div.Tensor_mode" => div_tm,
        "div.Scalar" => div_s, "neg" => neg, "exp" => exp, "log" => log, "sqrt" => sqrt,
        "rsqrt" => rsqrt, "abs" => abs, "relu" => relu, "sigmoid" => sigmoid, "tanh" => tanh,
        "gelu" => gelu, "silu" => silu, "pow.Tensor_Scalar" => pow_ts,
        "pow.Tensor_Tensor" => pow_tt, "pow.Scalar" => pow_s, "maximum" => maximum,
        "minimum" => minimum, "where.self" => where_t, "where.ScalarSelf" => where_ss,
        "where.ScalarOther" => where_so, "masked_fill.Scalar" => masked_fill_s,
        "masked_fill.Tensor" => masked_fill_t, "clamp" => clamp, "clamp_min" => clamp_min,
        "clamp_max" => clamp_max, "clamp.Tensor" => clamp_t, "div.Scalar_mode" => div_sm,
        "mse_loss" => mse_loss,
        "threshold_backward" => threshold_backward, "sigmoid_backward" => sigmoid_backward,
        "tanh_backward" => tanh_backward,
    }
    Ok(())
}
