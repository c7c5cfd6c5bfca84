//! `Union(...)` and `T?` construction, following PyTorch's canonicalisation.
//!
//! Note [Union canonicalisation]
//! PyTorch builds `T?` as a union `{T, None}` and normalises every union:
//! members are flattened (nested unions and optionals, `Scalar` becoming
//! `int, float, complex`), members that are subtypes of others are merged,
//! and the rest is sorted by `TypeKind` then by spelling.  Visible effects:
//! `Tensor??` is `Tensor?`, `Union(str, int)` prints `Union(int, str)`,
//! `None?` and `Union(int)` are internal-assert failures (a union of one
//! type).  This module implements that pipeline over the subtype relation
//! restricted to schema types; it is exact for everything a schema can
//! spell except refined tensor types, which schemas cannot contain.

use crate::types::Type;

const UNION_FILE: &str = "aten/src/ATen/core/union_type.cpp";

/// Why a union could not be built: PyTorch's internal-assert message.
#[derive(Debug)]
pub(crate) struct UnionError {
    pub(crate) file: &'static str,
    pub(crate) message: String,
}

fn flatten(t: &Type, out: &mut Vec<Type>) {
    match t {
        Type::Union(members) => members.iter().for_each(|m| flatten(m, out)),
        Type::Optional(inner) => {
            flatten(inner, out);
            out.push(Type::NoneType);
        }
        Type::Scalar => out.extend([Type::Int, Type::Float, Type::Complex]),
        other => out.push(other.clone()),
    }
}

/// The members PyTorch keeps in a union's `containedTypes()`.
fn members(t: &Type) -> Vec<Type> {
    match t {
        Type::Union(m) => m.clone(),
        Type::Optional(inner) if **inner == Type::Scalar => vec![Type::Scalar, Type::NoneType],
        Type::Optional(inner) => standardize(&[(**inner).clone(), Type::NoneType]),
        other => vec![other.clone()],
    }
}

fn is_number(t: &Type) -> bool {
    matches!(t, Type::Int | Type::Float | Type::Complex)
}

/// Whether a union with these members can hold every `Scalar`.
fn can_hold_number(members: &[Type]) -> bool {
    [Type::Int, Type::Float, Type::Complex]
        .iter()
        .all(|n| members.iter().any(|m| is_subtype(n, m)))
}

/// PyTorch's `isSubtypeOf` for schema types.
pub(crate) fn is_subtype(a: &Type, b: &Type) -> bool {
    if a == b || *b == Type::Any {
        return true;
    }
    match a {
        Type::NoneType if matches!(b, Type::Optional(_)) => return true,
        Type::Int | Type::Float | Type::Complex if *b == Type::Scalar => return true,
        Type::Scalar => {
            if let Type::Union(m) = b {
                return can_hold_number(m);
            }
        }
        Type::Union(_) | Type::Optional(_) => {
            let rhs: Vec<Type> = match b {
                Type::Union(m) => m.clone(),
                Type::Optional(inner) if **inner == Type::Scalar => {
                    vec![Type::NoneType, Type::Int, Type::Float, Type::Complex]
                }
                Type::Optional(inner) => vec![Type::NoneType, (**inner).clone()],
                Type::Scalar => vec![Type::Int, Type::Float, Type::Complex],
                other => vec![other.clone()],
            };
            return members(a)
                .iter()
                .all(|l| rhs.iter().any(|r| is_subtype(l, r)));
        }
        Type::Tuple(xs) => {
            if let Type::Tuple(ys) = b {
                return xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| is_subtype(x, y));
            }
        }
        Type::Future(x) => {
            if let Type::Future(y) = b {
                return is_subtype(x, y);
            }
        }
        Type::CustomClass(_) if *b == Type::AnyClassType => return true,
        _ => {}
    }
    match b {
        Type::Optional(inner) => is_subtype(a, inner),
        Type::Union(m) => m.iter().any(|inner| is_subtype(a, inner)),
        _ => false,
    }
}

