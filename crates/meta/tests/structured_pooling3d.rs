//! `avg_pool3d` and `avg_pool3d_backward`, structured as in PyTorch 2.15 (`avg_pool3d.out`
//! and `avg_pool3d_backward.grad_input` with `structured: True`), against values recorded
//! from `torch` 2.15 on the CPU: output geometry of every form on Meta and on the CPU
//! (contiguous whatever the input's layout, channels_last_3d included; `ceil_mode`,
//! `divisor_override`, Long), PyTorch's messages on both devices, the errors only the CPU
//! kernel gives (its dtypes), and Meta kernels that are the meta functions.

mod common;

use switchboard_dispatcher::Result;
use switchboard_ops::{self as ops, TensorOps};
use switchboard_tensor::{Device, MemoryFormat, ScalarType as S, Tensor};

use switchboard_cpu as _;
use switchboard_meta as _;

use common::{DeviceCase, ErrorCase};

fn on(d: Device, sizes: &[i64], dtype: S) -> Tensor {
    Tensor::empty_on(sizes, dtype, d).unwrap()
}

fn f(d: Device, sizes: &[i64]) -> Tensor {
    on(d, sizes, S::Float)
}

fn channels_last_3d(d: Device, sizes: &[i64]) -> Tensor {
    Tensor::empty_with_format(sizes, S::Float, d, MemoryFormat::ChannelsLast3d).unwrap()
}

fn options<'a>(
    stride: &'a [i64],
    padding: &'a [i64],
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Option<i64>,
) -> ops::AvgPool3dOptions<'a> {
    ops::AvgPool3dOptions {
        stride,
        padding,
        ceil_mode,
        count_include_pad,
        divisor_override,
    }
}

/// `avg_pool3d_backward` of gradient `g` and input `x` by a 2-wide window.
fn backward(
    d: Device,
    [g, x]: [&[i64]; 2],
    stride: &[i64],
    padding: &[i64],
    ceil_mode: bool,
    divisor_override: Option<i64>,
) -> Result<Tensor> {
    ops::avg_pool3d_backward(
        &f(d, g),
        &f(d, x),
        &[2],
        stride,
        padding,
        ceil_mode,
        true,
        divisor_override,
    )
}

/// `(name, call, sizes, strides, dtype)` as torch 2.15 gives them.
#[rustfmt::skip]
const CASES: &[DeviceCase] = &[
    ("avg_pool3d of channels_last_3d is contiguous", |d| ops::avg_pool3d(&channels_last_3d(d, &[2, 3, 4, 5, 6]), &[2]), &[2, 3, 2, 2, 3], &[36, 12, 6, 3, 1], S::Float),
    ("avg_pool3d ceil_mode with padding", |d| ops::avg_pool3d_with(&f(d, &[1, 3, 5, 5, 6]), &[2], options(&[2], &[1], true, true, None)), &[1, 3, 3, 3, 4], &[108, 36, 12, 4, 1], S::Float),
    ("avg_pool3d of a 4-d input, ceil_mode, padding not counted", |d| ops::avg_pool3d_with(&f(d, &[3, 5, 7, 6]), &[3, 2, 2], options(&[2, 2, 3], &[1, 0, 1], true, false, None)), &[3, 3, 4, 3], &[36, 12, 3, 1], S::Float),
    ("avg_pool3d of Long with divisor_override", |d| ops::avg_pool3d_with(&on(d, &[3, 4, 4, 4], S::Long), &[2], options(&[1], &[0], false, true, Some(3))), &[3, 3, 3, 3], &[27, 9, 3, 1], S::Long),
    ("avg_pool3d of a transposed double tensor", |d| ops::avg_pool3d(&on(d, &[2, 3, 4, 5, 6], S::Double).transpose(2, 4)?, &[2]), &[2, 3, 3, 2, 2], &[36, 12, 4, 2, 1], S::Double),
    ("avg_pool3d of an empty batch", |d| ops::avg_pool3d(&f(d, &[0, 3, 4, 5, 6]), &[2]), &[0, 3, 2, 2, 3], &[36, 12, 6, 3, 1], S::Float),
    ("avg_pool3d.out of channels_last_3d", |d| ops::avg_pool3d_out(&channels_last_3d(d, &[2, 3, 4, 5, 6]), &[2], &f(d, &[0])), &[2, 3, 2, 2, 3], &[36, 12, 6, 3, 1], S::Float),
    ("avg_pool3d_backward of channels_last_3d is contiguous", |d| ops::avg_pool3d_backward(&f(d, &[2, 3, 2, 2, 3]), &channels_last_3d(d, &[2, 3, 4, 5, 6]), &[2], &[], &[0], false, true, None), &[2, 3, 4, 5, 6], &[360, 120, 30, 6, 1], S::Float),
    ("avg_pool3d_backward of a 4-d input with ceil_mode", |d| backward(d, [&[3, 3, 3, 4], &[3, 5, 5, 6]], &[2], &[1], true, None), &[3, 5, 5, 6], &[150, 30, 6, 1], S::Float),
    ("avg_pool3d_backward.grad_input resized", |d| ops::avg_pool3d_backward_grad_input(&f(d, &[2, 3, 2, 2, 3]), &f(d, &[2, 3, 4, 5, 6]), &[2], &[], &[0], false, true, None, &f(d, &[0])), &[2, 3, 4, 5, 6], &[360, 120, 30, 6, 1], S::Float),
    ("avg_pool3d_backward does not check the batch size", |d| backward(d, [&[3, 3, 2, 2, 3], &[2, 3, 4, 5, 6]], &[2], &[0], false, None), &[2, 3, 4, 5, 6], &[360, 120, 30, 6, 1], S::Float),
];

