//! `gradcheck` and `gradgradcheck`: compare the gradients autograd computes with finite
//! differences, in f64.

use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::{ScalarType, Tensor};

use crate::grad_mode::{enable_grad, no_grad};
use crate::node::err;
use crate::tensor_ext::AutogradTensor;

fn to_f64(t: &Tensor) -> Result<Tensor> {
    Ok(Tensor::from_vec(t.to_vec_as::<f64>()?, t.sizes())?)
}

fn flat(t: &Tensor) -> Result<Vec<f64>> {
    Ok(t.to_vec_as::<f64>()?)
}

/// Floating inputs as f64 copies (leaves requiring grad where the originals do).
fn f64_inputs(inputs: &[Tensor]) -> Result<Vec<Tensor>> {
    inputs
        .iter()
        .map(|t| {
            if !t.dtype().is_floating_point() {
                return Ok(t.clone());
            }
            let d = to_f64(t)?;
            if t.requires_grad() {
                d.requires_grad_(true)?;
            }
            Ok(d)
        })
        .collect()
}

/// Checks the gradients of `f` with respect to the inputs that require grad against central
/// finite differences (`torch.autograd.gradcheck`). Floating inputs are converted to f64;
/// returns `Ok(true)`, or an error naming the first mismatching Jacobian entry.
pub fn gradcheck(
    f: impl Fn(&[Tensor]) -> Result<Tensor>,
    inputs: &[Tensor],
    eps: f64,
    atol: f64,
    rtol: f64,
) -> Result<bool> {
    check_jacobian(&f, &f64_inputs(inputs)?, eps, atol, rtol, false, "Jacobian")
}

/// Checks the Jacobian of `f` computed with forward-mode AD against central finite
/// differences (`torch.autograd.gradcheck(..., check_forward_ad=True)`): one Jacobian-vector
/// product per element of each input that requires grad, that input made dual with the
/// element's basis tangent. Floating inputs are converted to f64; returns `Ok(true)`, or an
/// error naming the first mismatching entry (or the operator without a forward formula).
pub fn gradcheck_forward_ad(
    f: impl Fn(&[Tensor]) -> Result<Tensor>,
    inputs: &[Tensor],
    eps: f64,
    atol: f64,
    rtol: f64,
) -> Result<bool> {
    let xs = f64_inputs(inputs)?;
    let wrt: Vec<usize> = (0..xs.len()).filter(|&i| xs[i].requires_grad()).collect();
    if wrt.is_empty() {
        return Err(err(
            "gradcheck expects at least one input tensor to require gradient",
        ));
    }
    let _ng = no_grad();
    for &i in &wrt {
        let base = flat(&xs[i])?;
        for e in 0..base.len() {
            let mut onehot = vec![0.0f64; base.len()];
            onehot[e] = 1.0;
            let tangent = Tensor::from_vec(onehot, xs[i].sizes())?;
            let analytical = {
                let level = crate::forward_ad::dual_level()?;
                let mut args = xs.to_vec();
                args[i] = crate::forward_ad::make_dual(&xs[i], &tangent, level.level())?;
                let y = f(&args)?;
                match crate::forward_ad::unpack_dual(&y, level.level())?.1 {
                    Some(t) => flat(&t)?,
                    None => vec![0.0; y.numel() as usize],
                }
            };
            let eval = |delta: f64| -> Result<Vec<f64>> {
                let mut v = base.clone();
                v[e] += delta;
                let mut args = xs.to_vec();
                args[i] = Tensor::from_vec(v, xs[i].sizes())?;
                flat(&f(&args)?)
            };
            let (plus, minus) = (eval(eps)?, eval(-eps)?);
            if analytical.len() != plus.len() {
                return Err(err(format!(
                    "Jacobian computed with forward mode: the tangent has {} elements, the \
                     output {}",
                    analytical.len(),
                    plus.len()
                )));
            }
            for j in 0..plus.len() {
                let num = (plus[j] - minus[j]) / (2.0 * eps);
                let ana = analytical[j];
                if (num - ana).abs() > atol + rtol * num.abs() || ana.is_nan() != num.is_nan() {
                    return Err(err(format!(
                        "Jacobian computed with forward mode mismatch for output 0 with respect \
                         to input {i},\nnumerical:{num}\nanalytical:{ana}\n(at output element \
                         {j}, input element {e})"
                    )));
                }
            }
        }
    }
    Ok(true)
}

// Note [gradgradcheck]
// As torch.autograd.gradgradcheck: the gradients of `f` with respect to its differentiable
// inputs, computed with create_graph for fixed random `grad_outputs` that themselves require
// grad, form a new function of (inputs, grad_outputs); its Jacobian is checked by finite
// differences. That checks every double-backward formula the first backward goes through,
// including the derivatives with respect to the incoming gradients. The numerical side runs
// with grad mode on (the function differentiates inside), and perturbed inputs keep their
// requires_grad flag.

