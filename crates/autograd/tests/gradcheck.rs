//! gradcheck of every differentiable operator with an autograd kernel (and a few composite
//! ones through their decomposition), in f64.
#![allow(clippy::cloned_ref_to_slice_refs)] // literal input lists read best

use switchboard_autograd::{gradcheck, AutogradTensor, Result};
use switchboard_cpu as _;
use switchboard_ops as ops;
use switchboard_tensor::{ScalarType, Tensor};

mod common;
use common::*;

fn check(name: &str, f: impl Fn(&[Tensor]) -> Result<Tensor>, inputs: &[Tensor]) {
    match gradcheck(f, inputs, 1e-6, 1e-5, 1e-3) {
        Ok(true) => {}
        Ok(false) => panic!("{name}: gradcheck false"),
        Err(e) => panic!("{name}: {e}"),
    }
}

#[test]
fn pointwise_binary() {
    let (a, b, bb) = (x(&[2, 3], 1), x(&[2, 3], 2), x(&[3], 3));
    check(
        "add",
        |t| ops::add_with(&t[0], &t[1], ops::AddOptions::default().alpha(2)),
        &[a.clone(), bb.clone()],
    );
    check(
        "add_scalar",
        |t| ops::add_scalar_with(&t[0], 3, ops::AddScalarOptions::default().alpha(2)),
        &[a.clone()],
    );
    check(
        "sub",
        |t| ops::sub_with(&t[0], &t[1], ops::SubOptions::default().alpha(3)),
        &[a.clone(), b.clone()],
    );
    check("sub_scalar", |t| ops::sub_scalar(&t[0], 1.5), &[a.clone()]);
    check(
        "rsub",
        |t| ops::rsub_with(&t[0], &t[1], ops::RsubOptions::default().alpha(2)),
        &[a.clone(), bb.clone()],
    );
    check(
        "mul",
        |t| ops::mul(&t[0], &t[1]),
        &[x(&[2, 1], 4), x(&[1, 3], 5)],
    );
    check("mul_scalar", |t| ops::mul_scalar(&t[0], -2.5), &[a.clone()]);
    check(
        "div",
        |t| ops::div(&t[0], &t[1]),
        &[a.clone(), pos(&[3], 6)],
    );
    check(
        "div_mode_none",
        |t| ops::div_tensor_mode(&t[0], &t[1], None),
        &[a.clone(), pos(&[2, 3], 7)],
    );
    check("div_scalar", |t| ops::div_scalar(&t[0], 4), &[a.clone()]);
    check(
        "pow",
        |t| ops::pow(&t[0], &t[1]),
        &[pos(&[2, 3], 8), x(&[2, 3], 9)],
    );
    check(
        "pow_tensor_scalar",
        |t| ops::pow_tensor_scalar(&t[0], 3),
        &[a.clone()],
    );
    check("pow_scalar", |t| ops::pow_scalar(2.5, &t[0]), &[a.clone()]);
    check(
        "maximum",
        |t| ops::maximum(&t[0], &t[1]),
        &[a.clone(), b.clone()],
    );
    check(
        "minimum",
        |t| ops::minimum(&t[0], &t[1]),
        &[a.clone(), bb.clone()],
    );
    check(
        "mse_loss",
        |t| ops::mse_loss(&t[0], &t[1]),
        &[a.clone(), b.clone()],
    );
    check(
        "mse_loss_none",
        |t| ops::mse_loss_with(&t[0], &t[1], ops::MseLossOptions::default().reduction(0)),
        &[a.clone(), b.clone()],
    );
}

