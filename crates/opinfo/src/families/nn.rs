//! Neural-network operators: convolutions, pooling, softmax, losses, dropout, embedding, layer
//! norm, and the backward helpers autograd calls.

use switchboard_tensor::ScalarType::{BFloat16, Double, Float, Half, Int};

use crate::info::{Family, Grad, OpInfo, Promotion, Stats};
use crate::sample::NONE;
use crate::spec::{index, longs, mask, t};
use crate::{sample, Registry};

fn nn(name: &'static str) -> OpInfo {
    OpInfo::new(name, Family::Nn).differentiable()
}

/// The neural-network family.
pub fn register(r: &mut Registry) {
    convolutions(r);
    pooling_and_softmax(r);
    losses(r);
    others(r);
    one_hot(r);
}

fn one_hot(r: &mut Registry) {
    let long2 = |v: &[f64]| {
        t(&[2, 2])
            .dtype(switchboard_tensor::ScalarType::Long)
            .literal(v)
    };
    r.add(
        OpInfo::new("one_hot", Family::Nn)
            .samples(vec![
                // Non-empty inputs read their values (min, max): Meta cannot run them.
                sample![longs(&[0, 2, 1])].needs_data(),
                sample![longs(&[0, 2, 1]), 5i64].needs_data(),
                sample![long2(&[0.0, 3.0, 1.0, 1.0])].needs_data(),
                sample![longs(&[]), 3i64],
                sample![
                    t(&[])
                        .dtype(switchboard_tensor::ScalarType::Long)
                        .literal(&[1.0]),
                    3i64
                ]
                .needs_data(),
                sample![longs(&[0, 2, 1]), 2i64].error().needs_data(),
                sample![longs(&[0, 2, 1]), -2i64].error().needs_data(),
                sample![longs(&[0, -2, 1])].error().needs_data(),
                sample![longs(&[])].error(),
                sample![t(&[3]).dtype(Int)].error(),
            ])
            .grad(Grad::None("an integer result")),
    );
}

