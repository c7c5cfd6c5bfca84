//! Advanced indexing and scattering: `index.Tensor`, `index_put`, `scatter`, `scatter_reduce`.

use switchboard_tensor::ScalarType::{Bool, Float, Int, Long};

use crate::info::{Family, OpInfo};
use crate::sample::NONE;
use crate::spec::{longs, mask, t, TensorSpec};
use crate::{sample, Registry};

fn op(name: &'static str) -> OpInfo {
    OpInfo::new(name, Family::Shape).differentiable()
}

/// The indexing family.
pub fn register(r: &mut Registry) {
    advanced_indexing(r);
    scattering(r);
    masked_scattering(r);
    view_scattering(r);
}

/// `Tensor?[]` index lists.
fn idx(items: Vec<Option<TensorSpec>>) -> Vec<Option<TensorSpec>> {
    items
}

fn advanced_indexing(r: &mut Registry) {
    r.add(
        op("index.Tensor")
            .samples(vec![
                sample![t(&[3, 4]), idx(vec![Some(longs(&[2, 0, 2]))])],
                sample![t(&[3, 4]), idx(vec![None, Some(longs(&[1, -1]))])],
                // Adjacent indices broadcast together: [2, 1] with [3].
                sample![
                    t(&[3, 4, 5]),
                    idx(vec![
                        Some(longs(&[0, 2]).shape(&[2, 1])),
                        Some(longs(&[1, 3, 0]))
                    ])
                ],
                // Separated by a slice: the broadcast dimensions lead the result.
                sample![
                    t(&[3, 4, 5]),
                    idx(vec![Some(longs(&[0, 2])), None, Some(longs(&[1, 4]))])
                ],
                sample![
                    t(&[3, 4, 5]).transposed(),
                    idx(vec![None, Some(longs(&[0, 2]).shape(&[2, 1]))])
                ],
                sample![t(&[3, 4]).f64(), idx(vec![Some(longs(&[1]).shape(&[]))])],
                sample![t(&[4, 2]), idx(vec![Some(longs(&[3, 1]).dtype(Int))])],
                sample![t(&[3, 4]).dtype(Long), idx(vec![Some(longs(&[]))])],
                sample![t(&[3, 4]), idx(vec![Some(mask(&[3]))])].needs_data(),
                sample![t(&[3, 4]), idx(vec![Some(mask(&[3, 4]))])].needs_data(),
                sample![t(&[3, 4]), idx(vec![Some(longs(&[1]).dtype(Float))])].error(),
                sample![t(&[3, 4]), idx(vec![Some(mask(&[4]))])].error(),
                sample![t(&[3]), idx(vec![Some(longs(&[0])), Some(longs(&[0]))])].error(),
                sample![
                    t(&[3, 4]),
                    idx(vec![Some(longs(&[0, 1])), Some(longs(&[0, 1, 2]))])
                ]
                .error(),
                sample![t(&[3, 4]), idx(vec![])].error(),
                sample![t(&[3, 4]), idx(vec![None, Some(longs(&[4]))])].error_from_data(),
                sample![t(&[3, 4]), idx(vec![Some(longs(&[-4]))])].error_from_data(),
            ])
            .meta()
            .out(),
    );
    r.add(
        op("index_put")
            .samples(vec![
                sample![t(&[3, 4]), idx(vec![Some(longs(&[2, 0]))]), t(&[2, 4])],
                // Repeated indices add up.
                sample![
                    t(&[3, 4]),
                    idx(vec![Some(longs(&[0, 2, 0]))]),
                    t(&[3, 4]),
                    true
                ],
                sample![t(&[3, 4]), idx(vec![None, Some(longs(&[3, 1]))]), t(&[2])],
                sample![
                    t(&[3, 4]).transposed(),
                    idx(vec![Some(longs(&[1]))]),
                    t(&[])
                ],
                sample![
                    t(&[3, 4, 5]),
                    idx(vec![Some(longs(&[0, 2])), None, Some(longs(&[1, -1]))]),
                    t(&[2, 4])
                ],
                sample![
                    t(&[3, 4]).f64(),
                    idx(vec![Some(longs(&[1, 2]).dtype(Int)), Some(longs(&[0, 3]))]),
                    t(&[2]).f64(),
                    true
                ],
                sample![t(&[3, 4]), idx(vec![Some(mask(&[3, 4]))]), t(&[])],
                sample![
                    t(&[2, 3]).dtype(Bool),
                    idx(vec![Some(longs(&[1]))]),
                    t(&[3]).dtype(Bool)
                ],
                // PyTorch's meta function checks nothing: these fail on the CPU only.
                sample![t(&[3, 4]), idx(vec![Some(longs(&[0]))]), t(&[4]).f64()].error_from_data(),
                sample![t(&[3, 4]), idx(vec![Some(longs(&[0, 1]))]), t(&[3, 4])].error_from_data(),
                sample![t(&[3, 4]), idx(vec![Some(longs(&[3]))]), t(&[])].error_from_data(),
            ])
            .meta()
            .inplace()
            .out(),
    );
}

