//! Decompositions are PyTorch's: the programs of `data/make_fx_reference.py`, written here
//! with the same calls, trace to the operators PyTorch's `make_fx` records for them
//! (`data/make_fx_reference.txt`, recorded from torch 2.15 by that script).
//!
//! One difference is expected and removed from PyTorch's lists before comparing:
//! `aten::alias`. make_fx traces tensor subclasses, and autograd treats those differently
//! from plain tensors in places where it makes a shallow copy without calling an operator:
//! `SavedVariable` saving an output (relu's, `_log_softmax`'s, `tanh`'s) and unpacking it
//! (`tensor_data()` / `shallow_copy_and_detach`, which for a subclass dispatches `detach`),
//! and AccumulateGrad storing a new `.grad` (`new_grad.detach()`). make_fx decomposes each
//! such `detach` into `alias`. Switchboard's autograd makes those copies without a call (a
//! shallow alias of the same storage, Note [Tensor identity in a trace]), as PyTorch does for
//! plain tensors, so they are not operator calls here. Everything else, the `ones_like` that
//! starts backward included, is compared as it is, in order.
//!
//! Scalars: Python's `x.mul_(0.9)` passes a wrapped-number tensor to the `.Tensor` overload;
//! the programs below do the same with `Tensor::wrapped_scalar`.
//!
//! Besides whole training steps, single operators are compared (`single:*`: `f(x)` and the
//! backward of its sum). Operators whose traces still differ are left out of that list:
//! - `matmul` with a vector operand: PyTorch calls `dot` and `mv`, which Switchboard lacks
//!   (`mul` + `sum`, `unsqueeze` + `mm` + `squeeze` compute the same values);
//! - `max.dim`'s and `index_select`'s backward: PyTorch's `new_zeros` + `scatter.src` /
//!   `index_add`, here `zeros` + `scatter_add` / `index_add`;
//! - `clamp`'s backward: PyTorch's `scalar_tensor`, `gt`, `lt`, `logical_and_`, `where`, here
//!   `gt`, `lt`, `where`, `where` (the same values);
//! - `amax`'s backward: the same calls in another order (C++ evaluates the arguments of
//!   `scale_grad_by_count` right to left);
//! - `cross_entropy` with label smoothing: PyTorch's in-place `masked_fill_` and `bitwise_not`
//!   against `masked_fill` and `ne`.
//!
//! Python-only calls are not compared either: `torch.tensor([...])` inside a traced function
//! is a `lift_fresh_copy` call; in Rust a tensor made from data is a constant of the graph.

use std::collections::HashMap;

use switchboard_autograd::AutogradTensor;
use switchboard_cpu as _;
use switchboard_dispatcher::Result;
use switchboard_ops::{self as ops, TensorOps};
use switchboard_tensor::Tensor;
use switchboard_trace::{trace, Traced};

/// The reference lists, by program.
fn reference() -> HashMap<String, Vec<String>> {
    let text = include_str!("data/make_fx_reference.txt");
    let mut lists: HashMap<String, Vec<String>> = HashMap::new();
    let mut current = None;
    for line in text.lines() {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        if let Some(title) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = Some(title.to_string());
            lists.insert(title.to_string(), Vec::new());
        } else {
            let title = current
                .as_ref()
                .expect("an operator under a [program] title");
            lists.get_mut(title).unwrap().push(line.to_string());
        }
    }
    lists
}

/// PyTorch's list for `program`, without its `alias` calls (see the module documentation).
fn pytorch(program: &str) -> Vec<String> {
    reference()[program]
        .iter()
        .filter(|op| *op != "aten::alias")
        .cloned()
        .collect()
}

fn requires_grad(sizes: &[i64]) -> Result<Tensor> {
    ops::randn(sizes)?.requires_grad_(true)
}

fn check(program: &str, traced: &Traced) {
    let ours = traced.op_names();
    let theirs = pytorch(program);
    assert_eq!(
        ours, theirs,
        "{program}: our trace (left) and make_fx's (right) differ\n{traced}"
    );
}

fn bias(b: &Tensor) -> ops::LinearOptions<'_> {
    ops::LinearOptions::default().bias(b)
}

