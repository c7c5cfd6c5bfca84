//! `gradcheck`: compares the gradients autograd computes with finite differences, in f64.

use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::{ScalarType, Tensor};

use crate::grad_mode::no_grad;
use crate::node::err;
use crate::tensor_ext::AutogradTensor;

fn to_f64(t: &Tensor) -> Result<Tensor> {
    Ok(Tensor::from_vec(t.to_vec_as::<f64>()?, t.sizes())?)
}

fn flat(t: &Tensor) -> Result<Vec<f64>> {
    Ok(t.to_vec_as::<f64>()?)
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
    let xs: Vec<Tensor> = inputs
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
        .collect::<Result<_>>()?;
    let wrt: Vec<usize> = (0..xs.len()).filter(|&i| xs[i].requires_grad()).collect();
    if wrt.is_empty() {
        return Err(err(
            "gradcheck expects at least one input tensor to require gradient",
        ));
    }
    let y = f(&xs)?;
    let ny = y.numel() as usize;
    // Analytical Jacobian, one output element at a time.
    let mut analytical = vec![Vec::new(); wrt.len()];
    let wrt_t: Vec<Tensor> = wrt.iter().map(|&i| xs[i].clone()).collect();
    for j in 0..ny {
        let mut onehot = vec![0.0f64; ny];
        onehot[j] = 1.0;
        let go = Tensor::from_vec(onehot, y.sizes())?;
        let go = if y.dtype() == ScalarType::Double {
            go
        } else {
            ops::_to_copy(&go, Some(y.dtype()), None, None, None, false, None)?
        };
        let gs = crate::grad(std::slice::from_ref(&y), &wrt_t, &[Some(go)], true, false)?;
        for (k, g) in gs.iter().enumerate() {
            let n = wrt_t[k].numel() as usize;
            analytical[k].push(match g {
                Some(g) => flat(g)?,
                None => vec![0.0; n],
            });
        }
    }
    // Numerical Jacobian.
    let _ng = no_grad();
    for (k, &i) in wrt.iter().enumerate() {
        let base = flat(&xs[i])?;
        for e in 0..base.len() {
            let eval = |delta: f64| -> Result<Vec<f64>> {
                let mut v = base.clone();
                v[e] += delta;
                let mut args = xs.clone();
                args[i] = Tensor::from_vec(v, xs[i].sizes())?;
                flat(&f(&args)?)
            };
            let plus = eval(eps)?;
            let minus = eval(-eps)?;
            for j in 0..ny {
                let num = (plus[j] - minus[j]) / (2.0 * eps);
                let ana = analytical[k][j][e];
                if (num - ana).abs() > atol + rtol * num.abs() || ana.is_nan() != num.is_nan() {
                    return Err(err(format!(
                        "Jacobian mismatch for output 0 with respect to input {i},\n\
                         numerical:{num}\nanalytical:{ana}\n(at output element {j}, input \
                         element {e})"
                    )));
                }
            }
        }
    }
    Ok(true)
}
