//! `lerp`, `addcmul` and `addcdiv`: the pointwise operators optimizers are written with.

use switchboard_tensor::ScalarType::{Bool, Half, Long};

use crate::info::{Family, OpInfo, Promotion};
use crate::spec::{mask, t};
use crate::{sample, Registry};

pub fn register(r: &mut Registry) {
    r.add(
        OpInfo::new("lerp.Scalar", Family::BinaryPointwise)
            .samples(vec![
                sample![t(&[2, 3]), t(&[2, 3]), 0.3],
                sample![t(&[2, 3]), t(&[3]), 0.75],
                sample![t(&[]), t(&[2, 2]), -0.5],
                sample![t(&[3, 4]).transposed(), t(&[3, 4]).strided(), 1.5],
                sample![t(&[4]).f64(), t(&[4]).f64(), 0.5],
                sample![t(&[0, 3]), t(&[3]), 0.2],
                sample![t(&[4]).dtype(Half), t(&[4]).dtype(Half), 0.3].no_grad("float16"),
                sample![t(&[3]), t(&[3]).f64(), 0.5].error(),
                sample![t(&[3]).dtype(Long), t(&[3]).dtype(Long), 1i64].error_from_kernel_dtype(),
                sample![t(&[3]), t(&[4]), 0.5].error(),
            ])
            .differentiable()
            .meta()
            .inplace()
            .out()
            .promotion(Promotion::Default),
    );
    r.add(
        OpInfo::new("lerp.Tensor", Family::BinaryPointwise)
            .samples(vec![
                sample![t(&[2, 3]), t(&[2, 3]), t(&[2, 3]).range(-0.2, 1.2)],
                sample![t(&[2, 3]), t(&[3]), t(&[2, 1]).range(0.0, 1.0)],
                sample![t(&[3]), t(&[3]), t(&[]).f64().literal(&[0.25])],
                sample![t(&[3, 4]).transposed(), t(&[4]), t(&[3, 4]).strided()],
                sample![t(&[4]).f64(), t(&[4]).f64(), t(&[4]).f64()],
                sample![t(&[3]), t(&[3]), t(&[3]).f64()].error(),
                sample![t(&[3]), t(&[3]).f64(), t(&[3])].error(),
            ])
            .differentiable()
            .meta()
            .inplace()
            .out()
            .promotion(Promotion::Default),
    );
    r.add(
        OpInfo::new("addcmul", Family::BinaryPointwise)
            .samples(vec![
                sample![t(&[2, 3]), t(&[2, 3]), t(&[2, 3])],
                sample![t(&[2, 3]), t(&[3]), t(&[2, 1]); value = 0.5],
                sample![t(&[]), t(&[2, 2]), t(&[2]); value = -2i64],
                sample![t(&[3, 4]).transposed(), t(&[3, 4]).strided(), t(&[4]); value = 0.37],
                sample![t(&[4]).f64(), t(&[4]), t(&[4]); value = 0.1],
                sample![t(&[4]).dtype(Long), t(&[4]).dtype(Long), t(&[4]).dtype(Long); value = 3i64],
                sample![t(&[4]).dtype(Half), t(&[4]).dtype(Half), t(&[4]).dtype(Half); value = 0.1]
                    .no_grad("float16"),
                sample![t(&[0, 2]), t(&[2]), t(&[2])],
                sample![mask(&[3]), mask(&[3]), mask(&[3])].error_from_kernel_dtype(),
                sample![t(&[3]), t(&[4]), t(&[3])].error(),
            ])
            .differentiable()
            .meta()
            .inplace()
            .out()
            .promotion(Promotion::Unchecked),
    );
    r.add(
        OpInfo::new("addcdiv", Family::BinaryPointwise)
            .samples(vec![
                sample![t(&[2, 3]), t(&[2, 3]), t(&[2, 3]).range(0.5, 2.0)],
                sample![t(&[2, 3]), t(&[3]), t(&[2, 1]).range(-2.0, -0.5); value = 0.5],
                sample![t(&[]), t(&[2, 2]), t(&[2]).range(0.5, 2.0); value = -2i64],
                sample![
                    t(&[3, 4]).transposed(),
                    t(&[3, 4]).strided(),
                    t(&[4]).range(0.5, 2.0);
                    value = 0.37
                ],
                sample![t(&[4]).f64(), t(&[4]), t(&[4]).range(1.0, 3.0); value = 0.1],
                sample![t(&[4]).dtype(Long), t(&[4]), t(&[4]).range(1.0, 3.0)],
                sample![t(&[3]).dtype(Bool), t(&[3]), t(&[3]).range(1.0, 3.0)]
                    .no_grad("bool input"),
                sample![t(&[3]), t(&[3]).dtype(Long), t(&[3]).dtype(Long)].error(),
                sample![t(&[3]), t(&[3]).dtype(Long), mask(&[3])].error(),
            ])
            .differentiable()
            .meta()
            .inplace()
            .out()
            .promotion(Promotion::Unchecked),
    );
}
