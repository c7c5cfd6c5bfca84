//! Autograd kernels of the views, copies, concatenation and indexing operators.

use switchboard_dispatcher::{
    AutoDispatchBelowADInplaceOrView as BelowADIV, AutoDispatchBelowAutograd as Below,
    DispatchKeySet, KernelFunction, Library, Result,
};
use switchboard_ops::{self as ops, redispatch as rd};
use switchboard_tensor::{Device, Layout, MemoryFormat, Scalar, ScalarType, Tensor};

use super::{rec, when};
use crate::recording::{any_hint, any_rg, fresh, scale, sum_to, AFTER_AD};

type Grads = Result<Vec<Option<Tensor>>>;

fn wrap(d: i64, n: usize) -> i64 {
    if d < 0 {
        d + n as i64
    } else {
        d
    }
}

fn zeros(sizes: &[i64], like: &Tensor) -> Result<Tensor> {
    ops::zeros_with(
        sizes,
        ops::ZerosOptions::default()
            .dtype(like.dtype())
            .device(like.device()),
    )
}

/// The indices `v` as a tensor on `like`'s device (the gradients it indexes are there).
fn index_tensor(v: Vec<i64>, like: &Tensor) -> Result<Tensor> {
    let t = Tensor::from_vec(v.clone(), &[v.len() as i64])?;
    if like.device() == t.device() {
        return Ok(t);
    }
    ops::_to_copy_with(&t, ops::ToCopyOptions::default().device(like.device()))
}

/// A view kernel: `view!(fn name(params) => redispatch(args); "Name", params, formula)`.
/// The recording path is a separate function (see Note [Autograd fast path] in pointwise.rs).
macro_rules! view {
    ($f:ident ($x:ident $(, $p:ident : $t:ty)*) => $rd:ident($($arg:expr),*); $name:literal, $pv:expr, $form:expr) => {
        #[inline(always)]
        fn $f(ks: DispatchKeySet, $x: &Tensor, $($p: $t),*) -> Result<Tensor> {
            #[inline(never)]
            fn recording(k: DispatchKeySet, $x: &Tensor, $($p: $t),*) -> Result<Tensor> {
                if !crate::is_grad_enabled() {
                    return rd::$rd(k, $x, $($arg),*);
                }
                let out = fresh({ let _g = Below::new(); rd::$rd(k, $x, $($arg),*)? }, &[$x]);
                rec($name, &[Some($x)], &[&out], &[], &[], $pv, $form);
                Ok(out)
            }
            let k = ks & AFTER_AD;
            if !any_hint(&[$x]) {
                return rd::$rd(k, $x, $($arg),*);
            }
            recording(k, $x, $($p),*)
        }
    };
}

view!(view(x, size: &[i64]) => view(size); "ViewBackward0", x.sizes().to_vec(),
    |s, _, g, _, _| -> Grads { Ok(vec![Some(ops::reshape(g, s)?)]) });
view!(transpose(x, d0: i64, d1: i64) => transpose(d0, d1); "TransposeBackward0", (d0, d1),
    |(a, b), _, g, _, _| -> Grads { Ok(vec![Some(ops::transpose(g, *a, *b)?)]) });
view!(t(x) => t(); "TBackward0", (), |_, _, g, _, _| -> Grads { Ok(vec![Some(ops::t(g)?)]) });
view!(permute(x, dims: &[i64]) => permute(dims); "PermuteBackward0", {
        let n = x.dim();
        let mut inv = vec![0i64; n];
        for (i, &d) in dims.iter().enumerate() {
            inv[(wrap(d, n) as usize).min(n.saturating_sub(1))] = i as i64;
        }
        inv
    },
    |inv, _, g, _, _| -> Grads { Ok(vec![Some(ops::permute(g, inv)?)]) });
view!(expand(x, size: &[i64], implicit: bool) => expand(size, implicit); "ExpandBackward0",
    x.sizes().to_vec(), |s, _, g, _, _| -> Grads { Ok(vec![Some(sum_to(g, s)?)]) });