#[test]
fn geometry_as_pytorch_on_meta_and_cpu() {
    common::assert_geometry_on_meta_and_cpu(CASES);
}

/// PyTorch 2.15's messages (its meta functions' checks), on Meta and on the CPU.
#[rustfmt::skip]
const ERRORS: &[ErrorCase] = &[
    ("kernel_size of two values", |d| ops::avg_pool3d(&f(d, &[1, 3, 4, 5, 6]), &[2, 2]), "avg_pool3d: kernel_size must be a single int, or a tuple of three ints"),
    ("stride of two values", |d| ops::avg_pool3d_with(&f(d, &[1, 3, 4, 5, 6]), &[2], options(&[1, 1], &[0], false, true, None)), "avg_pool3d: stride must be omitted, a single int, or a tuple of three ints"),
    ("padding of two values", |d| ops::avg_pool3d_with(&f(d, &[1, 3, 4, 5, 6]), &[2], options(&[], &[1, 1], false, true, None)), "avg_pool3d: padding must be a single int, or a tuple of three ints"),
    ("kernel_size beyond int", |d| ops::avg_pool3d(&f(d, &[1, 3, 4, 5, 6]), &[1 << 31]), "value cannot be converted to type int without overflow"),
    ("3-d input", |d| ops::avg_pool3d(&f(d, &[3, 5, 6]), &[2]), "non-empty 4D or 5D (batch mode) tensor expected for input"),
    ("divisor_override 0", |d| ops::avg_pool3d_with(&f(d, &[1, 3, 4, 5, 6]), &[2], options(&[], &[0], false, true, Some(0))), "divisor must be not zero"),
    ("kernel_size 0", |d| ops::avg_pool3d(&f(d, &[1, 3, 4, 5, 6]), &[0]), "stride should not be zero"),
    ("negative kernel_size", |d| ops::avg_pool3d_with(&f(d, &[1, 3, 4, 5, 6]), &[-1], options(&[1], &[0], false, true, None)), "kernel size should be greater than zero, but got kT: -1 kH: -1 kW: -1"),
    ("negative stride", |d| ops::avg_pool3d_with(&f(d, &[1, 3, 4, 5, 6]), &[2], options(&[-1], &[0], false, true, None)), "stride should be greater than zero, but got dT: -1 dH: -1 dW: -1"),
    ("negative padding", |d| ops::avg_pool3d_with(&f(d, &[1, 3, 4, 5, 6]), &[2], options(&[1], &[-1], false, true, None)), "pad must be non-negative, but got pad: -1"),
    ("padding above half the kernel", |d| ops::avg_pool3d_with(&f(d, &[1, 3, 4, 5, 6]), &[2], options(&[], &[2], false, true, None)), "pad should be at most half of effective kernel size, but got pad=2, kernel_size=2 and dilation=1"),
    ("input smaller than the kernel", |d| ops::avg_pool3d(&f(d, &[1, 3, 1, 5, 6]), &[2]), "input image (T: 1 H: 5 W: 6) smaller than kernel size (kT: 2 kH: 2 kW: 2)"),
    ("empty channels", |d| ops::avg_pool3d(&f(d, &[2, 0, 4, 5, 6]), &[2]), "avg_pool3d(): Expected input to have non-zero size for non-batch dimensions, but input has sizes [2, 0, 4, 5, 6] with dimension 1 being empty"),
    ("out of another dtype", |d| ops::avg_pool3d_out(&f(d, &[2, 3, 4, 5, 6]), &[2], &on(d, &[0], S::Double)), "Expected out tensor to have dtype float, but got double instead"),
    ("backward of empty channels", |d| backward(d, [&[2, 0, 2, 2, 3], &[2, 0, 4, 5, 6]], &[], &[0], false, None), "avg_pool3d_backward(): Expected input to have non-zero size for non-batch dimensions, but input has sizes [2, 0, 4, 5, 6] with dimension 1 being empty"),
    ("backward input smaller than the kernel", |d| backward(d, [&[2, 3, 2, 2, 3], &[2, 3, 1, 5, 6]], &[], &[0], false, None), "input image (T: 1 H: 5 W: 6) smaller than kernel size (kT: 2 kH: 2 kW: 2)"),
    ("backward of a 3-d input", |d| backward(d, [&[2, 3, 2], &[3, 5, 6]], &[], &[0], false, None), "non-empty 4D or 5D (batch mode) tensor expected for input"),
    ("backward divisor_override 0", |d| backward(d, [&[2, 3, 2, 2, 3], &[2, 3, 4, 5, 6]], &[], &[0], false, Some(0)), "divisor must be not zero"),
    ("backward gradient width", |d| backward(d, [&[2, 3, 2, 2, 4], &[2, 3, 4, 5, 6]], &[], &[0], false, None), "Expected a tensor of dimension 5 and tensor.size[4] == 3 but got: dimension 5 and tensor.size[4] = 4"),
    ("backward gradient channels", |d| backward(d, [&[2, 4, 2, 2, 3], &[2, 3, 4, 5, 6]], &[], &[0], false, None), "Expected a tensor of dimension 5 and tensor.size[1] == 3 but got: dimension 5 and tensor.size[1] = 4"),
    ("backward gradient rank", |d| backward(d, [&[3, 2, 2, 3], &[2, 3, 4, 5, 6]], &[], &[0], false, None), "Expected a tensor of dimension 5 and tensor.size[1] == 3 but got: dimension 4 and tensor.size[1] = 2"),
    ("backward grad_input of another dtype", |d| ops::avg_pool3d_backward_grad_input(&f(d, &[2, 3, 2, 2, 3]), &f(d, &[2, 3, 4, 5, 6]), &[2], &[], &[0], false, true, None, &on(d, &[0], S::Double)), "Expected out tensor to have dtype float, but got double instead"),
];

