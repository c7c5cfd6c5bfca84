//! PyTorch operator schemas: parse and print them exactly as PyTorch does.
//!
//! Operators are declared by schema strings such as
//! `aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)`.
//! This crate parses them into a [`FunctionSchema`], prints them back in
//! PyTorch's canonical form, answers the questions the dispatcher and
//! autograd ask (which arguments are written, which carry dispatch keys,
//! is this a view op), and rejects malformed strings with PyTorch's error
//! message, input excerpt and `~~~~ <--- HERE` caret line.
//!
//! ```
//! use switchboard_schema::{FunctionSchema, Type};
//!
//! let s: FunctionSchema =
//!     "aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)".parse()?;
//! assert_eq!(s.name(), "aten::add_");
//! assert_eq!(s.namespace(), Some("aten"));
//! assert_eq!(s.overload_name(), "Tensor");
//! assert!(s.is_mutable());
//! assert_eq!(s.written_arguments(), [0]);
//! assert_eq!(s.tensor_like_argument_indices(), [0, 1]);
//! assert_eq!(s.arguments()[2].ty(), &Type::Scalar);
//! assert_eq!(s.arguments()[2].default_string().as_deref(), Some("1"));
//! assert_eq!(
//!     s.to_string(),
//!     "aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)"
//! );
//!
//! let err = FunctionSchema::parse("foo(Tensor x, ) -> ()").unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     "expected ident but found ')' here:\nfoo(Tensor x, ) -> ()\n              ~ <--- HERE\n"
//! );
//! # Ok::<(), switchboard_schema::SchemaParseError>(())
//! ```
//!
//! Note [Fidelity over tidiness]
//! The reference is PyTorch 2.15's behaviour, including its oddities: the
//! schema lexer is the TorchScript lexer (indentation tokens, keywords,
//! `strtod` numbers), unknown lowercase identifiers are type variables,
//! `int[1.5]` means `int[1]`, `complex c=1.5` is `1j`, defaults print as
//! PyTorch's `IValue` printer prints them.  Deviations are documented where
//! they are made: alias sets print in the order written, broadcast default
//! lists are capped in size.  Custom classes must be registered, as in
//! PyTorch (Note [Custom class registry]).
//!
//! Parsing never panics, whatever the input.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod alias;
mod argument;
mod custom_class;
mod default;
mod default_parser;
mod dtype_names;
mod error;
mod highlight;
mod lexer;
#[cfg(test)]
mod lexer_reference;
mod lexer_rules;
mod names;
mod number;
mod parser;
mod print;
mod schema;
mod tag;
mod token;
mod type_parser;
mod types;
mod union;

pub use alias::{AliasInfo, WILDCARD};
pub use argument::Argument;
pub use custom_class::{is_custom_class_registered, register_custom_class, CustomClassError};
pub use default::{DefaultValue, Device};
pub use default_parser::MAX_BROADCAST_LEN;
pub use error::{ErrorKind, SchemaParseError};
pub use parser::parse_schema_or_name;
pub use schema::{FunctionSchema, OperatorName, SchemaOrName};
pub use tag::{Tag, UnknownTag};
pub use types::Type;