/// Checks second-order gradients of `f` (`torch.autograd.gradgradcheck`): the vector-Jacobian
/// product of `f` with a fixed pseudo-random `grad_output` (entries in [-1, 1), seeded by
/// `seed`), as a function of the inputs and of `grad_output`, is compared with finite
/// differences. Floating inputs are converted to f64; returns `Ok(true)`, or an error
/// naming the first mismatching entry.
pub fn gradgradcheck(
    f: impl Fn(&[Tensor]) -> Result<Tensor>,
    inputs: &[Tensor],
    seed: u64,
    eps: f64,
    atol: f64,
    rtol: f64,
) -> Result<bool> {
    let xs = f64_inputs(inputs)?;
    let wrt: Vec<usize> = (0..xs.len()).filter(|&i| xs[i].requires_grad()).collect();
    if wrt.is_empty() {
        return Err(err(
            "gradgradcheck expects at least one input tensor to require gradient",
        ));
    }
    let y = {
        let _g = enable_grad();
        f(&xs)?
    };
    let go = Tensor::from_vec(pseudo_random(y.numel() as usize, seed), y.sizes())?;
    go.requires_grad_(true)?;
    let n = xs.len();
    let vjp = |args: &[Tensor]| -> Result<Tensor> {
        let (ins, go) = (&args[..n], &args[n]);
        let y = f(ins)?;
        let go = if y.dtype() == ScalarType::Double {
            go.clone()
        } else {
            ops::_to_copy_with(go, ops::ToCopyOptions::default().dtype(y.dtype()))?
        };
        let targets: Vec<Tensor> = wrt.iter().map(|&i| ins[i].clone()).collect();
        let gs = crate::grad(&[y], &targets, &[Some(go)], true, true)?;
        let parts = gs
            .iter()
            .zip(&targets)
            .map(|(g, t)| match g {
                Some(g) => ops::reshape(g, &[-1]),
                // No dependence: a zero gradient without history.
                None => {
                    ops::zeros_with(&[t.numel()], ops::ZerosOptions::default().dtype(t.dtype()))
                }
            })
            .collect::<Result<Vec<_>>>()?;
        ops::cat(&parts)
    };
    let mut all = xs;
    all.push(go);
    check_jacobian(&vjp, &all, eps, atol, rtol, true, "Gradgrad")
}

/// Deterministic values in [-1, 1).
fn pseudo_random(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed ^ 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            2.0 * ((s >> 11) as f64 / (1u64 << 53) as f64) - 1.0
        })
        .collect()
}

/// Compares the Jacobian of `f` at `xs` (already f64) computed by autograd with central
/// differences. `grad_mode_numerical`: evaluate the perturbed calls with grad mode on.
fn check_jacobian(
    f: &dyn Fn(&[Tensor]) -> Result<Tensor>,
    xs: &[Tensor],
    eps: f64,
    atol: f64,
    rtol: f64,
    grad_mode_numerical: bool,
    what: &str,
) -> Result<bool> {
    let wrt: Vec<usize> = (0..xs.len()).filter(|&i| xs[i].requires_grad()).collect();
    if wrt.is_empty() {
        return Err(err(
            "gradcheck expects at least one input tensor to require gradient",
        ));
    }
    let y = {
        let _g = enable_grad();
        f(xs)?
    };
    let ny = y.numel() as usize;
    // Analytical Jacobian, one output element at a time (zero when the output has no
    // history: it does not depend on the inputs).
    let mut analytical = vec![Vec::new(); wrt.len()];
    let wrt_t: Vec<Tensor> = wrt.iter().map(|&i| xs[i].clone()).collect();
    for j in 0..ny {
        if !y.requires_grad() {
            for (k, t) in wrt_t.iter().enumerate() {
                analytical[k].push(vec![0.0; t.numel() as usize]);
            }
            continue;
        }
        let mut onehot = vec![0.0f64; ny];
        onehot[j] = 1.0;
        let go = Tensor::from_vec(onehot, y.sizes())?;
        let go = if y.dtype() == ScalarType::Double {
            go
        } else {
            ops::_to_copy_with(&go, ops::ToCopyOptions::default().dtype(y.dtype()))?
        };
        let gs = {
            let _g = enable_grad();
            crate::grad(std::slice::from_ref(&y), &wrt_t, &[Some(go)], true, false)?
        };
        for (k, g) in gs.iter().enumerate() {
            let n = wrt_t[k].numel() as usize;
            analytical[k].push(match g {
                Some(g) => flat(g)?,
                None => vec![0.0; n],
            });
        }
    }
    // Numerical Jacobian.
    let _ng = (!grad_mode_numerical).then(no_grad);
    for (k, &i) in wrt.iter().enumerate() {
        let base = flat(&xs[i])?;
        for e in 0..base.len() {
            let eval = |delta: f64| -> Result<Vec<f64>> {
                let mut v = base.clone();
                v[e] += delta;
                let mut args = xs.to_vec();
                let p = Tensor::from_vec(v, xs[i].sizes())?;
                if grad_mode_numerical {
                    p.requires_grad_(true)?;
                }
                args[i] = p;
                flat(&f(&args)?)
            };
            let plus = eval(eps)?;
            let minus = eval(-eps)?;
            for j in 0..ny {
                let num = (plus[j] - minus[j]) / (2.0 * eps);
                let ana = analytical[k][j][e];
                if (num - ana).abs() > atol + rtol * num.abs() || ana.is_nan() != num.is_nan() {
                    return Err(err(format!(
                        "{what} mismatch for output 0 with respect to input {i},\n\
                         numerical:{num}\nanalytical:{ana}\n(at output element {j}, input \
                         element {e})"
                    )));
                }
            }
        }
    }
    Ok(true)
}
