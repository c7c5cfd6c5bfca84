//! Neural-network operators, continued: batch and group normalization and their backward
//! helpers.

use switchboard_tensor::ScalarType::{BFloat16, Float, Half, Int};

use crate::info::{Family, Grad, OpInfo};
use crate::sample::NONE;
use crate::spec::t;
use crate::{sample, Registry};

fn nn(name: &'static str) -> OpInfo {
    OpInfo::new(name, Family::Nn).differentiable()
}

/// Batch and group normalization.
pub fn register(r: &mut Registry) {
    batch_norm(r);
    group_norm(r);
}

fn batch_norm(r: &mut Registry) {
    // Running statistics: constants (PyTorch's are buffers), the variance positive.
    let rm = |c: i64| t(&[c]).no_grad();
    let rv = |c: i64| t(&[c]).pos().no_grad();
    let (m, eps) = (0.1, 1e-5);
    // (input, weight, bias, running_mean, running_var, training, momentum, eps)
    let native = || {
        vec![
            sample![t(&[2, 3]), NONE, NONE, NONE, NONE, true, m, eps],
            sample![t(&[2, 3, 4]), t(&[3]), t(&[3]), rm(3), rv(3), true, m, eps],
            sample![t(&[2, 3, 2, 2]), t(&[3]), NONE, rm(3), rv(3), false, m, eps],
            sample![
                t(&[3, 2, 2, 2]).transposed(),
                NONE,
                t(&[2]),
                NONE,
                NONE,
                true,
                0.3,
                1e-3
            ],
            sample![
                t(&[2, 2, 3]).f64(),
                t(&[2]).f64(),
                t(&[2]).f64(),
                rm(2).f64(),
                rv(2).f64(),
                true,
                m,
                eps
            ],
            sample![
                t(&[2, 2, 3]).f64(),
                t(&[2]).f64(),
                t(&[2]).f64(),
                rm(2).f64(),
                rv(2).f64(),
                false,
                m,
                eps
            ],
            sample![
                t(&[2, 3, 2]).dtype(Half),
                t(&[3]),
                t(&[3]),
                rm(3),
                rv(3),
                true,
                m,
                eps
            ],
            sample![
                t(&[2, 3, 2]).dtype(BFloat16),
                NONE,
                NONE,
                NONE,
                NONE,
                true,
                m,
                eps
            ],
            sample![t(&[0, 3]), NONE, NONE, rm(3), rv(3), false, m, eps],
            sample![t(&[3]), NONE, NONE, NONE, NONE, true, m, eps].error(),
            sample![t(&[2, 3]), t(&[4]), NONE, NONE, NONE, true, m, eps].error(),
            sample![t(&[2, 3]), NONE, NONE, NONE, NONE, false, m, eps].error(),
            sample![t(&[2, 3]), NONE, NONE, rm(3), NONE, true, m, eps].error(),
            sample![t(&[2, 3]).dtype(Int), NONE, NONE, NONE, NONE, true, m, eps].error(),
            sample![t(&[2, 3]), t(&[3]).f64(), NONE, NONE, NONE, true, m, eps].error(),
        ]
    };
    let mut composite: Vec<_> = native()
        .into_iter()
        .map(|mut s| {
            s.args.push(false.into());
            s
        })
        .collect();
    // An empty input in training: the composite returns it through the parameters' first
    // elements, the native operator fails (no batch statistics).
    composite.push(sample![
        t(&[0, 3]),
        t(&[3]),
        t(&[3]),
        NONE,
        NONE,
        true,
        m,
        eps,
        false
    ]);
    r.add(nn("batch_norm").samples(composite));
    let mut native_samples = native();
    native_samples.push(sample![t(&[0, 3]), NONE, NONE, NONE, NONE, true, m, eps].error());
    r.add(nn("native_batch_norm").samples(native_samples).meta().out());
    r.add(
        nn("_native_batch_norm_legit")
            .samples(vec![
                sample![t(&[2, 3]), NONE, NONE, rm(3), rv(3), true, m, eps],
                sample![
                    t(&[2, 3, 4]),
                    t(&[3]),
                    t(&[3]),
                    rm(3),
                    rv(3),
                    true,
                    0.5,
                    eps
                ],
                sample![
                    t(&[2, 3, 2, 2]),
                    t(&[3]),
                    t(&[3]),
                    rm(3),
                    rv(3),
                    false,
                    m,
                    eps
                ],
                sample![
                    t(&[2, 2, 3]).f64(),
                    t(&[2]).f64(),
                    NONE,
                    rm(2).f64(),
                    rv(2).f64(),
                    true,
                    m,
                    eps
                ],
                sample![
                    t(&[2, 3, 2]).dtype(Half),
                    NONE,
                    NONE,
                    rm(3),
                    rv(3),
                    true,
                    m,
                    eps
                ],
                sample![t(&[2, 3]), NONE, NONE, rm(2), rv(2), true, m, eps].error(),
            ])
            .meta(),
    );
    r.add(nn("_native_batch_norm_legit_functional").samples(vec![
        sample![t(&[2, 3]), NONE, NONE, rm(3), rv(3), true, m, eps],
        sample![
            t(&[2, 3, 4]),
            t(&[3]),
            t(&[3]),
            rm(3),
            rv(3),
            true,
            0.5,
            eps
        ],
        sample![
            t(&[2, 3, 2, 2]),
            t(&[3]),
            t(&[3]),
            rm(3),
            rv(3),
            false,
            m,
            eps
        ],
        sample![
            t(&[2, 2, 3]).f64(),
            t(&[2]).f64(),
            NONE,
            rm(2).f64(),
            rv(2).f64(),
            true,
            m,
            eps
        ],
        sample![t(&[2, 3]), NONE, NONE, rm(2), rv(2), true, m, eps].error(),
    ]));
    r.add(
        nn("_native_batch_norm_legit.no_stats")
            .samples(vec![
                sample![t(&[2, 3]), NONE, NONE, true, m, eps],
                sample![t(&[2, 3, 4]), t(&[3]), t(&[3]), true, m, eps],
                sample![
                    t(&[2, 2, 3]).f64(),
                    t(&[2]).f64(),
                    t(&[2]).f64(),
                    true,
                    m,
                    eps
                ],
                sample![t(&[2, 3]), NONE, NONE, false, m, eps].error(),
            ])
            .meta()
            .out(),
    );
    r.add(
        nn("_native_batch_norm_legit_no_training")
            .samples(vec![
                sample![t(&[2, 3]), NONE, NONE, rm(3), rv(3), m, eps],
                sample![t(&[2, 3, 4]), t(&[3]), t(&[3]), rm(3), rv(3), m, eps],
                sample![
                    t(&[2, 2, 3]).f64(),
                    t(&[2]).f64(),
                    t(&[2]).f64(),
                    rm(2).f64(),
                    rv(2).f64(),
                    m,
                    eps
                ],
                sample![t(&[2, 3]), NONE, NONE, rm(4), rv(4), m, eps].error(),
            ])
            .meta()
            .out(),
    );
    // Saved statistics as the forward computes them: the batch mean and a positive invstd.
    let saved = |c: i64| t(&[c]).no_grad();
    let invstd = |c: i64| t(&[c]).pos().no_grad();
    r.add(
        nn("native_batch_norm_backward")
            .samples(vec![
                sample![
                    t(&[2, 3, 2]),
                    t(&[2, 3, 2]).no_grad(),
                    t(&[3]),
                    NONE,
                    NONE,
                    saved(3),
                    invstd(3),
                    true,
                    eps,
                    [true, true, true]
                ],
                sample![
                    t(&[2, 3]),
                    t(&[2, 3]),
                    NONE,
                    rm(3),
                    rv(3),
                    NONE,
                    NONE,
                    false,
                    eps,
                    [true, true, true]
                ],
                sample![
                    t(&[2, 2, 3]).f64(),
                    t(&[2, 2, 3]).f64().no_grad(),
                    t(&[2]).f64(),
                    rm(2).f64(),
                    rv(2).f64(),
                    saved(2).f64(),
                    invstd(2).f64(),
                    true,
                    eps,
                    [true, false, true]
                ],
                sample![
                    t(&[2, 3]),
                    t(&[2, 3]),
                    NONE,
                    NONE,
                    NONE,
                    NONE,
                    NONE,
                    false,
                    eps,
                    [true, true, true]
                ]
                .error(),
            ])
            .meta()
            .out()
            .grad(Grad::CheckOnce(
                "its formula takes save_mean and save_invstd as functions of input (the training \
                 samples hold input constant); native_batch_norm's gradgradcheck covers the rest",
            )),
    );
}