fn convolutions(r: &mut Registry) {
    r.add(nn("conv1d").samples(vec![
        sample![t(&[1, 2, 5]), t(&[3, 2, 2])],
        sample![t(&[2, 2, 5]), t(&[3, 2, 3]), t(&[3]), [2i64], [1i64]],
        sample![
            t(&[1, 4, 6]),
            t(&[2, 2, 2]),
            NONE,
            [1i64],
            [0i64],
            [2i64],
            2i64
        ],
        sample![t(&[2, 5]), t(&[3, 2, 2])],
        sample![t(&[1, 3, 5]), t(&[3, 2, 2])].error(),
    ]));
    r.add(nn("conv2d").samples(vec![
        sample![t(&[1, 2, 4, 3]), t(&[3, 2, 2, 2]), t(&[3])],
        sample![t(&[1, 2, 4, 4]), t(&[2, 2, 3, 3]); padding = [1i64, 1], stride = [2i64, 1]],
        sample![t(&[1, 4, 3, 3]), t(&[2, 2, 2, 2]); groups = 2i64, dilation = [1i64, 1]],
        sample![t(&[2, 3, 4]), t(&[1, 2, 2, 2])],
    ]));
    for name in ["conv1d.padding", "conv2d.padding"] {
        let one = name.starts_with("conv1d");
        let input = |c: i64| if one { t(&[1, c, 6]) } else { t(&[1, c, 4, 5]) };
        let weight = |o: i64, c: i64, k: i64| if one { t(&[o, c, k]) } else { t(&[o, c, k, k]) };
        r.add(nn(name).samples(vec![
            sample![input(2), weight(3, 2, 3), t(&[3]); padding = "same"],
            sample![input(2), weight(3, 2, 2); padding = "same"],
            sample![input(2), weight(2, 2, 3); padding = "valid"],
            sample![input(4), weight(2, 2, 2); padding = "same", groups = 2i64],
            sample![input(2), weight(3, 2, 2); padding = "nope"].error(),
        ]));
    }
    r.add(nn("_convolution_mode").samples(vec![
        sample![
            t(&[1, 2, 5]),
            t(&[3, 2, 2]),
            NONE,
            [1i64],
            "same",
            [2i64],
            1i64
        ],
        sample![
            t(&[1, 2, 4, 4]),
            t(&[2, 2, 3, 3]),
            t(&[2]),
            [1i64, 1],
            "valid",
            [1i64, 1],
            1i64
        ],
    ]));
    r.add(
        nn("convolution")
            .samples(vec![
                sample![
                    t(&[1, 2, 4, 3]),
                    t(&[3, 2, 2, 2]),
                    t(&[3]),
                    [1i64, 1],
                    [1i64, 0],
                    [1i64, 1],
                    false,
                    [0i64, 0],
                    1i64
                ],
                sample![
                    t(&[2, 2, 5]),
                    t(&[4, 1, 3]),
                    NONE,
                    [2i64],
                    [1i64],
                    [1i64],
                    false,
                    [0i64],
                    2i64
                ],
                sample![
                    t(&[1, 2, 4]).f64(),
                    t(&[2, 2, 2]).f64(),
                    NONE,
                    [1i64],
                    [0i64],
                    [2i64],
                    false,
                    [0i64],
                    1i64
                ],
                sample![
                    t(&[1, 3, 4, 4]),
                    t(&[2, 2, 2, 2]),
                    NONE,
                    [1i64, 1],
                    [0i64, 0],
                    [1i64, 1],
                    false,
                    [0i64, 0],
                    1i64
                ]
                .error(),
            ])
            .meta()
            .promotion(Promotion::Unchecked)
            .out(),
    );
    r.add(
        nn("convolution_backward")
            .samples(vec![
                sample![
                    t(&[1, 3, 5, 2]),
                    t(&[1, 2, 4, 3]),
                    t(&[3, 2, 2, 2]),
                    [3i64],
                    [1i64, 1],
                    [1i64, 0],
                    [1i64, 1],
                    false,
                    [0i64, 0],
                    1i64,
                    [true, true, true]
                ],
                sample![
                    t(&[2, 4, 3]),
                    t(&[2, 2, 5]),
                    t(&[4, 1, 3]),
                    NONE,
                    [2i64],
                    [1i64],
                    [1i64],
                    false,
                    [0i64],
                    2i64,
                    [true, true, false]
                ],
            ])
            .grad(Grad::CheckOnce(
                "the sample covers first derivatives; gradgradcheck runs on convolution's",
            ))
            .meta(),
    );
}

