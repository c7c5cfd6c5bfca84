//! Tiling, padding and triangles: `repeat`, `repeat_interleave`, `constant_pad_nd`, `pad`,
//! `triu`, `tril`.

use switchboard_tensor::ScalarType::{Bool, Int, Long};

use crate::info::{Family, Grad, OpInfo, Promotion};
use crate::spec::{longs, mask, t};
use crate::{sample, Registry};

fn op(name: &'static str) -> OpInfo {
    OpInfo::new(name, Family::Shape)
        .differentiable()
        .promotion(Promotion::SameAsSelf)
}

/// The tiling, padding and triangle operators.
pub fn register(r: &mut Registry) {
    let empty: &[i64] = &[];
    r.add(
        op("repeat")
            .samples(vec![
                sample![t(&[2, 3]), [2i64, 2]],
                sample![t(&[2, 3]), [2i64, 1, 3]],
                sample![t(&[3, 2]).transposed(), [1i64, 2]],
                sample![t(&[4, 2]).strided(), [3i64, 1]],
                sample![t(&[]), empty],
                sample![t(&[]), [2i64, 3]],
                sample![t(&[2, 3]), [0i64, 2]],
                sample![t(&[0, 3]), [2i64, 2]],
                sample![t(&[3]).f64(), [2i64]],
                sample![t(&[2]).dtype(Long), [3i64]],
                sample![mask(&[2]), [2i64]],
                sample![t(&[2, 3]), [2i64]].error(),
                sample![t(&[2, 3]), [-1i64, 2]].error(),
            ])
            .meta()
            .out(),
    );
    r.add(op("repeat_interleave.self_int").samples(vec![
        sample![t(&[2, 3]), 2i64],
        sample![t(&[2, 3]), 2i64; dim = 1i64],
        sample![t(&[2, 3, 4]), 3i64; dim = -1i64],
        sample![t(&[3, 2]).transposed(), 2i64; dim = 0i64, output_size = 6i64],
        sample![t(&[2, 3]), 0i64; dim = 0i64],
        sample![t(&[]), 2i64],
        sample![t(&[2]).dtype(Long), 3i64],
        sample![mask(&[2, 2]), 2i64; dim = 1i64],
        sample![t(&[2, 3]), -1i64; dim = 0i64].error(),
        sample![t(&[2, 3]), 2i64; dim = 2i64].error(),
        sample![t(&[2, 3]), 2i64; dim = 0i64, output_size = 5i64].error(),
        sample![t(&[]), 2i64; dim = 0i64].error(),
    ]));
    // `repeat_interleave.Tensor`'s length is the sum of its entries, read from the data unless
    // `output_size` gives it (Note [Data-dependent output shapes] in switchboard-cpu).
    r.add(
        OpInfo::new("repeat_interleave.Tensor", Family::Shape)
            .samples(vec![
                sample![longs(&[1, 0, 3])].needs_data(),
                sample![longs(&[2, 1]).dtype(Int)].needs_data(),
                sample![longs(&[0, 0])].needs_data(),
                sample![longs(&[1, 0, 3]); output_size = 4i64],
                sample![longs(&[1, 0, 3]); output_size = 5i64].error_from_data(),
                sample![longs(&[1, -1])].needs_data().error(),
                sample![longs(&[1, 2]).shape(&[1, 2])].error(),
                sample![t(&[2])].error(),
            ])
            .grad(Grad::None("integer result"))
            .meta()
            .out(),
    );
    r.add(op("repeat_interleave.self_Tensor").samples(vec![
        sample![t(&[2, 3]), longs(&[1, 2]); dim = 0i64].needs_data(),
        sample![t(&[2, 3]), longs(&[1, 2, 0]); dim = 1i64].needs_data(),
        sample![t(&[2, 3]), longs(&[2]); dim = -1i64].needs_data(),
        sample![t(&[2, 3]), t(&[]).dtype(Long).literal(&[2.0]); dim = 1i64].needs_data(),
        sample![t(&[3, 2]).transposed(), longs(&[1, 0, 2]); dim = 0i64].needs_data(),
        sample![t(&[]), longs(&[3])].needs_data(),
        sample![t(&[2, 3]), longs(&[1, 2]); dim = 0i64, output_size = 3i64],
        sample![t(&[2, 3]), longs(&[1, 2])].error(),
        sample![t(&[2, 3]), longs(&[1, 2]).shape(&[1, 2]); dim = 0i64].error(),
        sample![t(&[2, 3]), longs(&[1, 2]); dim = 2i64].error(),
        sample![t(&[]), longs(&[3]); dim = 0i64].error(),
    ]));
    r.add(
        op("constant_pad_nd")
            .samples(vec![
                sample![t(&[2, 3]), [1i64, 2]],
                sample![t(&[2, 3]), [-1i64, 1, 1, 0]; value = 2.5],
                sample![t(&[2, 3, 4]), [1i64, 1, 0, 2, 1, 0]],
                sample![t(&[3, 4]).transposed(), [1i64, 1]],
                sample![t(&[2, 3]), [-1i64, -1]],
                sample![t(&[2, 3]), [-3i64, 0]],
                sample![t(&[2, 3]), empty],
                sample![t(&[3]).f64(), [2i64, 1]; value = -1.0],
                sample![t(&[2]).dtype(Long), [1i64, 1]; value = 2.5],
                sample![t(&[1]).dtype(Bool), [1i64, 1]; value = 2i64],
                sample![t(&[2, 3]), [1i64]].error(),
                sample![t(&[2, 3]), [1i64, 1, 1, 1, 1, 1]].error(),
                sample![t(&[2, 3]), [-2i64, -2]].error(),
            ])
            .meta()
            .out(),
    );
    r.add(
        OpInfo::new("pad", Family::Shape)
            .samples(vec![
                sample![t(&[2, 3]), [1i64, 1]],
                sample![t(&[2, 3]), [1i64, 1], "constant", 2.0],
                sample![t(&[2, 3]), [1i64, 1], "reflect"],
                sample![t(&[1, 2, 3, 3]), [1i64, 1, 2, 0], "replicate"],
                sample![t(&[2, 3]), [-1i64, 2, 1, 0]],
                sample![t(&[2, 3]), [1i64, 1], "reflect", 1.0].error(),
                sample![t(&[2, 3]), [1i64, 1], "foo"].error(),
                sample![t(&[2, 3]), [1i64, 1, 1]].error(),
            ])
            .differentiable()
            .promotion(Promotion::SameAsSelf),
    );
    for name in ["triu", "tril"] {
        r.add(
            op(name)
                .samples(vec![
                    sample![t(&[3, 3])],
                    sample![t(&[3, 4]), 1i64],
                    sample![t(&[4, 3]), -1i64],
                    sample![t(&[2, 3, 3]).transposed(), 0i64],
                    sample![t(&[3, 2]), 5i64],
                    sample![t(&[3, 2]), -5i64],
                    sample![t(&[0, 3])],
                    sample![t(&[3, 3]).f64(), 1i64],
                    sample![t(&[3, 3]).dtype(Long)],
                    sample![mask(&[2, 2, 2])],
                    sample![t(&[3])].error(),
                ])
                .meta()
                .inplace()
                .out(),
        );
    }
}
