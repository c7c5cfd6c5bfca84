//! Function schemas and operator names.

use std::fmt;
use std::str::FromStr;

use crate::argument::Argument;
use crate::error::SchemaParseError;

/// An operator's name: `ns::name` plus an overload name (`""` for none).
///
/// `Display` prints `ns::name.overload` (`ns::name` without overload).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OperatorName {
    // Boxed strs (16 bytes each, not 24): every registered operator holds its name twice
    // (entry and schema).
    name: Box<str>,
    overload_name: Box<str>,
}

impl OperatorName {
    /// Builds a name from its full name (`"aten::add"` or `"add"`) and
    /// overload name (`""` for none).
    pub fn new(name: impl Into<String>, overload_name: impl Into<String>) -> Self {
        OperatorName {
            name: name.into().into_boxed_str(),
            overload_name: overload_name.into().into_boxed_str(),
        }
    }

    /// Parses a bare operator name, `ns::name.overload`, like PyTorch's
    /// `torch::jit::parseName` (a full schema is an error).
    pub fn parse(s: &str) -> Result<Self, SchemaParseError> {
        match crate::parser::parse_schema_or_name(s)? {
            SchemaOrName::Name(n) => Ok(n),
            SchemaOrName::Schema(_) => Err(SchemaParseError::plain(
                crate::error::ErrorKind::Check,
                "Tried to parse an operator name but function schema was given",
                None,
            )),
        }
    }

    /// The full name, with namespace when given: `"aten::add"`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The overload name, `""` if none.
    pub fn overload_name(&self) -> &str {
        &self.overload_name
    }

    /// The namespace (`"aten"`), if the name has one.
    pub fn namespace(&self) -> Option<&str> {
        split_namespace(&self.name).map(|(ns, _)| ns)
    }

    /// The name without namespace (`"add"`).
    pub fn base_name(&self) -> &str {
        split_namespace(&self.name).map_or(&self.name, |(_, base)| base)
    }
}

/// `s.split_once("::")` as a byte scan: the generic substring searcher's set-up costs more than
/// scanning a short name (registration asks for namespaces several times).
fn split_namespace(s: &str) -> Option<(&str, &str)> {
    let i = s.as_bytes().windows(2).position(|w| w == b"::")?;
    Some((&s[..i], &s[i + 2..]))
}

impl fmt::Display for OperatorName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        if !self.overload_name.is_empty() {
            write!(f, ".{}", self.overload_name)?;
        }
        Ok(())
    }
}

impl FromStr for OperatorName {
    type Err = SchemaParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        OperatorName::parse(s)
    }
}

/// What [`parse_schema_or_name`](crate::parse_schema_or_name) found: a bare
/// operator name or a full schema.
#[derive(Clone, Debug, PartialEq)]
pub enum SchemaOrName {
    /// Only `ns::name.overload` was given.
    Name(OperatorName),
    /// A complete schema.
    Schema(FunctionSchema),
}

/// A parsed operator schema (PyTorch's `c10::FunctionSchema`).
///
/// `Display` prints the canonical form PyTorch prints, which parses back to
/// an equal schema for every schema PyTorch itself prints that way.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionSchema {
    name: OperatorName,
    arguments: Vec<Argument>,
    returns: Vec<Argument>,
    is_vararg: bool,
    is_varret: bool,
}

impl FunctionSchema {
    /// Builds a schema, checking (like PyTorch's constructor) that no
    /// positional argument without default follows one with a default
    /// (list-typed arguments are exempt, as in PyTorch).
    pub fn new(
        name: OperatorName,
        arguments: Vec<Argument>,
        returns: Vec<Argument>,
        is_vararg: bool,
        is_varret: bool,
    ) -> Result<Self, SchemaParseError> {
        // A registered operator keeps its schema for the life of the program: no spare
        // capacity. The parser's vectors are already exact (Note [Exact-size argument
        // vectors]), so for them this is a no-op; other callers' may not be.
        let (mut arguments, mut returns) = (arguments, returns);
        arguments.shrink_to_fit();
        returns.shrink_to_fit();
        let schema = FunctionSchema {
            name,
            arguments,
            returns,
            is_vararg,
            is_varret,
        };
        schema.check()?;
        Ok(schema)
    }

    fn check(&self) -> Result<(), SchemaParseError> {
        let mut seen_default = false;
        for arg in &self.arguments {
            if arg.default_value().is_some() {
                seen_default = true;
            } else if arg.ty().list_element().is_none() && seen_default && !arg.kwarg_only() {
                return Err(SchemaParseError::internal_assert(
                    "!seen_default_arg || arg.kwarg_only()",
                    "aten/src/ATen/core/function_schema.h",
                    340,
                    &format!(
                        "Non-default positional argument follows default argument. Parameter {} in {}",
                        arg.name(),
                        self
                    ),
                    None,
                ));
            }
        }
        Ok(())
    }

