//! Arguments and returns of a schema.

use std::borrow::Cow;
use std::fmt;

use crate::alias::AliasInfo;
use crate::default::DefaultValue;
use crate::types::Type;

/// One argument (or return) of a [`crate::FunctionSchema`].
///
/// `Display` prints it as it appears in the schema:
/// `Tensor(a!) out`, `int[2] stride=1`, `Scalar alpha=1`.
#[derive(Clone, PartialEq)]
pub struct Argument {
    // An argument stays at 80 bytes (was 112): a registered operator holds all of its
    // arguments. Most names are static (Note [Common argument names are static]), most
    // arguments have no default, and the list size is an `i32` with a flag rather than an
    // `Option<i32>` (4 bytes fewer, which keeps the `Cow` name's extra word within 80).
    name: Cow<'static, str>,
    ty: Type,
    n: i32,
    has_n: bool,
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
        Argument::with_name(
            Cow::Owned(name.into()),
            ty,
            n,
            default,
            kwarg_only,
            alias_info,
        )
    }

    /// [`Argument::new`] with a name that may be static (the parser's).
    pub(crate) fn with_name(
        name: Cow<'static, str>,
        ty: Type,
        n: Option<i32>,
        default: Option<DefaultValue>,
        kwarg_only: bool,
        alias_info: Option<AliasInfo>,
    ) -> Self {
        let is_out = kwarg_only && alias_info.as_ref().is_some_and(AliasInfo::is_write);
        Argument {
            name,
            ty,
            n: n.unwrap_or(0),
            has_n: n.is_some(),
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
        self.has_n.then_some(self.n)
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

impl fmt::Debug for Argument {
    /// As `#[derive(Debug)]` printed it when `n` was an `Option<i32>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Argument")
            .field("name", &&*self.name)
            .field("ty", &self.ty)
            .field("n", &self.n())
            .field("default", &self.default)
            .field("kwarg_only", &self.kwarg_only)
            .field("alias_info", &self.alias_info)
            .field("is_out", &self.is_out)
            .finish()
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
    fn debug_output() {
        let a = Argument::new("x", Type::Int, Some(2), None, false, None);
        assert_eq!(
            format!("{a:?}"),
            "Argument { name: \"x\", ty: Int, n: Some(2), default: None, kwarg_only: false, \
             alias_info: None, is_out: false }"
        );
    }

    #[test]
    fn an_argument_is_80_bytes() {
        assert!(std::mem::size_of::<Argument>() <= 80);
    }

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
