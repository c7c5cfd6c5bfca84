//! Arguments and returns of a schema.

use std::fmt;

use crate::alias::AliasInfo;
use crate::default::DefaultValue;
use crate::types::Type;

/// One argument (or return) of a [`crate::FunctionSchema`].
///
/// `Display` prints it as it appears in the schema:
/// `Tensor(a!) out`, `int[2] stride=1`, `Scalar alpha=1`.
#[derive(Clone, Debug, PartialEq)]
pub struct Argument {
    // Boxed str and boxed default keep an argument at 80 bytes (was 112): a registered
    // operator holds all of its arguments, and most have no default.
    name: Box<str>,
    ty: Type,
    n: Option<i32>,
    default: Option<Box<DefaultValue>>,
    kwarg_only: bool,
    // Boxed like PyTorch's `unique_ptr<AliasInfo>`: most arguments have none.
    alias_info: Option<Box<AliasInfo>>,
    is_out: bool,
}

impl Argument {
    /// Builds an argument.  `ty` is the real type (`SymInt[]`, not
    /// `int[]`); `n` is the fixed size of a list type (`int[2]`).  Like
    /// PyTorch, an argument is an out argument when it is keyword-only and
    /// written (`*, Tensor(a!) out`).
    pub fn new(
        name: impl Into<String>,
        ty: Type,
        n: Option<i32>,
        default: Option<DefaultValue>,
        kwarg_only: bool,
        alias_info: Option<AliasInfo>,
    ) -> Self {
        let is_out = kwarg_only && alias_info.as_ref().is_some_and(AliasInfo::is_write);
        Argument {
            name: name.into().into_boxed_str(),
            ty,
            n,
            default: default.map(Box::new),
            kwarg_only,
            alias_info: alias_info.map(Box::new),
            is_out,
        }
    }

    /// The name; empty for an unnamed return.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The real type (`ScalarType?`, `SymInt[]`).
    pub fn ty(&self) -> &Type {
        &self.ty
    }

    /// The fake type PyTorch reports as `arg.type` (`int?`, `int[]`).
    pub fn fake_type(&self) -> Type {
        self.ty.fake()
    }

    /// The fixed list size `N` of `T[N]`.  PyTorch stores it as a 32-bit
    /// integer (larger sizes wrap), hence `i32`.
    pub fn n(&self) -> Option<i32> {
        self.n
    }

    /// The default value, if any.
    pub fn default_value(&self) -> Option<&DefaultValue> {
        self.default.as_deref()
    }

    /// Whether the argument comes after `*` (always false for returns).
    pub fn kwarg_only(&self) -> bool {
        self.kwarg_only
    }

    /// The alias annotation, if any.
    pub fn alias_info(&self) -> Option<&AliasInfo> {
        self.alias_info.as_deref()
    }

    /// Whether the annotation marks the value as written (`Tensor(a!)`,
    /// `Tensor(a!)[]`).
    pub fn is_write(&self) -> bool {
        self.alias_info.as_ref().is_some_and(|a| a.is_write())
    }

    /// Whether this is an out argument: keyword-only and written.
    pub fn is_out(&self) -> bool {
        self.is_out
    }

    /// Whether the dispatcher reads dispatch keys from this argument (see
    /// [`Type::is_tensor_like`]).
    pub fn is_tensor_like(&self) -> bool {
        self.ty.is_tensor_like()
    }

    /// The type as the schema prints it, annotation and size included:
    /// `Tensor(a!)`, `SymInt[2]`, `int[1]?`, `Tensor(b -> *)[]`.
    pub fn type_string(&self) -> String {
        let mut s = String::new();
        crate::print::write_arg_type(&mut s, self);
        s
    }

    /// The default as the schema prints it, if there is one.
    pub fn default_string(&self) -> Option<String> {
        let d = self.default.as_deref()?;
        let mut s = String::new();
        crate::print::write_default(&mut s, &self.ty, d);
        Some(s)
    }
}

impl fmt::Display for Argument {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        crate::print::write_argument(&mut s, self);
        f.write_str(&s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_argument() {
        let a = Argument::new(
            "out",
            Type::Tensor,
            None,
            None,
            true,
            Some(AliasInfo::with_set("a", true)),
        );
        assert!(a.is_out() && a.is_write());
        assert_eq!(a.to_string(), "Tensor(a!) out");
        let b = Argument::new(
            "self",
            Type::Tensor,
            None,
            None,
            false,
            Some(AliasInfo::with_set("a", true)),
        );
        assert!(!b.is_out() && b.is_write());
    }

    #[test]
    fn sized_list_default() {
        let a = Argument::new(
            "stride",
            Type::List(Box::new(Type::Int)),
            Some(2),
            Some(DefaultValue::List(vec![
                DefaultValue::Int(1),
                DefaultValue::Int(1),
            ])),
            false,
            None,
        );
        assert_eq!(a.to_string(), "int[2] stride=1");
        assert_eq!(a.type_string(), "int[2]");
        assert_eq!(a.default_string().as_deref(), Some("1"));
    }
}
