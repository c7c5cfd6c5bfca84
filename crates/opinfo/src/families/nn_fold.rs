//! Neural-network operators, continued: sliding blocks (`im2col`, `col2im`: nn.Unfold and
//! nn.Fold).

use switchboard_tensor::ScalarType::{Half, Long};

use crate::info::{Family, OpInfo};
use crate::spec::t;
use crate::{sample, Registry};

fn nn(name: &'static str) -> OpInfo {
    OpInfo::new(name, Family::Nn).differentiable()
}

/// `im2col` and `col2im`.
pub fn register(r: &mut Registry) {
    r.add(
        nn("im2col")
            .samples(vec![
                sample![t(&[2, 3, 5, 6]), [2i64, 2], [1i64, 1], [0i64, 0], [1i64, 1]],
                sample![t(&[1, 2, 5, 5]), [3i64, 2], [2i64, 1], [1i64, 2], [2i64, 1]],
                sample![
                    t(&[3, 4, 4]).f64(),
                    [2i64, 3],
                    [1i64, 1],
                    [1i64, 0],
                    [1i64, 2]
                ],
                sample![
                    t(&[1, 2, 4, 4]).transposed(),
                    [2i64, 2],
                    [1i64, 1],
                    [0i64, 0],
                    [2i64, 2]
                ],
                sample![
                    t(&[1, 2, 4, 4]).dtype(Half),
                    [2i64, 2],
                    [1i64, 1],
                    [0i64, 0],
                    [1i64, 1]
                ],
                sample![t(&[0, 2, 4, 4]), [2i64, 2], [1i64, 1], [0i64, 0], [1i64, 1]],
                sample![t(&[2, 3, 5, 6]), [2i64], [1i64, 1], [0i64, 0], [1i64, 1]].error(),
                sample![t(&[2, 3, 5, 6]), [0i64, 2], [1i64, 1], [0i64, 0], [1i64, 1]].error(),
                sample![
                    t(&[2, 3, 5, 6]),
                    [2i64, 2],
                    [1i64, 1],
                    [-1i64, 0],
                    [1i64, 1]
                ]
                .error(),
                sample![t(&[2, 3, 5, 6]), [7i64, 2], [1i64, 1], [0i64, 0], [1i64, 1]].error(),
                sample![t(&[2, 0, 5, 6]), [2i64, 2], [1i64, 1], [0i64, 0], [1i64, 1]].error(),
                sample![t(&[5, 6]), [2i64, 2], [1i64, 1], [0i64, 0], [1i64, 1]].error(),
                sample![
                    t(&[1, 2, 4, 4]).dtype(Long),
                    [2i64, 2],
                    [1i64, 1],
                    [0i64, 0],
                    [1i64, 1]
                ]
                .error_from_kernel_dtype(),
            ])
            .meta()
            .out(),
    );
    r.add(
        nn("col2im")
            .samples(vec![
                sample![
                    t(&[2, 12, 20]),
                    [5i64, 6],
                    [2i64, 2],
                    [1i64, 1],
                    [0i64, 0],
                    [1i64, 1]
                ],
                sample![
                    t(&[1, 12, 16]),
                    [5i64, 5],
                    [3i64, 2],
                    [2i64, 1],
                    [1i64, 2],
                    [2i64, 1]
                ],
                sample![
                    t(&[18, 5]).f64(),
                    [4i64, 4],
                    [2i64, 3],
                    [1i64, 1],
                    [1i64, 0],
                    [1i64, 2]
                ],
                sample![
                    t(&[1, 8, 4]).transposed(),
                    [4i64, 4],
                    [2i64, 2],
                    [1i64, 1],
                    [0i64, 0],
                    [2i64, 2]
                ],
                sample![
                    t(&[1, 8, 9]).dtype(Half),
                    [4i64, 4],
                    [2i64, 2],
                    [1i64, 1],
                    [0i64, 0],
                    [1i64, 1]
                ],
                sample![
                    t(&[0, 8, 9]),
                    [4i64, 4],
                    [2i64, 2],
                    [1i64, 1],
                    [0i64, 0],
                    [1i64, 1]
                ],
                sample![
                    t(&[2, 12, 20]),
                    [5i64],
                    [2i64, 2],
                    [1i64, 1],
                    [0i64, 0],
                    [1i64, 1]
                ]
                .error(),
                sample![
                    t(&[2, 12, 20]),
                    [6i64, 6],
                    [2i64, 2],
                    [1i64, 1],
                    [0i64, 0],
                    [1i64, 1]
                ]
                .error(),
                sample![
                    t(&[2, 13, 20]),
                    [5i64, 6],
                    [2i64, 2],
                    [1i64, 1],
                    [0i64, 0],
                    [1i64, 1]
                ]
                .error(),
                sample![
                    t(&[2, 12, 20]),
                    [5i64, 6],
                    [2i64, 2],
                    [1i64, 1],
                    [0i64, 0],
                    [0i64, 1]
                ]
                .error(),
                sample![
                    t(&[2, 12, 0]),
                    [5i64, 6],
                    [2i64, 2],
                    [1i64, 1],
                    [0i64, 0],
                    [1i64, 1]
                ]
                .error(),
                sample![
                    t(&[2, 12, 20]),
                    [1i64, 1],
                    [2i64, 2],
                    [1i64, 1],
                    [0i64, 0],
                    [1i64, 1]
                ]
                .error(),
                sample![
                    t(&[1, 8, 9]).dtype(Long),
                    [4i64, 4],
                    [2i64, 2],
                    [1i64, 1],
                    [0i64, 0],
                    [1i64, 1]
                ]
                .error_from_kernel_dtype(),
            ])
            .meta()
            .out(),
    );
}
