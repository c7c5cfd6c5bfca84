//! Autograd kernels of the reductions: sum, mean, amax/amin, max/min, var.

use std::sync::Arc;

use switchboard_dispatcher::{
    AutoDispatchBelowADInplaceOrView, DispatchKeySet, KernelFunction, Library, Result,
};
use switchboard_ops::{self as ops, redispatch as rd};
use switchboard_tensor::{Scalar, ScalarType, Tensor};

use crate::node::{Node, SavedTensor};
use crate::recording::{any_rg, fresh, grad_at, record_with, AFTER_AD};

/// What a reduction formula sees.
struct Args {
    x: Option<Tensor>,
    r: Option<Tensor>,
    idx: Option<Tensor>,
    sizes: Vec<i64>,
    /// Reduced dims, wrapped and sorted.
    dims: Vec<i64>,
    keepdim: bool,
    corr: f64,
}

type RedFn = fn(&Tensor, &Args) -> Result<Tensor>;

struct State {
    x: Option<SavedTensor>,
    r: Option<SavedTensor>,
    idx: Option<SavedTensor>,
    sizes: Vec<i64>,
    dims: Vec<i64>,
    keepdim: bool,
    corr: f64,
    f: RedFn,
}

const X: u8 = 1;
const R: u8 = 2;

/// The reduced dims: all for `None` or `[]`, else wrapped and sorted.
fn wrap_dims(dim: Option<&[i64]>, ndim: usize) -> Vec<i64> {
    let n = ndim as i64;
    match dim {
        Some(d) if !d.is_empty() => {
            let mut v: Vec<i64> = d
                .iter()
                .map(|&x| if x < 0 && n > 0 { x + n } else { x })
                .collect();
            v.sort_unstable();
            v
        }
        _ => (0..n).collect(),
    }
}

/// `t` with the reduced dims put back as size 1 (`restore_reduced_dims`).
fn restore(t: &Tensor, a: &Args) -> Result<Tensor> {
    if a.keepdim || a.sizes.is_empty() {
        return Ok(t.clone());
    }
    let mut t = t.clone();
    for &d in &a.dims {
        t = ops::unsqueeze(&t, d)?;
    }
    Ok(t)
}

fn count(a: &Args) -> i64 {
    a.dims
        .iter()
        .map(|&d| a.sizes[d as usize])
        .product::<i64>()
        .max(0)
}

fn formula(
    st: &State,
    node: &Arc<dyn Node>,
    grads: &[Option<Tensor>],
    _mask: &[bool],
) -> Result<Vec<Option<Tensor>>> {
    let g = grad_at(grads, 0)?;
    let un = |s: &Option<SavedTensor>| s.as_ref().map(|s| s.unpack(node)).transpose();
    let args = Args {
        x: un(&st.x)?,
        r: un(&st.r)?,
        idx: un(&st.idx)?,
        sizes: st.sizes.clone(),
        dims: st.dims.clone(),
        keepdim: st.keepdim,
        corr: st.corr,
    };
    Ok(vec![Some((st.f)(&g, &args)?)])
}

/// The recording path of the reductions over `dim` (all for `None`).
#[allow(clippy::too_many_arguments)]
fn run(
    name: &'static str,
    x: &Tensor,
    dim: Option<&[i64]>,
    keepdim: bool,
    corr: f64,
    save: u8,
    fwd: impl FnOnce() -> Result<Tensor>,
    f: RedFn,
) -> Result<Tensor> {
    let dims = wrap_dims(dim, x.dim());
    let out = {
        let _g = AutoDispatchBelowADInplaceOrView::new();
        fwd()?
    };
    let out = fresh(out, &[x]);
    // The state is made in the node's memory (see Note [Recording cost]).
    let st = || State {
        x: (save & X != 0).then(|| SavedTensor::input(x)),
        r: (save & R != 0).then(|| SavedTensor::output(&out, 0, name)),
        idx: None,
        sizes: x.sizes().to_vec(),
        dims,
        keepdim,
        corr,
        f,
    };
    record_with(name, &[Some(x)], &[Some(&out)], st, formula);
    Ok(out)
}

fn expand_back(g: &Tensor, a: &Args) -> Result<Tensor> {
    ops::expand(&restore(g, a)?, &a.sizes)
}

#[inline(never)]
fn sum_recording(ks: DispatchKeySet, x: &Tensor, dtype: Option<ScalarType>) -> Result<Tensor> {
    let k = ks & AFTER_AD;
    if !any_rg(&[x]) {
        return rd::sum(k, x, dtype);
    }
    run(
        "SumBackward0",
        x,
        None,
        false,
        0.0,
        0,
        || rd::sum(k, x, dtype),
        expand_back,
    )
}

pass_through!(
    fn sum(ks: DispatchKeySet, x: &Tensor, dtype: Option<ScalarType>) -> Result<Tensor>;
    [x] => sum, else sum_recording
);

