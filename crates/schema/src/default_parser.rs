//! Parsing default values (`=1`, `=[0, 1]`, `="mean"`, `=None`, `=long`).
//!
//! Note [Defaults follow the fake type]
//! PyTorch picks the default grammar from the argument's *fake* type
//! (`ScalarType` is `int`), and an optional argument always takes a single
//! constant, so `int[]? x=[1]` is an error while `int[1]? x=3` is the int
//! `3`.  A number becomes a complex if the type is `complex` or the token
//! contains `j` (the last character is dropped and the rest read as the
//! imaginary part, so `complex c=1.5` is `1j` and `complex c=1` fails in
//! `stod`), a double if the type is `float` or the token has `.` or `e`,
//! and an `int` via `stoll` otherwise.  Lists convert their elements to
//! the element kind afterwards, with PyTorch's internal-assert failures for
//! elements of the wrong kind.
//!
//! Note [Named defaults]
//! A name as a default is an integer constant: `float` (6), `complex` (9),
//! `long` (4), `strided` (0), `Mean` (1) and `contiguous_format` (0) for an
//! argument of any type, and for a `ScalarType` or `ScalarType?` argument
//! (its *real* type; also a list's elements) every dtype name PyTorch knows,
//! sized or legacy (`int` 3, `bfloat16` 15, `cdouble` 10; `dtype_names`).
//! Enum-like defaults may also be written as the integers themselves
//! (`MemoryFormat memory_format=0`), and all of them print as integers, so
//! `ScalarType s=int` prints `ScalarType s=3`.  A string default of a
//! `ScalarType` prints unquoted (`s="int"` prints `s=int`), which therefore
//! reparses as the dtype, as PyTorch's print does.

use std::borrow::Cow;

use crate::default::{DefaultValue, Device};
use crate::dtype_names::scalar_type_value;
use crate::error::{ErrorKind, SchemaParseError};
use crate::number::stod;
use crate::parser::{ch, conv_error, PResult, SchemaParser};
use crate::token;
use crate::types::Type;

/// Largest list PyTorch's `int[N] x=1` broadcast may build here.  PyTorch
/// allocates whatever `N` says (up to 2^31 - 1 `IValue`s); we refuse sizes
/// that would take more than a few megabytes.
pub const MAX_BROADCAST_LEN: usize = 1 << 16;

const IVALUE_H: &str = "aten/src/ATen/core/ivalue.h";