#[test]
fn mlp_step_traces_to_make_fx_operators() -> Result<()> {
    let inputs = vec![
        ops::randn(&[8, 64])?,
        ops::randint(10, &[8])?,
        requires_grad(&[128, 64])?,
        requires_grad(&[128])?,
        requires_grad(&[10, 128])?,
        requires_grad(&[10])?,
    ];
    let traced = trace(&inputs, |t| {
        let h = ops::linear_with(&t[0], &t[2], bias(&t[3]))?.relu()?;
        let logits = ops::linear_with(&h, &t[4], bias(&t[5]))?;
        let loss = ops::cross_entropy_loss(&logits, &t[1])?;
        loss.backward()?;
        let mut out = vec![loss];
        out.extend(t[2..].iter().map(|p| p.grad().unwrap()));
        Ok(out)
    })?;
    check("mlp_step", &traced);
    Ok(())
}

#[test]
fn cnn_step_traces_to_make_fx_operators() -> Result<()> {
    let inputs = vec![
        ops::randn(&[4, 1, 28, 28])?,
        ops::randint(10, &[4])?,
        requires_grad(&[32, 1, 3, 3])?,
        requires_grad(&[32])?,
        requires_grad(&[64, 32, 3, 3])?,
        requires_grad(&[64])?,
        requires_grad(&[128, 9216])?,
        requires_grad(&[128])?,
        requires_grad(&[10, 128])?,
        requires_grad(&[10])?,
    ];
    let traced = trace(&inputs, |t| {
        let conv = |x: &Tensor, w: &Tensor, b: &Tensor| {
            ops::conv2d_with(x, w, ops::Conv2dOptions::default().bias(b))
        };
        let h = conv(&t[0], &t[2], &t[3])?.relu()?;
        let h = conv(&h, &t[4], &t[5])?.relu()?;
        let h = ops::max_pool2d(&h, &[2])?;
        let h = ops::flatten_with(&h, ops::FlattenOptions::default().start_dim(1))?;
        let h = ops::linear_with(&h, &t[6], bias(&t[7]))?.relu()?;
        let out = ops::log_softmax(&ops::linear_with(&h, &t[8], bias(&t[9]))?, 1)?;
        let loss = ops::nll_loss(&out, &t[1])?;
        loss.backward()?;
        Ok(vec![loss, t[2].grad().unwrap(), t[4].grad().unwrap()])
    })?;
    check("cnn_step", &traced);
    Ok(())
}

#[test]
fn sgd_momentum_step_traces_to_make_fx_operators() -> Result<()> {
    let inputs = vec![
        ops::randn(&[5, 3])?,
        ops::randn(&[5, 3])?,
        ops::randn(&[5, 3])?,
    ];
    let traced = trace(&inputs, |t| {
        let (p, g, buf) = (&t[0], &t[1], &t[2]);
        ops::add_(&ops::mul_(buf, &Tensor::wrapped_scalar(0.9))?, g)?;
        ops::add_with_(p, buf, ops::AddInplaceOptions::default().alpha(-0.1))?;
        Ok(vec![p.clone(), buf.clone()])
    })?;
    check("sgd_momentum_step", &traced);
    Ok(())
}

#[test]
fn views_and_in_place_writes_trace_to_make_fx_operators() -> Result<()> {
    let traced = trace(&[ops::randn(&[3, 4])?], |t| {
        let x = &t[0];
        let y = ops::transpose(x, 0, 1)?;
        let z = ops::reshape(&y, &[-1])?;
        ops::mul_(x, &Tensor::wrapped_scalar(2))?;
        ops::add_(&ops::select(&y, 0, 0)?, &Tensor::wrapped_scalar(1))?;
        let a = ops::sum_dim_int_list(&ops::mul(&z, &Tensor::wrapped_scalar(3))?, Some(&[0]))?;
        let b = ops::cat(&[x.clone(), ops::t(&y)?])?.mean()?;
        Ok(vec![a, b])
    })?;
    check("views_and_inplace", &traced);
    Ok(())
}

#[test]
fn mse_tanh_step_traces_to_make_fx_operators() -> Result<()> {
    let inputs = vec![
        ops::randn(&[6, 4])?,
        ops::randn(&[6, 2])?,
        requires_grad(&[4, 2])?,
    ];
    let traced = trace(&inputs, |t| {
        let loss = ops::mse_loss(&ops::matmul(&t[0], &t[2])?.tanh()?, &t[1])?;
        loss.backward()?;
        Ok(vec![loss, t[2].grad().unwrap()])
    })?;
    check("mse_tanh_step", &traced);
    Ok(())
}

