//! The autograd layer's cost on the smallest op, for instruction counts with callgrind (the
//! three `add_1elem*` scenarios of the root package's `dispatch_overhead` example, without
//! building the root package):
//!
//! ```sh
//! cargo build --release -p switchboard-autograd --example autograd_overhead
//! valgrind --tool=callgrind target/release/examples/autograd_overhead add_1elem 1000
//! valgrind --tool=callgrind target/release/examples/autograd_overhead add_1elem 2000
//! ```
//! The difference of the two totals divided by 1000 is the cost of one call. Scenarios:
//! `add_1elem` (`ops::add` of two 1-element CPU tensors: autograd kernel, nothing requires
//! grad), `add_1elem_below_autograd` (the same with the Autograd keys excluded: the difference
//! is the autograd layer's cost) and `add_1elem_requires_grad` (both require grad: the node is
//! built and attached, then freed with the result). Other kernel families: `sum_4elem` and
//! `sum_requires_grad` (`ops::sum` of a 4-element tensor, without and with requires_grad),
//! `mm_2x2` and `mm_requires_grad` (`ops::mm` of two 2x2 tensors), `view_requires_grad`
//! (`ops::view` of a 4-element tensor that requires grad), `mul__1elem` (in-place
//! `ops::mul_` of 1-element tensors, nothing requires grad: the in-place pass-through path),
//! `mul_scalar_1elem` and `mul_scalar__1elem` (`ops::mul_scalar` and `ops::mul_scalar_` of a
//! 1-element tensor and a number).

use std::hint::black_box;

use switchboard_autograd::AutogradTensor;
use switchboard_cpu as _;
use switchboard_dispatcher::ExcludeDispatchKeyGuard;
use switchboard_keys::AUTOGRAD_DISPATCH_KEYSET;
use switchboard_ops as ops;
use switchboard_tensor::{ScalarType, Tensor};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let scenario = args.get(1).map(String::as_str).unwrap_or("add_1elem");
    let n: u64 = args
        .get(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    const SCENARIOS: [&str; 11] = [
        "add_1elem",
        "add_1elem_below_autograd",
        "add_1elem_requires_grad",
        "sum_4elem",
        "sum_requires_grad",
        "mm_2x2",
        "mm_requires_grad",
        "view_requires_grad",
        "mul__1elem",
        "mul_scalar_1elem",
        "mul_scalar__1elem",
    ];
    if !SCENARIOS.contains(&scenario) {
        eprintln!(
            "unknown scenario {scenario}; one of {}",
            SCENARIOS.join(", ")
        );
        std::process::exit(2);
    }
    let rg = scenario.ends_with("_requires_grad");
    let ones = |s: &[i64]| {
        let t = Tensor::ones(s, ScalarType::Float).unwrap();
        if rg {
            t.requires_grad_(true).unwrap();
        }
        t
    };
    let _below = (scenario == "add_1elem_below_autograd")
        .then(|| ExcludeDispatchKeyGuard::new(AUTOGRAD_DISPATCH_KEYSET));
    match scenario {
        "sum_4elem" | "sum_requires_grad" => {
            let a = ones(&[4]);
            for _ in 0..n {
                black_box(ops::sum(black_box(&a)).unwrap());
            }
        }
        "mm_2x2" | "mm_requires_grad" => {
            let (a, b) = (ones(&[2, 2]), ones(&[2, 2]));
            for _ in 0..n {
                black_box(ops::mm(black_box(&a), black_box(&b)).unwrap());
            }
        }
        "view_requires_grad" => {
            let a = ones(&[4]);
            for _ in 0..n {
                black_box(ops::view(black_box(&a), &[2, 2]).unwrap());
            }
        }
        "mul__1elem" => {
            let (a, b) = (ones(&[1]), ones(&[1]));
            for _ in 0..n {
                black_box(ops::mul_(black_box(&a), black_box(&b)).unwrap());
            }
        }
        "mul_scalar_1elem" => {
            let a = ones(&[1]);
            for _ in 0..n {
                black_box(ops::mul_scalar(black_box(&a), 0.5).unwrap());
            }
        }
        "mul_scalar__1elem" => {
            let a = ones(&[1]);
            for _ in 0..n {
                black_box(ops::mul_scalar_(black_box(&a), 1.0).unwrap());
            }
        }
        _ => {
            let (a, b) = (ones(&[1]), ones(&[1]));
            for _ in 0..n {
                black_box(ops::add(black_box(&a), black_box(&b)).unwrap());
            }
        }
    }
}
