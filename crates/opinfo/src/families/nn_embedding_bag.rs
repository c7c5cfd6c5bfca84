//! Embedding bags: `_embedding_bag` (sum, mean and max bags, per-sample weights, a padding
//! index, a last offset), its backwards, and the `embedding_bag` composites.

use switchboard_tensor::ScalarType::{Half, Int};

use crate::info::{Family, Grad, OpInfo};
use crate::sample::{Sample, NONE};
use crate::spec::{longs, t};
use crate::{sample, Registry};

/// Bags `[0, 2]`, `[]`, `[4, 1, 3]` of a `(5, 3)` table, in every mode, with and without
/// per-sample weights, a padding index, a last offset; float64 (gradcheck) and float32 (the
/// fast path, with no offset2bag in sum mode).
fn bag_samples() -> Vec<Sample> {
    let (i, o) = (|| longs(&[0, 2, 4, 1, 3]), || longs(&[0, 2, 2]));
    let w = || t(&[5, 3]).f64();
    vec![
        sample![w(), i(), o()],
        sample![w(), i(), o(), false, 1i64],
        sample![w(), i(), o(), false, 2i64],
        sample![w(), i(), o(), false, 0i64, false, t(&[5]).f64()],
        sample![w(), i(), o(), false, 1i64, false, NONE, false, 2i64],
        sample![w(), i(), o(), false, 2i64, false, NONE, false, 4i64],
        sample![w(), i(), longs(&[0, 2, 5]), false, 0i64, false, NONE, true],
        sample![w(), i(), longs(&[0, 2, 5]), false, 2i64, false, NONE, true],
        sample![t(&[5, 3]), i(), o()],
        sample![t(&[5, 3]), i(), o(), false, 1i64],
        sample![t(&[5, 3]), i(), o(), false, 0i64, false, t(&[5])],
        sample![t(&[5, 3]), i().dtype(Int), o().dtype(Int), false, 2i64],
        sample![t(&[5, 3]), i().dtype(Int), o(), false, 1i64],
        sample![t(&[5, 3]).transposed().f64(), i(), o(), false, 1i64],
        sample![t(&[5, 3]).dtype(Half), i(), o(), false, 1i64],
        sample![t(&[5, 3]), i(), longs(&[]), false, 1i64],
        sample![t(&[5, 3]), longs(&[]), longs(&[0, 0]), false, 2i64].no_grad("no indices"),
        sample![t(&[5, 3]), longs(&[0, 5]), longs(&[0])].error_from_data(),
        sample![t(&[5, 3]), longs(&[0, -1]), longs(&[0]), false, 2i64].error_from_data(),
        sample![t(&[5, 3]), i(), longs(&[1, 2])].error_from_data(),
        sample![t(&[5, 3]), i(), longs(&[0, 6])].error_from_data(),
        sample![t(&[5, 3]), i(), o(), false, 3i64].error(),
        sample![t(&[5, 3]), i(), o(), false, 1i64, false, t(&[5])].error(),
        sample![t(&[5, 3]), i(), o(), false, 0i64, false, t(&[5]).f64()].error(),
        sample![t(&[5, 3]), i(), o(), false, 0i64, false, t(&[4])].error(),
        sample![t(&[5, 3]).long(), i(), o()].error(),
        sample![t(&[5, 3]), t(&[5]), o()].error(),
        sample![t(&[5]), i(), o()].error(),
        sample![t(&[5, 3]), i(), longs(&[]), false, 0i64, false, NONE, true].error(),
    ]
}

/// The embedding-bag operators.
pub fn register(r: &mut Registry) {
    let once = Grad::CheckOnce("PyTorch 2.15 has no formula for _embedding_bag_backward");
    r.add(
        OpInfo::new("_embedding_bag", Family::Nn)
            .samples(bag_samples())
            .grad(once)
            .meta()
            .out(),
    );
    r.add(
        OpInfo::new("_embedding_bag_forward_only", Family::Nn)
            .samples(bag_samples())
            .grad(Grad::NotImplemented(
                "PyTorch 2.15 has no formula for it either",
            ))
            .meta()
            .out(),
    );
    let four = |s: Sample| {
        // embedding_bag takes no padding_idx argument.
        let mut s = s;
        s.args.truncate(8);
        s
    };
    r.add(
        OpInfo::new("embedding_bag", Family::Nn)
            .samples(bag_samples().into_iter().map(four).collect())
            .grad(once),
    );
    let (i, o) = (|| longs(&[0, 2, 4, 1, 3]), || longs(&[0, 2, 2]));
    r.add(
        OpInfo::new("embedding_bag.padding_idx", Family::Nn)
            .samples(vec![
                sample![
                    t(&[5, 3]).f64(),
                    i(),
                    o(),
                    false,
                    1i64,
                    false,
                    NONE,
                    false,
                    NONE
                ],
                sample![
                    t(&[5, 3]).f64(),
                    i(),
                    o(),
                    false,
                    1i64,
                    false,
                    NONE,
                    false,
                    -3i64
                ],
                sample![
                    t(&[5, 3]).f64(),
                    i(),
                    o(),
                    false,
                    2i64,
                    false,
                    NONE,
                    false,
                    4i64
                ],
                sample![t(&[5, 3]), i(), o(), false, 1i64, false, NONE, false, 5i64].error(),
                sample![t(&[5, 3]), i(), o(), false, 1i64, false, NONE, false, -6i64].error(),
            ])
            .grad(once),
    );
    backwards(r);
}