#[test]
fn pointwise_unary() {
    let a = x(&[2, 3], 11);
    let p = pos(&[2, 3], 12);
    check("neg", |t| ops::neg(&t[0]), &[a.clone()]);
    check("exp", |t| ops::exp(&t[0]), &[a.clone()]);
    check("log", |t| ops::log(&t[0]), &[p.clone()]);
    check("sqrt", |t| ops::sqrt(&t[0]), &[p.clone()]);
    check("rsqrt", |t| ops::rsqrt(&t[0]), &[p.clone()]);
    check("abs", |t| ops::abs(&t[0]), &[a.clone()]);
    check("relu", |t| ops::relu(&t[0]), &[a.clone()]);
    check("sigmoid", |t| ops::sigmoid(&t[0]), &[a.clone()]);
    check("tanh", |t| ops::tanh(&t[0]), &[a.clone()]);
    check("gelu", |t| ops::gelu(&t[0]), &[a.clone()]);
    check(
        "gelu_tanh",
        |t| ops::gelu_with(&t[0], ops::GeluOptions::default().approximate("tanh")),
        &[a.clone()],
    );
    check("silu", |t| ops::silu(&t[0]), &[a.clone()]);
    check(
        "clamp",
        |t| ops::clamp_with(&t[0], ops::ClampOptions::default().min(-0.5).max(0.5)),
        &[a.clone()],
    );
    check("clamp_min", |t| ops::clamp_min(&t[0], 0.1), &[a.clone()]);
    check("clamp_max", |t| ops::clamp_max(&t[0], 0.1), &[a.clone()]);
    // Bounds that do not require grad (a broadcast row for `max`).
    let lo = r(&[2, 3], 5, -0.6, -0.1);
    let hi = r(&[3], 6, 0.1, 0.6);
    check(
        "clamp.Tensor",
        move |t| {
            ops::clamp_tensor_with(&t[0], ops::ClampTensorOptions::default().min(&lo).max(&hi))
        },
        &[a.clone()],
    );
    // Bounds that require grad (min broadcast; one element with min > max).
    let lo = Tensor::from_vec(vec![-0.5f64, 0.3, -0.2], &[3])
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    let hi = Tensor::from_vec(vec![0.4f64, 0.1, 0.6, 0.5, -0.6, 0.2], &[2, 3])
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    check(
        "clamp.Tensor bounds",
        |t| {
            ops::clamp_tensor_with(
                &t[0],
                ops::ClampTensorOptions::default().min(&t[1]).max(&t[2]),
            )
        },
        &[a.clone(), lo.clone(), hi.clone()],
    );
    check(
        "clamp.Tensor max only",
        |t| ops::clamp_tensor_with(&t[0], ops::ClampTensorOptions::default().max(&t[1])),
        &[a.clone(), hi],
    );
    check(
        "clamp.Tensor min only",
        |t| ops::clamp_tensor_with(&t[0], ops::ClampTensorOptions::default().min(&t[1])),
        &[a.clone(), lo],
    );
    check(
        "div.Scalar_mode",
        |t| ops::div_scalar_mode(&t[0], 2.5, None),
        &[a.clone()],
    );
}

#[test]
fn selection() {
    let (a, b) = (x(&[2, 3], 21), x(&[2, 3], 22));
    let m = mask(&[true, false, true, false, false, true], &[2, 3]);
    check(
        "where",
        |t| ops::r#where(&t[2], &t[0], &t[1]),
        &[a.clone(), b.clone(), m.clone()],
    );
    check(
        "where_scalar_self",
        |t| ops::where_scalar_self(&t[1], 2.0, &t[0]),
        &[a.clone(), m.clone()],
    );
    check(
        "where_scalar_other",
        |t| ops::where_scalar_other(&t[1], &t[0], 2.0),
        &[a.clone(), m.clone()],
    );
    check(
        "masked_fill",
        |t| ops::masked_fill(&t[0], &t[1], 0.5),
        &[a.clone(), m.clone()],
    );
    let v = r(&[], 23, -1.0, 1.0).requires_grad_(true).unwrap();
    check(
        "masked_fill_tensor",
        |t| ops::masked_fill_tensor(&t[0], &t[2], &t[1]),
        &[a.clone(), v, m],
    );
}

