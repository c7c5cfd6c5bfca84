//! Matrix products.

use crate::info::{Family, OpInfo, Promotion};
use crate::sample::NONE;
use crate::spec::t;
use crate::{sample, Registry};

/// The matrix products.
pub fn register(r: &mut Registry) {
    let product = |name| {
        OpInfo::new(name, Family::Linalg)
            .differentiable()
            .promotion(Promotion::Default)
    };
    r.add(
        product("mm")
            .samples(vec![
                sample![t(&[2, 3]), t(&[3, 4])],
                sample![t(&[2, 3]).transposed(), t(&[3, 4]).transposed()],
                sample![t(&[2, 3]).strided(), t(&[3, 2])],
                sample![t(&[1, 3]).f64(), t(&[3, 1]).f64()],
                sample![t(&[0, 3]), t(&[3, 2])],
                sample![t(&[2, 0]), t(&[0, 2])],
                sample![t(&[2, 3]), t(&[4, 2])].error(),
                sample![t(&[3]), t(&[3, 2])].error(),
            ])
            .meta()
            .out(),
    );
    r.add(
        product("bmm")
            .samples(vec![
                sample![t(&[2, 2, 3]), t(&[2, 3, 2])],
                sample![t(&[2, 2, 3]).transposed(), t(&[2, 3, 4])],
                sample![t(&[1, 2, 2]).f64(), t(&[1, 2, 3]).f64()],
                sample![t(&[0, 2, 3]), t(&[0, 3, 1])],
                sample![t(&[2, 2, 3]), t(&[3, 3, 2])].error(),
            ])
            .meta()
            .out(),
    );
    r.add(
        product("addmm")
            .samples(vec![
                sample![t(&[4]), t(&[2, 3]), t(&[3, 4])],
                sample![t(&[2, 4]), t(&[2, 3]), t(&[3, 4]); beta = 0.5, alpha = 2i64],
                sample![t(&[2, 1]), t(&[2, 3]).transposed(), t(&[3, 1]); beta = 0i64],
                sample![t(&[]).f64(), t(&[2, 2]).f64(), t(&[2, 2]).f64()],
                sample![t(&[3]), t(&[2, 3]), t(&[3, 4])].error(),
            ])
            .meta()
            .inplace()
            .out(),
    );
    r.add(
        product("matmul")
            .samples(vec![
                sample![t(&[3]), t(&[3])],
                sample![t(&[2, 3]), t(&[3])],
                sample![t(&[3]), t(&[3, 2])],
                sample![t(&[2, 3]), t(&[3, 2])],
                sample![t(&[2, 2, 3]), t(&[3, 2])],
                sample![t(&[3]), t(&[2, 3, 2])],
                sample![t(&[2, 1, 2, 3]), t(&[3, 3, 2])],
                sample![t(&[3, 2]).transposed(), t(&[3]).f64()].error(),
                sample![t(&[2, 3]), t(&[2])].error(),
            ])
            .out(),
    );
    r.add(
        product("linear")
            .samples(vec![
                sample![t(&[2, 3]), t(&[4, 3])],
                sample![t(&[2, 3]), t(&[4, 3]), t(&[4])],
                sample![t(&[3]), t(&[2, 3]), t(&[2])],
                sample![t(&[2, 2, 3]), t(&[4, 3]); bias = NONE],
                sample![t(&[0, 3]), t(&[2, 3]), t(&[2])],
                sample![t(&[2, 3]), t(&[4, 2])].error(),
            ])
            .out(),
    );
}