#[inline(never)]
fn sum_dim_recording(
    ks: DispatchKeySet,
    x: &Tensor,
    dim: Option<&[i64]>,
    keepdim: bool,
    dtype: Option<ScalarType>,
) -> Result<Tensor> {
    let k = ks & AFTER_AD;
    if !any_rg(&[x]) {
        return rd::sum_dim_int_list(k, x, dim, keepdim, dtype);
    }
    let fwd = || rd::sum_dim_int_list(k, x, dim, keepdim, dtype);
    run("SumBackward1", x, dim, keepdim, 0.0, 0, fwd, expand_back)
}

pass_through!(
    fn sum_dim(
        ks: DispatchKeySet,
        x: &Tensor,
        dim: Option<&[i64]>,
        keepdim: bool,
        dtype: Option<ScalarType>,
    ) -> Result<Tensor>;
    [x] => sum_dim_int_list, else sum_dim_recording
);

fn mean_back(g: &Tensor, a: &Args) -> Result<Tensor> {
    ops::div_scalar(&expand_back(g, a)?, count(a))
}

#[inline(never)]
fn mean_recording(ks: DispatchKeySet, x: &Tensor, dtype: Option<ScalarType>) -> Result<Tensor> {
    let k = ks & AFTER_AD;
    if !any_rg(&[x]) {
        return rd::mean(k, x, dtype);
    }
    run(
        "MeanBackward0",
        x,
        None,
        false,
        0.0,
        0,
        || rd::mean(k, x, dtype),
        mean_back,
    )
}

pass_through!(
    fn mean(ks: DispatchKeySet, x: &Tensor, dtype: Option<ScalarType>) -> Result<Tensor>;
    [x] => mean, else mean_recording
);

#[inline(never)]
fn mean_dim_recording(
    ks: DispatchKeySet,
    x: &Tensor,
    dim: Option<&[i64]>,
    keepdim: bool,
    dtype: Option<ScalarType>,
) -> Result<Tensor> {
    let k = ks & AFTER_AD;
    if !any_rg(&[x]) {
        return rd::mean_dim(k, x, dim, keepdim, dtype);
    }
    let fwd = || rd::mean_dim(k, x, dim, keepdim, dtype);
    run("MeanBackward1", x, dim, keepdim, 0.0, 0, fwd, mean_back)
}

pass_through!(
    fn mean_dim(
        ks: DispatchKeySet,
        x: &Tensor,
        dim: Option<&[i64]>,
        keepdim: bool,
        dtype: Option<ScalarType>,
    ) -> Result<Tensor>;
    [x] => mean_dim, else mean_dim_recording
);

/// amax/amin and max()/min(): the gradient is shared evenly among the extremal elements.
fn evenly(g: &Tensor, a: &Args) -> Result<Tensor> {
    let r = restore(a.r.as_ref().expect("saved result"), a)?;
    let g = restore(g, a)?;
    let mask = ops::eq(a.x.as_ref().expect("saved self"), &r)?;
    let n = ops::sum_dim_int_list_with(
        &mask,
        Some(&a.dims),
        ops::SumDimIntListOptions::default().keepdim(true),
    )?;
    ops::where_scalar_other(&mask, &ops::div(&g, &n)?, 0.0)
}

macro_rules! amax_like {
    ($f:ident, $rd:ident, $name:literal) => {
        pass_through!([x] => $rd;
        fn $f(ks: DispatchKeySet, x: &Tensor, dim: &[i64], keepdim: bool) -> Result<Tensor> {
            let k = ks & AFTER_AD;
            if !any_rg(&[x]) {
                return rd::$rd(k, x, dim, keepdim);
            }
            run(
                $name,
                x,
                Some(dim),
                keepdim,
                0.0,
                X | R,
                || rd::$rd(k, x, dim, keepdim),
                evenly,
            )
        });
    };
}
amax_like!(amax, amax, "AmaxBackward0");
amax_like!(amin, amin, "AminBackward0");

macro_rules! max_all {
    ($f:ident, $rd:ident, $name:literal) => {
        pass_through!([x] => $rd;
        fn $f(ks: DispatchKeySet, x: &Tensor) -> Result<Tensor> {
            let k = ks & AFTER_AD;
            if !any_rg(&[x]) {
                return rd::$rd(k, x);
            }
            run($name, x, None, false, 0.0, X | R, || rd::$rd(k, x), evenly)
        });
    };
}
max_all!(max, max, "MaxBackward1");
max_all!(min, min, "MinBackward1");

/// `value_selecting_reduction_backward`: the gradient goes to the selected index.
fn select_back(g: &Tensor, a: &Args) -> Result<Tensor> {
    let g = restore(g, a)?;
    let idx = restore(a.idx.as_ref().expect("saved indices"), a)?;
    let z = ops::zeros_with(
        &a.sizes,
        ops::ZerosOptions::default()
            .dtype(g.dtype())
            .device(g.device()),
    )?;
    ops::scatter_add(&z, a.dims[0], &idx, &g)
}

