//! `erf` and `exp` of `f32` as element functions that vectorise (Note [Vectorized erf and
//! exp]).

// Note [Vectorized erf and exp]
// PyTorch's CPU kernels run their float loops on `Vectorized<float>`, whose `exp` is a
// vector polynomial (1-ulp) and whose `erf` is the Hastings approximation of Abramowitz and
// Stegun's 7.1.26, `1 - t (a1 + a2 t + ... + a5 t^4) e^{-x^2}` with `t = 1 / (1 + p |x|)`
// (absolute error below 1e-6 in f32), its sign restored. libm's `erff` and `expf` are exact
// to the last bit but are a call per element with branches, so a loop over them never
// vectorises: GELU and its gradient spent ten times PyTorch's time in them. `erf_f32` and
// `exp_f32` are branch-free (clamps and selects only) and built on `mul_add`, so inside a
// loop compiled with fused multiply-add (`for_each1_fused`, `for_each2_fused`: Note [Fused
// multiply-add]) they become eight-lane vector code. `exp_f32` reduces `x = n ln2 + r`, `|r|
// <= ln2/2`, evaluates `e^r` by its Taylor polynomial to degree 7 (within 1 ulp of the true
// value) and scales by `2^n` in two steps, so that results in the subnormal range are right.
// The element functions that use them are those whose PyTorch kernels use the vector forms:
// `gelu` and `gelu_backward` (the exact form, in f32 and the reduced types computing in it).

const LOG2_E: f32 = std::f32::consts::LOG2_E;
/// `ln 2` split in a high part exact in products with small integers and the rest (Cody and
/// Waite's reduction).
const LN_2_HI: f32 = 0.693_145_75;
const LN_2_LO: f32 = 1.428_606_8e-6;
/// `1.5 * 2^23`: adding it rounds a float of magnitude below `2^22` to an integer, left in the
/// low bits of the sum.
const ROUND_TO_INTEGER: f32 = 12_582_912.0;

/// `2^n` for `-126 <= n <= 127`.
#[inline(always)]
fn pow2(n: i32) -> f32 {
    f32::from_bits((n.wrapping_add(127) as u32).wrapping_shl(23))
}

/// `e^x`, within 1 ulp, for every `f32` (NaN, infinities and subnormal results included).
#[inline(always)]
pub(crate) fn exp_f32(x: f32) -> f32 {
    // Outside these bounds the result is 0 or infinity anyway; inside, `n` below stays in
    // -150..=129. `clamp` keeps a NaN.
    let x = x.clamp(-104.0, 89.0);
    let shifted = x.mul_add(LOG2_E, ROUND_TO_INTEGER);
    let n_float = shifted - ROUND_TO_INTEGER;
    let n = (shifted.to_bits() as i32).wrapping_sub(ROUND_TO_INTEGER.to_bits() as i32);
    let r = n_float.mul_add(-LN_2_HI, x);
    let r = n_float.mul_add(-LN_2_LO, r);
    let mut p = 1.0 / 5040.0f32;
    for c in [
        1.0 / 720.0,
        1.0 / 120.0,
        1.0 / 24.0,
        1.0 / 6.0,
        0.5,
        1.0,
        1.0,
    ] {
        p = p.mul_add(r, c);
    }
    // `2^n` in two factors, each a normal float, so that `n < -126` gives a subnormal (or 0)
    // and `n > 127` infinity.
    let half = n >> 1;
    p * pow2(half) * pow2(n.wrapping_sub(half))
}

/// The error function as PyTorch's vectorized kernels compute it (Note [Vectorized erf and
/// exp]): absolute error below 1e-6.
#[inline(always)]
pub(crate) fn erf_f32(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / 0.327_591_1f32.mul_add(a, 1.0);
    let mut r = 1.061_405_4f32;
    for c in [-1.453_152_1, 1.421_413_7, -0.284_496_74, 0.254_829_6] {
        r = r.mul_add(t, c);
    }
    (r * t).mul_add(-exp_f32(-(a * a)), 1.0).copysign(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The distance from `got` to the exact `want`, in units of the last place of `want` in
    /// f32.
    fn ulps(got: f32, want: f64) -> f64 {
        let w = want as f32;
        let ulp = f32::from_bits(w.abs().to_bits() + 1) - w.abs();
        (got as f64 - want).abs() / ulp as f64
    }

    #[test]
    fn exp_is_within_one_ulp_over_the_whole_range() {
        let mut x = -103.9f32;
        let mut worst = 0f64;
        while x < 88.7 {
            worst = worst.max(ulps(exp_f32(x), (x as f64).exp()));
            x += 0.000_73;
        }
        assert!(worst <= 1.0, "{worst} ulps");
        // Subnormal results.
        for x in [-87.5f32, -90.0, -95.25, -100.0, -103.0] {
            assert_eq!(exp_f32(x), (x as f64).exp() as f32, "exp({x})");
        }
    }

    #[test]
    fn exp_of_special_values() {
        assert!(exp_f32(f32::NAN).is_nan());
        assert_eq!(exp_f32(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp_f32(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_f32(88.73), f32::INFINITY);
        assert_eq!(exp_f32(1e30), f32::INFINITY);
        assert_eq!(exp_f32(-110.0), 0.0);
        assert_eq!(exp_f32(-1e30), 0.0);
        assert_eq!(exp_f32(0.0), 1.0);
        assert_eq!(exp_f32(-0.0), 1.0);
    }

    #[test]
    fn erf_is_within_its_approximation_error() {
        let mut x = -6.0f32;
        let mut worst = 0f64;
        while x < 6.0 {
            worst = worst.max((erf_f32(x) as f64 - libm::erf(x as f64)).abs());
            x += 0.000_1;
        }
        assert!(worst < 1e-6, "{worst}");
        assert!(erf_f32(f32::NAN).is_nan());
        assert_eq!(erf_f32(f32::INFINITY), 1.0);
        assert_eq!(erf_f32(f32::NEG_INFINITY), -1.0);
        assert_eq!(erf_f32(1e20), 1.0);
        assert_eq!(erf_f32(-10.0), -1.0);
        // Odd: the sign is the argument's, exactly.
        assert_eq!(erf_f32(-0.5), -erf_f32(0.5));
    }
}
