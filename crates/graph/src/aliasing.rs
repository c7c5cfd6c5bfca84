//! The graph's reading of an operator's semantics (which arguments it writes, which argument
//! each return aliases, purity): computed once when the operator is defined, in
//! `switchboard_dispatcher::OperatorSemantics` (Note [One home for an operator's facts]).

use switchboard_dispatcher::{OperatorHandle, OperatorSemantics};

use crate::Source;

/// The memory an output of a call of an operator with `semantics` is, given `arg_root` (the
/// memory of each argument by position): the argument a return aliases, the `out=` argument an
/// output is, or `None` for fresh memory (and for items of a returned list).
pub fn output_root<R>(
    semantics: &OperatorSemantics,
    source: Source,
    arg_root: impl Fn(usize) -> Option<R>,
) -> Option<R> {
    match source {
        Source::Return(r) => semantics
            .return_aliases
            .get(r as usize)
            .copied()
            .flatten()
            .and_then(arg_root),
        Source::ReturnItem(..) => None,
        Source::Argument(k) => arg_root(k as usize),
    }
}

/// Whether calls of `op` draw random numbers (`OperatorSemantics::is_random`); false without a
/// schema.
pub fn is_random(op: &OperatorHandle) -> bool {
    op.semantics().is_some_and(|s| s.is_random)
}

/// Whether calls of `op` are pure functions of their arguments (`OperatorSemantics::is_pure`),
/// so that a plan may run identical calls once; false without a schema.
pub fn is_pure(op: &OperatorHandle) -> bool {
    op.semantics().is_some_and(|s| s.is_pure)
}