fn scattering(r: &mut Registry) {
    let gidx = || longs(&[0, 1, 1, 0, 2, 2]).shape(&[2, 3]);
    r.add(
        op("scatter.src")
            .samples(vec![
                // Distinct positions: with repeated ones, which write remains is unspecified.
                sample![
                    t(&[3, 3]),
                    0i64,
                    longs(&[0, 1, 2, 2, 0, 1]).shape(&[2, 3]),
                    t(&[2, 3])
                ],
                // A source larger than the index: PyTorch's backward fails on it too.
                sample![
                    t(&[2, 4]),
                    1i64,
                    longs(&[3, 0, 1, 2]).shape(&[2, 2]),
                    t(&[2, 3])
                ]
                .no_grad("src larger than index"),
                sample![
                    t(&[3, 4]).transposed(),
                    -1i64,
                    longs(&[2]).shape(&[1, 1]),
                    t(&[1, 1])
                ],
                sample![t(&[]), 0i64, longs(&[0]).shape(&[]), t(&[])],
                sample![t(&[3]).f64(), 0i64, longs(&[]), t(&[2]).f64()]
                    .no_grad("src larger than index"),
                sample![
                    t(&[2, 3]).dtype(Long),
                    1i64,
                    gidx().dtype(Int),
                    t(&[2, 3]).dtype(Long)
                ],
                sample![t(&[2, 3]), 1i64, gidx(), t(&[2, 3]).f64()].error(),
                sample![t(&[2, 3]), 1i64, gidx().dtype(Float), t(&[2, 3])].error(),
                sample![
                    t(&[3, 4]),
                    0i64,
                    longs(&[0, 1, 2, 1, 0]).shape(&[1, 5]),
                    t(&[2, 3])
                ]
                .error(),
                sample![t(&[3, 4]), 0i64, longs(&[0]).shape(&[1, 1]), t(&[2])].error(),
                sample![t(&[2, 3]), 1i64, longs(&[3]).shape(&[1, 1]), t(&[1, 1])].error_from_data(),
            ])
            .meta()
            .inplace()
            .out(),
    );
    r.add(
        op("scatter.value")
            .samples(vec![
                sample![t(&[3, 3]), 0i64, gidx(), 2.5],
                sample![
                    t(&[3, 4]).transposed(),
                    1i64,
                    longs(&[2, 0]).shape(&[1, 2]),
                    -1i64
                ],
                sample![t(&[4]).dtype(Long), 0i64, longs(&[1, 3]), 2.7],
                sample![
                    t(&[2, 2]).dtype(Bool),
                    0i64,
                    longs(&[1, 0]).shape(&[1, 2]),
                    true
                ],
                sample![
                    t(&[3, 4]),
                    0i64,
                    longs(&[0, 1, 2, 1, 0]).shape(&[1, 5]),
                    1.0
                ]
                .error(),
                sample![t(&[3]), 0i64, longs(&[5]), 1.0].error_from_data(),
            ])
            .meta()
            .inplace()
            .out(),
    );
    // Index 0 twice and 1 twice: groups of two, plus positions no index reaches.
    let pairs = || longs(&[0, 0, 1, 1]);
    let mut reduce_samples = Vec::new();
    for reduce in ["sum", "prod", "mean", "amax", "amin"] {
        for include_self in [true, false] {
            reduce_samples.push(
                sample![t(&[3]), 0i64, pairs(), t(&[4]), reduce; include_self = include_self],
            );
        }
        reduce_samples.push(sample![
            t(&[2, 3]).transposed(),
            1i64,
            longs(&[2, 0, 2, 1]).shape(&[2, 2]),
            t(&[2, 2]),
            reduce
        ]);
        reduce_samples.push(
            sample![t(&[4]).dtype(Long), 0i64, pairs(), longs(&[1, 2, -3, 4]), reduce; include_self = false]
                .no_grad("integer"),
        );
    }
    // `amax` with a NaN among the scattered elements; `prod` with zeros (one alone in its
    // group, two in another).
    reduce_samples.push(
        sample![
            t(&[3]),
            0i64,
            pairs(),
            t(&[4]).literal(&[1.0, f64::NAN, 3.0, 4.0]),
            "amax"
        ]
        .no_grad("NaN"),
    );
    reduce_samples.push(
        sample![
            t(&[3]).literal(&[2.0, 3.0, 0.5]),
            0i64,
            longs(&[0, 0, 1, 1, 2]),
            t(&[5]).literal(&[0.0, 1.5, 0.0, 0.0, -2.0]),
            "prod"
        ]
        .no_grad("two zeros in a product: PyTorch's gradient is not the numerical one"),
    );
    reduce_samples.push(sample![
        t(&[3]).literal(&[2.0, 3.0, 0.5]),
        0i64,
        longs(&[0, 0, 1]),
        t(&[3]).literal(&[0.0, 1.5, 2.0]),
        "prod"
    ]);
    reduce_samples.push(sample![t(&[3]), 0i64, pairs(), t(&[4]), "median"].error());
    reduce_samples.push(
        sample![
            t(&[3]).dtype(Bool),
            0i64,
            pairs(),
            t(&[4]).dtype(Bool),
            "mean"
        ]
        .error_from_data(),
    );
    r.add(
        op("scatter_reduce.two")
            .samples(reduce_samples)
            .meta()
            .inplace()
            .out(),
    );
}

