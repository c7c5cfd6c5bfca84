//! ADInplaceOrView kernels: in-place and `out=` operators bump the version counter of the
//! tensor they write; view operators record their base (`_base`).

use switchboard_dispatcher::{
    AutoDispatchBelowADInplaceOrView as Below, DispatchKeySet, KernelFunction, Library, Result,
};
use switchboard_ops::redispatch as rd;
use switchboard_tensor::{Generator, Scalar, ScalarType, Tensor};

use crate::autograd_meta;
use crate::recording::{fresh, AFTER_ADIV};

/// Makes `out` a view of `base`'s base (or of `base`).
fn record_view(base: &Tensor, out: Tensor) -> Tensor {
    let out = fresh(out, &[base]);
    let root = autograd_meta::read(base, |m| m.base.clone())
        .flatten()
        .unwrap_or_else(|| base.clone());
    let grad_mode = crate::is_grad_enabled();
    let version = out.version();
    autograd_meta::with(&out, |m| {
        m.base = Some(root);
        m.bw_view = grad_mode;
        m.attr_version = version;
    });
    out
}

/// Registers this file's kernels.
pub(crate) fn register(lib: &mut Library) -> Result<()> {
    macro_rules! bump {
        ($($name:literal => $rd:ident ($($p:ident : $t:ty),*) writes $w:ident;)*) => {$(
            lib.impl_with_static_debug($name, None, KernelFunction::from_fn_with_keys(
                |ks: DispatchKeySet, $($p: $t),*| -> Result<Tensor> {
                    let r = {
                        let _g = Below::new();
                        rd::$rd(ks & AFTER_ADIV, $($p),*)?
                    };
                    $w.bump_version();
                    Ok(r)
                }), concat!("switchboard_autograd::", stringify!($rd), " [ADInplaceOrView]"))?;
        )*};
    }
    macro_rules! views {
        ($($name:literal => $rd:ident ($($p:ident : $t:ty),*);)*) => {$(
            lib.impl_with_static_debug($name, None, KernelFunction::from_fn_with_keys(
                |ks: DispatchKeySet, x: &Tensor, $($p: $t),*| -> Result<Tensor> {
                    let out = {
                        let _g = Below::new();
                        rd::$rd(ks & AFTER_ADIV, x, $($p),*)?
                    };
                    Ok(record_view(x, out))
                }), concat!("switchboard_autograd::", stringify!($rd), " [ADInplaceOrView]"))?;
        )*};
    }
    bump! {
        "add_.Tensor" => add_(s: &Tensor, o: &Tensor, a: Scalar) writes s;
        "add_.Scalar" => add_scalar_(s: &Tensor, o: Scalar, a: Scalar) writes s;
        "sub_.Tensor" => sub_(s: &Tensor, o: &Tensor, a: Scalar) writes s;
        "sub_.Scalar" => sub_scalar_(s: &Tensor, o: Scalar, a: Scalar) writes s;
        "mul_.Tensor" => mul_(s: &Tensor, o: &Tensor) writes s;
        "mul_.Scalar" => mul_scalar_(s: &Tensor, o: Scalar) writes s;
        "div_.Tensor" => div_(s: &Tensor, o: &Tensor) writes s;
        "div_.Scalar" => div_scalar_(s: &Tensor, o: Scalar) writes s;
        "pow_.Scalar" => pow_(s: &Tensor, o: Scalar) writes s;
        "pow_.Tensor" => pow_tensor_(s: &Tensor, o: &Tensor) writes s;
        "neg_" => neg_(s: &Tensor) writes s;
        "exp_" => exp_(s: &Tensor) writes s;
        "log_" => log_(s: &Tensor) writes s;
        "sqrt_" => sqrt_(s: &Tensor) writes s;
        "rsqrt_" => rsqrt_(s: &Tensor) writes s;
        "abs_" => abs_(s: &Tensor) writes s;
        "relu_" => relu_(s: &Tensor) writes s;
        "sigmoid_" => sigmoid_(s: &Tensor) writes s;
        "tanh_" => tanh_(s: &Tensor) writes s;
        "gelu_" => gelu_(s: &Tensor, a: &str) writes s;
        "silu_" => silu_(s: &Tensor) writes s;
        "masked_fill_.Scalar" => masked_fill_(s: &Tensor, m: &Tensor, v: Scalar) writes s;
        "masked_fill_.Tensor" => masked_fill_tensor_(s: &Tensor, m: &Tensor, v: &Tensor) writes s;
        "clamp_" => clamp_(s: &Tensor, lo: Option<Scalar>, hi: Option<Scalar>) writes s;
        "addmm_" => addmm_(s: &Tensor, a: &Tensor, b: &Tensor, be: Scalar, al: Scalar) writes s;
        "copy_" => copy_(s: &Tensor, src: &Tensor, nb: bool) writes s;
        "fill_.Scalar" => fill_(s: &Tensor, v: Scalar) writes s;
        "fill_.Tensor" => fill_tensor_(s: &Tensor, v: &Tensor) writes s;
        "zero_" => zero_(s: &Tensor) writes s;
        "uniform_" => uniform_(s: &Tensor, a: f64, b: f64, g: Option<&Generator>) writes s;
        "normal_" => normal_(s: &Tensor, a: f64, b: f64, g: Option<&Generator>) writes s;
        "random_.from" => random_(s: &Tensor, a: i64, b: Option<i64>, g: Option<&Generator>) writes s;
        "bernoulli_.float" => bernoulli_(s: &Tensor, p: f64, g: Option<&Generator>) writes s;
        "add.out" => add_out(s: &Tensor, o: &Tensor, a: Scalar, out: &Tensor) writes out;
        "sub.out" => sub_out(s: &Tensor, o: &Tensor, a: Scalar, out: &Tensor) writes out;
        "mul.out" => mul_out(s: &Tensor, o: &Tensor, out: &Tensor) writes out;
        "div.out" => div_out(s: &Tensor, o: &Tensor, out: &Tensor) writes out;
        "div.out_mode" => div_out_mode(s: &Tensor, o: &Tensor, m: Option<&str>, out: &Tensor) writes out;
        "pow.Tensor_Tensor_out" => pow_tensor_tensor_out(s: &Tensor, o: &Tensor, out: &Tensor) writes out;
        "pow.Tensor_Scalar_out" => pow_tensor_scalar_out(s: &Tensor, o: Scalar, out: &Tensor) writes out;
        "maximum.out" => maximum_out(s: &Tensor, o: &Tensor, out: &Tensor) writes out;
        "minimum.out" => minimum_out(s: &Tensor, o: &Tensor, out: &Tensor) writes out;
        "neg.out" => neg_out(s: &Tensor, out: &Tensor) writes out;
        "exp.out" => exp_out(s: &Tensor, out: &Tensor) writes out;
        "log.out" => log_out(s: &Tensor, out: &Tensor) writes out;
        "sqrt.out" => sqrt_out(s: &Tensor, out: &Tensor) writes out;
        "rsqrt.out" => rsqrt_out(s: &Tensor, out: &Tensor) writes out;
        "abs.out" => abs_out(s: &Tensor, out: &Tensor) writes out;
        "sigmoid.out" => sigmoid_out(s: &Tensor, out: &Tensor) writes out;
        "tanh.out" => tanh_out(s: &Tensor, out: &Tensor) writes out;
        "gelu.out" => gelu_out(s: &Tensor, a: &str, out: &Tensor) writes out;
        "silu.out" => silu_out(s: &Tensor, out: &Tensor) writes out;
        "where.self_out" => where_self_out(c: &Tensor, s: &Tensor, o: &Tensor, out: &Tensor) writes out;
        "clamp.out" => clamp_out(s: &Tensor, lo: Option<Scalar>, hi: Option<Scalar>, out: &Tensor) writes out;
        "sum.IntList_out" => sum_int_list_out(s: &Tensor, d: Option<&[i64]>, k: bool, t: Option<ScalarType>, out: &Tensor) writes out;
        "mean.out" => mean_out(s: &Tensor, d: Option<&[i64]>, k: bool, t: Option<ScalarType>, out: &Tensor) writes out;
        "mm.out" => mm_out(s: &Tensor, o: &Tensor, out: &Tensor) writes out;
        "bmm.out" => bmm_out(s: &Tensor, o: &Tensor, out: &Tensor) writes out;
        "addmm.out" => addmm_out(s: &Tensor, a: &Tensor, b: &Tensor, be: Scalar, al: Scalar, out: &Tensor) writes out;
        "cat.out" => cat_out(ts: &[Tensor], d: i64, out: &Tensor) writes out;
        "arange.start_out" => arange_start_out(a: Scalar, b: Scalar, c: Scalar, out: &Tensor) writes out;
    }
    views! {
        "view" => view(size: &[i64]);
        "transpose.int" => transpose(a: i64, b: i64);
        "t" => t();
        "permute" => permute(dims: &[i64]);
        "expand" => expand(size: &[i64], implicit: bool);
        "squeeze" => squeeze();
        "squeeze.dim" => squeeze_dim(d: i64);
        "unsqueeze" => unsqueeze(d: i64);
        "select.int" => select(d: i64, i: i64);
        "slice.Tensor" => slice(d: i64, a: Option<i64>, b: Option<i64>, s: i64);
        "as_strided" => as_strided(size: &[i64], stride: &[i64], off: Option<i64>);
    }
    Ok(())
}
