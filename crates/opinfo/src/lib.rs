//! The operator-sample registry: PyTorch's OpInfo, our way.
//!
//! ```
//! use switchboard_opinfo::{registry, Family};
//! let reg = registry();
//! let add = reg.iter().find(|o| o.name == "add.Tensor").unwrap();
//! assert_eq!(add.family, Family::BinaryPointwise);
//! assert!(add.inplace && add.out && add.meta && add.grad.checks());
//! ```

// Note [Operator samples]
// One registry describes every registered aten operator for the tests: `registry()` returns an
// `OpInfo` per functional operator (overload), with sample calls and flags. Its in-place and
// `out=` variants are not entries of their own: they are found by schema (`variants.rs`, as
// torchgen groups native functions) and an entry's `inplace` / `out` flags say they exist. An
// in-place operator with no functional form (`copy_`, `random_`) is an entry itself.
//
// Samples describe tensors instead of holding them (`TensorSpec`: shape, dtype, values,
// layout), so each test makes them where it needs them: float64 leaves for gradcheck, Meta
// tensors for the parity test, fresh copies for an in-place call. Entries are grouped by kind
// in `families/`, where one line gives a family its samples (`unary_samples`,
// `binary_samples`, ...) and flags; arguments a sample leaves out take the schema's defaults.
//
// The generic tests that read it live beside what they test:
// - crates/autograd/tests/samples_gradcheck.rs: gradcheck of every differentiable entry and
//   of its in-place form, gradgradcheck of the first samples;
// - crates/meta/tests/samples_parity.rs: Meta against CPU (sizes, strides, dtype, errors);
// - crates/cpu/tests/samples_variants.rs: in-place and `out=` forms against the functional
//   one, dtype promotion, random statistics;
// - crates/lazy/tests/samples_lazy.rs: every sample and its variants with the tensors on
//   `lazy` against the CPU (lazy mode on and off; errors when captured), and gradients through
//   lazy tensors;
// - crates/trace/tests/samples_replay.rs: every call traced (make_fx) and its graph re-run on
//   fresh inputs with eager's results, errors while tracing;
// - crates/autocast/tests/samples_autocast.rs: results in a CPU autocast region against the
//   eager call on inputs cast as the policy table says;
// - tests/operator_samples.rs (the facade, where every crate's registrations are linked):
//   coverage. It fails when a registered aten operator is neither an entry nor a variant of
//   one, and when an entry's flags disagree with the dispatcher's registrations (a Meta
//   kernel, an in-place or out= variant, an Autograd kernel from derivatives.yaml without a
//   gradcheck sample, a not-implemented one not declared as such).
//
// What cannot be compared generically (random values, uninitialized memory, numbers read from
// data) is declared in one list, `special::UNSAMPLED`, with the reason; those entries still
// take part in everything else (Meta parity of shapes, variants reseeded alike).

mod call;
mod compare;
mod families;
mod functionalized;
mod info;
mod promotion;
mod sample;
mod spec;
pub mod special;
mod variants;

pub use call::{harness_error, operator, returned_tensors, Prepared, TensorSlot};
pub use compare::{assert_close, assert_no_failures, assert_same_metadata};
pub use functionalized::{same_random_draws, viewed_input};
pub use info::{Family, Grad, OpInfo, Promotion, Stats, Unsampled};
pub use promotion::{promote_types, result_type, Operand};
pub use sample::{Arg, Sample, NONE};
pub use spec::{index, longs, mask, t, Layout, TensorSpec, Values};
pub use variants::{aten_operators, is_inplace_of, is_out_of, short_name, variants_of, Registered};

/// The entries, built by the families.
#[derive(Default)]
pub struct Registry {
    entries: Vec<OpInfo>,
}

impl Registry {
    /// Adds an entry.
    pub fn add(&mut self, info: OpInfo) {
        self.entries.push(info);
    }
}

/// Every entry.
pub fn registry() -> Vec<OpInfo> {
    let mut r = Registry::default();
    families::register(&mut r);
    r.entries
}

/// The entry of `name` (`add.Tensor`).
pub fn entry(name: &str) -> Option<OpInfo> {
    registry().into_iter().find(|o| o.name == name)
}
