//! The `diagonal` and `alias` views and `diagonal_backward`.

use switchboard_tensor::ScalarType::Long;

use crate::info::{Family, OpInfo};
use crate::spec::{mask, t};
use crate::{sample, Registry};

fn shape(name: &'static str) -> OpInfo {
    OpInfo::new(name, Family::Shape).differentiable()
}

/// The diagonal and alias views.
pub fn register(r: &mut Registry) {
    r.add(shape("diagonal").samples(vec![
        sample![t(&[3, 3])],
        sample![t(&[3, 4]), 1i64],
        sample![t(&[4, 3]), -2i64],
        sample![t(&[2, 3, 4]), 0i64, 0i64, 2i64],
        sample![t(&[2, 3, 4]), 1i64, -1i64, 1i64],
        sample![t(&[3, 4]).transposed(), 0i64, 1i64, 0i64],
        sample![t(&[3, 3]), 5i64],
        sample![t(&[3, 3]).f64(), -1i64],
        sample![t(&[2, 2]).dtype(Long)],
        sample![mask(&[2, 2])],
        sample![t(&[3, 3]), 0i64, 0i64, 0i64].error(),
        sample![t(&[3, 3]), 0i64, 0i64, 2i64].error(),
        sample![t(&[3])].error(),
    ]));
    r.add(
        shape("diagonal_backward")
            .samples(vec![
                sample![t(&[3]), [3i64, 3], 0i64, 0i64, 1i64],
                sample![t(&[2]), [3i64, 4], 2i64, 0i64, 1i64],
                sample![t(&[2, 3]), [2i64, 3, 4], -1i64, 2i64, 1i64],
                sample![t(&[0]), [3i64, 3], 4i64, 0i64, 1i64],
            ])
            .out(),
    );
    r.add(shape("alias").samples(vec![
        sample![t(&[2, 3])],
        sample![t(&[])],
        sample![t(&[3, 4]).transposed()],
        sample![t(&[4, 2]).strided()],
        sample![t(&[2]).dtype(Long)],
    ]));
}
