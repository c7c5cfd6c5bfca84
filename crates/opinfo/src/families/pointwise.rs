//! Elementwise operators: unary, tensor-tensor and tensor-scalar, comparisons, `where`,
//! `clamp`, `masked_fill`.

use switchboard_tensor::ScalarType::{BFloat16, Byte, Char, Float, Half, Int, Long, Short};

use crate::info::{Family, Grad, OpInfo, Promotion};
use crate::sample::{Sample, NONE};
use crate::spec::{longs, mask, t, TensorSpec};
use crate::{sample, Registry};

/// The values a unary operator is sampled in.
#[derive(Clone, Copy)]
pub(super) enum Domain {
    /// `[-1, 1)`.
    Any,
    /// `[0.5, 2)`: `log`, `sqrt`, `rsqrt`.
    Positive,
    /// `[-0.9, 0.9)`, inside the open interval `(-1, 1)`: `asin`, `acos`, `atanh`, whose
    /// derivatives are infinite at ±1.
    Unit,
    /// `[1.5, 3)`: `acosh`.
    AboveOne,
}

fn x(shape: &[i64], d: Domain) -> TensorSpec {
    match d {
        Domain::Any => t(shape),
        Domain::Positive => t(shape).pos(),
        Domain::Unit => t(shape).range(-0.9, 0.9),
        Domain::AboveOne => t(shape).range(1.5, 3.0),
    }
}

/// Samples of a unary operator: plain, 0-dim, empty, non-contiguous, float64, NaN; integer and
/// bool inputs when the operator takes them (`ints`).
pub(super) fn unary_samples(d: Domain, ints: bool) -> Vec<Sample> {
    let mut s = vec![
        sample![x(&[2, 3], d)],
        sample![x(&[], d)],
        sample![x(&[0, 3], d)],
        sample![x(&[3, 4], d).transposed()],
        sample![x(&[2, 3], d).strided()],
        sample![x(&[4], d).f64()],
        sample![x(&[3], d).nan()].no_grad("NaN"),
    ];
    // Reduced-precision floats.
    s.push(sample![x(&[2, 3], d).dtype(Half)]);
    s.push(sample![x(&[3], d).dtype(BFloat16)]);
    if ints {
        s.push(sample![t(&[5]).dtype(Long).range(1.0, 5.0)]);
        s.push(sample![t(&[2, 2]).dtype(Int).range(-3.0, 4.0)]);
        s.push(sample![t(&[4]).dtype(Byte).range(1.0, 9.0)]);
        s.push(sample![t(&[4]).dtype(Short).range(1.0, 9.0)]);
    }
    s
}

/// Samples of a tensor-tensor operator; `other` drawn by `rhs` (a divisor is positive).
pub(super) fn binary_samples(rhs: fn(&[i64]) -> TensorSpec, ints: bool) -> Vec<Sample> {
    let mut s = vec![
        sample![t(&[2, 3]), rhs(&[2, 3])],
        sample![t(&[2, 3]), rhs(&[3])],
        sample![t(&[2, 1]), rhs(&[1, 3])],
        sample![t(&[]), rhs(&[2, 3])],
        sample![t(&[2, 3]), rhs(&[])],
        sample![t(&[0, 3]), rhs(&[3])],
        sample![t(&[3, 4]).transposed(), rhs(&[3, 4]).strided()],
        sample![t(&[2, 3]).expanded(&[1, 3]), rhs(&[2, 3])],
        sample![t(&[4]).f64(), rhs(&[4]).f64()],
        sample![t(&[3]), rhs(&[]).f64()],
        sample![t(&[3]).nan(), rhs(&[3])].no_grad("NaN"),
        sample![t(&[2, 3]), rhs(&[4])].error(),
    ];
    // Reduced precision, and their promotion.
    s.push(sample![t(&[2, 3]).dtype(Half), rhs(&[2, 3]).dtype(Half)]);
    s.push(sample![t(&[3]).dtype(Half), rhs(&[3]).dtype(BFloat16)]);
    s.push(sample![t(&[3]).dtype(BFloat16), rhs(&[]).dtype(Float)]);
    if ints {
        s.push(sample![t(&[3]).dtype(Long).range(1.0, 6.0), rhs(&[3])]);
        s.push(sample![
            t(&[4]).dtype(Byte).range(1.0, 9.0),
            t(&[4]).dtype(Char).range(1.0, 5.0)
        ]);
        s.push(sample![
            t(&[3]).dtype(Long).range(1.0, 6.0),
            rhs(&[3]).dtype(Half)
        ]);
        s.push(sample![
            t(&[3]).dtype(Int).range(1.0, 6.0),
            t(&[3]).dtype(Long).range(1.0, 4.0)
        ]);
        s.push(sample![
            t(&[2, 2]).dtype(Long).range(1.0, 6.0),
            t(&[]).dtype(Int).range(1.0, 4.0)
        ]);
    }
    s
}