/// PyTorch's `unifyTypes(t1, t2, /*default_to_union=*/false)`.
fn unify(a: &Type, b: &Type) -> Option<Type> {
    if is_subtype(a, b) {
        return Some(b.clone());
    }
    if is_subtype(b, a) {
        return Some(a.clone());
    }
    let a_none = is_subtype(a, &Type::NoneType);
    let b_none = is_subtype(b, &Type::NoneType);
    if a_none && !b_none {
        return create_optional(b.clone()).ok();
    }
    if b_none && !a_none {
        return create_optional(a.clone()).ok();
    }
    if let Type::Optional(inner) = a {
        return unify(inner, b).and_then(|t| create_optional(t).ok());
    }
    if let Type::Optional(inner) = b {
        return unify(inner, a).and_then(|t| create_optional(t).ok());
    }
    match (a, b) {
        (Type::Tuple(xs), Type::Tuple(ys)) if xs.len() == ys.len() => {
            let elems: Option<Vec<Type>> = xs.iter().zip(ys).map(|(x, y)| unify(x, y)).collect();
            elems.map(Type::Tuple)
        }
        (Type::Future(x), Type::Future(y)) => unify(x, y).map(|t| Type::Future(Box::new(t))),
        _ => None,
    }
}

/// PyTorch's `filterDuplicateSubtypes`: right to left, merge each member
/// into the first earlier one it unifies with.
fn filter_duplicate_subtypes(types: &mut Vec<Type>) {
    if types.is_empty() {
        return;
    }
    let supertype = |t1: &Type, t2: &Type| {
        let n1 = is_subtype(t1, &Type::NoneType);
        let n2 = is_subtype(t2, &Type::NoneType);
        if n1 != n2 {
            None
        } else {
            unify(t1, t2)
        }
    };
    let mut end = types.len() - 1;
    let mut i = types.len() - 1;
    while i > 0 {
        let mut j = (i - 1).min(end);
        loop {
            if let Some(u) = supertype(&types[i], &types[j]) {
                types[j] = u;
                types[i] = types[end].clone();
                end -= 1;
                break;
            }
            if j == 0 {
                break;
            }
            j -= 1;
        }
        i -= 1;
    }
    types.truncate(end + 1);
}

fn standardize(reference: &[Type]) -> Vec<Type> {
    let mut out = Vec::new();
    reference.iter().for_each(|t| flatten(t, &mut out));
    filter_duplicate_subtypes(&mut out);
    out.sort_by(|a, b| {
        a.kind_ordinal()
            .cmp(&b.kind_ordinal())
            .then_with(|| a.to_string().cmp(&b.to_string()))
    });
    out
}

fn single_type_error(reference: &[Type], single: &Type) -> UnionError {
    let mut msg =
        String::from("After type unification was performed, the Union with the original types {");
    for (i, t) in reference.iter().enumerate() {
        msg.push_str(&t.annotation_str());
        if i > 0 {
            msg.push(',');
        }
        msg.push(' ');
    }
    msg.push_str("} has the single type ");
    msg.push_str(&single.annotation_str());
    msg.push_str(". Use the common supertype instead of creating a Uniontype");
    UnionError {
        file: UNION_FILE,
        message: msg,
    }
}

/// Builds the members of a `UnionType`, failing like its constructor.
fn union_members(reference: &[Type]) -> Result<Vec<Type>, UnionError> {
    let types = standardize(reference);
    if types.len() == 1 {
        return Err(single_type_error(reference, &types[0]));
    }
    Ok(types)
}

/// `Union(...)`, as `c10::UnionType::create` builds it.
pub(crate) fn create_union(reference: Vec<Type>) -> Result<Type, UnionError> {
    let types = union_members(&reference)?;
    let has = |t: &Type| types.contains(t);
    if has(&Type::NoneType) {
        if types.len() == 4 && has(&Type::Int) && has(&Type::Float) && has(&Type::Complex) {
            return Ok(Type::Optional(Box::new(Type::Scalar)));
        }
        if types.len() == 2 {
            let other = if types[0] != Type::NoneType {
                &types[0]
            } else {
                &types[1]
            };
            return create_optional(other.clone());
        }
    }
    Ok(Type::Union(types))
}

