//! Sorting along a dimension: `sort`, `sort.stable`, `topk`.

use switchboard_tensor::ScalarType::{Bool, Long};

use crate::info::{Family, OpInfo};
use crate::spec::t;
use crate::{sample, Registry};

fn op(name: &'static str) -> OpInfo {
    OpInfo::new(name, Family::Shape).differentiable()
}

/// The sorting family (random values: no ties, whose order PyTorch leaves open).
pub fn register(r: &mut Registry) {
    let with_nan = || t(&[2, 3]).literal(&[3.0, 1.0, 2.0, f64::NAN, 0.0, -1.0]);
    r.add(
        op("sort")
            .samples(vec![
                sample![t(&[2, 5])],
                sample![t(&[3, 4]), 0i64, true],
                sample![t(&[3, 4]).transposed(), -1i64],
                sample![t(&[4, 2]).strided(), 0i64],
                sample![t(&[])],
                sample![t(&[0, 3])],
                sample![t(&[5]).f64(), 0i64, true],
                sample![t(&[2, 3]).dtype(Long).range(-50.0, 50.0), 1i64],
                sample![with_nan()].no_grad("NaN"),
                sample![with_nan(), 1i64, true].no_grad("NaN"),
                sample![t(&[2, 3]), 2i64].error(),
            ])
            // CompositeExplicitAutograd over `sort.stable`, as in PyTorch: no Meta kernel
            // of its own.
            .out(),
    );
    r.add(
        op("sort.stable")
            .samples(vec![
                sample![t(&[2, 5]); stable = true],
                sample![t(&[3, 4]); stable = true, dim = 0i64, descending = true],
                sample![t(&[4]).dtype(Bool); stable = true],
                sample![with_nan(); stable = false, dim = 0i64].no_grad("NaN"),
            ])
            .meta()
            .out(),
    );
    r.add(
        op("topk")
            .samples(vec![
                sample![t(&[2, 5]), 2i64],
                sample![t(&[4, 3]), 3i64, 0i64, false],
                sample![t(&[3, 4]).transposed(), 1i64, 0i64],
                sample![t(&[]), 1i64],
                sample![t(&[0, 3]), 2i64],
                sample![t(&[6]).f64(), 6i64],
                sample![t(&[2, 3]).dtype(Long).range(-50.0, 50.0), 2i64],
                sample![with_nan(), 2i64].no_grad("NaN"),
                sample![t(&[2, 3]), 4i64].error(),
                sample![t(&[2, 3]), -1i64].error(),
                sample![t(&[3]).dtype(Bool), 1i64].error_from_kernel_dtype(),
            ])
            .meta()
            .out(),
    );
}