macro_rules! max_dim {
    ($f:ident, $rd:ident, $name:literal) => {
        pass_through!([x] => $rd;
        fn $f(ks: DispatchKeySet, x: &Tensor, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
            let k = ks & AFTER_AD;
            if !any_rg(&[x]) {
                return rd::$rd(k, x, dim, keepdim);
            }
            let (v, i) = {
                let _g = AutoDispatchBelowADInplaceOrView::new();
                rd::$rd(k, x, dim, keepdim)?
            };
            let v = fresh(v, &[x]);
            let dims = if x.dim() == 0 {
                vec![0]
            } else {
                wrap_dims(Some(&[dim]), x.dim())
            };
            let st = || State {
                x: None,
                r: None,
                idx: Some(SavedTensor::input(&i)),
                sizes: x.sizes().to_vec(),
                dims,
                keepdim: keepdim || x.dim() == 0,
                corr: 0.0,
                f: select_back,
            };
            record_with($name, &[Some(x)], &[Some(&v), Some(&i)], st, formula);
            Ok((v, i))
        });
    };
}
max_dim!(max_dim, max_dim, "MaxBackward0");
max_dim!(min_dim, min_dim, "MinBackward0");

/// `var_backward`: `2 / (N - correction) * grad * (self - mean)`.
fn var_back(g: &Tensor, a: &Args) -> Result<Tensor> {
    let x = a.x.as_ref().expect("saved self");
    let g = restore(g, a)?;
    let m = ops::mean_dim_with(
        x,
        Some(&a.dims),
        ops::MeanDimOptions::default().keepdim(true),
    )?;
    let d = ops::sub(x, &m)?;
    let n = count(a) as f64 - a.corr;
    ops::mul_scalar(&ops::mul(&g, &d)?, 2.0 / n)
}

fn var_impl(
    name: &'static str,
    x: &Tensor,
    dim: Option<&[i64]>,
    corr: f64,
    keepdim: bool,
    fwd: impl FnOnce() -> Result<Tensor>,
) -> Result<Tensor> {
    run(name, x, dim, keepdim, corr, X, fwd, var_back)
}

#[inline(never)]
fn var_recording(ks: DispatchKeySet, x: &Tensor, unbiased: bool) -> Result<Tensor> {
    let k = ks & AFTER_AD;
    if !any_rg(&[x]) {
        return rd::var(k, x, unbiased);
    }
    let c = if unbiased { 1.0 } else { 0.0 };
    var_impl("VarBackward0", x, None, c, false, || {
        rd::var(k, x, unbiased)
    })
}

pass_through!(
    fn var(ks: DispatchKeySet, x: &Tensor, unbiased: bool) -> Result<Tensor>;
    [x] => var, else var_recording
);

#[inline(never)]
fn var_dim_recording(
    ks: DispatchKeySet,
    x: &Tensor,
    dim: Option<&[i64]>,
    unbiased: bool,
    keepdim: bool,
) -> Result<Tensor> {
    let k = ks & AFTER_AD;
    if !any_rg(&[x]) {
        return rd::var_dim(k, x, dim, unbiased, keepdim);
    }
    let c = if unbiased { 1.0 } else { 0.0 };
    var_impl("VarBackward0", x, dim, c, keepdim, || {
        rd::var_dim(k, x, dim, unbiased, keepdim)
    })
}

pass_through!(
    fn var_dim(
        ks: DispatchKeySet,
        x: &Tensor,
        dim: Option<&[i64]>,
        unbiased: bool,
        keepdim: bool,
    ) -> Result<Tensor>;
    [x] => var_dim, else var_dim_recording
);

#[inline(never)]
fn var_correction_recording(
    ks: DispatchKeySet,
    x: &Tensor,
    dim: Option<&[i64]>,
    correction: Option<Scalar>,
    keepdim: bool,
) -> Result<Tensor> {
    let k = ks & AFTER_AD;
    if !any_rg(&[x]) {
        return rd::var_correction(k, x, dim, correction, keepdim);
    }
    let c = correction.map_or(1.0, Scalar::to_f64);
    let fwd = || rd::var_correction(k, x, dim, correction, keepdim);
    var_impl("VarBackward0", x, dim, c, keepdim, fwd)
}

pass_through!(
    fn var_correction(
        ks: DispatchKeySet,
        x: &Tensor,
        dim: Option<&[i64]>,
        correction: Option<Scalar>,
        keepdim: bool,
    ) -> Result<Tensor>;
    [x] => var_correction, else var_correction_recording
);

/// Registers this file's kernels.
pub(crate) fn register(lib: &mut Library) -> Result<()> {
    macro_rules! reg {
        ($($name:literal => $f:ident),* $(,)?) => {
            $(lib.impl_with_static_debug($name, None, KernelFunction::from_fn_with_keys($f), concat!("switchboard_autograd::", stringify!($f), " [Autograd]"))?;)*
        };
    }
    reg! {
        "sum" => sum, "sum.dim_IntList" => sum_dim, "mean" => mean, "mean.dim" => mean_dim,
        "amax" => amax, "amin" => amin, "max" => max, "min" => min, "max.dim" => max_dim,
        "min.dim" => min_dim, "var" => var, "var.dim" => var_dim,
        "var.correction" => var_correction,
    }
    Ok(())
}