#[test]
fn reductions() {
    let a = x(&[2, 3, 4], 31);
    check("sum", |t| ops::sum(&t[0]), &[a.clone()]);
    check(
        "sum_dim",
        |t| ops::sum_dim_int_list(&t[0], Some(&[0, 2])),
        &[a.clone()],
    );
    check(
        "sum_dim_keep",
        |t| {
            ops::sum_dim_int_list_with(
                &t[0],
                Some(&[-1]),
                ops::SumDimIntListOptions::default().keepdim(true),
            )
        },
        &[a.clone()],
    );
    check("mean", |t| ops::mean(&t[0]), &[a.clone()]);
    check(
        "mean_dim",
        |t| ops::mean_dim(&t[0], Some(&[1])),
        &[a.clone()],
    );
    check(
        "amax",
        |t| ops::amax_with(&t[0], ops::AmaxOptions::default().dim(&[1])),
        &[a.clone()],
    );
    check(
        "amin",
        |t| {
            ops::amin_with(
                &t[0],
                ops::AminOptions::default().dim(&[0, 2]).keepdim(true),
            )
        },
        &[a.clone()],
    );
    check("max", |t| ops::max(&t[0]), &[a.clone()]);
    check("min", |t| ops::min(&t[0]), &[a.clone()]);
    check("max_dim", |t| Ok(ops::max_dim(&t[0], 2)?.0), &[a.clone()]);
    check(
        "min_dim",
        |t| Ok(ops::min_dim_with(&t[0], 1, ops::MinDimOptions::default().keepdim(true))?.0),
        &[a.clone()],
    );
    check("var", |t| ops::var(&t[0]), &[a.clone()]);
    check(
        "var_dim",
        |t| {
            ops::var_dim_with(
                &t[0],
                Some(&[1]),
                ops::VarDimOptions::default().unbiased(false).keepdim(true),
            )
        },
        &[a.clone()],
    );
    check(
        "var_correction",
        |t| {
            ops::var_correction_with(
                &t[0],
                ops::VarCorrectionOptions::default()
                    .dim(&[0, 2])
                    .correction(2),
            )
        },
        &[a.clone()],
    );
}

#[test]
fn linalg_and_nn() {
    check(
        "mm",
        |t| ops::mm(&t[0], &t[1]),
        &[x(&[2, 3], 41), x(&[3, 4], 42)],
    );
    check(
        "bmm",
        |t| ops::bmm(&t[0], &t[1]),
        &[x(&[2, 2, 3], 43), x(&[2, 3, 2], 44)],
    );
    check(
        "addmm",
        |t| {
            ops::addmm_with(
                &t[0],
                &t[1],
                &t[2],
                ops::AddmmOptions::default().beta(0.5).alpha(2),
            )
        },
        &[x(&[4], 45), x(&[2, 3], 46), x(&[3, 4], 47)],
    );
    check(
        "convolution",
        |t| {
            ops::convolution(
                &t[0],
                &t[1],
                Some(&t[2]),
                &[1, 1],
                &[1, 0],
                &[1, 1],
                false,
                &[0, 0],
                1,
            )
        },
        &[x(&[1, 2, 4, 3], 48), x(&[3, 2, 2, 2], 49), x(&[3], 50)],
    );
    check(
        "max_pool2d_with_indices",
        |t| {
            Ok(ops::max_pool2d_with_indices_with(
                &t[0],
                &[2, 2],
                ops::MaxPool2dWithIndicesOptions::default().stride(&[2, 2]),
            )?
            .0)
        },
        &[x(&[1, 2, 4, 4], 51)],
    );
    check(
        "_softmax",
        |t| ops::_softmax(&t[0], 1, false),
        &[x(&[2, 3], 52)],
    );
    check(
        "_log_softmax",
        |t| ops::_log_softmax(&t[0], 0, false),
        &[x(&[2, 3], 53)],
    );
    let target = long(&[0, 2, 1], &[3]);
    check(
        "nll_loss_forward",
        |t| Ok(ops::nll_loss_forward(&t[0], &t[1], None, 1, -100)?.0),
        &[x(&[3, 4], 54), target.clone()],
    );
    check(
        "cross_entropy (composite)",
        |t| ops::cross_entropy_loss(&t[0], &t[1]),
        &[x(&[3, 4], 55), target],
    );
    check(
        "native_dropout",
        |t| {
            switchboard_tensor::manual_seed(7);
            Ok(ops::native_dropout(&t[0], 0.5, Some(true))?.0)
        },
        &[x(&[3, 4], 56)],
    );
    check(
        "native_layer_norm",
        |t| Ok(ops::native_layer_norm(&t[0], &[3], Some(&t[1]), Some(&t[2]), 1e-5)?.0),
        &[x(&[2, 3], 57), x(&[3], 58), x(&[3], 59)],
    );
    check(
        "embedding",
        |t| ops::embedding(&t[0], &t[1]),
        &[x(&[4, 3], 60), long(&[1, 3, 1], &[3])],
    );
    check(
        "linear (composite)",
        |t| ops::linear_with(&t[0], &t[1], ops::LinearOptions::default().bias(&t[2])),
        &[x(&[2, 3], 61), x(&[4, 3], 62), x(&[4], 63)],
    );
}

