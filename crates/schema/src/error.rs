//! Parse errors, worded and laid out like PyTorch's.

use std::fmt;
use std::ops::Range;

use crate::highlight::highlight;

/// Which kind of failure PyTorch reports for an input, i.e. which C++
/// exception it throws (and so which Python exception class users see).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The lexer or parser expected another token: `expected ident but found
    /// ')' here:` (Python `RuntimeError`).
    Syntax,
    /// A semantic error tied to a source range (`ErrorReport` in PyTorch):
    /// unknown type specifier, invalid default value, ... (`RuntimeError`).
    Semantic,
    /// A `TORCH_CHECK` without source location: only an operator name was
    /// given, illegal overload name, bad device string (`RuntimeError`).
    Check,
    /// PyTorch fails an internal assertion on this input, e.g. a default
    /// list element of the wrong type or a positional argument without
    /// default after one with a default (`RuntimeError`).
    InternalAssert,
    /// `std::stod` / `std::stoll` found no number (`ValueError`).
    InvalidNumber,
    /// `std::stod` / `std::stoll` overflowed (`IndexError`).
    NumberOutOfRange,
    /// A fixed-size default list with a size PyTorch cannot allocate
    /// (`std::length_error`, Python `ValueError`), or larger than this crate's
    /// limit (see `MAX_BROADCAST_LEN`).
    Length,
}

impl ErrorKind {
    /// The Python exception class PyTorch raises for this kind.
    pub fn python_exception(self) -> &'static str {
        match self {
            ErrorKind::InvalidNumber | ErrorKind::Length => "ValueError",
            ErrorKind::NumberOutOfRange => "IndexError",
            _ => "RuntimeError",
        }
    }
}

/// A schema string that could not be parsed.
///
/// `Display` prints the message PyTorch prints (minus the leading blank
/// line its `ErrorReport` starts with), including the input excerpt and the
/// `~~~~ <--- HERE` caret line where PyTorch shows one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaParseError {
    kind: ErrorKind,
    message: String,
    span: Option<Range<usize>>,
    expected: Option<String>,
    rendered: String,
}

impl SchemaParseError {
    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The short message, without the input excerpt, e.g. `expected ident
    /// but found ')' here` or `unknown type specifier. ...`.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Byte range of the input the error points at, if any.
    pub fn span(&self) -> Option<Range<usize>> {
        self.span.clone()
    }

    /// Byte offset of the error in the input, if it has a location.
    pub fn offset(&self) -> Option<usize> {
        self.span.as_ref().map(|r| r.start)
    }

    /// What the parser expected, for syntax errors (`ident`, `)`, `eof`,
    /// `number`, ...).
    pub fn expected(&self) -> Option<&str> {
        self.expected.as_deref()
    }

    /// Exactly `str(exception)` as PyTorch renders it, leading newline
    /// included.
    pub fn pytorch_message(&self) -> &str {
        &self.rendered
    }

    /// The first non-empty line of the PyTorch message (what the
    /// conformance data records as `error_first_line`).
    pub fn first_line(&self) -> &str {
        self.rendered.lines().find(|l| !l.is_empty()).unwrap_or("")
    }

    /// Lexer/parser "expected X but found 'Y' here:" error.
    pub(crate) fn expected_token(
        src: &str,
        expected: &str,
        found: &str,
        span: Range<usize>,
    ) -> Self {
        let message = format!("expected {expected} but found '{found}' here");
        let mut out = Vec::with_capacity(message.len() + 2 * src.len() + 32);
        out.extend_from_slice(message.as_bytes());
        out.extend_from_slice(b":\n");
        highlight(&mut out, src.as_bytes(), span.start, span.end);
        SchemaParseError {
            kind: ErrorKind::Syntax,
            message,
            span: Some(span),
            expected: Some(expected.to_string()),
            rendered: String::from_utf8_lossy(&out).into_owned(),
        }
    }

    /// Lexer `reportError`: "what:\n" followed by the highlight.
    pub(crate) fn lexer_report(src: &str, what: String, span: Range<usize>) -> Self {
        let mut out = Vec::new();
        out.extend_from_slice(what.as_bytes());
        out.extend_from_slice(b":\n");
        highlight(&mut out, src.as_bytes(), span.start, span.end);
        SchemaParseError {
            kind: ErrorKind::Syntax,
            message: what,
            span: Some(span),
            expected: None,
            rendered: String::from_utf8_lossy(&out).into_owned(),
        }
    }

    /// PyTorch's `ErrorReport(range) << msg`: "\nmsg:\n" plus the highlight.
    pub(crate) fn report(src: &str, message: impl Into<String>, span: Range<usize>) -> Self {
        let message = message.into();
        let mut out = Vec::new();
        out.push(b'\n');
        out.extend_from_slice(message.as_bytes());
        out.extend_from_slice(b":\n");
        highlight(&mut out, src.as_bytes(), span.start, span.end);
        SchemaParseError {
            kind: ErrorKind::Semantic,
            message,
            span: Some(span),
            expected: None,
            rendered: String::from_utf8_lossy(&out).into_owned(),
        }
    }

    /// An error without source excerpt (`TORCH_CHECK`, libstdc++ exceptions).
    pub(crate) fn plain(
        kind: ErrorKind,
        message: impl Into<String>,
        span: Option<Range<usize>>,
    ) -> Self {
        let message = message.into();
        SchemaParseError {
            kind,
            rendered: message.clone(),
            message,
            span,
            expected: None,
        }
    }

    /// A `TORCH_INTERNAL_ASSERT` failure, worded as PyTorch words it.
    pub(crate) fn internal_assert(
        cond: &str,
        file: &str,
        line: u32,
        message: &str,
        span: Option<Range<usize>>,
    ) -> Self {
        let rendered = format!(
            "{cond} INTERNAL ASSERT FAILED at \"/__w/pytorch/pytorch/{file}\":{line}, please report a bug to PyTorch. {message}"
        );
        SchemaParseError {
            kind: ErrorKind::InternalAssert,
            message: message.to_string(),
            span,
            expected: None,
            rendered,
        }
    }
}

impl fmt::Display for SchemaParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.rendered.trim_start_matches('\n'))
    }
}

impl std::error::Error for SchemaParseError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_like_pytorch() {
        let e = SchemaParseError::expected_token("foo(x) -> ()", "ident", ")", 5..6);
        assert_eq!(
            e.to_string(),
            "expected ident but found ')' here:\nfoo(x) -> ()\n     ~ <--- HERE\n"
        );
        assert_eq!(e.first_line(), "expected ident but found ')' here:");
        assert_eq!(e.offset(), Some(5));
        assert_eq!(e.expected(), Some("ident"));
        let r = SchemaParseError::report(
            "foo(t x=None) -> ()",
            "unexpected type, file a bug report",
            8..12,
        );
        assert_eq!(
            r.pytorch_message(),
            "\nunexpected type, file a bug report:\nfoo(t x=None) -> ()\n        ~~~~ <--- HERE\n"
        );
        assert_eq!(r.first_line(), "unexpected type, file a bug report:");
        assert_eq!(r.kind().python_exception(), "RuntimeError");
    }
}
