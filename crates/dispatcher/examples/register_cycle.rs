//! The `register` scenario of the workspace's `dispatch_overhead` example, buildable with this
//! crate alone (for quick callgrind runs while working on registration):
//!
//! ```sh
//! cargo build --release -p switchboard-dispatcher --example register_cycle
//! valgrind --tool=callgrind target/release/examples/register_cycle register 2000
//! ```

use std::hint::black_box;

use switchboard_dispatcher::{Dispatcher, KernelFunction, Library, LibraryKind, Result};
use switchboard_keys::DispatchKey as K;
use switchboard_tensor::Tensor;

fn first(a: &Tensor, _b: &Tensor) -> Result<Tensor> {
    Ok(a.clone())
}

fn main() {
    let n: u64 = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let d = Dispatcher::with_builtin_fallbacks();
    for i in 0..n {
        let mut lib = Library::new(&d, LibraryKind::Fragment, "reg", None).unwrap();
        let name = format!("op{}", i % 64);
        lib.def(&format!("{name}(Tensor a, Tensor b) -> Tensor"))
            .unwrap();
        lib.impl_(&name, Some(K::CPU), KernelFunction::from_fn(first))
            .unwrap();
        black_box(&lib);
    }
}