#[test]
fn errors_as_pytorch_on_meta_and_cpu() {
    common::assert_errors_on_meta_and_cpu(ERRORS);
}

/// The CPU kernels' own errors, after the meta function (PyTorch's dtype dispatch and
/// `data_ptr` checks): its meta device accepts these calls, and so does Meta here.
#[test]
fn the_cpu_kernel_checks_dtypes() {
    let half = |d| ops::avg_pool3d(&on(d, &[1, 3, 4, 5, 6], S::Half), &[2]);
    let int = |d| ops::avg_pool3d(&on(d, &[1, 3, 4, 5, 6], S::Int), &[2]);
    let mixed = |d| {
        let g = on(d, &[2, 3, 2, 2, 3], S::Double);
        ops::avg_pool3d_backward(
            &g,
            &f(d, &[2, 3, 4, 5, 6]),
            &[2],
            &[2],
            &[0],
            false,
            true,
            None,
        )
    };
    let cases: [ErrorCase; 3] = [
        (
            "Half",
            half,
            "\"avg_pool3d_out_frame\" not implemented for 'Half'",
        ),
        (
            "Int",
            int,
            "\"avg_pool3d_out_frame\" not implemented for 'Int'",
        ),
        (
            "a Double gradient of a Float input",
            mixed,
            "expected scalar type Float but found Double",
        ),
    ];
    for (name, call, message) in cases {
        assert!(call(Device::META).is_ok(), "{name} on Meta");
        assert_eq!(
            call(Device::CPU).unwrap_err().first_line(),
            message,
            "{name}"
        );
    }
}

/// The CPU kernel computes into the output it is given: a channels_last_3d `out=` of the
/// right size keeps its layout, as PyTorch's, and holds the values a fresh output does
/// (PyTorch 2.15's kernel writes a contiguous frame into it, which permutes them).
#[test]
fn the_cpu_kernel_computes_into_a_given_output() {
    let x = ops::randn(&[2, 3, 4, 5, 6]).unwrap();
    let y = ops::avg_pool3d(&x, &[2]).unwrap();
    let out = channels_last_3d(Device::CPU, &[2, 3, 2, 2, 3]);
    let r = ops::avg_pool3d_out(&x, &[2], &out).unwrap();
    assert!(r.is_alias_of(&out));
    assert_eq!(r.to_vec::<f32>().unwrap(), y.to_vec::<f32>().unwrap());
}

#[test]
fn meta_kernels_are_meta_functions() {
    common::assert_meta_kernels_are_meta_functions([
        "aten::avg_pool3d",
        "aten::avg_pool3d.out",
        "aten::avg_pool3d_backward",
        "aten::avg_pool3d_backward.grad_input",
    ]);
}
