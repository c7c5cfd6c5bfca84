//! The structured families' meta functions against PyTorch 2.15 (values recorded from
//! `torch` on the meta and CPU devices): output sizes, strides (memory-format propagation)
//! and dtypes (type promotion), the in-place broadcast error, the `out=` dtype rules, and
//! `out=` resizing with PyTorch's warning (on Meta and CPU alike: both go through
//! `resize_output`).

mod common;

use std::sync::{Arc, Mutex};

use switchboard_dispatcher::{set_warning_handler, Result};
use switchboard_ops::{self as ops, TensorOps};
use switchboard_tensor::{Device, ScalarType as S, Tensor};

use switchboard_cpu as _;
use switchboard_meta as _;

use common::{channels_last, ErrorCase};

fn e(sizes: &[i64], dtype: S) -> Tensor {
    Tensor::empty_on(sizes, dtype, Device::META).unwrap()
}

fn f(sizes: &[i64]) -> Tensor {
    e(sizes, S::Float)
}

type Case = (
    &'static str,
    fn() -> Result<Tensor>,
    &'static [i64],
    &'static [i64],
    S,
);

/// `(name, call, sizes, strides, dtype)` as PyTorch 2.15 gives them.
const CASES: &[Case] = &[
    (
        "mse_loss broadcast, promoted, unreduced",
        || {
            let b = Tensor::empty_on(&[4, 3], S::Double, Device::META)?;
            ops::mse_loss_with(
                &f(&[2, 1, 3]),
                &b,
                ops::MseLossOptions::default().reduction(0),
            )
        },
        &[2, 4, 3],
        &[12, 3, 1],
        S::Double,
    ),
    (
        "mse_loss mean",
        || {
            ops::mse_loss(
                &f(&[2, 1, 3]),
                &Tensor::empty_on(&[4, 3], S::Double, Device::META)?,
            )
        },
        &[],
        &[],
        S::Double,
    ),
    (
        "add channels_last + row",
        || ops::add(&channels_last(&[2, 3, 4, 5]), &f(&[5])),
        &[2, 3, 4, 5],
        &[60, 1, 15, 3],
        S::Float,
    ),
    (
        "add transposed + contiguous",
        || ops::add(&f(&[3, 4]).t()?, &f(&[4, 3])),
        &[4, 3],
        &[1, 4],
        S::Float,
    ),
    (
        "add long + float row",
        || ops::add(&e(&[2, 3], S::Long), &f(&[3])),
        &[2, 3],
        &[3, 1],
        S::Float,
    ),
    (
        "add int + 0-dim double",
        || ops::add(&e(&[2], S::Int), &Tensor::scalar_tensor(1.5, S::Double)),
        &[2],
        &[1],
        S::Double,
    ),
    (
        "div long",
        || ops::div(&e(&[2], S::Long), &e(&[2], S::Long)),
        &[2],
        &[1],
        S::Float,
    ),
    (
        "div floor long",
        || ops::div_tensor_mode(&e(&[2], S::Long), &e(&[2], S::Long), Some("floor")),
        &[2],
        &[1],
        S::Long,
    ),
    (
        "eq broadcast",
        || ops::eq(&f(&[2, 1]), &f(&[3])),
        &[2, 3],
        &[3, 1],
        S::Bool,
    ),
    (
        "lt int < 2.5",
        || ops::lt_scalar(&e(&[2], S::Int), 2.5),
        &[2],
        &[1],
        S::Bool,
    ),
    (
        "sigmoid long",
        || ops::sigmoid(&e(&[2, 3], S::Long)),
        &[2, 3],
        &[3, 1],
        S::Float,
    ),
    (
        "neg transposed",
        || ops::neg(&f(&[3, 4]).t()?),
        &[4, 3],
        &[1, 4],
        S::Float,
    ),
    (
        "maximum bool, uint8",
        || ops::maximum(&e(&[2], S::Bool), &e(&[2], S::Byte)),
        &[2],
        &[1],
        S::Byte,
    ),
    (
        "threshold_backward follows self",
        || ops::threshold_backward(&f(&[3, 4]).t()?, &f(&[4, 3]), 0.5),
        &[4, 3],
        &[3, 1],
        S::Float,
    ),
    (
        "sum int keepdim",
        || {
            ops::sum_dim_int_list_with(
                &e(&[2, 3, 4], S::Int),
                Some(&[0, 2]),
                ops::SumDimIntListOptions::default().keepdim(true),
            )
        },
        &[1, 3, 1],
        &[3, 1, 1],
        S::Long,
    ),
    (
        "sum dtype",
        || {
            ops::sum_dim_int_list_with(
                &f(&[2, 3]).t()?,
                Some(&[1]),
                ops::SumDimIntListOptions::default().dtype(S::Double),
            )
        },
        &[3],
        &[1],
        S::Double,
    ),
    (
        "sum all keepdim",
        || {
            ops::sum_dim_int_list_with(
                &f(&[2, 3]),
                None,
                ops::SumDimIntListOptions::default().keepdim(true),
            )
        },
        &[1, 1],
        &[1, 1],
        S::Float,
    ),
    (
        "mean last",
        || ops::mean_dim(&f(&[2, 3, 4]), Some(&[-1])),
        &[2, 3],
        &[3, 1],
        S::Float,
    ),
    (
        "sum out long into float",
        || ops::sum_int_list_out(&e(&[2, 3], S::Long), Some(&[1]), &f(&[0])),
        &[2],
        &[1],
        S::Float,
    ),
    (
        "add out resized gets the meta strides",
        || ops::add_out(&f(&[3, 4]).t()?, &f(&[4, 3]), &f(&[0])),
        &[4, 3],
        &[1, 4],
        S::Float,
    ),
    (
        "eq_ keeps self's dtype",
        || f(&[2]).eq_tensor_(&f(&[2])),
        &[2],
        &[1],
        S::Float,
    ),
    (
        "_softmax of channels_last is contiguous",
        || ops::_softmax(&channels_last(&[2, 3, 4, 5]), 1, false),
        &[2, 3, 4, 5],
        &[60, 20, 5, 1],
        S::Float,
    ),
    (
        "_log_softmax of transposed",
        || ops::_log_softmax(&f(&[2, 3]).t()?, 0, false),
        &[3, 2],
        &[2, 1],
        S::Float,
    ),
    (
        "_softmax half_to_float",
        || ops::_softmax(&e(&[2, 3], S::Half), -1, true),
        &[2, 3],
        &[3, 1],
        S::Float,
    ),
    (
        "_softmax_backward_data float grad of half input",
        || ops::_softmax_backward_data(&f(&[2, 3]), &f(&[2, 3]), 1, S::Half),
        &[2, 3],
        &[3, 1],
        S::Half,
    ),
    (
        "_log_softmax_backward_data out resized",
        || {
            ops::_log_softmax_backward_data_out(
                &f(&[3, 2]).t()?,
                &f(&[2, 3]),
                1,
                S::Float,
                &f(&[0]),
            )
        },
        &[2, 3],
        &[3, 1],
        S::Float,
    ),
    (
        "nll_loss_forward none",
        || Ok(ops::nll_loss_forward(&f(&[3, 4]), &e(&[3], S::Long), None, 0, -100)?.0),
        &[3],
        &[1],
        S::Float,
    ),
    (
        "nll_loss_forward total_weight",
        || Ok(ops::nll_loss_forward(&e(&[3, 4], S::Double), &e(&[3], S::Byte), None, 0, -100)?.1),
        &[],
        &[],
        S::Double,
    ),
    (
        "nll_loss_forward mean of one sample",
        || Ok(ops::nll_loss_forward(&f(&[4]), &e(&[1], S::Long), None, 1, -100)?.0),
        &[],
        &[],
        S::Float,
    ),
    (
        "nll_loss_forward.output resized",
        || {
            let (loss, _) = ops::nll_loss_forward_output(
                &f(&[3, 4]),
                &e(&[3], S::Long),
                Some(&f(&[4])),
                0,
                -100,
                &f(&[0]),
                &f(&[0]),
            )?;
            Ok(loss)
        },
        &[3],
        &[1],
        S::Float,
    ),
    (
        "nll_loss_backward of transposed self",
        || {
            ops::nll_loss_backward(
                &f(&[]),
                &f(&[3, 4]).t()?,
                &e(&[4], S::Long),
                None,
                1,
                -100,
                &f(&[]),
            )
        },
        &[4, 3],
        &[3, 1],
        S::Float,
    ),
    (
        "mm of transposed",
        || ops::mm(&f(&[3, 2]).t()?, &f(&[4, 3]).t()?),
        &[2, 4],
        &[4, 1],
        S::Float,
    ),
    (
        "mm out resized",
        || {
            ops::mm_out(
                &e(&[2, 3], S::Long),
                &e(&[3, 4], S::Long),
                &e(&[0], S::Long),
            )
        },
        &[2, 4],
        &[4, 1],
        S::Long,
    ),
    (
        "bmm",
        || ops::bmm(&e(&[2, 2, 3], S::Double), &e(&[2, 3, 5], S::Double)),
        &[2, 2, 5],
        &[10, 5, 1],
        S::Double,
    ),
    (
        "addmm broadcasts self",
        || ops::addmm(&f(&[3]), &f(&[2, 3]), &f(&[3, 3]).t()?),
        &[2, 3],
        &[3, 1],
        S::Float,
    ),
    (
        "addmm_ keeps self's strides",
        || ops::addmm_(&f(&[2, 3]).t()?, &f(&[3, 3]), &f(&[3, 2])),
        &[3, 2],
        &[1, 3],
        S::Float,
    ),
    (
        "addmm out of another layout is not restrided",
        || ops::addmm_out(&f(&[4]), &f(&[2, 3]), &f(&[3, 4]), &f(&[4, 2]).t()?),
        &[2, 4],
        &[1, 2],
        S::Float,
    ),
    (
        "max_pool2d_with_indices of channels_last",
        || Ok(ops::max_pool2d_with_indices(&channels_last(&[2, 3, 6, 6]), &[2])?.0),
        &[2, 3, 3, 3],
        &[27, 1, 9, 3],
        S::Float,
    ),
    (
        "max_pool2d_with_indices indices",
        || Ok(ops::max_pool2d_with_indices(&f(&[3, 6, 6]).transpose(1, 2)?, &[2])?.1),
        &[3, 3, 3],
        &[9, 3, 1],
        S::Long,
    ),
    (
        "max_pool2d_with_indices.out indices of channels_last",
        || {
            Ok(ops::max_pool2d_with_indices_out(
                &channels_last(&[2, 3, 6, 6]),
                &[2],
                &f(&[0]),
                &e(&[0], S::Long),
            )?
            .1)
        },
        &[2, 3, 3, 3],
        &[27, 1, 9, 3],
        S::Long,
    ),
    (
        "max_pool2d_with_indices_backward of channels_last",
        || {
            let x = channels_last(&[2, 3, 6, 6]);
            let (y, i) = ops::max_pool2d_with_indices(&x, &[2])?;
            ops::max_pool2d_with_indices_backward(&y, &x, &[2], &[2], &[0], &[1], false, &i)
        },
        &[2, 3, 6, 6],
        &[108, 1, 18, 3],
        S::Float,
    ),
    (
        "avg_pool2d of channels_last",
        || ops::avg_pool2d(&channels_last(&[2, 3, 6, 6]), &[2]),
        &[2, 3, 3, 3],
        &[27, 1, 9, 3],
        S::Float,
    ),
    (
        "avg_pool2d of long",
        || ops::avg_pool2d(&e(&[3, 6, 6], S::Long), &[2]),
        &[3, 3, 3],
        &[9, 3, 1],
        S::Long,
    ),
    (
        "avg_pool2d.out of channels_last",
        || ops::avg_pool2d_out(&channels_last(&[2, 3, 6, 6]), &[2], &f(&[0])),
        &[2, 3, 3, 3],
        &[27, 1, 9, 3],
        S::Float,
    ),
    (
        "avg_pool2d_backward of channels_last",
        || {
            let x = channels_last(&[2, 3, 6, 6]);
            ops::avg_pool2d_backward(
                &ops::avg_pool2d(&x, &[2])?,
                &x,
                &[2],
                &[],
                &[0],
                false,
                true,
                None,
            )
        },
        &[2, 3, 6, 6],
        &[108, 1, 18, 3],
        S::Float,
    ),
    (
        "upsample_nearest2d of channels_last",
        || ops::upsample_nearest2d(&channels_last(&[2, 3, 4, 4]), &[8, 8]),
        &[2, 3, 8, 8],
        &[192, 1, 24, 3],
        S::Float,
    ),
    (
        "upsample_nearest2d.out",
        || ops::upsample_nearest2d_out(&e(&[1, 2, 3, 3], S::Byte), &[5, 6], &e(&[0], S::Byte)),
        &[1, 2, 5, 6],
        &[60, 30, 6, 1],
        S::Byte,
    ),
    (
        "upsample_nearest2d_backward of channels_last",
        || ops::upsample_nearest2d_backward(&channels_last(&[2, 3, 8, 8]), &[8, 8], &[2, 3, 4, 4]),
        &[2, 3, 4, 4],
        &[48, 1, 12, 3],
        S::Float,
    ),
    (
        "upsample_bilinear2d of channels_last",
        || ops::upsample_bilinear2d(&channels_last(&[2, 3, 4, 4]), &[6, 5], false),
        &[2, 3, 6, 5],
        &[90, 1, 15, 3],
        S::Float,
    ),
    (
        "upsample_bilinear2d_backward.grad_input resized",
        || {
            ops::upsample_bilinear2d_backward_grad_input(
                &e(&[1, 2, 6, 6], S::Double),
                &[6, 6],
                &[1, 2, 3, 3],
                true,
                &e(&[0], S::Double),
            )
        },
        &[1, 2, 3, 3],
        &[18, 9, 3, 1],
        S::Double,
    ),
];

