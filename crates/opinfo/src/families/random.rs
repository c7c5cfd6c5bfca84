//! Random sampling: factories, in-place samplers and their functional forms. Their values are
//! compared only between calls reseeded alike, and through statistics (`Stats`).

use switchboard_dispatcher::IValue;
use switchboard_tensor::Generator;
use switchboard_tensor::ScalarType::{Double, Float, Long};

use crate::info::{Family, Grad, OpInfo, Stats};
use crate::sample::{Arg, Sample};
use crate::spec::t;
use crate::{sample, Registry};

/// A generator seeded with `seed` (an explicit `generator=` argument).
fn generator(seed: u64) -> Arg {
    Arg::Value(IValue::Generator(Generator::new(seed)))
}

const N: i64 = 4096;

fn stats(sample: Sample, mean: f64, std: f64, min: f64, max: f64) -> Stats {
    // Four standard errors of the mean over N values, and 5% of the deviation.
    let tol = (4.0 * std / (N as f64).sqrt()).max(0.05 * std);
    Stats {
        sample,
        mean,
        std,
        min,
        max,
        tol,
    }
}

const UNIFORM_STD: f64 = 0.288_675_134_594_812_9; // 1 / sqrt(12)

/// The random family.
pub fn register(r: &mut Registry) {
    let factory = |name| OpInfo::new(name, Family::Random).grad(Grad::None("no tensor input"));
    let sizes = || {
        vec![
            sample![[2i64, 3]],
            sample![[0i64; 0]],
            sample![[0i64, 2]],
            sample![[3i64]; dtype = Double],
        ]
    };
    r.add(
        factory("rand")
            .samples(sizes())
            .stats(stats(sample![[N]], 0.5, UNIFORM_STD, 0.0, 1.0))
            .out(),
    );
    r.add(
        factory("randn")
            .samples(sizes())
            .stats(stats(sample![[N]], 0.0, 1.0, -10.0, 10.0))
            .out(),
    );
    let with_generator = |s: Vec<Sample>| -> Vec<Sample> {
        s.into_iter()
            .map(|mut s| {
                s.kwargs.push(("generator", generator(3)));
                s
            })
            .collect()
    };
    r.add(
        factory("rand.generator")
            .samples(with_generator(sizes()))
            .stats(stats(
                sample![[N]; generator = generator(5)],
                0.5,
                UNIFORM_STD,
                0.0,
                1.0,
            ))
            .out(),
    );
    r.add(
        factory("randn.generator")
            .samples(with_generator(sizes()))
            .stats(stats(
                sample![[N]; generator = generator(5)],
                0.0,
                1.0,
                -10.0,
                10.0,
            ))
            .out(),
    );
    let ints = || {
        vec![
            sample![10i64, [2i64, 3]],
            sample![3i64, [0i64; 0]],
            sample![5i64, [4i64]; dtype = Float],
            sample![0i64, [2i64]].error(),
        ]
    };
    // Integers in [0, 10): mean 4.5, deviation sqrt((10^2 - 1) / 12).
    let int_std = (99.0f64 / 12.0).sqrt();
    r.add(
        factory("randint")
            .samples(ints())
            .stats(stats(sample![10i64, [N]], 4.5, int_std, 0.0, 9.0))
            .out(),
    );
    r.add(
        factory("randint.generator")
            .samples(with_generator(ints()))
            .stats(stats(
                sample![10i64, [N]; generator = generator(5)],
                4.5,
                int_std,
                0.0,
                9.0,
            ))
            .out(),
    );
    let low = || {
        vec![
            sample![-5i64, 5i64, [2i64, 3]],
            sample![2i64, 3i64, [4i64]],
            sample![0i64, 4i64, [3i64]; dtype = Double],
            sample![3i64, 3i64, [2i64]].error(),
        ]
    };
    r.add(
        factory("randint.low")
            .samples(low())
            .stats(stats(sample![-5i64, 5i64, [N]], -0.5, int_std, -5.0, 4.0))
            .out(),
    );
    r.add(
        factory("randint.low_generator")
            .samples(with_generator(low()))
            .stats(stats(
                sample![-5i64, 5i64, [N]; generator = generator(5)],
                -0.5,
                int_std,
                -5.0,
                4.0,
            ))
            .out(),
    );

    // A permutation of 0..N: mean (N - 1) / 2, deviation sqrt((N^2 - 1) / 12), whatever the
    // draws.
    let perm_std = ((N * N - 1) as f64 / 12.0).sqrt();
    let perm_stats = |s| stats(s, (N - 1) as f64 / 2.0, perm_std, 0.0, (N - 1) as f64);
    let perms = || {
        vec![
            sample![5i64],
            sample![0i64],
            sample![1i64],
            sample![6i64; dtype = Float],
            sample![7i64; dtype = switchboard_tensor::ScalarType::Half],
            // The dtype errors (overflow, float precision, bool) are the CPU kernel's unit
            // tests: an out= call takes its dtype from `out`.
            sample![-1i64].error(),
        ]
    };
    r.add(
        factory("randperm")
            .samples(perms())
            .stats(perm_stats(sample![N]))
            .out(),
    );
    r.add(
        factory("randperm.generator")
            .samples(with_generator(perms()))
            .stats(perm_stats(sample![N; generator = generator(5)]))
            .out(),
    );

    // Samplers of a tensor's shape: gradients are zero (PyTorch's formulas), or not
    // implemented where PyTorch 2.15 has none.
    // The in-place samplers have Meta kernels; their functional forms are composite.
    let sampler = |name: &'static str, grad| {
        let info = OpInfo::new(name, Family::Random).grad(grad);
        if info.is_inplace_only() {
            info.meta()
        } else {
            info
        }
    };
    let shapes = |extra: &dyn Fn() -> Vec<Arg>| {
        [
            t(&[2, 3]),
            t(&[3, 4]).transposed(),
            t(&[]),
            t(&[0, 3]),
            t(&[4]).f64(),
        ]
        .into_iter()
        .map(|x| {
            let mut args = vec![Arg::Tensor(x)];
            args.extend(extra());
            Sample::new(args, vec![])
        })
        .collect::<Vec<_>>()
    };
    let big = || t(&[N]);
    r.add(
        sampler("uniform", Grad::Check)
            .samples({
                let mut s = shapes(&|| vec![(-2.0).into(), 3.0.into()]);
                s.push(sample![t(&[3]); generator = generator(1)]);
                s
            })
            .inplace()
            .stats(stats(
                sample![big(), -2.0, 3.0],
                0.5,
                5.0 * UNIFORM_STD,
                -2.0,
                3.0,
            ))
            .out(),
    );
    r.add(
        sampler(
            "normal_functional",
            Grad::NotImplemented("PyTorch 2.15 has no formula for normal_functional"),
        )
        .samples({
            let mut s = shapes(&|| vec![1.0.into(), 2.0.into()]);
            s.push(sample![t(&[3]), 0.0, -1.0].error());
            s
        })
        .stats(stats(sample![big(), 1.0, 2.0], 1.0, 2.0, -20.0, 20.0)),
    );
    r.add(
        sampler("normal_", Grad::Check)
            .samples(shapes(&|| vec![(-1.0).into(), 0.5.into()]))
            .stats(stats(sample![big(), -1.0, 0.5], -1.0, 0.5, -10.0, 10.0)),
    );
    r.add(
        sampler("random_.from", Grad::Check)
            .samples({
                let mut s = shapes(&|| vec![0i64.into(), 10i64.into()]);
                s.push(sample![t(&[3]).dtype(Long), -3i64, 3i64]);
                s.push(sample![t(&[3]), 5i64, 2i64].error());
                s
            })
            .stats(stats(sample![big(), 0i64, 10i64], 4.5, int_std, 0.0, 9.0)),
    );
    r.add(
        sampler("random_.to", Grad::Check)
            .samples({
                let mut s = shapes(&|| vec![5i64.into()]);
                s.push(sample![t(&[3]).dtype(Long), 100i64]);
                s
            })
            .stats(stats(
                sample![big(), 5i64],
                2.0,
                (24.0f64 / 12.0).sqrt(),
                0.0,
                4.0,
            )),
    );
    // float32's random_ draws integers in [0, 2^24].
    let m = (1u64 << 24) as f64;
    r.add(
        sampler("random_", Grad::Check)
            .samples({
                let mut s = shapes(&|| vec![]);
                s.push(sample![t(&[3]).dtype(Long)]);
                s
            })
            .stats(stats(sample![big()], m / 2.0, m * UNIFORM_STD, 0.0, m)),
    );
    let p_std = |p: f64| (p * (1.0 - p)).sqrt();
    r.add(
        sampler("bernoulli_.float", Grad::Check)
            .samples({
                let mut s = shapes(&|| vec![0.3.into()]);
                s.push(sample![t(&[3]).dtype(Long), 0.5]);
                s.push(sample![t(&[3]), 1.5].error());
                s
            })
            .stats(stats(sample![big(), 0.3], 0.3, p_std(0.3), 0.0, 1.0)),
    );
    // `bernoulli` draws with the probabilities in `self`, `bernoulli.Tensor` (and its in-place
    // form) with those in `p`: uniform probabilities give a mean and deviation of 1/2.
    let probs = |shape: &[i64]| t(shape).range(0.0, 1.0);
    r.add(
        sampler("bernoulli", Grad::Check)
            .samples(vec![
                sample![probs(&[2, 3])],
                sample![probs(&[3, 4]).transposed()],
                sample![probs(&[])],
                sample![probs(&[0, 3])],
                sample![probs(&[4]).f64()],
                sample![probs(&[3]); generator = generator(2)],
                sample![t(&[3]).literal(&[0.5, 1.5, 0.0])].error_from_data(),
                sample![t(&[3]).dtype(Long)].error(),
            ])
            .stats(stats(sample![probs(&[N])], 0.5, 0.5, 0.0, 1.0))
            .out(),
    );
    r.add(
        sampler("bernoulli.Tensor", Grad::Check)
            .samples(vec![
                sample![t(&[2, 3]), probs(&[2, 3])],
                sample![t(&[3, 4]).transposed(), probs(&[4])],
                sample![t(&[]), probs(&[])],
                sample![t(&[0, 3]), probs(&[3])],
                sample![t(&[4]).dtype(Long), probs(&[4])].no_grad("an integer result"),
                sample![t(&[3]), probs(&[3]); generator = generator(3)],
                sample![t(&[3]), t(&[3]).literal(&[0.5, -0.5, 0.0])].error_from_data(),
                sample![t(&[3]), t(&[3]).dtype(Long)].error(),
            ])
            .inplace()
            .stats(stats(sample![t(&[N]), probs(&[N])], 0.5, 0.5, 0.0, 1.0))
            .out(),
    );
    r.add(
        sampler(
            "bernoulli.p",
            Grad::NotImplemented("PyTorch 2.15 has no formula for bernoulli.p"),
        )
        .samples(shapes(&|| vec![0.7.into()]))
        .stats(stats(sample![big(), 0.7], 0.7, p_std(0.7), 0.0, 1.0)),
    );
}
