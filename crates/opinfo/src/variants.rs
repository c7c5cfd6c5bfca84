//! Finding an operator's in-place and `out=` variants among the registered operators, by
//! schema, as torchgen groups PyTorch's native functions (by `FunctionSchema.signature()`:
//! overload names and alias annotations aside, the same base name and arguments, defaults
//! included): the in-place form is `name_` with the same arguments (`pow_.Scalar` is
//! `pow.Tensor_Scalar`'s); the `out=` form has the same name and arguments plus `out` tensors (a
//! factory's without its `dtype`, `layout`, `device` and `pin_memory`).

use switchboard_dispatcher::{Dispatcher, OperatorHandle};
use switchboard_schema::{Argument, FunctionSchema};

/// The arguments that a factory's `out=` form drops (its `TensorOptions`).
const TENSOR_OPTIONS: [&str; 4] = ["dtype", "layout", "device", "pin_memory"];

fn same_arguments<'a>(
    a: impl IntoIterator<Item = &'a Argument>,
    b: impl IntoIterator<Item = &'a Argument>,
) -> bool {
    let a: Vec<_> = a.into_iter().collect();
    let b: Vec<_> = b.into_iter().collect();
    a.len() == b.len()
        && a.iter().zip(&b).all(|(x, y)| {
            x.name() == y.name() && x.ty() == y.ty() && x.default_value() == y.default_value()
        })
}

/// The registered `aten` operators with a schema.
pub fn aten_operators() -> Vec<Registered> {
    let d = Dispatcher::global();
    d.list_operators()
        .iter()
        .filter(|n| n.namespace() == Some("aten"))
        .filter_map(|n| d.find_op(n))
        .filter_map(|op| {
            let s = op.schema()?.schema.clone();
            Some((op, s))
        })
        .collect()
}

/// `name.overload` of a schema, as the registry names operators.
pub fn short_name(s: &FunctionSchema) -> String {
    match s.overload_name() {
        "" => s.base_name().to_owned(),
        o => format!("{}.{o}", s.base_name()),
    }
}

/// Whether `candidate` is the in-place form of `functional`.
pub fn is_inplace_of(candidate: &FunctionSchema, functional: &FunctionSchema) -> bool {
    candidate.base_name() == format!("{}_", functional.base_name())
        && candidate.out_arguments().is_empty()
        && candidate.arguments().first().is_some_and(|a| a.is_write())
        && same_arguments(candidate.arguments(), functional.arguments())
}

/// Whether `candidate` is the `out=` form of `functional`.
pub fn is_out_of(candidate: &FunctionSchema, functional: &FunctionSchema) -> bool {
    if candidate.base_name() != functional.base_name()
        || candidate.out_arguments().is_empty()
        || !functional.out_arguments().is_empty()
    {
        return false;
    }
    let factory = functional.arguments().iter().any(|a| a.name() == "device");
    let kept = functional
        .arguments()
        .iter()
        .filter(|a| !(factory && TENSOR_OPTIONS.contains(&a.name())));
    same_arguments(kept, candidate.arguments().iter().filter(|a| !a.is_out()))
}

/// A registered operator and its schema.
pub type Registered = (OperatorHandle, FunctionSchema);

/// The in-place and `out=` variants of `functional` among `all`.
pub fn variants_of<'a>(
    functional: &FunctionSchema,
    all: &'a [Registered],
) -> (Option<&'a Registered>, Option<&'a Registered>) {
    (
        all.iter().find(|(_, s)| is_inplace_of(s, functional)),
        all.iter().find(|(_, s)| is_out_of(s, functional)),
    )
}