#[test]
fn meta_functions_give_pytorchs_geometry() {
    let mut failures = Vec::new();
    for (name, call, sizes, strides, dtype) in CASES {
        match call() {
            Ok(t) => {
                let got = (t.sizes(), t.strides(), t.dtype(), t.is_meta(), t.has_data());
                if got != (*sizes, *strides, *dtype, true, false) {
                    failures.push(format!(
                        "{name}: got {got:?}, PyTorch gives {sizes:?} {strides:?} {dtype:?}"
                    ));
                }
            }
            Err(err) => failures.push(format!("{name}: {err}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn on(d: Device, sizes: &[i64], dtype: S) -> Tensor {
    Tensor::empty_on(sizes, dtype, d).unwrap()
}

/// PyTorch 2.15's messages (CPU), which Meta gives as well.
const ERRORS: &[ErrorCase] = &[
    ("add_ broadcast would resize self", |d| on(d, &[2], S::Float).add_(&on(d, &[3, 2], S::Float)), "output with shape [2] doesn't match the broadcast shape [3, 2]"),
    ("mul_ of int by float", |d| on(d, &[2], S::Int).mul_(&on(d, &[2], S::Float)), "result type Float can't be cast to the desired output type Int"),
    ("add out of a narrower dtype", |d| ops::add_out(&on(d, &[2], S::Float), &on(d, &[2], S::Float), &on(d, &[2], S::Long)), "result type Float can't be cast to the desired output type Long"),
    ("sub of bool", |d| ops::sub(&on(d, &[2], S::Bool), &on(d, &[2], S::Float)), "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a mask, use the `~` or `logical_not()` operator instead."),
    ("add float alpha on ints", |d| ops::add_with(&on(d, &[2], S::Long), &on(d, &[2], S::Long), ops::AddOptions::default().alpha(0.5)), "For integral input tensors, argument alpha must not be a floating point number."),
    ("sum repeated dim", |d| ops::sum_dim_int_list(&on(d, &[2, 3], S::Float), Some(&[1, -1])), "dim 1 appears multiple times in the list of dims"),
    ("sum out of another dtype than dtype=", |d| ops::sum_int_list_out_with(&on(d, &[2], S::Long), Some(&[0]), &on(d, &[0], S::Float), ops::SumIntListOutOptions::default().dtype(S::Double)), "Expected out tensor to have dtype double, but got float instead"),
    ("mean of long", |d| ops::mean_dim(&on(d, &[2], S::Long), Some(&[0])), "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: Long"),
    ("div bad rounding mode", |d| ops::div_tensor_mode(&on(d, &[2], S::Float), &on(d, &[2], S::Float), Some("x")), "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found 'x'"),
    ("amax of an empty tensor over all dims", |d| ops::amax(&on(d, &[0, 2], S::Float)), "amax(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument."),
    ("amin over an empty dim, as given", |d| ops::amin_with(&on(d, &[0, 2], S::Float), ops::AminOptions::default().dim(&[-2])), "amin(): Expected reduction dim -2 to have non-zero size."),
    ("amax out of another dtype", |d| ops::amax_out(&on(d, &[2], S::Float), &on(d, &[0], S::Long)), "Expected the dtype for input and out to match, but got Float for input's dtype and Long for out's dtype."),
    ("argmax of an empty tensor", |d| ops::argmax(&on(d, &[0, 2], S::Float)), "argmax(): Expected reduction dim to be specified for input.numel() == 0."),
    ("add shapes", |d| ops::add(&on(d, &[2], S::Float), &on(d, &[3], S::Float)), "The size of tensor a (2) must match the size of tensor b (3) at non-singleton dimension 0"),
    ("_softmax dim", |d| ops::_softmax(&on(d, &[2, 3], S::Float), 2, false), "Dimension out of range (expected to be in range of [-2, 1], but got 2)"),
    ("_log_softmax out of another dtype", |d| ops::_log_softmax_out(&on(d, &[2], S::Float), 0, false, &on(d, &[0], S::Double)), "Expected out tensor to have dtype float, but got double instead"),
    ("_softmax_backward_data sizes", |d| ops::_softmax_backward_data(&on(d, &[2, 3], S::Float), &on(d, &[3, 2], S::Float), 1, S::Float), "Expected tensor for argument #1 'grad' to have same size as tensor for argument #2 'output'; but [2, 3] does not equal [3, 2] (while checking arguments for softmax_backward)"),
    ("_log_softmax_backward_data dim", |d| ops::_log_softmax_backward_data(&on(d, &[2, 3], S::Float), &on(d, &[2, 3], S::Float), -3, S::Float), "Dimension out of range (expected to be in range of [-2, 1], but got -3)"),
    ("nll_loss_forward 3-d input", |d| Ok(ops::nll_loss_forward(&on(d, &[2, 3, 4], S::Float), &on(d, &[2], S::Long), None, 1, -100)?.0), "input tensor should be 1D or 2D"),
    ("nll_loss_forward 2-d target", |d| Ok(ops::nll_loss_forward(&on(d, &[2, 3], S::Float), &on(d, &[2, 1], S::Long), None, 1, -100)?.0), "0D or 1D target tensor expected, multi-target not supported"),
    ("nll_loss_forward int target", |d| Ok(ops::nll_loss_forward(&on(d, &[2, 3], S::Float), &on(d, &[2], S::Int), None, 1, -100)?.0), "expected target dtype to be Long or Byte, but got Int"),
    ("nll_loss_forward 1-d input, 2 targets", |d| Ok(ops::nll_loss_forward(&on(d, &[4], S::Float), &on(d, &[2], S::Long), None, 1, -100)?.0), "For 1D input, 1D target must have size 1, but got target size: 2"),
    ("nll_loss_forward batch", |d| Ok(ops::nll_loss_forward(&on(d, &[3, 4], S::Float), &on(d, &[2], S::Long), None, 1, -100)?.0), "size mismatch (got input: [3, 4], target: [2])"),
    ("nll_loss_forward 0-d target of a batch", |d| Ok(ops::nll_loss_forward(&on(d, &[3, 4], S::Float), &on(d, &[], S::Long), None, 1, -100)?.0), "Dimension specified as 0 but tensor has no dimensions"),
    ("nll_loss_forward weight", |d| Ok(ops::nll_loss_forward(&on(d, &[3, 4], S::Float), &on(d, &[3], S::Long), Some(&on(d, &[3], S::Float)), 1, -100)?.0), "weight tensor should be defined either for all 4 classes or no classes but got weight tensor of shape: [3]"),
    ("nll_loss_forward.output of another dtype", |d| Ok(ops::nll_loss_forward_output(&on(d, &[3, 4], S::Float), &on(d, &[3], S::Long), None, 1, -100, &on(d, &[0], S::Double), &on(d, &[0], S::Float))?.0), "Expected out tensor to have dtype float, but got double instead"),
    ("nll_loss_backward total_weight", |d| ops::nll_loss_backward(&on(d, &[], S::Float), &on(d, &[3, 4], S::Float), &on(d, &[3], S::Long), None, 1, -100, &on(d, &[2], S::Float)), "expected total_weight to be a  single element tensor, got: [2] (2 elements)"),
    ("nll_loss_backward weight", |d| ops::nll_loss_backward(&on(d, &[], S::Float), &on(d, &[3, 4], S::Float), &on(d, &[3], S::Long), Some(&on(d, &[3], S::Float)), 1, -100, &on(d, &[], S::Float)), "weight tensor should be defined either for all or no classes"),
    ("nll_loss_backward per-sample grad", |d| ops::nll_loss_backward(&on(d, &[2], S::Float), &on(d, &[3, 4], S::Float), &on(d, &[3], S::Long), None, 0, -100, &on(d, &[], S::Float)), "Expected a tensor of dimension 1 and tensor.size[0] == 3 but got: dimension 1 and tensor.size[0] = 2"),
    ("nll_loss_backward reduced grad", |d| ops::nll_loss_backward(&on(d, &[2], S::Float), &on(d, &[3, 4], S::Float), &on(d, &[3], S::Long), None, 1, -100, &on(d, &[], S::Float)), "Expected a single element grad_output tensor, but got: [2]"),
    ("mm shapes", |d| ops::mm(&on(d, &[2, 3], S::Float), &on(d, &[4, 5], S::Float)), "mm: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"),
    ("mm of a vector", |d| ops::mm(&on(d, &[2], S::Float), &on(d, &[3, 5], S::Float)), "mm: self must be a matrix, got 1-D tensor"),
    ("mm dtypes", |d| ops::mm(&on(d, &[2, 3], S::Float), &on(d, &[3, 5], S::Double)), "expected m1 and m2 to have the same dtype, but got: float != double"),
    ("mm out of another dtype", |d| ops::mm_out(&on(d, &[2, 3], S::Float), &on(d, &[3, 4], S::Float), &on(d, &[0], S::Double)), "Expected out tensor to have dtype float, but got double instead"),
    ("bmm batch2", |d| ops::bmm(&on(d, &[2, 2, 3], S::Float), &on(d, &[2, 4, 5], S::Float)), "Expected size for first two dimensions of batch2 tensor to be: [2, 3] but got: [2, 4]."),
    ("bmm 2-d batch1", |d| ops::bmm(&on(d, &[2, 3], S::Float), &on(d, &[2, 3, 5], S::Float)), "batch1 must be a 3D tensor"),
    ("bmm dtypes", |d| ops::bmm(&on(d, &[2, 2, 3], S::Float), &on(d, &[2, 3, 5], S::Double)), "expected scalar type Float but found Double"),
    ("addmm shapes", |d| ops::addmm(&on(d, &[3], S::Float), &on(d, &[2, 3], S::Float), &on(d, &[4, 3], S::Float)), "addmm: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x3)"),
    ("addmm of a vector", |d| ops::addmm(&on(d, &[3], S::Float), &on(d, &[2], S::Float), &on(d, &[3, 3], S::Float)), "addmm: self must be a matrix, got 1-D tensor"),
    ("addmm self dtype", |d| ops::addmm(&on(d, &[3], S::Double), &on(d, &[2, 3], S::Float), &on(d, &[3, 3], S::Float)), "self and mat2 must have the same dtype, but got Double and Float"),
    ("addmm self does not broadcast", |d| ops::addmm(&on(d, &[4], S::Float), &on(d, &[2, 3], S::Float), &on(d, &[3, 3], S::Float)), "The expanded size of the tensor (3) must match the existing size (4) at non-singleton dimension 1.  Target sizes: [2, 3].  Tensor sizes: [4]"),
    ("max_pool2d_with_indices of a matrix", |d| Ok(ops::max_pool2d_with_indices(&on(d, &[6, 6], S::Float), &[2])?.0), "non-empty 3D or 4D (batch mode) tensor expected for input"),
    ("max_pool2d_with_indices kernel_size", |d| Ok(ops::max_pool2d_with_indices(&on(d, &[2, 3, 6, 6], S::Float), &[2, 2, 2])?.0), "max_pool2d: kernel_size must either be a single int, or a tuple of two ints"),
    ("max_pool2d_with_indices_backward gradient dtype", |d| ops::max_pool2d_with_indices_backward(&on(d, &[2, 3, 2], S::Double), &on(d, &[2, 4, 4], S::Float), &[2], &[], &[0], &[1], false, &on(d, &[2, 2, 2], S::Long)), "expected dtype float for `gradOutput` but got dtype double"),
    ("max_pool2d_with_indices_backward indices size", |d| ops::max_pool2d_with_indices_backward(&on(d, &[2, 2, 2], S::Float), &on(d, &[2, 4, 4], S::Float), &[2], &[], &[0], &[1], false, &on(d, &[2, 3, 2], S::Long)), "Expected a tensor of dimension 3 and tensor.size[1] == 2 but got: dimension 3 and tensor.size[1] = 3"),
    ("avg_pool2d divisor", |d| ops::avg_pool2d_with(&on(d, &[3, 6, 6], S::Float), &[2], ops::AvgPool2dOptions::default().divisor_override(0)), "divisor must be not zero"),
    ("avg_pool2d padding", |d| ops::avg_pool2d_with(&on(d, &[3, 6, 6], S::Float), &[2], ops::AvgPool2dOptions::default().padding(&[2])), "pad should be at most half of effective kernel size, but got pad=2, kernel_size=2 and dilation=1"),
    ("avg_pool2d_backward gradient size", |d| ops::avg_pool2d_backward(&on(d, &[2, 3, 3, 2], S::Float), &on(d, &[2, 3, 6, 6], S::Float), &[2], &[], &[0], false, true, None), "Expected a tensor of dimension 4 and tensor.size[3] == 3 but got: dimension 4 and tensor.size[3] = 2"),
    ("upsample_nearest2d output_size", |d| ops::upsample_nearest2d(&on(d, &[1, 1, 2, 2], S::Float), &[4, 4, 4]), "It is expected output_size equals to 2, but got size 3"),
    ("upsample_bilinear2d of an empty plane", |d| ops::upsample_bilinear2d(&on(d, &[1, 0, 2, 2], S::Float), &[4, 4], false), "Non-empty 4D data tensor expected but got a tensor with sizes [1, 0, 2, 2]"),
    ("upsample_nearest2d_backward gradient", |d| ops::upsample_nearest2d_backward(&on(d, &[1, 1, 4, 3], S::Float), &[4, 4], &[1, 1, 2, 2]), "Expected grad_output to have the same shape as output; output.size(3) = 4 but got grad_output.size(3) = 3"),
    ("addmm_ would resize self", |d| ops::addmm_(&on(d, &[3], S::Float), &on(d, &[2, 3], S::Float), &on(d, &[3, 3], S::Float)), "Bad in-place call: input tensor size [3] and output tensor size [2, 3] should match"),
];

#[test]
fn meta_functions_fail_with_pytorchs_errors() {
    common::assert_errors_on_meta_and_cpu(ERRORS);
}

/// The warnings `f` emits on this thread.
fn warnings_of(f: impl FnOnce()) -> Vec<String> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    {
        let _guard = set_warning_handler(move |m: &str| sink.lock().unwrap().push(m.to_owned()));
        f();
    }
    let v = seen.lock().unwrap().clone();
    v
}

#[test]
fn out_resize_warns_when_out_had_elements() {
    let expected = "An output with one or more elements was resized since it had shape [2], which does \
                    not match the required output shape [3, 2]. This behavior is deprecated, and in a \
                    future PyTorch release outputs will not be resized unless they have zero elements. \
                    You can explicitly reuse an out tensor t by resizing it, inplace, to zero elements \
                    with t.resize_(0).";
    for d in [Device::META, Device::CPU] {
        let (a, b) = (on(d, &[3, 2], S::Float), on(d, &[2], S::Float));
        let mut resized = None;
        let seen =
            warnings_of(|| resized = Some(ops::add_out(&a, &b, &on(d, &[2], S::Float)).unwrap()));
        assert_eq!(seen, [expected], "{d}");
        assert_eq!(resized.unwrap().sizes(), &[3, 2]);
        // An empty out, or one of the right shape, is resized silently.
        let seen = warnings_of(|| {
            ops::add_out(&a, &b, &on(d, &[0], S::Float)).unwrap();
            ops::add_out(&a, &b, &on(d, &[3, 2], S::Float)).unwrap();
            ops::sum_int_list_out(&a, Some(&[0]), &on(d, &[0], S::Float)).unwrap();
        });
        assert!(seen.is_empty(), "{d}: {seen:?}");
        let seen = warnings_of(|| {
            ops::sum_int_list_out(&a, Some(&[0]), &on(d, &[5], S::Float)).unwrap();
        });
        assert_eq!(seen.len(), 1, "{d}: {seen:?}");
    }
}

/// An `out=` tensor that is resized gets the strides a fresh output would (torchgen's
/// `resize_out` restrides it), on the CPU as on Meta.
#[test]
fn resized_out_follows_the_inputs_layout() {
    for d in [Device::META, Device::CPU] {
        let a = on(d, &[4, 3], S::Float).t().unwrap();
        let out = ops::sigmoid_backward_grad_input(&a, &a, &on(d, &[0], S::Float)).unwrap();
        assert_eq!(
            (out.sizes(), out.strides()),
            (&[3i64, 4][..], &[1i64, 3][..]),
            "{d}"
        );
        let out = ops::add_out(&a, &a, &on(d, &[0], S::Float)).unwrap();
        assert_eq!(out.strides(), &[1, 3], "{d}");
    }
}

/// The Meta kernels of a structured family are its meta function's glue, not a CPU kernel.
#[test]
fn meta_kernels_of_structured_families_are_meta_functions() {
    common::assert_meta_kernels_are_meta_functions([
        "aten::add.Tensor",
        "aten::add_.Tensor",
        "aten::add.out",
        "aten::sum.dim_IntList",
        "aten::eq.Scalar_out",
        "aten::_softmax",
        "aten::_log_softmax.out",
        "aten::_softmax_backward_data.out",
        "aten::_log_softmax_backward_data",
        "aten::nll_loss_forward",
        "aten::nll_loss_forward.output",
        "aten::nll_loss_backward.grad_input",
        "aten::mse_loss",
        "aten::mse_loss.out",
        "aten::sgn",
        "aten::sgn_",
        "aten::sgn.out",
        "aten::mm",
        "aten::mm.out",
        "aten::bmm",
        "aten::addmm",
        "aten::addmm_",
        "aten::addmm.out",
        "aten::max_pool2d_with_indices",
        "aten::max_pool2d_with_indices.out",
        "aten::max_pool2d_with_indices_backward.grad_input",
        "aten::avg_pool2d",
        "aten::avg_pool2d_backward",
        "aten::upsample_nearest2d",
        "aten::upsample_nearest2d_backward.grad_input",
        "aten::upsample_bilinear2d.out",
        "aten::upsample_bilinear2d_backward",
    ]);
}