#[test]
fn shapes_and_indexing() {
    let a = x(&[2, 3, 4], 71);
    check("view", |t| ops::view(&t[0], &[6, 4]), &[a.clone()]);
    check(
        "_unsafe_view",
        |t| ops::_unsafe_view(&t[0], &[6, 4]),
        &[a.clone()],
    );
    check(
        "reshape (a copy: clone, _unsafe_view)",
        |t| ops::reshape(&ops::transpose(&t[0], 0, 2)?, &[-1]),
        &[a.clone()],
    );
    check("transpose", |t| ops::transpose(&t[0], 0, 2), &[a.clone()]);
    check("t", |t| ops::t(&t[0]), &[x(&[2, 3], 72)]);
    check("permute", |t| ops::permute(&t[0], &[2, 0, 1]), &[a.clone()]);
    check(
        "expand",
        |t| ops::expand(&t[0], &[2, 3, 4]),
        &[x(&[3, 1], 73)],
    );
    check("squeeze", |t| ops::squeeze(&t[0]), &[x(&[2, 1, 3], 74)]);
    check(
        "squeeze_dim",
        |t| ops::squeeze_dim(&t[0], 1),
        &[x(&[2, 1, 3], 75)],
    );
    check("unsqueeze", |t| ops::unsqueeze(&t[0], -1), &[a.clone()]);
    check("select", |t| ops::select(&t[0], 1, -1), &[a.clone()]);
    check(
        "slice",
        |t| {
            ops::slice_with(
                &t[0],
                ops::SliceOptions::default().dim(2).start(1).end(4).step(2),
            )
        },
        &[a.clone()],
    );
    check(
        "as_strided",
        |t| {
            ops::as_strided_with(
                &t[0],
                &[2, 2],
                &[1, 2],
                ops::AsStridedOptions::default().storage_offset(1),
            )
        },
        &[x(&[6], 76)],
    );
    check("clone", |t| ops::clone(&t[0]), &[a.clone()]);
    // Through f32: looser tolerances.
    let to_f32 = |t: &[Tensor]| {
        let f = ops::_to_copy_with(
            &t[0],
            ops::ToCopyOptions::default().dtype(ScalarType::Float),
        )?;
        ops::mul(&f, &f)
    };
    assert!(gradcheck(to_f32, &[x(&[3], 77)], 1e-3, 1e-3, 1e-2).unwrap());
    check(
        "cat",
        |t| {
            ops::cat_with(
                &[t[0].clone(), t[1].clone()],
                ops::CatOptions::default().dim(1),
            )
        },
        &[x(&[2, 1], 78), x(&[2, 3], 79)],
    );
    check(
        "stack",
        |t| {
            ops::stack_with(
                &[t[0].clone(), t[1].clone()],
                ops::StackOptions::default().dim(1),
            )
        },
        &[x(&[2, 3], 80), x(&[2, 3], 81)],
    );
    let idx = long(&[2, 0, 2], &[3]);
    check(
        "index_select",
        |t| ops::index_select(&t[0], 1, &t[1]),
        &[a.clone(), idx.clone()],
    );
    let gidx = long(&[0, 1, 1, 0, 2, 2], &[2, 3]);
    check(
        "gather",
        |t| ops::gather(&t[0], 1, &t[1]),
        &[x(&[2, 3], 82), gidx.clone()],
    );
    check(
        "scatter_add",
        |t| ops::scatter_add(&t[0], 1, &t[2], &t[1]),
        &[x(&[2, 3], 83), x(&[2, 3], 84), gidx],
    );
    check(
        "index_add",
        |t| {
            ops::index_add_with(
                &t[0],
                0,
                &t[2],
                &t[1],
                ops::IndexAddOptions::default().alpha(2),
            )
        },
        &[x(&[3, 2], 85), x(&[3, 2], 86), idx],
    );
    check(
        "reshape+narrow (composite)",
        |t| ops::narrow(&ops::reshape(&t[0], &[4, 6])?, 1, 1, 3),
        &[a],
    );
}

