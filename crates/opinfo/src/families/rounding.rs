//! Rounding, sign, NaN and infinity tests, bitwise and logical not.

use switchboard_tensor::ScalarType::{Float, Long};

use crate::info::{Family, Grad, OpInfo, Promotion};
use crate::sample;
use crate::spec::{mask, t};
use crate::Registry;

use super::pointwise::{unary_samples, Domain};

/// Special values: NaN, infinities, signed zeros and halves (round half to even).
fn special() -> crate::spec::TensorSpec {
    t(&[8]).literal(&[
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -0.0,
        0.5,
        1.5,
        -2.5,
        2.5,
    ])
}

/// The rounding, sign and boolean-test families.
pub fn register(r: &mut Registry) {
    for name in ["ceil", "floor", "round", "trunc"] {
        let mut samples = unary_samples(Domain::Any, true);
        samples.push(sample![special()].no_grad("special values"));
        // No rounding kernel for bool ("ceil_vml_cpu" not implemented for 'Bool'); the meta
        // function takes it.
        samples.push(sample![mask(&[4])].error_from_kernel_dtype());
        r.add(
            OpInfo::new(name, Family::UnaryPointwise)
                .samples(samples)
                .differentiable()
                .meta()
                .inplace()
                .out()
                .promotion(Promotion::Default),
        );
    }
    let mut decimals = Vec::new();
    for d in [1i64, 2, -1, 0] {
        decimals.push(sample![t(&[2, 3]).range(-200.0, 200.0); decimals = d]);
    }
    decimals.push(sample![t(&[4]).f64().range(-20.0, 20.0); decimals = 1i64]);
    decimals.push(sample![t(&[3, 4]).transposed(); decimals = 3i64]);
    decimals.push(sample![t(&[3]).dtype(Float).nan(); decimals = 1i64].no_grad("NaN"));
    // Integers have no kernel, even for 0 decimals ("round_cpu" / "round_vml_cpu").
    decimals.push(sample![t(&[3]).dtype(Long); decimals = 1i64].error_from_kernel_dtype());
    decimals.push(sample![t(&[3]).dtype(Long); decimals = 0i64].error_from_kernel_dtype());
    r.add(
        OpInfo::new("round.decimals", Family::UnaryPointwise)
            .samples(decimals)
            .differentiable()
            .meta()
            .inplace()
            .out()
            .promotion(Promotion::Default),
    );
    let mut sign = unary_samples(Domain::Any, true);
    sign.push(sample![special()].no_grad("special values"));
    sign.push(sample![mask(&[4])]);
    r.add(
        OpInfo::new("sign", Family::UnaryPointwise)
            .samples(sign)
            .differentiable()
            .meta()
            .inplace()
            .out()
            .promotion(Promotion::Default),
    );
    // `isnan` has kernels; `isinf` is a composite (over `abs` and `eq`, or `zeros_like`).
    for (name, meta) in [("isnan", true), ("isinf", false)] {
        let mut samples = unary_samples(Domain::Any, true);
        samples.push(sample![special()]);
        samples.push(sample![mask(&[4])]);
        let mut info = OpInfo::new(name, Family::UnaryPointwise)
            .samples(samples)
            .grad(Grad::None("boolean result"))
            .out()
            .promotion(Promotion::Bool);
        if meta {
            info = info.meta();
        }
        r.add(info);
    }
    let mut not = vec![
        sample![t(&[5]).dtype(Long).range(-9.0, 9.0)],
        sample![t(&[2, 3]).dtype(Long).range(-9.0, 9.0).transposed()],
        sample![t(&[]).dtype(Long)],
        sample![t(&[0, 2]).dtype(Long)],
        sample![mask(&[4])],
    ];
    for dt in [
        switchboard_tensor::ScalarType::Byte,
        switchboard_tensor::ScalarType::Char,
        switchboard_tensor::ScalarType::Short,
        switchboard_tensor::ScalarType::Int,
    ] {
        not.push(sample![t(&[4]).dtype(dt).range(0.0, 9.0)]);
    }
    // No bitwise kernel for floats ("bitwise_not_cpu" not implemented for 'Float').
    not.push(sample![t(&[3])].error_from_kernel_dtype());
    r.add(
        OpInfo::new("bitwise_not", Family::UnaryPointwise)
            .samples(not)
            .grad(Grad::NotImplemented(
                "integer and bool only: PyTorch has no formula",
            ))
            .meta()
            .inplace()
            .out()
            .promotion(Promotion::Default),
    );
    let mut samples = unary_samples(Domain::Any, true);
    samples.push(sample![special()]);
    samples.push(sample![mask(&[4])]);
    r.add(
        OpInfo::new("logical_not", Family::UnaryPointwise)
            .samples(samples)
            .grad(Grad::None("boolean result"))
            .inplace()
            .out()
            .promotion(Promotion::Bool),
    );
}
