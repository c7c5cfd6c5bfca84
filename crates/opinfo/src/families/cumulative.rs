//! Core ATen reductions beyond `reduction.rs`: `cumsum`, `prod`, `prod.dim_int`, `any`,
//! `any.dim`, `any.dims`; and `flip`, whose gradient `cumsum`'s uses.

use switchboard_tensor::ScalarType::{BFloat16, Byte, Double, Half, Int, Long};

use crate::info::{Family, Grad, OpInfo, Promotion};
use crate::sample::NONE;
use crate::spec::{mask, t};
use crate::{sample, Registry};

/// The cumulative sums, products and `any`.
pub fn register(r: &mut Registry) {
    r.add(
        OpInfo::new("cumsum", Family::Reduction)
            .samples(vec![
                sample![t(&[2, 3]), 1i64],
                sample![t(&[2, 3, 4]), 0i64],
                sample![t(&[3, 4]).transposed(), -1i64],
                sample![t(&[4, 2]).strided(), 0i64],
                sample![t(&[]), 0i64],
                sample![t(&[0, 3]), 1i64],
                sample![t(&[5]).f64(), 0i64],
                sample![t(&[2, 3]).dtype(Half), 1i64],
                sample![t(&[6]).dtype(BFloat16), 0i64],
                sample![t(&[2, 3]), 1i64; dtype = Double],
                sample![t(&[2, 3]).dtype(Int).range(-9.0, 9.0), 0i64],
                sample![t(&[4]).nan(), 0i64].no_grad("NaN"),
                sample![t(&[2, 3]), 2i64].error(),
            ])
            .differentiable()
            .meta()
            .inplace()
            .out(),
    );
    let with_zeros = |z: &[f64]| t(&[2, 3]).f64().literal(z);
    r.add(
        OpInfo::new("prod", Family::Reduction)
            .samples(vec![
                sample![t(&[2, 3])],
                sample![t(&[])],
                sample![t(&[3, 4]).transposed()],
                sample![t(&[5]).f64()],
                sample![with_zeros(&[1.5, 0.0, -2.0, 0.5, 3.0, 1.25])],
                sample![with_zeros(&[1.5, 0.0, -2.0, 0.0, 3.0, 1.25])],
                sample![t(&[0, 3])],
                sample![t(&[2, 3]).dtype(Half)],
                sample![t(&[4]).dtype(Long)],
                sample![mask(&[3])],
                sample![t(&[3]); dtype = Double],
                sample![t(&[4]).nan()].no_grad("NaN"),
            ])
            .differentiable()
            .meta()
            .out()
            .promotion(Promotion::IntToLong),
    );
    r.add(
        OpInfo::new("prod.dim_int", Family::Reduction)
            .samples(vec![
                sample![t(&[2, 3, 4]), 1i64],
                sample![t(&[2, 3]), -1i64; keepdim = true],
                sample![t(&[]), 0i64],
                sample![t(&[3, 4]).transposed(), 0i64],
                sample![with_zeros(&[1.5, 0.0, -2.0, 0.5, 3.0, 1.25]), 1i64],
                sample![with_zeros(&[1.5, 0.0, 0.0, 0.5, 3.0, 0.0]), 1i64; keepdim = true],
                sample![with_zeros(&[0.0, 2.0, -2.0, 0.0, 3.0, 1.25]), 0i64],
                sample![t(&[0, 3]), 0i64],
                sample![t(&[2, 3]).dtype(Int), 0i64],
                sample![t(&[2, 3]), 1i64; dtype = Double],
                sample![t(&[2, 3]), 2i64].error(),
            ])
            .differentiable()
            .meta()
            .out()
            .promotion(Promotion::IntToLong),
    );
    let no_grad = Grad::None("boolean result");
    let any_values = || t(&[2, 3]).literal(&[0.0, 0.0, 0.5, 0.0, 0.0, 0.0]);
    r.add(
        OpInfo::new("any", Family::Reduction)
            .samples(vec![
                sample![any_values()],
                sample![t(&[3]).literal(&[0.0, 0.0, 0.0])],
                sample![t(&[])],
                sample![t(&[0, 3])],
                sample![t(&[3, 4]).transposed()],
                sample![t(&[4]).dtype(Byte).range(0.0, 2.0)],
                sample![t(&[4]).dtype(Long).range(-1.0, 2.0)],
                sample![mask(&[5])],
                sample![t(&[3]).nan()],
            ])
            .grad(no_grad)
            .meta()
            .out(),
    );
    let none: &[i64] = &[];
    r.add(
        OpInfo::new("any.dim", Family::Reduction)
            .samples(vec![
                sample![any_values(), 1i64],
                sample![any_values(), 0i64; keepdim = true],
                sample![t(&[]), 0i64],
                sample![t(&[0, 3]), 0i64],
                sample![t(&[2, 3]).dtype(Byte).range(0.0, 2.0), -1i64],
                sample![mask(&[2, 3]), 0i64],
                sample![t(&[2, 3]), 2i64].error(),
            ])
            .grad(no_grad)
            .meta()
            .out(),
    );
    r.add(
        OpInfo::new("any.dims", Family::Reduction)
            .samples(vec![
                sample![any_values(), [1i64]],
                sample![any_values(), [0i64, 1]; keepdim = true],
                sample![any_values(), none],
                sample![any_values(), NONE],
                sample![t(&[0, 3]), [0i64]],
                sample![t(&[2, 3]).dtype(Byte).range(0.0, 2.0), [0i64]],
                sample![t(&[2, 3]), [0i64, 0]].error(),
            ])
            .grad(no_grad)
            .meta()
            .out(),
    );
    r.add(
        OpInfo::new("flip", Family::Shape)
            .samples(vec![
                sample![t(&[2, 3]), [1i64]],
                sample![t(&[2, 3, 4]), [0i64, -1]],
                sample![t(&[3, 4]).transposed(), [0i64]],
                sample![t(&[4, 2]).strided(), [0i64, 1]],
                sample![t(&[]), [0i64]],
                sample![t(&[0, 3]), [1i64]],
                sample![t(&[2, 3]), none],
                sample![t(&[5]).f64(), [0i64]],
                sample![t(&[2, 3]).dtype(Long), [0i64]],
                sample![mask(&[3]), [0i64]],
                sample![t(&[2, 3]), [0i64, 0]].error(),
                sample![t(&[2, 3]), [2i64]].error(),
            ])
            .differentiable()
            .meta()
            .out()
            .promotion(Promotion::SameAsSelf),
    );
}