fn pooling_and_softmax(r: &mut Registry) {
    let pool = || {
        vec![
            sample![t(&[1, 2, 4, 4]), [2i64, 2]],
            sample![t(&[1, 2, 4, 4]), [2i64, 2], [2i64, 2]],
            sample![t(&[2, 5, 5]), [3i64, 3], [2i64, 2], [1i64, 1]],
            sample![
                t(&[1, 1, 5, 4]),
                [2i64, 2],
                [2i64, 2],
                [0i64, 0],
                [1i64, 1],
                true
            ],
            sample![t(&[1, 1, 5, 5]), [2i64, 2], [1i64, 1], [0i64, 0], [2i64, 2]],
            sample![t(&[1, 1, 4, 4]).transposed(), [2i64, 2]],
            sample![t(&[1, 1, 3, 3]).f64(), [2i64, 2], [1i64, 1]],
            sample![t(&[1, 1, 2, 2]), [3i64, 3]].error(),
            sample![t(&[1, 1, 4, 4]), [2i64, 2], [2i64, 2], [2i64, 2]].error(),
        ]
    };
    r.add(nn("max_pool2d").samples(pool()));
    r.add(nn("max_pool2d_with_indices").samples(pool()).meta().out());
    r.add(
        nn("max_pool2d_with_indices_backward")
            .samples(vec![
                sample![
                    t(&[1, 1, 1, 1]),
                    t(&[1, 1, 2, 2]),
                    [2i64, 2],
                    [2i64, 2],
                    [0i64, 0],
                    [1i64, 1],
                    false,
                    longs(&[3]).shape(&[1, 1, 1, 1])
                ],
                sample![
                    t(&[1, 2, 2]),
                    t(&[1, 3, 3]),
                    [2i64, 2],
                    [1i64, 1],
                    [0i64, 0],
                    [1i64, 1],
                    false,
                    longs(&[0, 4, 4, 8]).shape(&[1, 2, 2])
                ],
            ])
            .meta()
            .out(),
    );
    let softmax_samples = || {
        vec![
            sample![t(&[2, 3]), 1i64],
            sample![t(&[2, 3, 4]), 0i64],
            sample![t(&[2, 3]), -1i64],
            sample![t(&[]), 0i64],
            sample![t(&[0, 3]), 1i64],
            sample![t(&[3, 4]).transposed(), 1i64],
            sample![t(&[4]).f64(), 0i64],
            sample![t(&[2, 3]).dtype(Half), 1i64],
            sample![t(&[3]).dtype(BFloat16), 0i64],
            sample![t(&[2, 3]), 2i64].error(),
        ]
    };
    for name in ["softmax.int", "log_softmax.int"] {
        let mut s = softmax_samples();
        s.push(sample![t(&[2, 3]), 1i64, Double]);
        r.add(nn(name).samples(s).out());
    }
    for name in ["_softmax", "_log_softmax"] {
        let s = softmax_samples()
            .into_iter()
            .map(|s| {
                let mut s = s;
                s.args.push(false.into());
                s
            })
            .collect();
        r.add(
            nn(name)
                .samples(s)
                .meta()
                .out()
                .promotion(Promotion::Default),
        );
    }
    for name in ["_softmax_backward_data", "_log_softmax_backward_data"] {
        let output = if name.starts_with("_log") {
            t(&[2, 3]).range(-2.0, -0.5)
        } else {
            t(&[2, 3]).range(0.1, 0.6)
        };
        r.add(
            nn(name)
                .samples(vec![
                    sample![t(&[2, 3]), output.clone(), 1i64, Float],
                    sample![t(&[2, 3]), output.clone(), 0i64, Float],
                    sample![t(&[2, 3]).transposed(), output.clone(), -1i64, Float],
                    sample![t(&[2, 3]).f64(), output.f64(), 1i64, Double],
                ])
                .meta()
                .out(),
        );
    }
}

