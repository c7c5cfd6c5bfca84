//! Neural-network operators, continued: 3-d average, adaptive average and max pooling and
//! their backward helpers.

use switchboard_tensor::ScalarType::{Half, Int, Long};

use crate::info::{Family, OpInfo};
use crate::sample::NONE;
use crate::spec::{longs, t};
use crate::{sample, Registry};

fn nn(name: &'static str) -> OpInfo {
    OpInfo::new(name, Family::Nn).differentiable()
}

/// 3-d average, adaptive average and max pooling.
pub fn register(r: &mut Registry) {
    average(r);
    adaptive(r);
    max(r);
}

fn average(r: &mut Registry) {
    r.add(
        nn("avg_pool3d")
            .samples(vec![
                sample![t(&[1, 2, 4, 4, 4]), [2i64, 2, 2]],
                sample![
                    t(&[1, 2, 3, 5, 4]),
                    [2i64, 3, 2],
                    [2i64, 2, 1],
                    [1i64, 1, 0],
                    true,
                    false
                ],
                sample![
                    t(&[1, 1, 3, 5, 5]),
                    [2i64],
                    [2i64],
                    [1i64],
                    true,
                    true
                ],
                sample![t(&[2, 3, 4, 5]), [2i64, 3, 2], [1i64, 2, 2], [1i64, 1, 0]; divisor_override = 3i64],
                sample![t(&[1, 1, 2, 4, 4]).transposed(), [2i64]],
                sample![
                    t(&[1, 1, 3, 5, 5]).f64(),
                    [3i64],
                    [2i64],
                    [1i64],
                    false,
                    false
                ],
                sample![t(&[1, 2, 2, 4, 4]).dtype(Half), [2i64]].error_from_kernel_dtype(),
                sample![t(&[1, 2, 2, 4, 4]).dtype(Long), [2i64]],
                sample![t(&[0, 2, 2, 4, 4]), [2i64]],
                sample![t(&[4, 5, 6]), [2i64]].error(),
                sample![t(&[1, 1, 4, 5, 6]), [2i64, 2]].error(),
                sample![t(&[1, 1, 4, 5, 6]), [5i64]].error(),
                sample![t(&[1, 1, 4, 4, 4]), [2i64], [2i64], [2i64]].error(),
                sample![t(&[2, 0, 4, 5, 6]), [2i64]].error(),
                sample![t(&[1, 1, 4, 4, 4]), [2i64]; divisor_override = 0i64].error(),
                sample![t(&[1, 1, 4, 4, 4]).dtype(Int), [2i64]].error_from_kernel_dtype(),
            ])
            .meta()
            .out(),
    );
    r.add(
        nn("avg_pool3d_backward")
            .samples(vec![
                sample![
                    t(&[1, 2, 2, 2, 2]),
                    t(&[1, 2, 4, 4, 4]),
                    [2i64],
                    [2i64],
                    [0i64],
                    false,
                    true,
                    NONE
                ],
                sample![
                    t(&[1, 2, 2, 3, 3]),
                    t(&[1, 2, 3, 5, 4]),
                    [2i64, 3, 2],
                    [2i64, 2, 1],
                    [1i64, 1, 0],
                    true,
                    false,
                    NONE
                ],
                sample![
                    t(&[2, 4, 2, 2]).f64(),
                    t(&[2, 3, 4, 5]).f64(),
                    [2i64, 3, 2],
                    [1i64, 2, 2],
                    [1i64, 1, 0],
                    false,
                    true,
                    3i64
                ],
                sample![
                    t(&[1, 2, 2, 2, 3]),
                    t(&[1, 2, 4, 4, 4]),
                    [2i64],
                    [2i64],
                    [0i64],
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
            sample![t(&[1, 2, 4, 5, 5]), [2i64, 2, 3]],
            sample![t(&[2, 3, 5, 7]), [3i64, 2, 4]],
            sample![t(&[1, 2, 3, 4, 4]), [1i64, 1, 1]],
            sample![t(&[1, 2, 2, 3, 3]), [3i64, 5, 4]],
            sample![t(&[1, 1, 3, 4, 3]).transposed(), [2i64, 2, 2]],
            sample![t(&[1, 2, 3, 5, 5]).f64(), [2i64, 3, 3]],
            sample![t(&[1, 2, 2, 4, 4]).dtype(Half), [2i64, 2, 2]],
            sample![t(&[0, 2, 2, 4, 4]), [2i64, 2, 2]],
            sample![t(&[1, 2, 4, 4, 4]), [2i64, 2]].error(),
            sample![t(&[4, 4, 4]), [2i64, 2, 2]].error(),
            sample![t(&[1, 2, 0, 4, 4]), [2i64, 2, 2]].error(),
        ]
    };
    r.add(nn("adaptive_avg_pool3d").samples(samples()));
    r.add(
        nn("_adaptive_avg_pool3d")
            .samples({
                let mut s = samples();
                s.push(
                    sample![t(&[1, 2, 4, 4, 4]).dtype(Long), [2i64, 2, 2]]
                        .error_from_kernel_dtype(),
                );
                s
            })
            .meta()
            .out(),
    );
    r.add(
        nn("_adaptive_avg_pool3d_backward")
            .samples(vec![
                sample![t(&[1, 2, 2, 2, 3]), t(&[1, 2, 4, 5, 5])],
                sample![t(&[2, 3, 2, 4]).f64(), t(&[2, 3, 5, 7]).f64()],
                sample![t(&[1, 2, 3, 5, 4]), t(&[1, 2, 2, 3, 3])],
                sample![t(&[1, 2, 2, 2]), t(&[1, 2, 4, 5, 5])].error(),
            ])
            .meta()
            .out(),
    );
}

fn max(r: &mut Registry) {
    let pool = || {
        vec![
            sample![t(&[1, 2, 4, 4, 4]), [2i64, 2, 2]],
            sample![t(&[1, 2, 3, 4, 4]), [2i64, 2, 2], [1i64, 2, 2]],
            sample![t(&[2, 3, 5, 5]), [3i64], [2i64], [1i64]],
            sample![
                t(&[1, 1, 3, 5, 4]),
                [2i64, 2, 2],
                [2i64, 2, 2],
                [0i64, 1, 0],
                [1i64, 1, 1],
                true
            ],
            sample![t(&[1, 1, 5, 5, 5]), [2i64], [1i64], [0i64], [2i64]],
            sample![t(&[1, 1, 2, 4, 4]).transposed(), [2i64]],
            sample![t(&[1, 1, 3, 3, 3]).f64(), [2i64], [1i64]],
            sample![t(&[1, 1, 2, 2, 2]).nan(), [2i64]].no_grad("NaN"),
            sample![t(&[0, 2, 2, 4, 4]), [2i64]],
            sample![t(&[1, 2, 2, 4, 4]).dtype(Int), [2i64]].no_grad("an integer input"),
            sample![t(&[4, 4, 4]), [2i64]].error(),
            sample![t(&[1, 1, 4, 4, 4]), [2i64, 2]].error(),
            sample![t(&[1, 1, 2, 2, 2]), [3i64]].error(),
            sample![t(&[1, 1, 4, 4, 4]), [2i64], [2i64], [2i64]].error(),
            sample![t(&[1, 1, 4, 4, 4]), [2i64], [1i64], [0i64], [0i64]].error(),
            sample![t(&[2, 0, 4, 4, 4]), [2i64]].error(),
        ]
    };
    r.add(nn("max_pool3d").samples(pool()));
    r.add(nn("max_pool3d_with_indices").samples(pool()).meta().out());
    r.add(
        nn("max_pool3d_with_indices_backward")
            .samples(vec![
                sample![
                    t(&[1, 1, 1, 1, 1]),
                    t(&[1, 1, 2, 2, 2]),
                    [2i64],
                    [2i64],
                    [0i64],
                    [1i64],
                    false,
                    longs(&[5]).shape(&[1, 1, 1, 1, 1])
                ],
                sample![
                    t(&[1, 2, 2, 1]).f64(),
                    t(&[1, 3, 3, 2]).f64(),
                    [2i64],
                    [1i64],
                    [0i64],
                    [1i64],
                    false,
                    longs(&[0, 8, 11, 17]).shape(&[1, 2, 2, 1])
                ],
                sample![
                    t(&[1, 1, 1, 1, 2]),
                    t(&[1, 1, 2, 2, 2]),
                    [2i64],
                    [2i64],
                    [0i64],
                    [1i64],
                    false,
                    longs(&[5]).shape(&[1, 1, 1, 1, 1])
                ]
                .error(),
            ])
            .meta()
            .out(),
    );
}