/// `f(x)` and the backward of its sum, on an `x` of `sizes` that requires grad.
fn single(program: &str, sizes: &[i64], f: impl Fn(&Tensor) -> Result<Tensor>) -> Result<()> {
    let traced = trace(&[requires_grad(sizes)?], |t| {
        let y = f(&t[0])?;
        y.sum()?.backward()?;
        Ok(vec![y, t[0].grad().unwrap()])
    })?;
    check(&format!("single:{program}"), &traced);
    Ok(())
}

fn w(v: f64) -> Tensor {
    Tensor::wrapped_scalar(v)
}

#[test]
fn single_operators_trace_to_make_fx_operators() -> Result<()> {
    single("softmax", &[3, 4], |x| ops::softmax(x, 1))?;
    single("log_softmax", &[3, 4], |x| ops::log_softmax(x, 1))?;
    single("matmul_3d_2d", &[2, 3, 4], |x| {
        ops::matmul(x, &ops::ones(&[4, 5])?)
    })?;
    single("linear_3d", &[2, 3, 4], |x| {
        let (w, b) = (ops::ones(&[5, 4])?, ops::ones(&[5])?);
        ops::linear_with(x, &w, bias(&b))
    })?;
    single("bmm", &[2, 3, 4], |x| ops::bmm(x, &ops::ones(&[2, 4, 2])?))?;
    single("mean_dim", &[3, 4], |x| ops::mean_dim(x, Some(&[1])))?;
    single("sum_dim_keepdim", &[3, 4], |x| {
        let keep = ops::SumDimIntListOptions::default().keepdim(true);
        ops::sum_dim_int_list_with(x, Some(&[1]), keep)
    })?;
    single("var_dim", &[3, 4], |x| {
        ops::var_correction_with(x, ops::VarCorrectionOptions::default().dim(&[1]))
    })?;
    single("flatten", &[3, 4], ops::flatten)?;
    single("squeeze_unsqueeze", &[3, 4], |x| {
        ops::squeeze_dim(&ops::unsqueeze(x, 0)?, 0)
    })?;
    single("permute_contiguous", &[3, 4], |x| {
        ops::contiguous(&ops::permute(x, &[1, 0])?)
    })?;
    single("expand", &[3, 4], |x| ops::expand(x, &[2, 3, 4]))?;
    single("narrow", &[3, 4], |x| ops::narrow(x, 1, 1, 2))?;
    single("stack", &[3, 4], |x| {
        ops::stack(&[x.clone(), ops::mul(x, &w(2.0))?])
    })?;
    single("gelu", &[3, 4], ops::gelu)?;
    single("sigmoid", &[3, 4], ops::sigmoid)?;
    single("tanh", &[3, 4], ops::tanh)?;
    single("silu", &[3, 4], ops::silu)?;
    single("abs", &[3, 4], ops::abs)?;
    single("pow", &[3, 4], |x| ops::pow_tensor_scalar(x, 2))?;
    single("div", &[3, 4], |x| ops::div(x, &w(3.0)))?;
    single("sub", &[3, 4], |x| ops::sub(x, &x.exp()?))?;
    single("sqrt", &[3, 4], |x| {
        ops::sqrt(&ops::add(&ops::mul(x, x)?, &w(1.0))?)
    })?;
    single("layer_norm", &[3, 4], |x| ops::layer_norm(x, &[4]))?;
    single("mse_loss_sum", &[3, 4], |x| {
        let sum = ops::MseLossOptions::default().reduction(2);
        ops::mse_loss_with(x, &ops::zeros(&[3, 4])?, sum)
    })?;
    single("cross_entropy_probs", &[3, 4], |x| {
        ops::cross_entropy_loss(x, &ops::softmax(&ops::ones(&[3, 4])?, 1)?)
    })?;
    single("conv1d", &[1, 3, 5], |x| {
        ops::conv1d(x, &ops::ones(&[2, 3, 2])?)
    })?;
    single("max_pool2d", &[1, 1, 4, 4], |x| ops::max_pool2d(x, &[2]))?;
    single("dropout_eval", &[3, 4], |x| ops::dropout(x, 0.5, false))?;
    Ok(())
}