/// `T?`, as `c10::OptionalType::create` builds it.
pub(crate) fn create_optional(inner: Type) -> Result<Type, UnionError> {
    // Fast path: only unions, optionals and None change under
    // canonicalisation (`Scalar?` stays `Scalar?`).
    if !matches!(inner, Type::Optional(_) | Type::Union(_) | Type::NoneType) {
        return Ok(Type::Optional(Box::new(inner)));
    }
    let reference = [inner, Type::NoneType];
    let types = union_members(&reference)?;
    let [inner, _] = reference;
    if types.len() == 2 {
        let other = if types[0].kind_ordinal() != Type::NoneType.kind_ordinal() {
            &types[0]
        } else {
            &types[1]
        };
        return Ok(Type::Optional(Box::new(other.clone())));
    }
    let is_number_union = matches!(&inner, Type::Union(m) if m.len() == 3 && can_hold_number(m));
    if inner == Type::Scalar || is_number_union {
        return Ok(Type::Optional(Box::new(Type::Scalar)));
    }
    let without_none: Vec<Type> = types.into_iter().filter(|t| *t != Type::NoneType).collect();
    let contained = if without_none.len() == 1 {
        without_none.into_iter().next().unwrap_or(Type::Any)
    } else {
        Type::Union(without_none)
    };
    Ok(Type::Optional(Box::new(contained)))
}

/// Writes a union as `UnionType::str()` (`Union(a, b)`) or
/// `annotation_str()` (`Union[a, b]`), including PyTorch's folding of
/// `int, float, complex` into `Scalar` / `number`.
pub(crate) fn write_union(out: &mut String, members: &[Type], annotation: bool) {
    let holds_number = can_hold_number(members);
    out.push_str(if annotation { "Union[" } else { "Union(" });
    let mut printed = false;
    for (i, t) in members.iter().enumerate() {
        if !holds_number || !is_number(t) {
            if i > 0 {
                out.push_str(", ");
                printed = true;
            }
            if annotation {
                out.push_str(&t.annotation_str());
            } else {
                t.write_schema(out);
            }
        }
    }
    if holds_number {
        if printed {
            out.push_str(", ");
        }
        out.push_str(if annotation { "number" } else { "Scalar" });
    }
    out.push(if annotation { ']' } else { ')' });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opt(t: Type) -> Type {
        Type::Optional(Box::new(t))
    }

    #[test]
    fn optional_canonicalisation() {
        assert_eq!(create_optional(Type::Tensor).unwrap(), opt(Type::Tensor));
        assert_eq!(
            create_optional(opt(Type::Tensor)).unwrap(),
            opt(Type::Tensor)
        );
        assert_eq!(create_optional(Type::Scalar).unwrap(), opt(Type::Scalar));
        assert!(create_optional(Type::NoneType).is_err());
    }

    #[test]
    fn union_canonicalisation() {
        let u = create_union(vec![Type::Str, Type::Int]).unwrap();
        assert_eq!(u.to_string(), "Union(int, str)");
        assert_eq!(u.annotation_str(), "Union[int, str]");
        assert_eq!(
            create_union(vec![Type::Int, Type::NoneType]).unwrap(),
            opt(Type::Int)
        );
        assert_eq!(
            create_union(vec![Type::Int, Type::Scalar])
                .unwrap()
                .to_string(),
            "Union(Scalar)"
        );
        assert!(create_union(vec![Type::Tensor, Type::Any]).is_err());
        assert!(create_union(vec![Type::Int]).is_err());
        let e = create_union(vec![Type::Int, Type::Int]).unwrap_err();
        assert!(e.message.contains("{int int, }"), "{}", e.message);
    }
}
