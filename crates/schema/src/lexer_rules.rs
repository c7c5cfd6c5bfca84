//! The token rules of the lexer (see `lexer`): byte classes, identifiers
//! and keywords, string literals, operator tokens.

use crate::token::{self, Kind};

/// C's `isspace` minus `'\n'`.
pub(crate) const fn is_blank(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\x0b' | b'\x0c' | b'\r')
}

// Note [Byte classes]
// The lexer looks at the first byte of a token once, in a table, to pick the only rule that
// can match there: identifiers (and keywords), numbers (`strtod` only reads a digit or `.`
// first, as PyTorch refuses a sign), string literals, single-character tokens that start no
// longer token (`( ) [ ] , : ? @ { } ~`, no trie walk needed), and the rest of PyTorch's
// token table. Spaces are skipped in the same loop; any other whitespace, `#` or `\` takes
// PyTorch's full whitespace loop (`skip_whitespace`). The identifier scan uses a second
// table. Both are built at compile time from the predicates they replace.

/// Any other byte: an operator or an invalid byte.
const OTHER: u8 = 0;
/// `[A-Za-z_]`.
pub(crate) const IDENT: u8 = 1;
/// `[0-9.]`.
pub(crate) const NUMBER: u8 = 2;
/// A single-character token that is not the start of a longer one.
pub(crate) const SINGLE: u8 = 3;
/// `' '`.
pub(crate) const SPACE: u8 = 4;
/// Other whitespace, `#` and `\`: the full whitespace loop.
pub(crate) const BLANK: u8 = 5;
/// Not a byte: the end of the input.
pub(crate) const END: u8 = 6;
/// `"` and `'`.
pub(crate) const QUOTE: u8 = 7;

/// The class of each byte (Note [Byte classes]).
pub(crate) static CLASS: [u8; 256] = {
    let mut t = [OTHER; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        t[c] = if b.is_ascii_alphabetic() || b == b'_' {
            IDENT
        } else if b.is_ascii_digit() || b == b'.' {
            NUMBER
        } else if b == b' ' {
            SPACE
        } else if b == b'"' || b == b'\'' {
            QUOTE
        } else if is_blank(b) || b == b'\n' || b == b'#' || b == b'\\' {
            BLANK
        } else if matches!(
            b,
            b'(' | b')' | b'[' | b']' | b',' | b':' | b'?' | b'@' | b'{' | b'}' | b'~'
        ) {
            SINGLE
        } else {
            OTHER
        };
        c += 1;
    }
    t
};

/// Whether a byte continues an identifier (`[A-Za-z0-9_]`).
static WORD: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        t[c] = b.is_ascii_alphanumeric() || b == b'_';
        c += 1;
    }
    t
};

/// Length of a string literal at the start of `s` (PyTorch's `isString`).
pub(crate) fn string_literal_len(s: &[u8]) -> Option<usize> {
    let quote = s[0];
    if quote != b'"' && quote != b'\'' {
        return None;
    }
    let count =
        |at: usize, n: usize| at + n <= s.len() && s[at..at + n].iter().all(|&c| c == quote);
    let quote_len = if count(0, 3) { 3 } else { 1 };
    let mut end = quote_len;
    while end < s.len() && !count(end, quote_len) {
        if s[end] == b'\n' && quote_len != 3 {
            return None;
        }
        if s[end] == b'\\' {
            end += 1;
        }
        end += 1;
    }
    if end < s.len() {
        Some(end + quote_len)
    } else {
        None
    }
}

fn prefix_is(s: &[u8], text: &[u8]) -> bool {
    // A byte loop: these are 2-7 byte strings, cheaper than a `memcmp` call.
    s.len() >= text.len() && text.iter().zip(s).all(|(a, b)| a == b)
}

/// The identifier or keyword at the start of `s`, whose first byte starts
/// an identifier.  PyTorch walks its token trie and the identifier rule
/// together and keeps the longest match, preferring the token on a tie: so
/// `None` is a keyword, `Nonex` and `default` are identifiers, and `is not`
/// is one token.
pub(crate) fn ident_or_keyword(s: &[u8]) -> (Kind, usize) {
    let mut n = 1;
    while n < s.len() && WORD[usize::from(s[n])] {
        n += 1;
    }
    let word = &s[..n];
    if n <= 3 {
        if word == b"is" && prefix_is(&s[2..], b" not") {
            return (token::ISNOT, 6);
        }
        if word == b"not" && prefix_is(&s[3..], b" in") {
            return (token::NOTIN, 6);
        }
    }
    if !token::may_be_keyword(word) {
        return (token::IDENT, n);
    }
    (token::keyword(word).unwrap_or(token::IDENT), n)
}

/// The longest operator token at the start of `s` (which does not start an
/// identifier, a number or a string), if any: PyTorch's token trie for
/// these bytes, spelled out (the tests compare it with the table in
/// `token::operator_candidates`).
pub(crate) fn operator_token(s: &[u8]) -> Option<(Kind, usize)> {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let single = |c: u8| (Kind::ch(c), 1);
    let first = s[0];
    let with_eq = |kind: Kind| {
        if at(1) == b'=' {
            (kind, 2)
        } else {
            single(first)
        }
    };
    Some(match first {
        b'-' => match at(1) {
            b'>' => (token::ARROW, 2),
            b'=' => (token::MINUS_EQ, 2),
            _ => single(first),
        },
        b'=' => with_eq(token::EQ),
        b'!' => with_eq(token::NE),
        b'+' => with_eq(token::PLUS_EQ),
        b'%' => with_eq(token::MOD_EQ),
        b'|' => with_eq(token::BIT_OR_EQ),
        b'&' => with_eq(token::BIT_AND_EQ),
        b'^' => with_eq(token::BIT_XOR_EQ),
        b'*' => match (at(1), at(2)) {
            (b'*', b'=') => (token::POW_EQ, 3),
            (b'*', _) => (token::POW, 2),
            (b'=', _) => (token::TIMES_EQ, 2),
            _ => single(first),
        },
        b'/' => match at(1) {
            b'/' => (token::FLOOR_DIV, 2),
            b'=' => (token::DIV_EQ, 2),
            _ => single(first),
        },
        b'<' => match (at(1), at(2)) {
            (b'=', b'>') => (token::EQUIVALENT, 3),
            (b'=', _) => (token::LE, 2),
            (b'<', b'=') => (token::LSHIFT_EQ, 3),
            (b'<', _) => (token::LSHIFT, 2),
            _ => single(first),
        },
        b'>' => match (at(1), at(2)) {
            (b'=', _) => (token::GE, 2),
            (b'>', b'=') => (token::RSHIFT_EQ, 3),
            (b'>', _) => (token::RSHIFT, 2),
            _ => single(first),
        },
        b'.' if s.starts_with(b"...") => (token::DOTS, 3),
        b'#' if s.starts_with(b"# type:") => (token::TYPE_COMMENT, 7),
        c if token::is_single_char_token(c) => single(c),
        _ => return None,
    })
}
