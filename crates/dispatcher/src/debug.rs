//! `RegistrationDebug`: what the dumps print about where a registration came from.

use std::fmt;
use std::sync::{Arc, OnceLock};

// Note [Debug strings formatted when printed]
// Every registration carries a debug string, `registered at file:line` by default, which only
// the dumps, errors and observers ever print. Formatting it eagerly cost a `format!` (~1k
// instructions) per library, more than the rest of `Library::new`. A library created in code
// (`Library::new`) instead keeps its `&'static` caller location and formats the string the first
// time it is asked for as a `&str` (`Display` formats it without storing). The text lives in one
// allocation shared by the library's registrations, and a thin `Arc` (8 bytes, not the 16 of an
// `Arc<str>`) keeps every kernel and schema small.

/// The `line` of a `Text` whose `file` is the whole text (`static_text`): no line number is
/// that large, and the text needs no copy.
const STATIC_TEXT: u32 = u32::MAX;

/// Where a registration came from (`registered at file:line`, or the text given at
/// registration); shared by the registrations of one library, formatted when printed (see
/// Note [Debug strings formatted when printed]).
#[derive(Clone)]
pub struct RegistrationDebug(Arc<Text>);

struct Text {
    /// The text, once formatted (or as given).
    text: OnceLock<Box<str>>,
    /// The location it is formatted from when not given (or the whole text, see
    /// `STATIC_TEXT`).
    file: &'static str,
    line: u32,
}

impl RegistrationDebug {
    /// `registered at {file}:{line}`, formatted when first printed.
    pub fn location(file: &'static str, line: u32) -> Self {
        RegistrationDebug(Arc::new(Text {
            text: OnceLock::new(),
            file,
            line,
        }))
    }

    /// The given text, kept as is (no copy: generated registrations name thousands of kernels).
    pub fn static_text(text: &'static str) -> Self {
        RegistrationDebug(Arc::new(Text {
            text: OnceLock::new(),
            file: text,
            line: STATIC_TEXT,
        }))
    }

    /// The given text.
    pub fn text(text: impl Into<Box<str>>) -> Self {
        RegistrationDebug(Arc::new(Text {
            text: OnceLock::from(text.into()),
            file: "",
            line: 0,
        }))
    }

    /// The text, formatted (and kept) on first use.
    pub fn as_str(&self) -> &str {
        if self.0.line == STATIC_TEXT {
            return self.0.file;
        }
        self.0
            .text
            .get_or_init(|| format!("registered at {}:{}", self.0.file, self.0.line).into())
    }
}

impl fmt::Display for RegistrationDebug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.line == STATIC_TEXT {
            return f.write_str(self.0.file);
        }
        match self.0.text.get() {
            Some(text) => f.write_str(text),
            None => write!(f, "registered at {}:{}", self.0.file, self.0.line),
        }
    }
}

impl fmt::Debug for RegistrationDebug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.to_string(), f)
    }
}

impl From<&str> for RegistrationDebug {
    fn from(s: &str) -> Self {
        RegistrationDebug::text(s)
    }
}

impl From<String> for RegistrationDebug {
    fn from(s: String) -> Self {
        RegistrationDebug::text(s)
    }
}

impl From<Arc<str>> for RegistrationDebug {
    fn from(s: Arc<str>) -> Self {
        RegistrationDebug::text(&*s)
    }
}

impl From<&RegistrationDebug> for RegistrationDebug {
    fn from(d: &RegistrationDebug) -> Self {
        d.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn location_formats_when_printed() {
        let d = RegistrationDebug::location("a.rs", 7);
        assert_eq!(d.to_string(), "registered at a.rs:7");
        assert_eq!(d.as_str(), "registered at a.rs:7");
        assert_eq!(d.to_string(), "registered at a.rs:7");
        assert_eq!(RegistrationDebug::from("x").as_str(), "x");
        let s = RegistrationDebug::static_text("kernels::k [CPU]");
        assert_eq!(
            (s.as_str(), s.to_string().as_str()),
            ("kernels::k [CPU]", "kernels::k [CPU]")
        );
        assert_eq!(std::mem::size_of::<RegistrationDebug>(), 8);
    }
}
