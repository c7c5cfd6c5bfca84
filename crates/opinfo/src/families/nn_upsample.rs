//! Neural-network operators, continued: 2-d upsampling (nearest and bilinear), their `.vec`
//! decompositions and their backwards.

use switchboard_tensor::ScalarType::{Byte, Half, Int};

use crate::info::{Family, OpInfo};
use crate::sample::NONE;
use crate::spec::t;
use crate::{sample, Registry};

fn nn(name: &'static str) -> OpInfo {
    OpInfo::new(name, Family::Nn).differentiable()
}

/// Nearest and bilinear 2-d upsampling.
pub fn register(r: &mut Registry) {
    nearest(r);
    bilinear(r);
}

fn nearest(r: &mut Registry) {
    r.add(
        nn("upsample_nearest2d")
            .samples(vec![
                sample![t(&[1, 2, 3, 4]), [5i64, 7]],
                sample![t(&[2, 1, 3, 3]), [6i64, 6]],
                sample![t(&[1, 2, 5, 6]), [3i64, 4]],
                sample![t(&[1, 2, 3, 4]).f64(), [5i64, 7], 0.7f64, 1.9f64],
                sample![t(&[1, 1, 3, 4]).transposed(), [4i64, 5]],
                sample![t(&[1, 2, 3, 4]).dtype(Half), [5i64, 5]],
                sample![t(&[1, 2, 3, 4]).dtype(Byte), [5i64, 5]],
                sample![t(&[0, 2, 3, 4]), [5i64, 5]],
                sample![t(&[3, 4, 5]), [2i64, 2]].error(),
                sample![t(&[1, 1, 4, 5]), [2i64]].error(),
                sample![t(&[1, 1, 4, 5]), [0i64, 2]].error(),
                sample![t(&[2, 0, 4, 5]), [2i64, 2]].error(),
                sample![t(&[1, 1, 4, 5]).dtype(Int), [2i64, 2]].error_from_kernel_dtype(),
            ])
            .meta()
            .out(),
    );
    r.add(
        nn("upsample_nearest2d.vec")
            .samples(vec![
                sample![t(&[1, 2, 3, 4]), [5i64, 7], NONE],
                sample![t(&[1, 2, 3, 4]), NONE, [1.5f64, 2.5]],
                sample![t(&[1, 1, 4, 4]).f64(), NONE, [0.6f64, 1.0]],
                sample![t(&[1, 1, 4, 5]), NONE, NONE].error(),
                sample![t(&[1, 1, 4, 5]), [2i64, 2], [2.0f64, 2.0]].error(),
                sample![t(&[1, 1, 4, 5]), [2i64], NONE].error(),
                sample![t(&[1, 1, 4, 5]), NONE, [2.0f64]].error(),
                sample![t(&[1, 1, 4, 5]), NONE, [0.1f64, 0.1]].error(),
                sample![t(&[3, 4, 5]), NONE, [2.0f64, 2.0]].error(),
            ])
            .out(),
    );
    r.add(
        nn("upsample_nearest2d_backward")
            .samples(vec![
                sample![t(&[1, 2, 5, 7]), [5i64, 7], [1i64, 2, 3, 4]],
                sample![t(&[2, 1, 6, 6]), [6i64, 6], [2i64, 1, 3, 3]],
                sample![
                    t(&[1, 2, 5, 7]).f64(),
                    [5i64, 7],
                    [1i64, 2, 3, 4],
                    0.7f64,
                    1.9f64
                ],
                sample![t(&[1, 2, 8, 7]), [8i64, 8], [1i64, 2, 4, 4]].error(),
                sample![t(&[2, 8, 8]), [8i64, 8], [2i64, 4, 4]].error(),
                sample![t(&[1, 2, 8, 8]).dtype(Int), [8i64, 8], [1i64, 2, 4, 4]]
                    .error_from_kernel_dtype(),
            ])
            .meta()
            .out(),
    );
}

fn bilinear(r: &mut Registry) {
    r.add(
        nn("upsample_bilinear2d")
            .samples(vec![
                sample![t(&[1, 2, 3, 4]), [5i64, 7], false],
                sample![t(&[1, 2, 3, 4]), [5i64, 7], true],
                sample![t(&[2, 1, 5, 6]), [3i64, 4], false],
                sample![t(&[1, 2, 3, 4]).f64(), [5i64, 7], false, 0.7f64, 1.9f64],
                sample![t(&[1, 2, 3, 4]).f64(), [1i64, 6], true],
                sample![t(&[1, 1, 3, 4]).transposed(), [4i64, 5], false],
                sample![t(&[1, 2, 3, 4]).dtype(Half), [5i64, 5], false],
                sample![t(&[0, 2, 3, 4]), [5i64, 5], true],
                sample![t(&[3, 4, 5]), [2i64, 2], false].error(),
                sample![t(&[1, 1, 4, 5]), [2i64, -1], true].error(),
                sample![t(&[2, 0, 4, 5]), [2i64, 2], false].error(),
                sample![t(&[1, 1, 4, 5]).dtype(Int), [2i64, 2], false].error_from_kernel_dtype(),
            ])
            .meta()
            .out(),
    );
    r.add(
        nn("upsample_bilinear2d.vec")
            .samples(vec![
                sample![t(&[1, 2, 3, 4]), [5i64, 7], false, NONE],
                sample![t(&[1, 2, 3, 4]), NONE, true, [1.5f64, 2.5]],
                sample![t(&[1, 1, 4, 4]).f64(), NONE, false, [0.6f64, 1.0]],
                sample![t(&[1, 1, 4, 5]), NONE, false, NONE].error(),
                sample![t(&[1, 1, 4, 5]), [2i64, 2], true, [2.0f64, 2.0]].error(),
            ])
            .out(),
    );
    r.add(
        nn("upsample_bilinear2d_backward")
            .samples(vec![
                sample![t(&[1, 2, 5, 7]), [5i64, 7], [1i64, 2, 3, 4], false],
                sample![t(&[1, 2, 5, 7]), [5i64, 7], [1i64, 2, 3, 4], true],
                sample![
                    t(&[1, 2, 5, 7]).f64(),
                    [5i64, 7],
                    [1i64, 2, 3, 4],
                    false,
                    0.7f64,
                    1.9f64
                ],
                sample![t(&[2, 1, 3, 4]).f64(), [3i64, 4], [2i64, 1, 5, 6], true],
                sample![t(&[1, 2, 8, 7]), [8i64, 8], [1i64, 2, 4, 4], false].error(),
                sample![t(&[1, 2, 8, 8]), [8i64, 8], [1i64, 2, 4], false].error(),
            ])
            .meta()
            .out(),
    );
}
