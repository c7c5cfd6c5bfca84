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
//! built and attached, then freed with the result).

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
    if !matches!(
        scenario,
        "add_1elem" | "add_1elem_below_autograd" | "add_1elem_requires_grad"
    ) {
        eprintln!("unknown scenario {scenario}; one of add_1elem, add_1elem_below_autograd, add_1elem_requires_grad");
        std::process::exit(2);
    }
    let a = Tensor::ones(&[1], ScalarType::Float).unwrap();
    let b = Tensor::ones(&[1], ScalarType::Float).unwrap();
    if scenario == "add_1elem_requires_grad" {
        a.requires_grad_(true).unwrap();
        b.requires_grad_(true).unwrap();
    }
    let _below = (scenario == "add_1elem_below_autograd")
        .then(|| ExcludeDispatchKeyGuard::new(AUTOGRAD_DISPATCH_KEYSET));
    for _ in 0..n {
        black_box(ops::add(black_box(&a), black_box(&b), 1).unwrap());
    }
}