#[test]
fn inplace_variants() {
    // In-place ops on a non-leaf (a fresh product), recorded as Note [CopySlices] says.
    let a = x(&[2, 3], 91);
    let b = x(&[2, 3], 92);
    let p = pos(&[2, 3], 93);
    macro_rules! ip {
        ($name:literal, $ins:expr, |$y:ident, $t:ident| $body:expr) => {
            check(
                $name,
                |$t| {
                    let $y = ops::mul_scalar(&$t[0], 1.0)?;
                    $body?;
                    Ok($y)
                },
                $ins,
            )
        };
    }
    ip!("add_", &[a.clone(), b.clone()], |y, t| ops::add_with_(
        &y,
        &t[1],
        ops::AddInplaceOptions::default().alpha(2)
    ));
    ip!("add_scalar_", &[a.clone()], |y, t| ops::add_scalar_(&y, 2));
    ip!("sub_", &[a.clone(), b.clone()], |y, t| ops::sub_(&y, &t[1]));
    ip!("mul_", &[a.clone(), b.clone()], |y, t| ops::mul_(&y, &t[1]));
    ip!("mul_scalar_", &[a.clone()], |y, t| ops::mul_scalar_(&y, 3));
    ip!("div_", &[a.clone(), p.clone()], |y, t| ops::div_(&y, &t[1]));
    ip!("pow_", &[p.clone()], |y, t| ops::pow_(&y, 2));
    ip!("exp_", &[a.clone()], |y, t| ops::exp_(&y));
    ip!("tanh_", &[a.clone()], |y, t| ops::tanh_(&y));
    ip!("sigmoid_", &[a.clone()], |y, t| ops::sigmoid_(&y));
    ip!("relu_", &[a.clone()], |y, t| ops::relu_(&y));
    ip!("clamp_", &[a.clone()], |y, t| ops::clamp_with_(
        &y,
        ops::ClampInplaceOptions::default().min(-0.3).max(0.3)
    ));
    ip!("copy_", &[a.clone(), x(&[3], 94)], |y, t| ops::copy_(
        &y, &t[1]
    ));
    ip!(
        "addmm_",
        &[a.clone(), x(&[2, 2], 95), x(&[2, 3], 96)],
        |y, t| ops::addmm_(&y, &t[1], &t[2])
    );
}
