//! Reductions: sums, means, extrema, arg-extrema, variance.

use switchboard_tensor::ScalarType::{BFloat16, Double, Half, Int, Long};

use crate::info::{Family, Grad, OpInfo, Promotion};
use crate::sample::{Sample, NONE};
use crate::spec::{mask, t};
use crate::{sample, Registry};

/// Whole-tensor reductions: plain, 0-dim, non-contiguous, float64, reduced precision, NaN.
fn full_samples() -> Vec<Sample> {
    vec![
        sample![t(&[2, 3, 4])],
        sample![t(&[])],
        sample![t(&[3, 4]).transposed()],
        sample![t(&[2, 6]).strided()],
        sample![t(&[5]).f64()],
        sample![t(&[2, 3]).dtype(Half)],
        sample![t(&[5]).dtype(BFloat16)],
        sample![t(&[4]).nan()].no_grad("NaN"),
    ]
}

/// Reductions over `int[1]? dim` with `keepdim`.
fn dims_samples() -> Vec<Sample> {
    let none: &[i64] = &[];
    vec![
        sample![t(&[2, 3, 4]), [1i64]],
        sample![t(&[2, 3, 4]), [0i64, 2]; keepdim = true],
        sample![t(&[2, 3, 4]), [-1i64]],
        sample![t(&[2, 3]), none],
        sample![t(&[2, 3]), NONE],
        sample![t(&[]), [0i64]],
        sample![t(&[3, 4]).transposed(), [0i64]; keepdim = true],
        sample![t(&[0, 3]), [0i64]],
        sample![t(&[4, 2]).f64(), [1i64]],
        sample![t(&[2, 3]).dtype(Half), [0i64]; keepdim = true],
        sample![t(&[2, 3]), [2i64]].error(),
        sample![t(&[2, 3]), [0i64, 0]].error(),
    ]
}

/// Reductions over one `int dim` returning values (and indices).
fn dim_samples() -> Vec<Sample> {
    vec![
        sample![t(&[2, 3, 4]), 1i64],
        sample![t(&[2, 3, 4]), -1i64; keepdim = true],
        sample![t(&[]), 0i64],
        sample![t(&[3, 4]).transposed(), 0i64],
        sample![t(&[4, 2]).f64(), 1i64; keepdim = true],
        sample![t(&[2, 3]), 2i64].error(),
        sample![t(&[0, 3]), 1i64],
        sample![t(&[0, 3]), 0i64].error(),
    ]
}