fn group_norm(r: &mut Registry) {
    let eps = 1e-5;
    r.add(nn("group_norm").samples(vec![
        sample![t(&[2, 4, 3]), 2i64],
        sample![t(&[2, 4, 3]), 2i64, t(&[4]), t(&[4])],
        sample![t(&[2, 6, 2, 2]), 3i64, t(&[6]), NONE; eps = 1e-3],
        sample![t(&[3, 2]), 1i64, NONE, t(&[2])],
        sample![t(&[2, 4, 3]).f64(), 4i64, t(&[4]).f64(), t(&[4]).f64()],
        sample![t(&[0, 4, 2]), 2i64],
        sample![t(&[2, 3, 4]), 2i64].error(),
        sample![t(&[2, 4, 3]), 0i64].error(),
        sample![t(&[2, 4, 3]), 2i64, t(&[3])].error(),
        sample![t(&[4]), 1i64].error(),
    ]));
    // (input, weight, bias, N, C, HxW, group, eps)
    r.add(
        nn("native_group_norm")
            .samples(vec![
                sample![t(&[2, 4, 3]), NONE, NONE, 2i64, 4i64, 3i64, 2i64, eps],
                sample![t(&[2, 4, 3]), t(&[4]), t(&[4]), 2i64, 4i64, 3i64, 2i64, eps],
                sample![t(&[2, 6, 2, 2]), t(&[6]), NONE, 2i64, 6i64, 4i64, 3i64, eps],
                sample![t(&[3, 2]), NONE, t(&[2]), 3i64, 2i64, 1i64, 1i64, eps],
                sample![
                    t(&[2, 4, 3]).f64(),
                    t(&[4]).f64(),
                    t(&[4]).f64(),
                    2i64,
                    4i64,
                    3i64,
                    4i64,
                    eps
                ],
                sample![
                    t(&[2, 4, 3]).dtype(Half),
                    t(&[4]).dtype(Float),
                    NONE,
                    2i64,
                    4i64,
                    3i64,
                    2i64,
                    eps
                ],
                sample![t(&[2, 4, 3]), NONE, NONE, 2i64, 4i64, 4i64, 2i64, eps].error(),
                sample![t(&[2, 4, 3]), NONE, NONE, 2i64, 4i64, 3i64, 3i64, eps].error(),
                sample![t(&[2, 4, 3]), t(&[3]), NONE, 2i64, 4i64, 3i64, 2i64, eps].error(),
            ])
            .meta()
            .out(),
    );
    let stats = |n: i64, g: i64| t(&[n, g]).no_grad();
    let rstd = |n: i64, g: i64| t(&[n, g]).pos().no_grad();
    r.add(
        nn("native_group_norm_backward")
            .samples(vec![
                sample![
                    t(&[2, 4, 3]),
                    t(&[2, 4, 3]).no_grad(),
                    stats(2, 2),
                    rstd(2, 2),
                    t(&[4]),
                    2i64,
                    4i64,
                    3i64,
                    2i64,
                    [true, true, true]
                ],
                sample![
                    t(&[2, 4, 3]).f64(),
                    t(&[2, 4, 3]).f64().no_grad(),
                    stats(2, 4).f64(),
                    rstd(2, 4).f64(),
                    NONE,
                    2i64,
                    4i64,
                    3i64,
                    4i64,
                    [true, false, true]
                ],
                sample![
                    t(&[2, 4, 3]),
                    t(&[2, 4, 3]),
                    stats(1, 2),
                    rstd(2, 2),
                    NONE,
                    2i64,
                    4i64,
                    3i64,
                    2i64,
                    [true, true, true]
                ]
                .error(),
            ])
            .meta()
            .out()
            .grad(Grad::NotImplemented(
                "PyTorch 2.15 has no derivative for native_group_norm_backward either",
            )),
    );
}
