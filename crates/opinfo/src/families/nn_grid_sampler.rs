//! Grid sampling: `grid_sampler_2d` (every interpolation and padding mode), its backward, the
//! `grid_sampler` composite, and the affine grids of `affine_grid_generator`.

use switchboard_tensor::ScalarType::{Half, Long};

use crate::info::{Family, Grad, OpInfo};
use crate::sample::Sample;
use crate::spec::t;
use crate::{sample, Registry};

/// An input `(N, C, H, W)` and a grid `(N, OH, OW, 2)` reaching a little past [-1, 1], so
/// that every padding mode pads.
fn sampling(
    n: i64,
    c: i64,
    h: i64,
    w: i64,
    oh: i64,
    ow: i64,
    f64_: bool,
) -> [crate::spec::TensorSpec; 2] {
    let (x, g) = (
        t(&[n, c, h, w]),
        t(&[n, oh, ow, 2]).range(-1.2, 1.2).seed(7),
    );
    if f64_ {
        [x.f64(), g.f64()]
    } else {
        [x, g]
    }
}

/// Every interpolation (bilinear 0, nearest 1, bicubic 2) with every padding (zeros 0, border
/// 1, reflection 2), both `align_corners`, in float64 (for gradcheck) and float32.
fn mode_samples() -> Vec<Sample> {
    let mut v = Vec::new();
    for interpolation in 0..3i64 {
        for padding in 0..3i64 {
            let align = (interpolation + padding) % 2 == 0;
            let [x, g] = sampling(2, 2, 3, 4, 2, 3, true);
            v.push(sample![x, g, interpolation, padding, align]);
            let [x, g] = sampling(1, 3, 4, 3, 3, 2, false);
            v.push(sample![x, g, interpolation, padding, !align]);
        }
    }
    v
}

fn forward_samples() -> Vec<Sample> {
    let mut v = mode_samples();
    let [x, g] = sampling(1, 2, 1, 1, 2, 2, true);
    v.push(sample![x, g, 2i64, 2i64, false]);
    v.push(sample![
        t(&[1, 2, 4, 3]).transposed().f64(),
        t(&[1, 2, 2, 2]).f64().range(-1.0, 1.0),
        0i64,
        0i64,
        true
    ]);
    v.push(sample![
        t(&[1, 2, 3, 4]).dtype(Half),
        t(&[1, 2, 2, 2]).dtype(Half),
        0i64,
        1i64,
        false
    ]);
    v.push(sample![
        t(&[0, 2, 3, 4]),
        t(&[0, 2, 2, 2]),
        0i64,
        0i64,
        false
    ]);
    v.push(sample![t(&[2, 0, 3, 4]), t(&[2, 2, 2, 2]), 2i64, 0i64, false].no_grad("no channels"));
    v.push(sample![t(&[2, 2, 3, 4]), t(&[2, 0, 2, 2]), 1i64, 0i64, false].no_grad("no locations"));
    v.push(sample![t(&[2, 2, 3, 4]), t(&[1, 2, 2, 2]), 0i64, 0i64, false].error());
    v.push(sample![t(&[2, 2, 3, 4]), t(&[2, 2, 2, 1]), 0i64, 0i64, false].error());
    v.push(sample![t(&[2, 2, 0, 4]), t(&[2, 2, 2, 2]), 0i64, 0i64, false].error());
    v.push(sample![t(&[2, 2, 3, 4]), t(&[2, 2, 2, 2]).f64(), 0i64, 0i64, false].error());
    v.push(
        sample![
            t(&[2, 2, 3, 4]).dtype(Long),
            t(&[2, 2, 2, 2]).dtype(Long),
            0i64,
            0i64,
            false
        ]
        .error(),
    );
    v
}

/// The grid sampling operators.
pub fn register(r: &mut Registry) {
    let once = Grad::CheckOnce("PyTorch 2.15 has no formula for grid_sampler_2d_backward");
    let mut forward = forward_samples();
    forward.push(sample![t(&[2, 3, 4]), t(&[2, 2, 2]), 0i64, 0i64, false].error());
    r.add(
        OpInfo::new("grid_sampler_2d", Family::Nn)
            .samples(forward)
            .grad(once)
            .meta()
            .out(),
    );
    let mut composite = forward_samples();
    composite.push(sample![t(&[2, 3, 4]), t(&[2, 2, 2]), 0i64, 0i64, false].error());
    r.add(
        OpInfo::new("grid_sampler", Family::Nn)
            .samples(composite)
            .grad(once),
    );
    let backward = |n: i64, c: i64, mask: [bool; 2], modes: (i64, i64), align: bool, f64_: bool| {
        let [x, g] = sampling(n, c, 3, 4, 2, 3, f64_);
        let go = if f64_ {
            t(&[n, c, 2, 3]).f64()
        } else {
            t(&[n, c, 2, 3])
        };
        sample![go, x, g, modes.0, modes.1, align, mask]
    };
    r.add(
        OpInfo::new("grid_sampler_2d_backward", Family::Nn)
            .samples(vec![
                backward(2, 2, [true, true], (0, 0), false, false),
                backward(1, 3, [true, true], (0, 2), true, true),
                backward(2, 2, [true, true], (1, 1), false, true),
                backward(2, 2, [true, true], (2, 2), false, true),
                backward(1, 2, [true, true], (2, 1), true, false),
                backward(2, 2, [false, true], (0, 1), false, false),
                sample![
                    t(&[2, 2, 2, 4]),
                    t(&[2, 2, 3, 4]),
                    t(&[2, 2, 3, 2]),
                    0i64,
                    0i64,
                    false,
                    [true, true]
                ]
                .error(),
                sample![
                    t(&[2, 2, 2, 3]).f64(),
                    t(&[2, 2, 3, 4]),
                    t(&[2, 2, 3, 2]),
                    0i64,
                    0i64,
                    false,
                    [true, true]
                ]
                .error(),
            ])
            .grad(Grad::NotImplemented(
                "PyTorch 2.15 has no formula for it either",
            ))
            .meta()
            .out(),
    );
    affine(r);
}

fn affine(r: &mut Registry) {
    r.add(
        OpInfo::new("affine_grid_generator", Family::Nn)
            .samples(vec![
                sample![t(&[2, 2, 3]), [2i64, 3, 4, 5], false],
                sample![t(&[2, 2, 3]).f64(), [2i64, 3, 4, 5], true],
                sample![t(&[1, 2, 3]).f64(), [1i64, 1, 1, 3], false],
                sample![t(&[3, 2, 3]).transposed().f64(), [3i64, 1, 2, 2], false],
                sample![t(&[2, 2, 3]), [2i64, 3, 4], false].error(),
                sample![t(&[3, 2, 3]), [2i64, 3, 4, 5], false].error(),
            ])
            .differentiable()
            .out(),
    );
    r.add(
        OpInfo::new("affine_grid_generator_backward", Family::Nn)
            .samples(vec![
                sample![t(&[2, 4, 5, 2]), [2i64, 3, 4, 5], false],
                sample![t(&[2, 4, 5, 2]).f64(), [2i64, 3, 4, 5], true],
                sample![t(&[1, 1, 3, 2]).f64(), [1i64, 1, 1, 3], false],
                sample![t(&[2, 4, 5, 2]), [2i64, 3, 4], false].error(),
            ])
            .differentiable(),
    );
}