impl SchemaParser<'_> {
    pub(crate) fn parse_default_value(
        &mut self,
        ty: &Type,
        n: Option<i32>,
    ) -> PResult<DefaultValue> {
        let start = self.lex.cur();
        let fake = if ty.has_fake_parts() {
            Cow::Owned(ty.fake())
        } else {
            Cow::Borrowed(ty)
        };
        match &*fake {
            Type::Tensor | Type::Generator | Type::Quantizer => {
                self.lex.expect(token::NONE)?;
                Ok(DefaultValue::None)
            }
            Type::Str
            | Type::Optional(_)
            | Type::Scalar
            | Type::Int
            | Type::Bool
            | Type::Float
            | Type::Complex => self.parse_single_constant(&fake, ty),
            Type::Device => {
                let t = self.lex.expect(token::STRINGLITERAL)?;
                let text = self.parse_string_literal(start.range(), self.lex.text(t))?;
                let s = String::from_utf8_lossy(&text);
                Device::parse(&s).map(DefaultValue::Device).map_err(|m| {
                    Box::new(SchemaParseError::plain(
                        ErrorKind::Check,
                        m,
                        Some(t.range()),
                    ))
                })
            }
            Type::List(elem) => {
                let real_elem = ty.list_element().unwrap_or(elem);
                if self.lex.cur().kind == token::IDENT {
                    self.lex.expect(token::NONE)?;
                    Ok(DefaultValue::None)
                } else if let (Some(n), false) = (n, self.lex.cur().kind == ch(b'[')) {
                    let v = self.parse_single_constant(elem, real_elem)?;
                    let len = usize::try_from(n).map_err(|_| {
                        Box::new(SchemaParseError::plain(
                            ErrorKind::Length,
                            "cannot create std::vector larger than max_size()",
                            Some(start.range()),
                        ))
                    })?;
                    if len > MAX_BROADCAST_LEN {
                        return Err(Box::new(SchemaParseError::plain(
                            ErrorKind::Length,
                            format!("default list of {len} elements exceeds this parser's limit of {MAX_BROADCAST_LEN}"),
                            Some(start.range()),
                        )));
                    }
                    self.convert_to_list(elem, start.range(), vec![v; len])
                } else {
                    self.parse_constant_list(elem, real_elem)
                }
            }
            _ => Err(self.error_at(start.range(), "unexpected type, file a bug report")),
        }
    }

    /// One constant; `ty` is the fake type that picks the number grammar, `real` the real type
    /// (a `ScalarType` or `ScalarType?` also takes dtype names, Note [Named defaults]).
    fn parse_single_constant(&mut self, ty: &Type, real: &Type) -> PResult<DefaultValue> {
        let cur = self.lex.cur();
        match cur.kind {
            k if k == token::TRUE => {
                self.lex.next()?;
                Ok(DefaultValue::Bool(true))
            }
            k if k == token::FALSE => {
                self.lex.next()?;
                Ok(DefaultValue::Bool(false))
            }
            k if k == token::NONE => {
                self.lex.next()?;
                Ok(DefaultValue::None)
            }
            k if k == token::STRINGLITERAL => {
                self.lex.next()?;
                Ok(DefaultValue::Str(
                    self.parse_string_literal(cur.range(), self.lex.text(cur))?,
                ))
            }
            k if k == token::IDENT => {
                self.lex.next()?;
                let text = self.lex.text(cur);
                let value = match text {
                    "float" => 6,             // ScalarType::Float
                    "complex" => 9,           // ScalarType::ComplexFloat
                    "long" => 4,              // ScalarType::Long
                    "strided" => 0,           // Layout::Strided
                    "Mean" => 1,              // Reduction::Mean
                    "contiguous_format" => 0, // MemoryFormat::Contiguous
                    _ => match scalar_type_value(text).filter(|_| is_scalar_type(real)) {
                        Some(value) => value,
                        None => {
                            // PyTorch points at the token *after* the name.
                            let at = self.lex.cur().range();
                            return Err(self.error_at(at, "invalid numeric default value"));
                        }
                    },
                };
                Ok(DefaultValue::Int(value))
            }
            _ => {
                let neg = self.lex.next_if(ch(b'-'))?;
                let num = self.lex.expect(token::NUMBER)?;
                let digits = self.lex.text(num);
                let mut n = String::with_capacity(digits.len() + 1);
                if neg {
                    n.push('-');
                }
                n.push_str(digits);
                if *ty == Type::Complex || n.contains('j') {
                    let imag = &n[..n.len() - 1];
                    let v = stod(imag).map_err(|e| conv_error(e, "stod", num))?;
                    Ok(DefaultValue::Complex(0.0, v))
                } else if *ty == Type::Float || n.contains('.') || n.contains('e') {
                    stod(&n)
                        .map(DefaultValue::Float)
                        .map_err(|e| conv_error(e, "stod", num))
                } else {
                    crate::number::stoll(&n)
                        .map(DefaultValue::Int)
                        .map_err(|e| conv_error(e, "stoll", num))
                }
            }
        }
    }

    fn parse_constant_list(&mut self, elem: &Type, real_elem: &Type) -> PResult<DefaultValue> {
        let open = self.lex.expect(ch(b'['))?;
        let mut values = Vec::new();
        if self.lex.cur().kind != ch(b']') {
            loop {
                values.push(self.parse_single_constant(elem, real_elem)?);
                if !self.lex.next_if(ch(b','))? {
                    break;
                }
            }
        }
        self.lex.expect(ch(b']'))?;
        self.convert_to_list(elem, open.range(), values)
    }

    /// Checks that every element has the list's element kind (PyTorch's
    /// `IValue::toInt` & co. assert it).
    fn convert_to_list(
        &self,
        elem: &Type,
        at: std::ops::Range<usize>,
        values: Vec<DefaultValue>,
    ) -> PResult<DefaultValue> {
        let (ok, cond, line, what): (fn(&DefaultValue) -> bool, &str, u32, &str) = match elem {
            Type::Complex => (
                |v| matches!(v, DefaultValue::Complex(..)),
                "isComplexDouble()",
                561,
                "Expected ComplexDouble",
            ),
            Type::Float => (
                |v| matches!(v, DefaultValue::Float(_)),
                "0",
                634,
                "expected double",
            ),
            Type::Int => (
                |v| matches!(v, DefaultValue::Int(_)),
                "0",
                662,
                "expected int",
            ),
            Type::Bool => (
                |v| matches!(v, DefaultValue::Bool(_)),
                "0",
                687,
                "expected bool",
            ),
            _ => {
                return Err(self.error_at(
                    at,
                    "lists are only supported for float, int and complex types",
                ))
            }
        };
        if let Some(bad) = values.iter().find(|v| !ok(v)) {
            let message = if *elem == Type::Complex {
                format!("{what} but got {}", tag_kind(bad))
            } else {
                what.to_string()
            };
            return Err(Box::new(SchemaParseError::internal_assert(
                cond,
                IVALUE_H,
                line,
                &message,
                Some(at),
            )));
        }
        Ok(DefaultValue::List(values))
    }

    /// Unquotes and unescapes a string literal token like PyTorch's
    /// `parseStringLiteral` (no `\x`, `\u`, `\r`; octal `\nnn`).
    pub(crate) fn parse_string_literal(
        &self,
        at: std::ops::Range<usize>,
        text: &str,
    ) -> PResult<Vec<u8>> {
        let b = text.as_bytes();
        let quote_len = if b.len() >= 3 && b[..3].iter().all(|&c| c == b[0]) {
            3
        } else {
            1
        };
        let inner = b
            .get(quote_len..b.len().saturating_sub(quote_len))
            .unwrap_or(&[]);
        let mut out = Vec::with_capacity(inner.len());
        let mut i = 0;
        while i < inner.len() {
            if inner[i] != b'\\' {
                out.push(inner[i]);
                i += 1;
                continue;
            }
            let next = inner.get(i + 1).copied().unwrap_or(0);
            let (c, width) = match next {
                b'\\' | b'\'' | b'"' | b'\n' => (next, 2),
                b'a' => (0x07, 2),
                b'b' => (0x08, 2),
                b'f' => (0x0c, 2),
                b'n' => (b'\n', 2),
                b'v' => (0x0b, 2),
                b't' => (b'\t', 2),
                b'x' => return Err(self.error_at(at, "unsupported hex specifier")),
                b'u' | b'U' => return Err(self.error_at(at, "unsupported unicode specifier")),
                _ => match parse_octal(inner, i) {
                    Some(v) => (v, 4),
                    None => return Err(self.error_at(at, " ill formed octal specifier")),
                },
            };
            out.push(c);
            i += width;
        }
        Ok(out)
    }
}

/// PyTorch's `isPossiblyOptionalScalarType`: `ScalarType`, or an optional of one.
fn is_scalar_type(real: &Type) -> bool {
    match real {
        Type::ScalarType => true,
        Type::Optional(inner) => is_scalar_type(inner),
        _ => false,
    }
}

/// `\nnn`: three octal digits with a value below 256.
fn parse_octal(s: &[u8], pos: usize) -> Option<u8> {
    if pos + 3 >= s.len() {
        return None;
    }
    let mut v: u32 = 0;
    for &d in &s[pos + 1..pos + 4] {
        if !(b'0'..=b'7').contains(&d) {
            return None;
        }
        v = v * 8 + u32::from(d - b'0');
    }
    u8::try_from(v).ok()
}

/// `IValue::tagKind()` of a default value.
fn tag_kind(v: &DefaultValue) -> &'static str {
    match v {
        DefaultValue::None => "None",
        DefaultValue::Bool(_) => "Bool",
        DefaultValue::Int(_) => "Int",
        DefaultValue::Float(_) => "Double",
        DefaultValue::Complex(..) => "ComplexDouble",
        DefaultValue::Str(_) => "String",
        DefaultValue::Device(_) => "Device",
        DefaultValue::List(_) => "GenericList",
    }
}
