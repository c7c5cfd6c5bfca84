//! Neural-network operators, continued: average and adaptive average pooling and their
//! backward helpers.

use switchboard_tensor::ScalarType::{Half, Int};

use crate::info::{Family, OpInfo};
use crate::sample::NONE;
use crate::spec::t;
use crate::{sample, Registry};

fn nn(name: &'static str) -> OpInfo {
    OpInfo::new(name, Family::Nn).differentiable()
}

/// Average and adaptive average pooling.
pub fn register(r: &mut Registry) {
    average(r);
    adaptive(r);
}

fn average(r: &mut Registry) {
    r.add(
        nn("avg_pool2d")
            .samples(vec![
                sample![t(&[1, 2, 4, 4]), [2i64, 2]],
                sample![
                    t(&[1, 2, 5, 5]),
                    [2i64, 2],
                    [2i64, 2],
                    [1i64, 1],
                    true,
                    false
                ],
                sample![
                    t(&[1, 2, 5, 5]),
                    [2i64, 2],
                    [2i64, 2],
                    [1i64, 1],
                    true,
                    true
                ],
                sample![t(&[2, 5, 4]), [3i64, 2], [1i64, 2], [1i64, 0]; divisor_override = 3i64],
                sample![t(&[1, 1, 4, 4]).transposed(), [2i64]],
                sample![
                    t(&[1, 1, 5, 5]).f64(),
                    [3i64, 3],
                    [2i64, 2],
                    [1i64, 1],
                    false,
                    false
                ],
                sample![t(&[1, 2, 4, 4]).dtype(Half), [2i64, 2]],
                sample![t(&[0, 2, 4, 4]), [2i64, 2]],
                sample![t(&[5, 5]), [2i64, 2]].error(),
                sample![t(&[1, 1, 2, 2]), [3i64, 3]].error(),
                sample![t(&[1, 1, 4, 4]), [2i64, 2], [2i64, 2], [2i64, 2]].error(),
                sample![t(&[1, 1, 4, 4]), [2i64, 2]; divisor_override = 0i64].error(),
                sample![t(&[1, 1, 4, 4]).dtype(Int), [2i64, 2]].error_from_kernel_dtype(),
            ])
            .meta()
            .out(),
    );
    r.add(
        nn("avg_pool2d_backward")
            .samples(vec![
                sample![
                    t(&[1, 2, 2, 2]),
                    t(&[1, 2, 4, 4]),
                    [2i64, 2],
                    [2i64, 2],
                    [0i64, 0],
                    false,
                    true,
                    NONE
                ],
                sample![
                    t(&[1, 2, 3, 3]),
                    t(&[1, 2, 5, 5]),
                    [2i64, 2],
                    [2i64, 2],
                    [1i64, 1],
                    true,
                    false,
                    NONE
                ],
                sample![
                    t(&[2, 5, 2]).f64(),
                    t(&[2, 5, 4]).f64(),
                    [3i64, 2],
                    [1i64, 2],
                    [1i64, 0],
                    false,
                    true,
                    3i64
                ],
                sample![
                    t(&[1, 2, 3, 2]),
                    t(&[1, 2, 4, 4]),
                    [2i64, 2],
                    [2i64, 2],
                    [0i64, 0],
                    false,
                    true,
                    NONE
                ]
                .error(),
            ])
            .meta()
            .out(),
    );
}

fn adaptive(r: &mut Registry) {
    let samples = || {
        vec![
            sample![t(&[1, 2, 5, 5]), [2i64, 3]],
            sample![t(&[2, 5, 7]), [3i64, 2]],
            sample![t(&[1, 2, 4, 4]), [1i64, 1]],
            sample![t(&[1, 2, 3, 3]), [5i64, 4]],
            sample![t(&[1, 1, 4, 3]).transposed(), [2i64, 2]],
            sample![t(&[1, 2, 5, 5]).f64(), [3i64, 3]],
            sample![t(&[1, 2, 4, 4]).dtype(Half), [2i64, 2]],
            sample![t(&[0, 2, 4, 4]), [2i64, 2]],
            sample![t(&[1, 2, 4, 4]), [2i64]].error(),
            sample![t(&[1, 2, 4, 4]), [-1i64, 2]].error(),
            sample![t(&[4, 4]), [2i64, 2]].error(),
            sample![t(&[1, 2, 0, 4]), [2i64, 2]].error(),
        ]
    };
    r.add(nn("adaptive_avg_pool2d").samples(samples()));
    r.add(nn("_adaptive_avg_pool2d").samples(samples()).meta().out());
    r.add(
        nn("_adaptive_avg_pool2d_backward")
            .samples(vec![
                sample![t(&[1, 2, 2, 3]), t(&[1, 2, 5, 5])],
                sample![t(&[2, 3, 2]).f64(), t(&[2, 5, 7]).f64()],
                sample![t(&[1, 2, 5, 4]), t(&[1, 2, 3, 3])],
                sample![t(&[1, 2, 2]), t(&[1, 2, 5, 5])].error(),
            ])
            .meta()
            .out(),
    );
}