#[allow(clippy::ptr_arg)] // must match BagFn<Vec<i64>>
fn reshape_back(s: &Vec<i64>, _: &[Tensor], g: &Tensor, _: &[Option<Tensor>], _: &[bool]) -> Grads {
    Ok(vec![Some(ops::reshape(g, s)?)])
}
view!(squeeze(x) => squeeze(); "SqueezeBackward0", x.sizes().to_vec(), reshape_back);
view!(squeeze_dim(x, d: i64) => squeeze_dim(d); "SqueezeBackward1", x.sizes().to_vec(), reshape_back);
view!(unsqueeze(x, d: i64) => unsqueeze(d); "UnsqueezeBackward0", x.sizes().to_vec(), reshape_back);
view!(select(x, d: i64, i: i64) => select(d, i); "SelectBackward0", {
    let d = wrap(d, x.dim());
    let n = x.sizes().get(d as usize).copied().unwrap_or(1);
    (x.sizes().to_vec(), d, if i < 0 { i + n } else { i })
},
|(s, d, i), _, g, _, _| -> Grads {
    let z = zeros(s, g)?;
    Ok(vec![Some(ops::index_add(&z, *d, &index_tensor(vec![*i], g)?, &ops::unsqueeze(g, *d)?)?)])
});
view!(slice(x, d: i64, start: Option<i64>, end: Option<i64>, step: i64) => slice(d, start, end, step);
"SliceBackward0", {
    let d = wrap(d, x.dim());
    let n = x.sizes().get(d as usize).copied().unwrap_or(1);
    let fix = |v: i64| (if v < 0 { v + n } else { v }).clamp(0, n);
    let (s, e) = (fix(start.unwrap_or(0)), fix(end.unwrap_or(n)));
    let idx: Vec<i64> = (s..e.max(s)).step_by(step.max(1) as usize).collect();
    (x.sizes().to_vec(), d, idx)
},
|(s, d, idx), _, g, _, _| -> Grads {
    let z = zeros(s, g)?;
    Ok(vec![Some(ops::index_add(&z, *d, &index_tensor(idx.clone(), g)?, g)?)])
});

/// Flat storage positions of every element of a geometry, relative to `base`.
fn positions(sizes: &[i64], strides: &[i64], offset: i64, base: i64) -> Vec<i64> {
    let mut out = vec![offset - base];
    for (&n, &s) in sizes.iter().zip(strides) {
        let prev = std::mem::take(&mut out);
        for p in prev {
            for i in 0..n {
                out.push(p + i * s);
            }
        }
    }
    out
}

/// `as_strided_backward` for inputs whose elements do not overlap: scatter the gradient
/// into a buffer covering both geometries, then read the input's elements back.
#[inline(never)]
fn as_strided_recording(
    ks: DispatchKeySet,
    x: &Tensor,
    size: &[i64],
    stride: &[i64],
    offset: Option<i64>,
) -> Result<Tensor> {
    let k = ks & AFTER_AD;
    if !any_rg(&[x]) {
        return rd::as_strided(k, x, size, stride, offset);
    }
    let out = fresh(
        {
            let _g = Below::new();
            rd::as_strided(k, x, size, stride, offset)?
        },
        &[x],
    );
    let o = offset.unwrap_or(x.storage_offset());
    let base = o.min(x.storage_offset());
    let pout = positions(size, stride, o, base);
    let pin = positions(x.sizes(), x.strides(), x.storage_offset(), base);
    let len = pout.iter().chain(&pin).copied().max().unwrap_or(0) + 1;
    rec(
        "AsStridedBackward0",
        &[Some(x)],
        &[&out],
        &[],
        &[],
        (pout, pin, len, x.sizes().to_vec()),
        |(pout, pin, len, xs), _, g, _, _| -> Grads {
            let buf = ops::index_add(
                &zeros(&[*len], g)?,
                0,
                &index_tensor(pout.clone(), g)?,
                &ops::reshape(g, &[-1])?,
            )?;
            let r = ops::index_select(&buf, 0, &index_tensor(pin.clone(), g)?)?;
            Ok(vec![Some(ops::reshape(&r, xs)?)])
        },
    );
    Ok(out)
}

pass_through!(
    fn as_strided(
        ks: DispatchKeySet,
        x: &Tensor,
        size: &[i64],
        stride: &[i64],
        offset: Option<i64>,
    ) -> Result<Tensor>;
    [x] => as_strided, else as_strided_recording
);

#[inline(never)]
fn clone_recording(ks: DispatchKeySet, x: &Tensor, mf: Option<MemoryFormat>) -> Result<Tensor> {
    let k = ks & AFTER_AD;
    if !any_rg(&[x]) {
        return rd::clone(k, x, mf);
    }
    let out = fresh(
        {
            let _g = BelowADIV::new();
            rd::clone(k, x, mf)?
        },
        &[x],
    );
    rec(
        "CloneBackward0",
        &[Some(x)],
        &[&out],
        &[],
        &[],
        (),
        |_, _, g, _, _| -> Grads { Ok(vec![Some(g.clone())]) },
    );
    Ok(out)
}

pass_through!(
    fn clone(ks: DispatchKeySet, x: &Tensor, mf: Option<MemoryFormat>) -> Result<Tensor>;
    [x] => clone, else clone_recording
);