fn losses(r: &mut Registry) {
    let target = || index(&[3], 4);
    let weight = || t(&[4]).pos().no_grad();
    let nll = || {
        vec![
            sample![t(&[3, 4]), target()],
            sample![t(&[3, 4]), target(), weight()],
            sample![t(&[3, 4]), target(); reduction = 0i64],
            sample![t(&[3, 4]), target(); reduction = 2i64],
            sample![t(&[3, 4]), longs(&[0, -100, 2]); ignore_index = -100i64],
            sample![t(&[3, 4]), target(), weight(); reduction = 0i64, ignore_index = 1i64],
            sample![t(&[4]), index(&[], 4)],
            sample![t(&[3, 4]).f64(), target()],
            sample![t(&[3, 4]), longs(&[0, 4, 1])].error_from_data(),
        ]
    };
    let spatial_target = || index(&[2, 2, 3], 3);
    let nll2d = || {
        vec![
            sample![t(&[2, 3, 2, 3]), spatial_target()],
            sample![t(&[2, 3, 2, 3]), spatial_target(), t(&[3]).pos().no_grad()],
            sample![t(&[2, 3, 2, 3]), spatial_target(); reduction = 0i64],
            sample![t(&[2, 3, 2, 3]), spatial_target(); reduction = 2i64, ignore_index = 0i64],
            sample![t(&[2, 3, 2, 3]), index(&[2, 3], 3)].error(),
        ]
    };
    r.add(nn("nll_loss").samples(nll()).out());
    r.add(nn("nll_loss_nd").samples({
        let mut s = nll();
        s.extend(nll2d());
        s
    }));
    r.add(nn("nll_loss2d").samples(nll2d()).out());
    let forward = |samples: Vec<crate::Sample>| {
        samples
            .into_iter()
            .map(|mut s| {
                // The primitives take every argument.
                let reduction = s.kwarg("reduction").cloned().unwrap_or(1i64.into());
                let ignore = s.kwarg("ignore_index").cloned().unwrap_or((-100i64).into());
                s.kwargs.clear();
                if s.args.len() < 3 {
                    s.args.push(NONE);
                }
                s.args.push(reduction);
                s.args.push(ignore);
                s
            })
            .collect::<Vec<_>>()
    };
    r.add(nn("nll_loss_forward").samples(forward(nll())).meta().out());
    r.add(
        nn("nll_loss2d_forward")
            .samples(forward(nll2d()))
            .meta()
            .out(),
    );
    r.add(
        nn("nll_loss_backward")
            .samples(vec![
                // Mean reduction divides by total_weight, which the formula takes to be the sum of the
                // targets' weights: 3 here.
                sample![
                    t(&[]),
                    t(&[3, 4]),
                    target(),
                    NONE,
                    1i64,
                    -100i64,
                    t(&[]).literal(&[3.0]).no_grad()
                ],
                sample![
                    t(&[3]),
                    t(&[3, 4]),
                    target(),
                    weight(),
                    0i64,
                    -100i64,
                    t(&[]).no_grad()
                ],
                sample![
                    t(&[]),
                    t(&[3, 4]),
                    target(),
                    weight(),
                    2i64,
                    1i64,
                    t(&[]).no_grad()
                ],
            ])
            .meta()
            .out(),
    );
    r.add(
        nn("nll_loss2d_backward")
            .samples(vec![
                sample![
                    t(&[]),
                    t(&[2, 3, 2, 3]),
                    spatial_target(),
                    NONE,
                    1i64,
                    -100i64,
                    t(&[]).literal(&[12.0]).no_grad()
                ],
                sample![
                    t(&[2, 2, 3]),
                    t(&[2, 3, 2, 3]),
                    spatial_target(),
                    t(&[3]).pos().no_grad(),
                    0i64,
                    -100i64,
                    t(&[]).no_grad()
                ],
            ])
            .meta()
            .out(),
    );
    r.add(nn("cross_entropy_loss").samples(vec![
        sample![t(&[3, 4]), target()],
        sample![t(&[3, 4]), target(), weight(); reduction = 2i64],
        sample![t(&[3, 4]), target(); label_smoothing = 0.1],
        sample![t(&[3, 4]), longs(&[0, 2, -100])],
        sample![t(&[2, 3, 2, 3]), spatial_target(); reduction = 0i64],
        sample![t(&[4]), index(&[], 4)],
        sample![t(&[3, 4]), t(&[3, 4]).range(0.0, 0.5).no_grad()],
        sample![t(&[3, 4]).f64(), target(); label_smoothing = 0.2, ignore_index = 1i64],
    ]));
    r.add(
        nn("mse_loss")
            .samples(vec![
                sample![t(&[2, 3]), t(&[2, 3])],
                sample![t(&[2, 3]), t(&[2, 3]), 0i64],
                sample![t(&[2, 3]), t(&[2, 3]), 2i64],
                sample![t(&[]), t(&[])],
                sample![t(&[3, 4]).transposed(), t(&[3, 4])],
                sample![t(&[4]).f64(), t(&[4]).f64(), 0i64],
            ])
            .meta()
            .out()
            .promotion(Promotion::Default),
    );
    r.add(
        nn("mse_loss_backward")
            .samples(vec![
                sample![t(&[]), t(&[2, 3]), t(&[2, 3]), 1i64],
                sample![t(&[2, 3]), t(&[2, 3]), t(&[2, 3]), 0i64],
                sample![t(&[]), t(&[3]).f64(), t(&[3]).f64(), 2i64],
            ])
            .meta()
            .out(),
    );
}