fn masked_scattering(r: &mut Registry) {
    let m34 = || {
        t(&[3, 4])
            .dtype(Bool)
            .literal(&[1., 0., 1., 0., 0., 0., 1., 1., 1., 0., 0., 0.])
    };
    r.add(
        op("masked_scatter")
            .samples(vec![
                sample![t(&[3, 4]), m34(), t(&[3, 4])],
                sample![t(&[3, 4]), m34(), t(&[5])],
                sample![t(&[3, 4]).transposed(), m34(), t(&[6])],
                sample![
                    t(&[3, 4]),
                    t(&[4]).dtype(Bool).literal(&[0., 1., 1., 0.]),
                    t(&[6])
                ],
                sample![
                    t(&[]).f64(),
                    t(&[]).dtype(Bool).literal(&[1.]),
                    t(&[2]).f64()
                ],
                sample![t(&[3, 4]).dtype(Long), m34(), t(&[5]).dtype(Long)],
                sample![t(&[3, 4]), m34(), t(&[5]).dtype(Long)].error(),
                sample![t(&[3, 4]), t(&[3, 4]), t(&[5])].error(),
                sample![t(&[3, 4]), t(&[3]).dtype(Bool), t(&[12])].error(),
                sample![t(&[3, 4]), m34(), t(&[4])].error_from_data(),
            ])
            .meta()
            .inplace()
            .out(),
    );
}

/// The `*_scatter` operators: `self` with a view's region replaced (composites: they run on
/// every backend).
fn view_scattering(r: &mut Registry) {
    r.add(
        op("select_scatter")
            .samples(vec![
                sample![t(&[3, 4]), t(&[4]), 0i64, 1i64],
                sample![t(&[3, 4]).transposed(), t(&[3]), 1i64, -1i64],
                sample![t(&[2, 3, 4]), t(&[2, 4]).f64(), 1i64, 2i64].no_grad("mixed dtypes"),
                sample![t(&[3]), t(&[]), 0i64, 0i64],
                sample![t(&[3, 4]), t(&[3]), 0i64, 1i64].error(),
                sample![t(&[3, 4]), t(&[4]), 0i64, 5i64].error(),
            ])
            .out(),
    );
    r.add(
        op("slice_scatter")
            .samples(vec![
                sample![t(&[3, 4]), t(&[3, 2]), 1i64, 0i64, 4i64, 2i64],
                sample![t(&[4, 3]), t(&[2, 3]), 0i64, NONE, 2i64],
                sample![t(&[5]), t(&[5])],
                sample![t(&[3, 4]).transposed(), t(&[2, 4]), 0i64, 1i64],
                sample![t(&[3, 4]), t(&[3, 3]), 1i64, 0i64, 4i64, 2i64].error(),
            ])
            .out(),
    );
    r.add(
        op("diagonal_scatter")
            .samples(vec![
                sample![t(&[3, 4]), t(&[3])],
                sample![t(&[3, 4]), t(&[3]), 1i64],
                sample![t(&[3, 4]), t(&[2]), -1i64],
                sample![t(&[2, 3, 4]).transposed(), t(&[3, 2]), 0i64, 2i64, 0i64],
                sample![t(&[3, 4]), t(&[0]), 5i64],
                sample![t(&[3, 4]), t(&[2]), 1i64].error(),
                sample![t(&[3, 4]), t(&[3]), 0i64, 1i64, 1i64].error(),
            ])
            .out(),
    );
    r.add(
        op("as_strided_scatter")
            .samples(vec![
                sample![t(&[3, 4]), t(&[2, 2]), [2i64, 2], [1i64, 2], 1i64],
                sample![t(&[6]), t(&[2, 3]), [2i64, 3], [3i64, 1]],
                sample![t(&[3, 4]), t(&[2, 3]), [2i64, 2], [1i64, 2], 1i64].error(),
            ])
            .out(),
    );
}
