//! The readers that bound the CSV text `--data` gives (Note [Reading untrusted data]): at most
//! so many bytes in all, at most so many in one row.

use std::io::Read;

/// A reader that fails once more than `left` bytes are available (Note [Reading untrusted
/// data]).
pub(super) struct Limited<R> {
    inner: R,
    left: u64,
    limit: u64,
}

impl<R> Limited<R> {
    pub(super) fn new(inner: R, limit: u64) -> Limited<R> {
        Limited {
            inner,
            left: limit,
            limit,
        }
    }
}

impl<R: Read> Read for Limited<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            // At the limit: the end of the data is fine, one more byte is not.
            let mut probe = [0u8; 1];
            return match self.inner.read(&mut probe)? {
                0 => Ok(0),
                _ => Err(std::io::Error::other(format!(
                    "the data is larger than {} of CSV text (decompressed); refusing to read \
                     more",
                    mib(self.limit)
                ))),
            };
        }
        let want = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        self.left -= n as u64;
        Ok(n)
    }
}

/// A reader that fails once a CSV record is longer than `limit` bytes (Note [Reading
/// untrusted data]). It follows the csv reader's grammar as far as records go: a record ends at
/// a line break outside a quoted field, a field is quoted when it starts with `"` (`""` inside
/// is a quote), and a record starting with `#` is a comment.
pub(super) struct RowLimited<R> {
    inner: R,
    limit: u64,
    /// Bytes of the current record so far.
    row: u64,
    /// Line of the current record's start, from 1.
    line: u64,
    /// Line breaks seen so far.
    lines: u64,
    state: RowState,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum RowState {
    FieldStart,
    InField,
    Quoted,
    /// A `"` in a quoted field: the field's end, or the first half of `""`.
    QuoteInQuoted,
    Comment,
}

impl<R> RowLimited<R> {
    pub(super) fn new(inner: R, limit: u64) -> RowLimited<R> {
        RowLimited {
            inner,
            limit,
            row: 0,
            line: 1,
            lines: 0,
            state: RowState::FieldStart,
        }
    }

    /// Takes one byte of text; false once the record is too long.
    fn step(&mut self, b: u8) -> bool {
        use RowState::*;
        if b == b'\n' {
            self.lines += 1;
        }
        let ends_record = matches!(b, b'\n' | b'\r') && self.state != Quoted;
        if ends_record {
            self.state = FieldStart;
            self.row = 0;
            self.line = self.lines + 1;
            return true;
        }
        self.state = match (self.state, b) {
            (FieldStart, b'#') if self.row == 0 => Comment,
            (FieldStart, b'"') => Quoted,
            (FieldStart | InField | QuoteInQuoted, b',') => FieldStart,
            (Quoted, b'"') => QuoteInQuoted,
            (QuoteInQuoted, b'"') | (Quoted, _) => Quoted,
            (Comment, _) => Comment,
            _ => InField,
        };
        self.row += 1;
        self.row <= self.limit
    }
}

impl<R: Read> Read for RowLimited<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        for &b in &buf[..n] {
            if !self.step(b) {
                return Err(std::io::Error::other(format!(
                    "the row at line {} is longer than {} of CSV text, the limit for one row; \
                     refusing to read more",
                    self.line,
                    mib(self.limit)
                )));
            }
        }
        Ok(n)
    }
}

/// `n` bytes in MiB, for messages.
fn mib(n: u64) -> String {
    if n & ((1 << 20) - 1) == 0 {
        format!("{} MiB", n >> 20)
    } else {
        format!("{n} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read<R: Read>(mut r: R) -> std::io::Result<usize> {
        r.read_to_end(&mut Vec::new())
    }

    #[test]
    fn the_total_limit_allows_exactly_the_limit() {
        assert_eq!(read(Limited::new(&b"abc"[..], 3)).unwrap(), 3);
        assert!(read(Limited::new(&b"abcd"[..], 3)).is_err());
        assert_eq!(read(Limited::new(&b""[..], 0)).unwrap(), 0);
    }

    #[test]
    fn a_row_ends_at_a_line_break_outside_quotes() {
        let ok = |text: &[u8], limit| read(RowLimited::new(text, limit)).is_ok();
        assert!(ok(b"1,2\n3,4\r\n5,6", 3));
        assert!(!ok(b"1,2\n3,45\n", 3));
        // A quoted field spans lines; `""` inside it is a quote, not its end.
        assert!(!ok(b"\"1\n2\"\n", 4));
        assert!(ok(b"\"1\"\n\"2\"\n", 3));
        assert!(!ok(b"\"a\"\"\n\"\n", 5));
        // A quote inside an unquoted field, or in a comment, opens nothing.
        assert!(ok(b"a\"b\n1,2\n", 3));
        assert!(ok(b"#\"\n1,2\n", 3));
        let e = read(RowLimited::new(&b"1\n\n12345\n"[..], 4)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the row at line 3 is longer than 4 bytes of CSV text, the limit for one row; \
             refusing to read more"
        );
    }
}
