//! Default values of arguments, and how PyTorch prints them.

use std::fmt;

use switchboard_keys::{parse_device, DeviceType};

use crate::number::write_ivalue_double;

/// A parsed default value (the `IValue` PyTorch stores).
///
/// Named constants are stored as the integers PyTorch turns them into:
/// `float` → 6, `complex` → 9, `long` → 4 (`ScalarType`), `strided` → 0,
/// `Mean` → 1, `contiguous_format` → 0.  Fixed-size lists given a single
/// value (`int[2] stride=1`) are stored expanded (`[1, 1]`).
///
/// `Display` prints the value as `IValue`'s `operator<<` does (strings
/// unquoted); the schema printer adds the quoting and `int[]` shortening
/// that depend on the argument type (see [`crate::Argument::default_string`]).
#[derive(Clone, Debug, PartialEq)]
pub enum DefaultValue {
    /// `None`.
    None,
    /// `True` / `False`.
    Bool(bool),
    /// An integer (also ScalarType/Layout/MemoryFormat/Reduction constants).
    Int(i64),
    /// A double.
    Float(f64),
    /// A complex number: (real, imaginary).  Schema literals only produce a
    /// zero real part: `1.5j`, and also a plain `1.5` for a `complex`
    /// argument (PyTorch drops the last character and reads `1.` as the
    /// imaginary part).
    Complex(f64, f64),
    /// A string literal, unescaped.  Bytes, because octal escapes such as
    /// `\377` can produce any byte.
    Str(Vec<u8>),
    /// A device, from a `Device` argument's string default.
    Device(Device),
    /// A list of ints, floats, bools or complex numbers.
    List(Vec<DefaultValue>),
}

impl DefaultValue {
    /// The string, if this is a valid UTF-8 string default.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            DefaultValue::Str(b) => std::str::from_utf8(b).ok(),
            _ => None,
        }
    }

    pub(crate) fn write(&self, out: &mut String) {
        match self {
            DefaultValue::None => out.push_str("None"),
            DefaultValue::Bool(b) => out.push_str(if *b { "True" } else { "False" }),
            DefaultValue::Int(i) => {
                use std::fmt::Write;
                let _ = write!(out, "{i}");
            }
            DefaultValue::Float(d) => write_ivalue_double(out, *d),
            DefaultValue::Complex(re, im) => {
                write_ivalue_double(out, *re);
                out.push(if *im >= 0.0 { '+' } else { '-' });
                write_ivalue_double(out, im.abs());
                out.push('j');
            }
            DefaultValue::Str(bytes) => out.push_str(&String::from_utf8_lossy(bytes)),
            DefaultValue::Device(d) => {
                use std::fmt::Write;
                let _ = write!(out, "{d}");
            }
            DefaultValue::List(items) => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    v.write(out);
                }
                out.push(']');
            }
        }
    }
}

impl fmt::Display for DefaultValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        self.write(&mut s);
        f.write_str(&s)
    }
}

/// Writes `bytes` quoted and escaped like `c10::printQuotedString`.
///
/// Bytes outside printable ASCII become three "octal" digits computed on a
/// *signed* `char`, as C++ does; for bytes >= 0x80 that gives odd
/// characters such as `\0)+`, which we reproduce byte for byte.
pub(crate) fn write_quoted(out: &mut String, bytes: &[u8]) {
    out.push('"');
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'\'' => out.push_str("\\'"),
            b'"' => out.push_str("\\\""),
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            0x0c => out.push_str("\\f"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x0b => out.push_str("\\v"),
            0x20..=0x7e => out.push(b as char),
            _ => {
                let mut s = i32::from(b as i8);
                let d2 = s % 8;
                s /= 8;
                let d1 = s % 8;
                s /= 8;
                out.push('\\');
                for d in [s, d1, d2] {
                    // '0' + d stays in ASCII for every signed byte.
                    out.push(char::from((i32::from(b'0') + d) as u8));
                }
            }
        }
    }
    out.push('"');
}

/// A device, as `c10::Device` parses and prints it (`cpu`, `cuda:1`), with the device-string
/// rules of [`switchboard_keys::parse_device`]: PyTorch's device types and the renamed
/// PrivateUse1 backend, and its 8-bit device index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Device {
    ty: DeviceType,
    index: Option<i8>,
}

impl Device {
    /// Parses a device string like `c10::Device(std::string)`:
    /// `([a-zA-Z_]+)(?::([1-9]\d*|0))?` with a known device type.  The error
    /// is PyTorch's message.
    pub fn parse(s: &str) -> Result<Device, String> {
        parse_device(s)
            .map(|(ty, index)| Device { ty, index })
            .map_err(|e| e.message().to_string())
    }

    /// The device type.
    pub fn device_type(&self) -> DeviceType {
        self.ty
    }

    /// The device type name (`cpu`, `cuda`, ...).
    pub fn type_name(&self) -> &'static str {
        self.ty.name()
    }

    /// The device index, if one was given.
    pub fn index(&self) -> Option<i8> {
        self.index
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.type_name())?;
        if let Some(i) = self.index() {
            write!(f, ":{i}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quoted(b: &[u8]) -> String {
        let mut s = String::new();
        write_quoted(&mut s, b);
        s
    }

    #[test]
    fn quoting() {
        assert_eq!(quoted(b"a\"b"), r#""a\"b""#);
        assert_eq!(quoted(b"new\nline"), r#""new\nline""#);
        assert_eq!(quoted(b"\x01"), r#""\001""#);
        assert_eq!(quoted(&[0xc3]), "\"\\0)+\"");
    }

    #[test]
    fn values() {
        assert_eq!(DefaultValue::Complex(0.0, 1.0).to_string(), "0.+1.j");
        assert_eq!(DefaultValue::Complex(0.0, -1.5).to_string(), "0.-1.5j");
        let l = DefaultValue::List(vec![DefaultValue::Float(1.0), DefaultValue::Float(2.5)]);
        assert_eq!(l.to_string(), "[1., 2.5]");
    }

    #[test]
    fn devices() {
        assert_eq!(Device::parse("cuda:1").unwrap().to_string(), "cuda:1");
        assert_eq!(Device::parse("cpu").unwrap().to_string(), "cpu");
        assert_eq!(
            Device::parse("cuda:01").unwrap_err(),
            "Invalid device string: 'cuda:01'"
        );
        assert!(Device::parse("tpu")
            .unwrap_err()
            .starts_with("Expected one of cpu, cuda, ipu"));
        assert_eq!(Device::parse("cuda:300").unwrap().index(), Some(44));
    }
}
