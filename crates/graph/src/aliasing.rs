//! What a schema says about aliasing: which arguments an operator writes, which argument each
//! return aliases, and whether the operator is a pure function of its inputs.

use switchboard_dispatcher::{OperatorHandle, Tag};
use switchboard_schema::{FunctionSchema, Type};

use crate::Source;

/// The aliasing of an operator's arguments and returns, read from its schema's annotations
/// (`Tensor(a!) self` is written, `-> Tensor(a)` aliases the argument annotated `(a)`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Aliasing {
    /// The arguments the operator writes (`Tensor(a!)`), in order.
    pub written: Vec<usize>,
    /// For each return, the argument it aliases, if any.
    pub return_aliases: Vec<Option<usize>>,
    /// For each return, whether it is a write alias (`-> Tensor(a!)`: the written argument
    /// itself) rather than a view.
    pub return_writes: Vec<bool>,
}

impl Aliasing {
    /// The aliasing of `schema`.
    pub fn of(schema: &FunctionSchema) -> Aliasing {
        let args = schema.arguments();
        let written = args
            .iter()
            .enumerate()
            .filter(|(_, a)| a.is_write())
            .map(|(i, _)| i)
            .collect();
        let mut return_aliases = Vec::new();
        let mut return_writes = Vec::new();
        for r in schema.returns() {
            let aliased = r.alias_info().and_then(|info| {
                args.iter().position(|a| {
                    a.alias_info().is_some_and(|ai| {
                        ai.before_set()
                            .any(|s| s != "*" && info.before_set().any(|t| t == s))
                    })
                })
            });
            return_aliases.push(aliased);
            return_writes.push(r.alias_info().is_some_and(|i| i.is_write()));
        }
        Aliasing {
            written,
            return_aliases,
            return_writes,
        }
    }

    /// The aliasing of `op` (nothing aliased when it has no schema).
    pub fn of_op(op: &OperatorHandle) -> Aliasing {
        op.schema()
            .map(|r| Aliasing::of(&r.schema))
            .unwrap_or_default()
    }

    /// The memory an output of a call is, given `arg_root` (the memory of each argument by
    /// position): the argument a return aliases, the `out=` argument an output is, or `None` for
    /// fresh memory (and for items of a returned list).
    pub fn output_root<R>(
        &self,
        source: Source,
        arg_root: impl Fn(usize) -> Option<R>,
    ) -> Option<R> {
        match source {
            Source::Return(r) => self
                .return_aliases
                .get(r as usize)
                .copied()
                .flatten()
                .and_then(arg_root),
            Source::ReturnItem(..) => None,
            Source::Argument(k) => arg_root(k as usize),
        }
    }

    /// Whether the operator writes any argument.
    pub fn is_mutating(&self) -> bool {
        !self.written.is_empty()
    }

    /// Whether every return is a view of an argument (a view operator: `view`, `t`, ...).
    pub fn returns_only_views(&self) -> bool {
        !self.return_aliases.is_empty()
            && self
                .return_aliases
                .iter()
                .zip(&self.return_writes)
                .all(|(a, w)| a.is_some() && !w)
    }
}

/// Factories whose results are uninitialised memory: deterministic in their metadata only.
const UNINITIALISED: &[&str] = &[
    "empty",
    "empty_like",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
];

/// Whether calls of `op` draw random numbers: it is tagged `nondeterministic_seeded` (`rand`,
/// `normal_`, `native_dropout`, ... and any operator defined with the tag), or it takes a
/// `Generator` (torchgen requires the tag of those, but an operator defined elsewhere may lack
/// it).
pub fn is_random(op: &OperatorHandle) -> bool {
    let Some(record) = op.schema() else {
        return false;
    };
    let schema = &record.schema;
    record.tags.contains(&Tag::NondeterministicSeeded)
        || schema
            .arguments()
            .iter()
            .any(|a| mentions_generator(a.ty()))
}

/// Whether calls of `op` are pure functions of their arguments: no argument is written, no
/// random number is drawn ([`is_random`]), and the result is not uninitialised memory
/// (`empty`). Identical pure calls on the same values give equal results, so a plan may run
/// them once.
pub fn is_pure(op: &OperatorHandle) -> bool {
    let Some(record) = op.schema() else {
        return false;
    };
    let schema = &record.schema;
    !schema.is_mutable() && !UNINITIALISED.contains(&schema.base_name()) && !is_random(op)
}

fn mentions_generator(t: &Type) -> bool {
    match t {
        Type::Generator => true,
        Type::Optional(e) | Type::List(e) => mentions_generator(e),
        _ => false,
    }
}
