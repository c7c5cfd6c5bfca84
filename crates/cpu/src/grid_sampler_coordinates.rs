//! The coordinate arithmetic of grid sampling (Note [Grid sampler coordinates]): PyTorch's
//! unnormalizing, clipping and reflecting (GridSampler.h) with their derivatives, and the
//! bicubic weights (UpSample.h).

use super::{Geometry, Padding, Real};

/// Unnormalizes a grid value to a pixel coordinate (Note [Grid sampler coordinates]).
pub(super) fn unnormalize<F: Real>(coord: F, size: i64, align_corners: bool) -> F {
    unnormalize_with_grad(coord, size, align_corners).0
}

/// [`unnormalize`] and its derivative.
pub(super) fn unnormalize_with_grad<F: Real>(coord: F, size: i64, align_corners: bool) -> (F, F) {
    let two = F::from_f64(2.0);
    if align_corners {
        let s = F::from_i64(size - 1);
        ((coord + F::ONE) / two * s, s / two)
    } else {
        let s = F::from_i64(size);
        (((coord + F::ONE) * s - F::ONE) / two, s / two)
    }
}

/// PyTorch's `clip_coordinates` (NaN becomes 0, as its vectorized kernel's `maximum`).
pub(super) fn clip<F: Real>(x: F, size: i64) -> F {
    let hi = F::from_i64(size - 1);
    let lo_clipped = if x > F::ZERO { x } else { F::ZERO };
    if lo_clipped < hi {
        lo_clipped
    } else {
        hi
    }
}

/// [`clip`] and its derivative: the borders count as outside (slope 0).
pub(super) fn clip_with_grad<F: Real>(x: F, size: i64) -> (F, F) {
    let hi = F::from_i64(size - 1);
    if x <= F::ZERO {
        (F::ZERO, F::ZERO)
    } else if x >= hi {
        (hi, F::ZERO)
    } else {
        (x, F::ONE)
    }
}

/// Reflects `x` into `[twice_low / 2, twice_high / 2]` and returns the slope's sign.
pub(super) fn reflect_with_grad<F: Real>(x: F, twice_low: i64, twice_high: i64) -> (F, F) {
    if twice_low == twice_high {
        return (F::ZERO, F::ZERO);
    }
    let two = F::from_f64(2.0);
    let min = F::from_i64(twice_low) / two;
    let span = F::from_i64(twice_high - twice_low) / two;
    let shifted = x - min;
    let (dist, sign) = if shifted < F::ZERO {
        (-shifted, -F::ONE)
    } else {
        (shifted, F::ONE)
    };
    let extra = dist % span;
    // PyTorch converts the flip count to `int`; x86 turns a count out of its range (or NaN)
    // into INT_MIN, an even count.
    let flips = (dist / span).floor().to_f64();
    let even = if flips.abs() < 2147483648.0 {
        (flips as i64) % 2 == 0
    } else {
        true
    };
    if even {
        (extra + min, sign)
    } else {
        (span - extra + min, -sign)
    }
}

/// The reflection bounds (doubled) of a dim of `size`.
pub(super) fn reflection_bounds(size: i64, align_corners: bool) -> (i64, i64) {
    if align_corners {
        (0, 2 * (size - 1))
    } else {
        (-1, 2 * size - 1)
    }
}

/// The pixel index of an integral coordinate. As PyTorch's `safe_downgrade_to_int_range`,
/// coordinates an `i32` cannot hold (and NaN) read outside (-100).
pub(super) fn index_of<F: Real>(x: F) -> i64 {
    let bound = F::from_f64(2147483647.0 - 1.0);
    if x > bound || x < F::from_f64(-2147483648.0) || !x.is_finite() {
        -100
    } else {
        x.to_i64()
    }
}

/// PyTorch's `compute_coordinates`: the padding mode applied to a pixel coordinate.
pub(super) fn pad_coordinate<F: Real>(coord: F, size: i64, g: &Geometry) -> F {
    match g.padding {
        Padding::Zeros => coord,
        Padding::Border => clip(coord, size),
        Padding::Reflection => {
            let (lo, hi) = reflection_bounds(size, g.align_corners);
            clip(reflect_with_grad(coord, lo, hi).0, size)
        }
    }
}

/// The pixel coordinate a grid value reads, padded.
pub(super) fn source_index<F: Real>(coord: F, size: i64, g: &Geometry) -> F {
    pad_coordinate(unnormalize(coord, size, g.align_corners), size, g)
}

/// [`source_index`] and its derivative with respect to the grid value.
pub(super) fn source_index_with_grad<F: Real>(coord: F, size: i64, g: &Geometry) -> (F, F) {
    let (c, mut m) = unnormalize_with_grad(coord, size, g.align_corners);
    let c = match g.padding {
        Padding::Zeros => c,
        Padding::Border => {
            let (c, mc) = clip_with_grad(c, size);
            m = m * mc;
            c
        }
        Padding::Reflection => {
            let (lo, hi) = reflection_bounds(size, g.align_corners);
            let (c, mr) = reflect_with_grad(c, lo, hi);
            let (c, mc) = clip_with_grad(c, size);
            m = m * mr * mc;
            c
        }
    };
    (c, m)
}

/// A bicubic tap `(x, y)` padded: its `(row, col)`, which may lie outside (it reads 0).
pub(super) fn bounded_tap(x: i64, y: i64, g: &Geometry) -> (i64, i64) {
    let px = index_of(pad_coordinate(x as f64, g.in_w, g));
    let py = index_of(pad_coordinate(y as f64, g.in_h, g));
    (py, px)
}

/// PyTorch's bicubic convolution constant.
const CUBIC_A: f64 = -0.75;

/// The weights of the taps at offsets -1, 0, 1, 2 for a fraction `t`: Keys' cubic
/// convolution with `A = -0.75` (PyTorch's `get_cubic_upsample_coefficients`).
pub(super) fn cubic_weights<F: Real>(t: F) -> [F; 4] {
    let a = F::from_f64(CUBIC_A);
    let (one, two, three) = (F::ONE, F::from_f64(2.0), F::from_f64(3.0));
    let (four, five, eight) = (F::from_f64(4.0), F::from_f64(5.0), F::from_f64(8.0));
    let near = |x: F| ((a + two) * x - (a + three)) * x * x + one;
    let far = |x: F| ((a * x - five * a) * x + eight * a) * x - four * a;
    [far(t + one), near(t), near(one - t), far(one - t + one)]
}

/// The derivatives of [`cubic_weights`] with respect to `t` (PyTorch's
/// `get_cubic_coefficients_grad`).
pub(super) fn cubic_weight_slopes<F: Real>(t: F) -> [F; 4] {
    let a = F::from_f64(CUBIC_A);
    let (one, two, three) = (F::ONE, F::from_f64(2.0), F::from_f64(3.0));
    let (eight, ten) = (F::from_f64(8.0), F::from_f64(10.0));
    let x0 = -one - t;
    let x1 = -t;
    let x2 = one - t;
    let x3 = two - t;
    [
        (-three * a * x0 - ten * a) * x0 - eight * a,
        (-three * (a + two) * x1 - two * (a + three)) * x1,
        (three * (a + two) * x2 - two * (a + three)) * x2,
        (three * a * x3 - ten * a) * x3 + eight * a,
    ]
}