    /// Parses a schema string like `torch._C.parse_schema`.
    ///
    /// ```
    /// use switchboard_schema::FunctionSchema;
    /// let s = FunctionSchema::parse("aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor")?;
    /// assert_eq!(s.overload_name(), "Tensor");
    /// assert_eq!(s.kwarg_only_index(), Some(2));
    /// # Ok::<(), switchboard_schema::SchemaParseError>(())
    /// ```
    pub fn parse(s: &str) -> Result<Self, SchemaParseError> {
        match crate::parser::parse_schema_or_name(s)? {
            SchemaOrName::Schema(schema) => Ok(schema),
            SchemaOrName::Name(_) => Err(SchemaParseError::plain(
                crate::error::ErrorKind::Check,
                "Tried to parse a function schema but only the operator name was given",
                None,
            )),
        }
    }

    /// The operator name (name and overload).
    pub fn operator_name(&self) -> &OperatorName {
        &self.name
    }

    /// The same schema under another name (e.g. qualified with a namespace); the arguments
    /// are moved, not copied.
    ///
    /// ```
    /// use switchboard_schema::{FunctionSchema, OperatorName};
    /// let s = FunctionSchema::parse("op(Tensor a) -> Tensor").unwrap();
    /// let s = s.with_name(OperatorName::new("ns::op", ""));
    /// assert_eq!(s.to_string(), "ns::op(Tensor a) -> Tensor");
    /// ```
    pub fn with_name(mut self, name: OperatorName) -> FunctionSchema {
        self.name = name;
        self
    }

    /// The full name, `"ns::op"` or `"op"`.
    pub fn name(&self) -> &str {
        self.name.name()
    }

    /// The namespace, if the name has one.
    pub fn namespace(&self) -> Option<&str> {
        self.name.namespace()
    }

    /// The name without namespace.
    pub fn base_name(&self) -> &str {
        self.name.base_name()
    }

    /// The overload name, `""` if none.
    pub fn overload_name(&self) -> &str {
        self.name.overload_name()
    }

    /// The arguments, in order (`*` and `...` are not arguments).
    pub fn arguments(&self) -> &[Argument] {
        &self.arguments
    }

    /// The returns, in order.
    pub fn returns(&self) -> &[Argument] {
        &self.returns
    }

    /// Whether the argument list ends with `...`.
    pub fn is_vararg(&self) -> bool {
        self.is_vararg
    }

    /// Whether the return list ends with `...`.
    pub fn is_varret(&self) -> bool {
        self.is_varret
    }

    /// The index of the first keyword-only argument, i.e. where `*` is
    /// printed; `None` if there is none.  (A `*` followed by no argument
    /// is not kept, as in PyTorch.)
    pub fn kwarg_only_index(&self) -> Option<usize> {
        self.arguments.iter().position(Argument::kwarg_only)
    }

    /// Index of the argument with this name.
    pub fn argument_index(&self, name: &str) -> Option<usize> {
        self.arguments.iter().position(|a| a.name() == name)
    }

    /// PyTorch's `is_mutable()`: some argument is written.
    pub fn is_mutable(&self) -> bool {
        self.arguments.iter().any(Argument::is_write)
    }

    /// Whether argument `i` is written (`Tensor(a!)`); false if out of range.
    pub fn is_argument_written(&self, i: usize) -> bool {
        self.arguments.get(i).is_some_and(Argument::is_write)
    }

    /// Indices of the written arguments.
    pub fn written_arguments(&self) -> Vec<usize> {
        self.indices(Argument::is_write)
    }

    /// PyTorch's `_is_view_op()`: some argument has an alias annotation
    /// that is not a write (`Tensor(a) self`, `Tensor(a -> *)[]`).
    pub fn is_view_op(&self) -> bool {
        self.arguments
            .iter()
            .any(|a| a.alias_info().is_some_and(|info| !info.is_write()))
    }

    /// Indices of the arguments the dispatcher extracts dispatch keys from:
    /// `Tensor`, `Tensor?`, `Tensor[]`, `Tensor?[]` (annotated or not).
    pub fn tensor_like_argument_indices(&self) -> Vec<usize> {
        self.indices(Argument::is_tensor_like)
    }

    /// Indices of the out arguments (keyword-only and written).
    pub fn out_arguments(&self) -> Vec<usize> {
        self.indices(Argument::is_out)
    }

    fn indices(&self, pred: impl Fn(&Argument) -> bool) -> Vec<usize> {
        self.arguments
            .iter()
            .enumerate()
            .filter(|(_, a)| pred(a))
            .map(|(i, _)| i)
            .collect()
    }
}

impl fmt::Display for FunctionSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::with_capacity(64);
        crate::print::write_schema(&mut s, self);
        f.write_str(&s)
    }
}

impl FromStr for FunctionSchema {
    type Err = SchemaParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        FunctionSchema::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsed_vectors_have_no_spare_capacity() {
        for text in [
            "f() -> ()",
            "f(Tensor a) -> Tensor",
            "f(Tensor a, Tensor b, *, Scalar alpha=1, Tensor(a!) out) -> (Tensor x, Tensor y)",
            "f(int a, int b, int c, int d, int e, int f, int g, int h, int i, int j) -> (int, int, int)",
        ] {
            let s = FunctionSchema::parse(text).unwrap();
            assert_eq!(s.arguments.capacity(), s.arguments.len(), "{text}");
            assert_eq!(s.returns.capacity(), s.returns.len(), "{text}");
        }
    }
}