/// Dropout of ones with p = 0.25: zeros and 4/3s, mean 1, deviation sqrt(p / (1 - p)).
fn dropout_stats() -> Stats {
    Stats {
        sample: sample![t(&[4096]).range(1.0, 1.0), 0.25, true],
        mean: 1.0,
        std: (1.0f64 / 3.0).sqrt(),
        min: 0.0,
        max: 4.0 / 3.0,
        tol: 0.05,
    }
}

fn others(r: &mut Registry) {
    let p = |v: f64| v;
    r.add(
        nn("dropout")
            .samples(vec![
                sample![t(&[3, 4]), p(0.5), true],
                sample![t(&[3, 4]), p(0.5), false],
                sample![t(&[5]).f64(), p(0.2), true],
                sample![t(&[2, 3]), p(1.0), true],
                sample![t(&[2, 3]), p(0.0), true],
            ])
            .stats(dropout_stats()),
    );
    // PyTorch names dropout_'s tensor `self` and dropout's `input`: two groups.
    r.add(nn("dropout_").samples(vec![
        sample![t(&[3, 4]), p(0.5), true],
        sample![t(&[3, 4]), p(0.5), false],
        sample![t(&[3, 4]).transposed(), p(0.25), true],
    ]));
    r.add(
        nn("native_dropout")
            .samples(vec![
                sample![t(&[3, 4]), p(0.5), true],
                // PyTorch's formula scales by 1 when `train` is None, its forward by 1 / (1 - p).
                sample![t(&[3, 4]), p(0.5), NONE].no_grad("PyTorch's formula: train=None"),
                sample![t(&[3, 4]), p(0.5), false],
                sample![t(&[5]).f64(), p(0.2), true],
                sample![t(&[0, 3]), p(0.5), true],
                sample![t(&[3, 4]).transposed(), p(0.3), true],
            ])
            .meta()
            .stats(dropout_stats())
            .out(),
    );
    r.add(
        nn("native_dropout_backward")
            .samples(vec![
                sample![t(&[3, 4]), mask(&[3, 4]), 2.0],
                sample![t(&[5]).f64(), mask(&[5]), 1.25],
                sample![t(&[3, 4]).transposed(), mask(&[3, 4]), 0.0],
            ])
            .meta()
            .out(),
    );
    r.add(
        nn("embedding")
            .samples(vec![
                sample![t(&[4, 3]), longs(&[1, 3, 1])],
                sample![t(&[4, 3]), longs(&[0, 2, 3, 2]).shape(&[2, 2])],
                // By design, the padding row gets no gradient and scale_grad_by_freq scales it.
                sample![t(&[4, 3]), longs(&[1, 3, 1]); padding_idx = 1i64].no_grad("padding_idx"),
                sample![t(&[4, 3]), longs(&[1, 3, 1]); scale_grad_by_freq = true]
                    .no_grad("scale_grad_by_freq"),
                sample![t(&[4, 3]), index(&[], 4)],
                sample![t(&[3, 4]).transposed().f64(), longs(&[2, 0])],
                sample![t(&[4, 3]), longs(&[1, 3]).dtype(Int)],
                sample![t(&[4, 3]), longs(&[4])].error_from_data(),
            ])
            .out(),
    );
    r.add(
        nn("embedding_dense_backward")
            .samples(vec![
                sample![t(&[3, 3]), longs(&[1, 3, 1]), 4i64, -1i64, false],
                sample![
                    t(&[2, 2, 3]),
                    longs(&[0, 2, 3, 2]).shape(&[2, 2]),
                    4i64,
                    2i64,
                    false
                ],
                sample![t(&[3, 3]), longs(&[1, 3, 1]), 4i64, -1i64, true],
            ])
            .meta()
            .out(),
    );
    let ln = || {
        vec![
            sample![t(&[2, 3]), [3i64]],
            sample![t(&[2, 3]), [3i64], t(&[3]), t(&[3])],
            sample![t(&[2, 3, 4]), [3i64, 4], t(&[3, 4]), NONE],
            sample![t(&[4, 3]).transposed(), [3i64], NONE, t(&[3])],
            sample![t(&[0, 3]), [3i64]],
            sample![t(&[2, 4]).f64(), [4i64], t(&[4]).f64(), t(&[4]).f64()],
            sample![t(&[2, 3]), [4i64]].error(),
        ]
    };
    r.add(nn("layer_norm").samples(ln()));
    r.add(
        nn("native_layer_norm")
            .samples(
                ln().into_iter()
                    .map(|mut s| {
                        while s.args.len() < 4 {
                            s.args.push(NONE);
                        }
                        s.args.push(1e-5.into());
                        s
                    })
                    .collect(),
            )
            .meta()
            .out(),
    );
    r.add(
        nn("native_layer_norm_backward")
            .samples(vec![
                sample![
                    t(&[2, 3]),
                    t(&[2, 3]).no_grad(),
                    [3i64],
                    t(&[2, 1]).no_grad(),
                    t(&[2, 1]).pos().no_grad(),
                    t(&[3]),
                    t(&[3]),
                    [true, true, true]
                ],
                sample![
                    t(&[2, 3]),
                    t(&[2, 3]).no_grad(),
                    [3i64],
                    t(&[2, 1]).no_grad(),
                    t(&[2, 1]).pos().no_grad(),
                    NONE,
                    NONE,
                    [true, false, false]
                ],
                sample![
                    t(&[2, 2, 2]).f64(),
                    t(&[2, 2, 2]).f64().no_grad(),
                    [2i64, 2],
                    t(&[2, 1, 1]).f64().no_grad(),
                    t(&[2, 1, 1]).f64().pos().no_grad(),
                    t(&[2, 2]).f64(),
                    NONE,
                    [true, true, false]
                ],
            ])
            .meta()
            .grad(Grad::CheckOnce(
                "its formula takes mean and rstd as functions of input: gradcheck holds input \
                 (and them) constant; native_layer_norm's gradgradcheck covers the rest",
            )),
    );
    let backward = |name: &'static str, kwarg: bool| {
        let mut s = vec![
            sample![t(&[2, 3]), t(&[2, 3])],
            sample![t(&[3, 4]).transposed(), t(&[3, 4])],
            sample![t(&[]), t(&[])],
            sample![t(&[4]).f64(), t(&[4]).f64()],
            sample![t(&[2, 3]), t(&[3])].error(),
        ];
        if kwarg {
            s.push(sample![t(&[2, 3]), t(&[2, 3]); approximate = "tanh"]);
        }
        if name == "sigmoid_backward" {
            for s in &mut s {
                if let Some(crate::Arg::Tensor(out)) = s.args.get_mut(1) {
                    out.values = crate::Values::Uniform(0.1, 0.9);
                }
            }
        }
        nn(name)
            .samples(s)
            .meta()
            .out()
            .promotion(Promotion::Default)
    };
    r.add(
        nn("threshold_backward")
            .samples(vec![
                sample![t(&[2, 3]), t(&[2, 3]), 0i64],
                sample![t(&[2, 3]), t(&[2, 3]), 0.25],
                sample![t(&[3, 4]).transposed(), t(&[3, 4]).strided(), -0.5],
                sample![t(&[4]).f64(), t(&[4]).f64(), 0i64],
            ])
            .meta()
            .out()
            .promotion(Promotion::Default),
    );
    r.add(backward("sigmoid_backward", false));
    r.add(backward("tanh_backward", false));
    r.add(backward("gelu_backward", true));
    r.add(backward("silu_backward", false).grad(Grad::NotImplemented(
        "PyTorch 2.15 records a NotImplemented node for silu_backward too",
    )));
}