#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn to_copy_recording(
    ks: DispatchKeySet,
    x: &Tensor,
    dtype: Option<ScalarType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin: Option<bool>,
    nb: bool,
    mf: Option<MemoryFormat>,
) -> Result<Tensor> {
    let k = ks & AFTER_AD;
    if !any_rg(&[x]) {
        return rd::_to_copy(k, x, dtype, layout, device, pin, nb, mf);
    }
    let out = fresh(
        {
            let _g = BelowADIV::new();
            rd::_to_copy(k, x, dtype, layout, device, pin, nb, mf)?
        },
        &[x],
    );
    rec(
        "ToCopyBackward0",
        &[Some(x)],
        &[&out],
        &[],
        &[],
        (x.dtype(), x.device()),
        |(dt, dev), _, g, _, _| -> Grads {
            Ok(vec![Some(ops::_to_copy_with(
                g,
                ops::ToCopyOptions::default().dtype(*dt).device(*dev),
            )?)])
        },
    );
    Ok(out)
}

pass_through!(
    fn to_copy(
        ks: DispatchKeySet,
        x: &Tensor,
        dtype: Option<ScalarType>,
        layout: Option<Layout>,
        device: Option<Device>,
        pin: Option<bool>,
        nb: bool,
        mf: Option<MemoryFormat>,
    ) -> Result<Tensor>;
    [x] => _to_copy, else to_copy_recording
);

fn cat(ks: DispatchKeySet, ts: &[Tensor], dim: i64) -> Result<Tensor> {
    let k = ks & AFTER_AD;
    let refs: Vec<&Tensor> = ts.iter().collect();
    if !any_rg(&refs) {
        return rd::cat(k, ts, dim);
    }
    let out = fresh(
        {
            let _g = BelowADIV::new();
            rd::cat(k, ts, dim)?
        },
        &refs,
    );
    let d = wrap(dim, out.dim());
    let sizes: Vec<Vec<i64>> = ts.iter().map(|t| t.sizes().to_vec()).collect();
    let inputs: Vec<Option<&Tensor>> = ts.iter().map(Some).collect();
    rec(
        "CatBackward0",
        &inputs,
        &[&out],
        &[],
        &[],
        (d, sizes),
        |(d, sizes), _, g, _, m| -> Grads {
            let mut off = 0;
            let mut r = Vec::with_capacity(sizes.len());
            for (s, &need) in sizes.iter().zip(m) {
                if s.len() == 1 && s[0] == 0 && g.dim() != 1 {
                    r.push(None); // legacy empty input, skipped by cat
                    continue;
                }
                let n = s[*d as usize];
                r.push(when(need, || {
                    ops::slice_with(
                        g,
                        ops::SliceOptions::default().dim(*d).start(off).end(off + n),
                    )
                })?);
                off += n;
            }
            Ok(r)
        },
    );
    Ok(out)
}

fn stack(ks: DispatchKeySet, ts: &[Tensor], dim: i64) -> Result<Tensor> {
    let k = ks & AFTER_AD;
    let refs: Vec<&Tensor> = ts.iter().collect();
    if !any_rg(&refs) {
        return rd::stack(k, ts, dim);
    }
    let out = fresh(
        {
            let _g = BelowADIV::new();
            rd::stack(k, ts, dim)?
        },
        &refs,
    );
    let d = wrap(dim, out.dim());
    let inputs: Vec<Option<&Tensor>> = ts.iter().map(Some).collect();
    rec(
        "StackBackward0",
        &inputs,
        &[&out],
        &[],
        &[],
        d,
        |d, _, g, _, m| -> Grads {
            m.iter()
                .enumerate()
                .map(|(i, &need)| when(need, || ops::select(g, *d, i as i64)))
                .collect()
        },
    );
    Ok(out)
}

#[inline(never)]
fn index_select_recording(
    ks: DispatchKeySet,
    x: &Tensor,
    dim: i64,
    idx: &Tensor,
) -> Result<Tensor> {
    let k = ks & AFTER_AD;
    if !any_rg(&[x]) {
        return rd::index_select(k, x, dim, idx);
    }
    let out = fresh(
        {
            let _g = BelowADIV::new();
            rd::index_select(k, x, dim, idx)?
        },
        &[x],
    );
    rec(
        "IndexSelectBackward0",
        &[Some(x)],
        &[&out],
        &[idx],
        &[],
        (x.sizes().to_vec(), dim),
        |(s, d), sv, g, _, _| -> Grads {
            Ok(vec![Some(ops::index_add(&zeros(s, g)?, *d, &sv[0], g)?)])
        },
    );
    Ok(out)
}

pass_through!(
    fn index_select(ks: DispatchKeySet, x: &Tensor, dim: i64, idx: &Tensor) -> Result<Tensor>;
    [x] => index_select, else index_select_recording
);

