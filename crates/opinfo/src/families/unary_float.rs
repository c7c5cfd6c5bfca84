//! The float unary operators of `UnaryOps.cpp` (`sin`, `acos`, `erf`, `log1p`,
//! `reciprocal`, ...): integer and bool inputs compute in the default float dtype.

use crate::info::{Family, OpInfo, Promotion};
use crate::sample;
use crate::spec::mask;
use crate::Registry;

use super::pointwise::{unary_samples, Domain};

/// The float unary family.
pub fn register(r: &mut Registry) {
    use Domain::*;
    for (name, d) in [
        ("acos", Unit),
        ("acosh", AboveOne),
        ("asin", Unit),
        ("asinh", Any),
        ("atan", Any),
        ("atanh", Unit),
        ("cos", Any),
        ("cosh", Any),
        ("sin", Any),
        ("sinh", Any),
        ("tan", Any),
        ("erf", Any),
        ("expm1", Any),
        ("log10", Positive),
        ("log1p", Positive),
        ("log2", Positive),
        ("reciprocal", Positive),
    ] {
        let mut samples = unary_samples(d, true);
        samples.push(sample![mask(&[4])]);
        r.add(
            OpInfo::new(name, Family::UnaryPointwise)
                .samples(samples)
                .differentiable()
                .meta()
                .inplace()
                .out()
                .promotion(Promotion::IntToFloat),
        );
    }
}