/// Samples of a tensor-scalar operator (`exponent`-like scalars stay small).
pub(super) fn scalar_samples(ints: bool) -> Vec<Sample> {
    let mut s = vec![
        sample![t(&[2, 3]), 2.5],
        sample![t(&[]), -1.5],
        sample![t(&[0, 3]), 2i64],
        sample![t(&[3, 4]).transposed(), 0.5],
        sample![t(&[3]).f64(), 1.5],
        sample![t(&[3]).nan(), 2.0].no_grad("NaN"),
    ];
    s.push(sample![t(&[3]).dtype(Half), 1.5]);
    if ints {
        s.push(sample![t(&[4]).dtype(Long).range(1.0, 6.0), 2i64]);
        s.push(sample![t(&[4]).dtype(Long).range(1.0, 6.0), 2.5]);
        s.push(sample![t(&[2, 2]).dtype(Int).range(1.0, 6.0), 3i64]);
        s.push(sample![t(&[4]).dtype(Byte).range(1.0, 9.0), 3i64]);
    }
    s
}

fn positive(shape: &[i64]) -> TensorSpec {
    t(shape).pos()
}

fn any(shape: &[i64]) -> TensorSpec {
    t(shape)
}

/// The pointwise families.
pub fn register(r: &mut Registry) {
    use Domain::*;
    // Unary: name, domain, result dtype of integer inputs, whether integers are accepted.
    for (name, d, promotion, ints) in [
        ("neg", Any, Promotion::Default, true),
        ("exp", Any, Promotion::IntToFloat, true),
        ("log", Positive, Promotion::IntToFloat, true),
        ("sqrt", Positive, Promotion::IntToFloat, true),
        ("rsqrt", Positive, Promotion::IntToFloat, true),
        ("abs", Any, Promotion::Default, true),
        ("sgn", Any, Promotion::Default, true),
        ("relu", Any, Promotion::Default, true),
        ("sigmoid", Any, Promotion::IntToFloat, true),
        ("tanh", Any, Promotion::IntToFloat, true),
        ("gelu", Any, Promotion::Default, false),
        ("silu", Any, Promotion::Default, false),
    ] {
        let mut samples = unary_samples(d, ints);
        if promotion == Promotion::IntToFloat {
            samples.push(sample![mask(&[4])]);
        }
        if name == "gelu" {
            samples.push(sample![t(&[2, 3]); approximate = "tanh"]);
            samples.push(sample![t(&[3]).f64(); approximate = "tanh"]);
        }
        if !ints {
            // PyTorch's kernels reject integers: "GeluKernelImpl" not implemented for 'Long';
            // the meta function takes them.
            samples.push(sample![t(&[3]).dtype(Long)].error_from_kernel_dtype());
        }
        r.add(
            OpInfo::new(name, Family::UnaryPointwise)
                .samples(samples)
                .differentiable()
                .meta()
                .inplace()
                .out()
                .promotion(promotion),
        );
    }

    // Tensor-tensor.
    let alpha = |mut s: Vec<Sample>, a: i64| {
        s.push(sample![t(&[2, 3]), t(&[3]); alpha = a]);
        s.push(sample![t(&[3]).dtype(Long), t(&[3]).dtype(Long); alpha = a]);
        s
    };
    let tt = |name, samples, promotion| {
        OpInfo::new(name, Family::BinaryPointwise)
            .samples(samples)
            .differentiable()
            .meta()
            .promotion(promotion)
    };
    r.add(
        tt(
            "add.Tensor",
            alpha(binary_samples(any, true), 2),
            Promotion::Default,
        )
        .inplace()
        .out(),
    );
    r.add(
        tt(
            "sub.Tensor",
            alpha(binary_samples(any, true), 3),
            Promotion::Default,
        )
        .inplace()
        .out(),
    );
    r.add(
        tt(
            "rsub.Tensor",
            alpha(binary_samples(any, true), 2),
            Promotion::Default,
        )
        .out(),
    );
    r.add(
        tt("mul.Tensor", binary_samples(any, true), Promotion::Default)
            .inplace()
            .out(),
    );
    r.add(
        tt(
            "div.Tensor",
            binary_samples(positive, true),
            Promotion::IntToFloat,
        )
        .inplace()
        .out(),
    );
    let mut modes = Vec::new();
    for mode in ["trunc", "floor"] {
        for s in binary_samples(positive, true) {
            modes.push(Sample {
                kwargs: vec![("rounding_mode", mode.into())],
                ..s
            });
        }
    }
    modes.push(sample![t(&[2, 3]), t(&[3]).pos(); rounding_mode = NONE]);
    // Integer division by zero: PyTorch's "ZeroDivisionError" (a CPU check of the values).
    modes.push(
        sample![t(&[3]).dtype(Long), longs(&[1, 0, 2]); rounding_mode = "floor"].error_from_data(),
    );
    modes.push(
        sample![t(&[3]).dtype(Long), longs(&[1, 0, 2]); rounding_mode = "trunc"].error_from_data(),
    );
    modes.push(
        sample![t(&[4]).dtype(Long), t(&[4]).dtype(Long).range(1.0, 4.0); rounding_mode = NONE],
    );
    r.add(
        tt("div.Tensor_mode", modes, Promotion::Division)
            .inplace()
            .out(),
    );
    let mut pow = binary_samples(any, false);
    for s in &mut pow {
        if let Some(crate::Arg::Tensor(base)) = s.args.first_mut() {
            // A negative base to a fractional power is NaN.
            base.values = crate::Values::Uniform(0.5, 2.0);
        }
    }
    pow.push(sample![
        t(&[3]).dtype(Long).range(0.0, 4.0),
        t(&[3]).dtype(Long).range(0.0, 3.0)
    ]);
    r.add(
        tt("pow.Tensor_Tensor", pow, Promotion::Default)
            .inplace()
            .out(),
    );
    for name in ["maximum", "minimum"] {
        r.add(tt(name, binary_samples(any, true), Promotion::Default).out());
    }
    // PyTorch's max.other and min.other are CompositeImplicitAutograd aliases of maximum and
    // minimum (their out= forms are max.out and min.out).
    for name in ["max.other", "min.other"] {
        r.add(
            OpInfo::new(name, Family::BinaryPointwise)
                .samples(binary_samples(any, true))
                .differentiable()
                .out()
                .promotion(Promotion::Default),
        );
    }
    for name in [
        "eq.Tensor",
        "ne.Tensor",
        "lt.Tensor",
        "le.Tensor",
        "gt.Tensor",
        "ge.Tensor",
    ] {
        let mut s = binary_samples(any, true);
        s.push(sample![mask(&[4]), mask(&[4])]);
        r.add(
            OpInfo::new(name, Family::BinaryPointwise)
                .samples(s)
                .grad(Grad::None("boolean result"))
                .meta()
                .inplace()
                .out()
                .promotion(Promotion::Bool),
        );
    }
    // The Tensor bounds of clamp_min / clamp_max.
    for name in ["clamp_min.Tensor", "clamp_max.Tensor"] {
        r.add(
            tt(name, binary_samples(any, true), Promotion::Default)
                .inplace()
                .out(),
        );
    }

    // Tensor-scalar.
    let ts = |name, samples, promotion| {
        OpInfo::new(name, Family::BinaryPointwise)
            .samples(samples)
            .differentiable()
            .meta()
            .promotion(promotion)
    };
    let with_alpha = |mut s: Vec<Sample>| {
        s.push(sample![t(&[2, 3]), 1.5; alpha = 2i64]);
        s
    };
    r.add(
        ts(
            "add.Scalar",
            with_alpha(scalar_samples(true)),
            Promotion::Default,
        )
        .inplace()
        .out(),
    );
    r.add(
        ts(
            "sub.Scalar",
            with_alpha(scalar_samples(true)),
            Promotion::Default,
        )
        .inplace()
        .out(),
    );
    r.add(
        ts(
            "rsub.Scalar",
            with_alpha(scalar_samples(true)),
            Promotion::Default,
        )
        .out(),
    );
    r.add(
        ts("mul.Scalar", scalar_samples(true), Promotion::Default)
            .inplace()
            .out(),
    );
    r.add(
        ts("div.Scalar", scalar_samples(true), Promotion::IntToFloat)
            .inplace()
            .out(),
    );
    let mut modes = Vec::new();
    for mode in ["trunc", "floor"] {
        for s in scalar_samples(true) {
            modes.push(Sample {
                kwargs: vec![("rounding_mode", mode.into())],
                ..s
            });
        }
    }
    modes.push(sample![t(&[2, 3]), 2.5; rounding_mode = NONE]);
    r.add(
        ts("div.Scalar_mode", modes, Promotion::Division)
            .inplace()
            .out(),
    );
    r.add(
        ts(
            "pow.Tensor_Scalar",
            vec![
                sample![t(&[2, 3]), 2i64],
                sample![t(&[2, 3]).pos(), 2.5],
                sample![t(&[2, 3]).pos(), -1.5],
                sample![t(&[2, 3]), 0i64],
                sample![t(&[2, 3]), 1i64],
                sample![t(&[]).pos(), 0.5],
                sample![t(&[0, 2]), 3i64],
                sample![t(&[3, 4]).transposed(), 3i64],
                sample![t(&[3]).f64().pos(), 1.5],
                sample![t(&[4]).dtype(Long).range(0.0, 4.0), 2i64],
                sample![t(&[4]).dtype(Long).range(1.0, 4.0), 0.5],
                sample![t(&[3]).nan(), 2i64].no_grad("NaN"),
            ],
            Promotion::Default,
        )
        .inplace()
        .out(),
    );
    r.add(
        ts(
            "pow.Scalar",
            vec![
                sample![2.5, t(&[2, 3])],
                sample![2i64, t(&[3]).dtype(Long).range(0.0, 5.0)],
                sample![0.5, t(&[])],
                sample![3.0, t(&[3, 4]).transposed()],
                sample![1.5, t(&[0])],
                sample![2i64, t(&[4])],
            ],
            Promotion::Default,
        )
        .out(),
    );
    for name in [
        "eq.Scalar",
        "ne.Scalar",
        "lt.Scalar",
        "le.Scalar",
        "gt.Scalar",
        "ge.Scalar",
    ] {
        let mut s = scalar_samples(true);
        s.push(sample![mask(&[4]), true]);
        r.add(
            OpInfo::new(name, Family::BinaryPointwise)
                .samples(s)
                .grad(Grad::None("boolean result"))
                .meta()
                .inplace()
                .out()
                .promotion(Promotion::Bool),
        );
    }
    for name in ["clamp_min", "clamp_max"] {
        r.add(
            ts(name, scalar_samples(true), Promotion::Default)
                .inplace()
                .out(),
        );
    }
    r.add(
        ts(
            "clamp",
            vec![
                sample![t(&[2, 3]); min = -0.5, max = 0.5],
                sample![t(&[2, 3]); min = -0.5],
                sample![t(&[2, 3]); max = 0.25],
                sample![t(&[]); min = 0.5, max = -0.5],
                sample![t(&[0, 3]); min = 0i64],
                sample![t(&[3, 4]).transposed(); min = -0.3, max = 0.3],
                sample![t(&[4]).f64(); min = -0.2, max = 0.7],
                sample![t(&[4]).dtype(Long).range(-5.0, 5.0); min = -2i64, max = 2i64],
                sample![t(&[4]).dtype(Long).range(-5.0, 5.0); min = 0.5],
                sample![t(&[3]).nan(); min = 0.0].no_grad("NaN"),
            ],
            Promotion::Default,
        )
        .inplace()
        .out(),
    );
    let lo = |s: &[i64]| t(s).range(-0.6, -0.1);
    let hi = |s: &[i64]| t(s).range(0.1, 0.6);
    r.add(
        OpInfo::new("clamp.Tensor", Family::BinaryPointwise)
            .samples(vec![
                sample![t(&[2, 3]); min = lo(&[3]), max = hi(&[2, 3])],
                sample![t(&[2, 3]); min = lo(&[2, 3])],
                sample![t(&[2, 3]); max = hi(&[3]).no_grad()],
                sample![t(&[3]); min = t(&[3]).range(0.2, 0.4), max = t(&[3]).range(-0.4, -0.2)],
                sample![t(&[]); min = lo(&[2, 2])],
                sample![t(&[3, 4]).transposed(); min = lo(&[4]), max = hi(&[3, 4]).strided()],
                sample![t(&[4]).f64(); min = lo(&[4]).f64(), max = hi(&[4]).f64()],
                sample![t(&[4]).dtype(Long).range(-5.0, 5.0); min = lo(&[4])],
                sample![t(&[2, 3]); min = lo(&[4])].error(),
            ])
            .differentiable()
            .meta()
            .inplace()
            .out()
            .promotion(Promotion::Default),
    );

    // Selection.
    r.add(
        OpInfo::new("where.self", Family::BinaryPointwise)
            .samples(vec![
                sample![mask(&[2, 3]), t(&[2, 3]), t(&[2, 3])],
                sample![mask(&[2, 1]), t(&[3]), t(&[2, 3])],
                sample![mask(&[]), t(&[2]), t(&[])],
                sample![mask(&[0, 3]), t(&[3]), t(&[3])],
                sample![mask(&[3, 4]).transposed(), t(&[3, 4]).strided(), t(&[4])],
                sample![mask(&[3]), t(&[3]).f64(), t(&[3])],
                sample![mask(&[3]), t(&[3]).dtype(Long), t(&[3])],
                sample![mask(&[3]), t(&[3]).dtype(Long), t(&[]).f64()],
                sample![mask(&[3]), t(&[4]), t(&[3])].error(),
            ])
            .differentiable()
            .meta()
            .out()
            .promotion(Promotion::Default),
    );
    for (name, samples) in [
        (
            "where.ScalarSelf",
            vec![
                sample![mask(&[2, 3]), 2.5, t(&[2, 3])],
                sample![mask(&[3]), 2i64, t(&[2, 3]).dtype(Long)],
                sample![mask(&[3]), 2.5, t(&[3]).dtype(Long)],
                sample![mask(&[2, 1]), -1.0, t(&[3]).f64()],
            ],
        ),
        (
            "where.ScalarOther",
            vec![
                sample![mask(&[2, 3]), t(&[2, 3]), 2.5],
                sample![mask(&[3]), t(&[2, 3]).dtype(Long), 2i64],
                sample![mask(&[3]), t(&[3]).dtype(Long), 2.5],
                sample![mask(&[]), t(&[3]).f64(), -1.0],
            ],
        ),
    ] {
        r.add(
            OpInfo::new(name, Family::BinaryPointwise)
                .samples(samples)
                .differentiable()
                .promotion(Promotion::Default),
        );
    }
    r.add(
        OpInfo::new("where.Scalar", Family::BinaryPointwise)
            .samples(vec![
                sample![mask(&[2, 3]), 1.5, -2.5],
                sample![mask(&[3]), 1i64, 2i64],
                sample![mask(&[]), 1.0, 2i64],
                sample![mask(&[3, 2]).transposed(), true, false],
            ])
            .grad(Grad::None("no tensor input but the boolean condition"))
            .promotion(Promotion::Default),
    );
    r.add(
        OpInfo::new("masked_fill.Scalar", Family::BinaryPointwise)
            .samples(vec![
                sample![t(&[2, 3]), mask(&[2, 3]), 0.5],
                sample![t(&[2, 3]), mask(&[3]), -1i64],
                sample![t(&[]), mask(&[]), 2.0],
                sample![t(&[0, 3]), mask(&[3]), 1.0],
                sample![t(&[3, 4]).transposed(), mask(&[3, 4]).strided(), 0.0],
                sample![t(&[4]).f64(), mask(&[4]), 3.0],
                sample![t(&[4]).dtype(Long), mask(&[4]), 7i64],
                sample![t(&[3]), mask(&[2, 3]), 1.0].error(),
            ])
            .differentiable()
            .meta()
            .inplace()
            .out()
            .promotion(Promotion::SameAsSelf),
    );
    r.add(
        OpInfo::new("masked_fill.Tensor", Family::BinaryPointwise)
            .samples(vec![
                sample![t(&[2, 3]), mask(&[2, 3]), t(&[])],
                sample![t(&[2, 3]), mask(&[3]), t(&[]).f64()],
                sample![t(&[]), mask(&[]), t(&[])],
                sample![t(&[3, 4]).transposed(), mask(&[4]), t(&[])],
                sample![t(&[4]).dtype(Long), mask(&[4]), t(&[]).dtype(Long)],
                sample![t(&[2, 3]), mask(&[2, 3]), t(&[2])].error(),
            ])
            .differentiable()
            .meta()
            .inplace()
            .out()
            .promotion(Promotion::SameAsSelf),
    );
}