/// The reductions.
pub fn register(r: &mut Registry) {
    let reduction = |name| OpInfo::new(name, Family::Reduction).meta().differentiable();

    let mut sum = full_samples();
    sum.push(sample![t(&[0, 3])]);
    sum.push(sample![t(&[5]).dtype(Long)]);
    sum.push(sample![t(&[2, 2]).dtype(Int)]);
    sum.push(sample![mask(&[5])]);
    sum.push(sample![t(&[3]); dtype = Double]);
    sum.push(sample![t(&[3]).dtype(Long); dtype = Double]);
    r.add(
        reduction("sum")
            .samples(sum)
            .out()
            .promotion(Promotion::IntToLong),
    );
    let mut sum_dim = dims_samples();
    sum_dim.push(sample![t(&[2, 3]).dtype(Long), [1i64]]);
    sum_dim.push(sample![mask(&[2, 3]), [0i64]; keepdim = true]);
    sum_dim.push(sample![t(&[2, 3]), [1i64]; dtype = Double]);
    r.add(
        reduction("sum.dim_IntList")
            .samples(sum_dim)
            .out()
            .promotion(Promotion::IntToLong),
    );

    let mut mean = full_samples();
    mean.push(sample![t(&[3]); dtype = Double]);
    // "mean(): could not infer output dtype. Input dtype must be either a floating point or
    // complex dtype."
    mean.push(sample![t(&[3]).dtype(Long)].error());
    r.add(
        reduction("mean")
            .samples(mean)
            .out()
            .promotion(Promotion::Default),
    );
    let mut mean_dim = dims_samples();
    mean_dim.push(sample![t(&[2, 3]), [1i64]; dtype = Double]);
    mean_dim.push(sample![t(&[2, 3]).dtype(Long), [1i64]].error());
    r.add(
        reduction("mean.dim")
            .samples(mean_dim)
            .out()
            .promotion(Promotion::Default),
    );

    for name in ["amax", "amin"] {
        let mut s = dims_samples();
        s.retain(|s| {
            !matches!(
                s.args.get(1),
                Some(crate::Arg::Value(switchboard_dispatcher::IValue::None))
            )
        });
        s.push(sample![t(&[2, 3])]);
        s.push(sample![t(&[2, 3]).dtype(Long), [1i64]]);
        s.push(sample![mask(&[2, 3]), [1i64]]);
        // Reducing an empty dimension has no identity.
        s.retain(|s| !s.tensors().any(|t| t.shape == [0, 3]));
        s.push(sample![t(&[0, 3]), [0i64]].error());
        r.add(
            reduction(name)
                .samples(s)
                .out()
                .promotion(Promotion::Default),
        );
    }
    for name in ["max", "min"] {
        let mut s = full_samples();
        s.push(sample![t(&[4]).dtype(Long)]);
        s.push(sample![mask(&[3])]);
        s.push(sample![t(&[0, 3])].error());
        r.add(
            reduction(name)
                .samples(s)
                .out()
                .promotion(Promotion::Default),
        );
    }
    for name in ["max.dim", "min.dim"] {
        let mut s = dim_samples();
        s.push(sample![t(&[2, 3]).dtype(Long), 1i64]);
        r.add(
            reduction(name)
                .samples(s)
                .out()
                .promotion(Promotion::Default),
        );
    }
    for name in ["argmax", "argmin"] {
        r.add(
            OpInfo::new(name, Family::Reduction)
                .samples(vec![
                    sample![t(&[2, 3, 4])],
                    sample![t(&[2, 3, 4]); dim = 1i64],
                    sample![t(&[2, 3, 4]); dim = -1i64, keepdim = true],
                    sample![t(&[]); dim = 0i64],
                    sample![t(&[3, 4]).transposed(); dim = 0i64],
                    sample![t(&[4]).dtype(Long)],
                    sample![t(&[4]).nan()],
                    sample![t(&[0, 3])].error(),
                    sample![t(&[2, 3]); dim = 2i64].error(),
                ])
                .grad(Grad::None("integer result"))
                .meta()
                .out(),
        );
    }

    let var_full = {
        let mut s = full_samples();
        s.push(sample![t(&[4]).dtype(Long)].error());
        s
    };
    r.add(
        OpInfo::new("var", Family::Reduction)
            .samples({
                let mut s = var_full.clone();
                s.push(sample![t(&[2, 3]), false]);
                s
            })
            .differentiable()
            .promotion(Promotion::Default),
    );
    r.add(
        OpInfo::new("var.dim", Family::Reduction)
            .samples(vec![
                sample![t(&[2, 3, 4]), [1i64]],
                sample![t(&[2, 3, 4]), [0i64, 2], false; keepdim = true],
                sample![t(&[3, 4]).transposed(), [-1i64]],
                sample![t(&[2, 3]), NONE],
                sample![t(&[4, 2]).f64(), [0i64]],
            ])
            .differentiable()
            .out()
            .promotion(Promotion::Default),
    );
    r.add(
        reduction("var.correction")
            .samples(vec![
                sample![t(&[2, 3, 4])],
                sample![t(&[2, 3, 4]), [1i64]],
                sample![t(&[2, 3, 4]), [0i64, 2]; correction = 2i64, keepdim = true],
                sample![t(&[2, 3]); correction = 0i64],
                sample![t(&[2, 3]); correction = 0.5],
                sample![t(&[]); correction = 0i64],
                sample![t(&[3, 4]).transposed(), [0i64]],
                sample![t(&[5]).f64()],
                sample![t(&[4]).dtype(Long)].error(),
            ])
            .out()
            .promotion(Promotion::Default),
    );
}
