//! Binary pointwise operators of `BinaryOps.cpp`: `atan2`, the remainders `fmod` and
//! `remainder`, and the bitwise and logical `and`/`or`/`xor`.

use switchboard_tensor::ScalarType::{Byte, Char, Float, Int, Long, Short};

use crate::info::{Family, Grad, OpInfo, Promotion};
use crate::sample::Sample;
use crate::spec::{longs, mask, t, TensorSpec};
use crate::{sample, Registry};

use super::pointwise::{binary_samples, scalar_samples};

/// A divisor away from zero.
fn divisor(shape: &[i64]) -> TensorSpec {
    t(shape).range(0.5, 2.0)
}

fn any(shape: &[i64]) -> TensorSpec {
    t(shape)
}

/// Integer and bool operands of the bitwise operators, with their promotions.
fn bitwise_samples() -> Vec<Sample> {
    vec![
        sample![
            t(&[5]).dtype(Long).range(-9.0, 9.0),
            t(&[5]).dtype(Long).range(-9.0, 9.0)
        ],
        sample![
            t(&[2, 3]).dtype(Long).range(-9.0, 9.0),
            t(&[3]).dtype(Long).range(0.0, 9.0)
        ],
        sample![
            t(&[3, 4]).dtype(Int).range(0.0, 99.0).transposed(),
            t(&[]).dtype(Int)
        ],
        sample![t(&[0, 2]).dtype(Long), t(&[2]).dtype(Long)],
        sample![
            t(&[4]).dtype(Byte).range(0.0, 200.0),
            t(&[4]).dtype(Char).range(-9.0, 9.0)
        ],
        sample![
            t(&[4]).dtype(Short).range(0.0, 99.0),
            t(&[4]).dtype(Long).range(0.0, 9.0)
        ],
        sample![mask(&[4]), mask(&[4])],
        sample![mask(&[4]), t(&[4]).dtype(Long).range(0.0, 9.0)],
        sample![t(&[2, 3]).dtype(Long), t(&[4]).dtype(Long)].error(),
        // No bitwise kernel for floats ("bitwise_and_cpu" not implemented for 'Float').
        sample![t(&[3]), t(&[3])].error_from_kernel_dtype(),
    ]
}

/// The binary families of `BinaryOps.cpp` beyond arithmetic.
pub fn register(r: &mut Registry) {
    let mut atan2 = binary_samples(any, true);
    atan2.push(sample![mask(&[4]), mask(&[4])]);
    atan2.push(
        sample![
            t(&[6]).literal(&[0.0, -0.0, 1.0, -1.0, f64::INFINITY, f64::NAN]),
            t(&[6]).literal(&[-0.0, -0.0, 0.0, f64::NEG_INFINITY, f64::INFINITY, 1.0])
        ]
        .no_grad("signed zeros and infinities"),
    );
    r.add(
        OpInfo::new("atan2", Family::BinaryPointwise)
            .samples(atan2)
            .differentiable()
            .meta()
            .inplace()
            .out()
            .promotion(Promotion::IntToFloat),
    );

    for name in ["fmod", "remainder"] {
        let mut tensor = binary_samples(divisor, true);
        tensor.push(sample![t(&[4]).range(-3.0, 3.0), t(&[4]).range(-2.0, -0.5)]);
        tensor.push(sample![
            t(&[6])
                .dtype(Long)
                .literal(&[5.0, -5.0, 7.0, -7.0, 0.0, 9.0]),
            t(&[6])
                .dtype(Long)
                .literal(&[3.0, 3.0, -2.0, -2.0, -4.0, 9.0])
        ]);
        tensor.push(
            sample![
                t(&[5]).f64().literal(&[-3.0, 3.0, 1.0, f64::INFINITY, 0.0]),
                t(&[5])
                    .f64()
                    .literal(&[f64::INFINITY, f64::NEG_INFINITY, 0.0, 2.0, -1.0])
            ]
            .no_grad("infinities and zeros"),
        );
        // An integer division by zero: PyTorch's "ZeroDivisionError" (a CPU check of values).
        tensor.push(sample![t(&[3]).dtype(Long), longs(&[1, 0, 2])].error_from_data());
        // No kernel for bool ("fmod_cpu" not implemented for 'Bool').
        tensor.push(sample![mask(&[3]), mask(&[3])].error_from_kernel_dtype());
        let overload: &'static str = if name == "fmod" {
            "fmod.Tensor"
        } else {
            "remainder.Tensor"
        };
        r.add(
            OpInfo::new(overload, Family::BinaryPointwise)
                .samples(tensor)
                .differentiable()
                .meta()
                .inplace()
                .out()
                .promotion(Promotion::Default),
        );
        let mut scalar = scalar_samples(true);
        scalar.push(sample![t(&[4]).range(-3.0, 3.0), -1.5]);
        scalar.push(sample![t(&[4]).dtype(Int).range(-9.0, 9.0), -4i64]);
        scalar.push(sample![t(&[3]).dtype(Long), 0i64].error_from_data());
        let overload: &'static str = if name == "fmod" {
            "fmod.Scalar"
        } else {
            "remainder.Scalar"
        };
        r.add(
            OpInfo::new(overload, Family::BinaryPointwise)
                .samples(scalar)
                .differentiable()
                .inplace()
                .out()
                .promotion(Promotion::Default),
        );
    }

    let not_differentiable = Grad::NotImplemented("integer and bool only: PyTorch has no formula");
    for (tensor, scalar) in [
        ("bitwise_and.Tensor", "bitwise_and.Scalar"),
        ("bitwise_or.Tensor", "bitwise_or.Scalar"),
        ("bitwise_xor.Tensor", "bitwise_xor.Scalar"),
    ] {
        r.add(
            OpInfo::new(tensor, Family::BinaryPointwise)
                .samples(bitwise_samples())
                .grad(not_differentiable)
                .meta()
                .inplace()
                .out()
                .promotion(Promotion::Default),
        );
        r.add(
            OpInfo::new(scalar, Family::BinaryPointwise)
                .samples(vec![
                    sample![t(&[5]).dtype(Long).range(-9.0, 9.0), 6i64],
                    sample![t(&[2, 3]).dtype(Int).range(0.0, 99.0).transposed(), -3i64],
                    sample![t(&[]).dtype(Long), 1i64],
                    sample![t(&[4]).dtype(Byte).range(0.0, 200.0), 7i64],
                    sample![mask(&[4]), true],
                    sample![mask(&[4]), 3i64],
                    sample![t(&[3]).dtype(Float), 1i64].error_from_kernel_dtype(),
                ])
                .grad(not_differentiable)
                .inplace()
                .out()
                .promotion(Promotion::Default),
        );
    }

    for name in ["logical_and", "logical_or", "logical_xor"] {
        let mut samples = binary_samples(any, true);
        samples.push(sample![mask(&[4]), mask(&[4])]);
        samples.push(sample![mask(&[4]), t(&[4]).dtype(Long).range(0.0, 2.0)]);
        samples.push(sample![
            t(&[4]).literal(&[0.0, -0.0, f64::NAN, 1.0]),
            t(&[4]).literal(&[0.0, 1.0, 0.0, f64::NAN])
        ]);
        r.add(
            OpInfo::new(name, Family::BinaryPointwise)
                .samples(samples)
                .grad(Grad::None("boolean result"))
                .inplace()
                .out()
                .promotion(Promotion::Bool),
        );
    }
}
