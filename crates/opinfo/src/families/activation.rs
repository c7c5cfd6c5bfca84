//! Activations of `Activation.cpp`: `leaky_relu`, `hardtanh`, `elu` and their backwards.

use switchboard_tensor::ScalarType::{BFloat16, Byte, Half, Long};

use crate::info::{Family, OpInfo, Promotion};
use crate::sample::Sample;
use crate::spec::{mask, t};
use crate::{sample, Registry};

/// Samples of an activation over `[-2, 2)` (both sides of the kinks), with its scalars.
fn activation_samples(scalars: &[(&'static str, f64)]) -> Vec<Sample> {
    let with = |mut s: Sample| {
        for &(name, v) in scalars {
            s.kwargs.push((name, v.into()));
        }
        s
    };
    vec![
        sample![t(&[2, 3]).range(-2.0, 2.0)],
        with(sample![t(&[2, 3]).range(-2.0, 2.0)]),
        with(sample![t(&[]).range(-2.0, 2.0)]),
        with(sample![t(&[0, 3])]),
        with(sample![t(&[3, 4]).range(-2.0, 2.0).transposed()]),
        with(sample![t(&[4]).f64().range(-2.0, 2.0)]),
        with(sample![t(&[3]).nan()].no_grad("NaN")),
        with(sample![t(&[2, 3]).dtype(Half).range(-2.0, 2.0)]),
        with(sample![t(&[3]).dtype(BFloat16).range(-2.0, 2.0)]),
    ]
}

/// The piecewise-linear activations.
pub fn register(r: &mut Registry) {
    let mut leaky = activation_samples(&[("negative_slope", 0.2)]);
    // With a negative slope the in-place form's backward fails, as PyTorch's does.
    leaky.push(
        sample![t(&[4]).f64().range(-2.0, 2.0); negative_slope = -0.5]
            .no_grad("leaky_relu_'s backward refuses a negative slope"),
    );
    // No integer kernel ("leaky_relu_cpu" not implemented for 'Long').
    leaky.push(sample![t(&[3]).dtype(Long)].error_from_kernel_dtype());
    r.add(
        OpInfo::new("leaky_relu", Family::Nn)
            .samples(leaky)
            .differentiable()
            .meta()
            .inplace()
            .out()
            .promotion(Promotion::Default),
    );
    let mut hardtanh = activation_samples(&[("min_val", -0.5), ("max_val", 1.5)]);
    hardtanh.push(sample![t(&[5]).dtype(Long).range(-5.0, 5.0); min_val = -1.5, max_val = 2.5]);
    hardtanh.push(sample![t(&[4]).dtype(Byte).range(0.0, 9.0); min_val = 2i64, max_val = 5i64]);
    hardtanh.push(sample![t(&[4]).dtype(Byte).range(0.0, 9.0); min_val = -1i64, max_val = 5i64]);
    hardtanh.push(sample![mask(&[3])].error());
    r.add(
        OpInfo::new("hardtanh", Family::Nn)
            .samples(hardtanh)
            .differentiable()
            .meta()
            .inplace()
            .out()
            .promotion(Promotion::Default),
    );
    let mut elu = activation_samples(&[("alpha", 0.5), ("scale", 1.5), ("input_scale", 2.0)]);
    // With a negative alpha the in-place form's backward fails, as PyTorch's does.
    elu.push(
        sample![t(&[4]).f64().range(-2.0, 2.0); alpha = -0.5]
            .no_grad("elu_'s backward refuses a negative alpha"),
    );
    elu.push(sample![t(&[3]).dtype(Long)].error_from_kernel_dtype());
    r.add(
        OpInfo::new("elu", Family::Nn)
            .samples(elu)
            .differentiable()
            .meta()
            .inplace()
            .out()
            .promotion(Promotion::Default),
    );
    r.add(
        OpInfo::new("elu_backward", Family::Nn)
            .samples(vec![
                sample![
                    t(&[2, 3]),
                    1.0,
                    1.0,
                    1.0,
                    false,
                    t(&[2, 3]).range(-2.0, 2.0)
                ],
                sample![
                    t(&[3, 4]).transposed(),
                    0.5,
                    1.5,
                    2.0,
                    false,
                    t(&[3, 4]).range(-2.0, 2.0)
                ],
                sample![
                    t(&[4]).f64(),
                    0.5,
                    1.5,
                    2.0,
                    true,
                    t(&[4]).f64().range(-0.4, 2.0)
                ],
                sample![t(&[]), 1.0, 1.0, 1.0, false, t(&[])],
                sample![t(&[2, 3]), 1.0, 1.0, 1.0, false, t(&[3]).range(-2.0, 2.0)],
                sample![t(&[3]), -1.0, 1.0, 1.0, true, t(&[3])].error(),
                sample![t(&[2, 3]), 1.0, 1.0, 1.0, false, t(&[4])].error(),
            ])
            .differentiable()
            .meta()
            .out()
            .promotion(Promotion::Default),
    );
    r.add(
        OpInfo::new("leaky_relu_backward", Family::Nn)
            .samples(vec![
                sample![t(&[2, 3]), t(&[2, 3]).range(-2.0, 2.0), 0.2, false],
                sample![
                    t(&[3, 4]).transposed(),
                    t(&[3, 4]).range(-2.0, 2.0),
                    0.01,
                    true
                ],
                sample![t(&[]), t(&[]), 0.3, false],
                sample![t(&[4]).f64(), t(&[4]).f64().range(-2.0, 2.0), 0.2, false],
                sample![t(&[2, 3]), t(&[3]), -0.2, false],
                sample![t(&[3]), t(&[3]), -0.2, true].error(),
                sample![t(&[2, 3]), t(&[4]), 0.2, false].error(),
            ])
            .differentiable()
            .meta()
            .out()
            .promotion(Promotion::Default),
    );
    r.add(
        OpInfo::new("hardtanh_backward", Family::Nn)
            .samples(vec![
                sample![t(&[2, 3]), t(&[2, 3]).range(-2.0, 2.0), -1i64, 1i64],
                sample![
                    t(&[3, 4]).transposed(),
                    t(&[3, 4]).range(-2.0, 2.0),
                    -0.5,
                    1.5
                ],
                sample![t(&[]), t(&[]), -1i64, 1i64],
                sample![t(&[4]).f64(), t(&[4]).f64().range(-2.0, 2.0), -1i64, 1i64],
                sample![t(&[2, 3]), t(&[4]), -1i64, 1i64].error(),
            ])
            .differentiable()
            .meta()
            .out()
            .promotion(Promotion::Default),
    );
}