#[inline(never)]
fn gather_recording(
    ks: DispatchKeySet,
    x: &Tensor,
    dim: i64,
    idx: &Tensor,
    sparse: bool,
) -> Result<Tensor> {
    let k = ks & AFTER_AD;
    if !any_rg(&[x]) {
        return rd::gather(k, x, dim, idx, sparse);
    }
    let out = fresh(
        {
            let _g = BelowADIV::new();
            rd::gather(k, x, dim, idx, sparse)?
        },
        &[x],
    );
    rec(
        "GatherBackward0",
        &[Some(x)],
        &[&out],
        &[idx],
        &[],
        (x.sizes().to_vec(), dim),
        |(s, d), sv, g, _, _| -> Grads {
            Ok(vec![Some(ops::scatter_add(&zeros(s, g)?, *d, &sv[0], g)?)])
        },
    );
    Ok(out)
}

pass_through!(
    fn gather(
        ks: DispatchKeySet,
        x: &Tensor,
        dim: i64,
        idx: &Tensor,
        sparse: bool,
    ) -> Result<Tensor>;
    [x] => gather, else gather_recording
);

#[inline(never)]
fn scatter_add_recording(
    ks: DispatchKeySet,
    x: &Tensor,
    dim: i64,
    idx: &Tensor,
    src: &Tensor,
) -> Result<Tensor> {
    let k = ks & AFTER_AD;
    if !any_rg(&[x, src]) {
        return rd::scatter_add(k, x, dim, idx, src);
    }
    let out = fresh(
        {
            let _g = BelowADIV::new();
            rd::scatter_add(k, x, dim, idx, src)?
        },
        &[x, src],
    );
    rec(
        "ScatterAddBackward0",
        &[Some(x), Some(src)],
        &[&out],
        &[idx],
        &[],
        dim,
        |d, sv, g, _, m| -> Grads {
            Ok(vec![
                when(m[0], || Ok(g.clone()))?,
                when(m[1], || ops::gather(g, *d, &sv[0]))?,
            ])
        },
    );
    Ok(out)
}

pass_through!(
    fn scatter_add(
        ks: DispatchKeySet,
        x: &Tensor,
        dim: i64,
        idx: &Tensor,
        src: &Tensor,
    ) -> Result<Tensor>;
    [x, src] => scatter_add, else scatter_add_recording
);

#[inline(never)]
fn index_add_recording(
    ks: DispatchKeySet,
    x: &Tensor,
    dim: i64,
    idx: &Tensor,
    src: &Tensor,
    alpha: Scalar,
) -> Result<Tensor> {
    let k = ks & AFTER_AD;
    if !any_rg(&[x, src]) {
        return rd::index_add(k, x, dim, idx, src, alpha);
    }
    let out = fresh(
        {
            let _g = BelowADIV::new();
            rd::index_add(k, x, dim, idx, src, alpha)?
        },
        &[x, src],
    );
    rec(
        "IndexAddBackward0",
        &[Some(x), Some(src)],
        &[&out],
        &[idx],
        &[],
        (dim, alpha, src.sizes().to_vec()),
        |(d, a, ss), sv, g, _, m| -> Grads {
            Ok(vec![
                when(m[0], || Ok(g.clone()))?,
                when(m[1], || {
                    let r = scale(&ops::index_select(g, *d, &sv[0])?, *a)?;
                    ops::reshape(&r, ss)
                })?,
            ])
        },
    );
    Ok(out)
}

pass_through!(
    fn index_add(
        ks: DispatchKeySet,
        x: &Tensor,
        dim: i64,
        idx: &Tensor,
        src: &Tensor,
        alpha: Scalar,
    ) -> Result<Tensor>;
    [x, src] => index_add, else index_add_recording
);

/// Registers this file's kernels.
pub(crate) fn register(lib: &mut Library) -> Result<()> {
    macro_rules! reg {
        ($($name:literal => $f:ident),* $(,)?) => {
            $(lib.impl_with_static_debug($name, None, KernelFunction::from_fn_with_keys($f), concat!("switchboard_autograd::", stringify!($f), " [Autograd]"))?;)*
        };
    }
    reg! {
        "view" => view, "transpose.int" => transpose, "t" => t, "permute" => permute,
        "expand" => expand, "squeeze" => squeeze, "squeeze.dim" => squeeze_dim,
        "unsqueeze" => unsqueeze, "select.int" => select, "slice.Tensor" => slice,
        "as_strided" => as_strided, "clone" => clone, "_to_copy" => to_copy, "cat" => cat,
        "stack" => stack, "index_select" => index_select, "gather" => gather,
        "scatter_add" => scatter_add, "index_add" => index_add,
    }
    Ok(())
}