fn backwards(r: &mut Registry) {
    let (i, o) = (|| longs(&[0, 2, 4, 1, 3]), || longs(&[0, 2, 2]));
    let o2b = || longs(&[0, 0, 2, 2, 2]);
    let sizes = || longs(&[2, 0, 3]);
    let no_formula = |name: &'static str| {
        OpInfo::new(name, Family::Nn).grad(Grad::NotImplemented(
            "PyTorch 2.15's formula is not_implemented",
        ))
    };
    r.add(
        no_formula("_embedding_bag_backward")
            .samples(vec![
                sample![
                    t(&[3, 3]),
                    i(),
                    o(),
                    o2b(),
                    sizes(),
                    sizes(),
                    5i64,
                    false,
                    0i64,
                    false,
                    NONE
                ],
                sample![
                    t(&[3, 3]),
                    i(),
                    o(),
                    longs(&[]),
                    sizes(),
                    sizes(),
                    5i64,
                    true,
                    1i64,
                    false,
                    NONE
                ],
                sample![
                    t(&[3, 3]).f64(),
                    i(),
                    o(),
                    o2b(),
                    sizes(),
                    longs(&[2, 0, 3, 0, 0, 0, 4, 1, 3]).shape(&[3, 3]),
                    5i64,
                    false,
                    2i64,
                    false,
                    NONE
                ],
                sample![
                    t(&[3, 3]),
                    i(),
                    o(),
                    o2b(),
                    sizes(),
                    sizes(),
                    5i64,
                    false,
                    0i64,
                    false,
                    t(&[5])
                ],
                sample![
                    t(&[3, 3]),
                    i(),
                    o(),
                    o2b(),
                    sizes(),
                    sizes(),
                    5i64,
                    false,
                    1i64,
                    false,
                    NONE,
                    2i64
                ],
                sample![
                    t(&[3, 3]),
                    i(),
                    o(),
                    o2b(),
                    sizes(),
                    sizes(),
                    5i64,
                    false,
                    0i64,
                    true,
                    NONE
                ]
                .error(),
                sample![
                    t(&[3, 3]),
                    i(),
                    o(),
                    o2b(),
                    sizes(),
                    sizes(),
                    4i64,
                    false,
                    0i64,
                    false,
                    NONE
                ]
                .error_from_data(),
            ])
            .meta(),
    );
    r.add(
        no_formula("_embedding_bag_dense_backward")
            .samples(vec![
                sample![
                    t(&[3, 3]),
                    i(),
                    o2b(),
                    sizes(),
                    sizes(),
                    5i64,
                    false,
                    0i64,
                    NONE
                ],
                sample![
                    t(&[3, 3]).f64(),
                    i(),
                    o2b(),
                    sizes(),
                    sizes(),
                    6i64,
                    true,
                    1i64,
                    NONE,
                    4i64
                ],
                sample![
                    t(&[3, 3]),
                    i(),
                    o2b(),
                    sizes(),
                    sizes(),
                    5i64,
                    false,
                    0i64,
                    t(&[5])
                ],
                sample![
                    t(&[3, 3]),
                    i(),
                    o2b(),
                    sizes(),
                    sizes(),
                    5i64,
                    false,
                    1i64,
                    t(&[5])
                ]
                .error(),
            ])
            .meta()
            .out(),
    );
    r.add(
        OpInfo::new("_embedding_bag_per_sample_weights_backward", Family::Nn)
            .samples(vec![
                sample![t(&[3, 3]), t(&[5, 3]), i(), o(), o2b(), 0i64],
                sample![
                    t(&[3, 3]).f64(),
                    t(&[5, 3]).f64(),
                    i(),
                    o(),
                    longs(&[]),
                    0i64,
                    4i64
                ],
                sample![t(&[3, 3]), t(&[5, 3]), i(), o(), o2b(), 1i64].error(),
            ])
            .grad(Grad::NotImplemented(
                "PyTorch 2.15 has no formula for it either",
            ))
            .meta()
            .out(),
    );
}
