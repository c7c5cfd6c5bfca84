//! The lexer as it was before Note [One token of state]: a `VecDeque` of
//! lookahead tokens filled by `lex`.  Kept for tests only, as the oracle the
//! new lexer's token streams are compared with (see `lexer::tests`).

use std::collections::VecDeque;

use crate::error::SchemaParseError;
use crate::lexer::{LexResult, Token};
use crate::number::strtod_prefix_len;
use crate::token::{self, Kind};

/// C's `isspace` minus `'\n'`.
fn is_blank(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\x0b' | b'\x0c' | b'\r')
}

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

fn is_ident_continue(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

pub(crate) struct Lexer<'a> {
    src: &'a str,
    bytes: &'a [u8],
    /// Raw position: where the next raw token match starts.
    pos: usize,
    /// Depth of `( [ {` nesting; wraps below zero like a `size_t`.
    nesting: usize,
    /// Indentation of the first line (the bottom of PyTorch's indent stack).
    indent_front: usize,
    /// The rest of the indent stack above `indent_front`.
    indent_stack: Vec<usize>,
    queue: VecDeque<Token>,
}

impl<'a> Lexer<'a> {
    pub(crate) fn new(src: &'a str) -> LexResult<Self> {
        let mut lexer = Lexer {
            src,
            bytes: src.as_bytes(),
            pos: 0,
            nesting: 0,
            indent_front: 0,
            indent_stack: Vec::new(),
            queue: VecDeque::with_capacity(4),
        };
        let first = lexer.lex_raw(true)?;
        lexer.indent_front = first.end - first.start;
        lexer.lex()?;
        Ok(lexer)
    }

    pub(crate) fn cur(&self) -> Token {
        // The queue is refilled whenever it empties, so it is never empty.
        self.queue.front().copied().unwrap_or(Token {
            kind: token::EOF,
            start: self.bytes.len(),
            end: self.bytes.len(),
        })
    }

    /// Returns the current token and moves to the next one.
    pub(crate) fn next(&mut self) -> LexResult<Token> {
        let t = self.cur();
        self.queue.pop_front();
        if self.queue.is_empty() {
            self.lex()?;
        }
        Ok(t)
    }

    pub(crate) fn lookahead(&mut self) -> LexResult<Token> {
        if self.queue.len() < 2 {
            self.lex()?;
        }
        Ok(self.queue.get(1).copied().unwrap_or_else(|| self.cur()))
    }

    fn indent_back(&self) -> usize {
        self.indent_stack
            .last()
            .copied()
            .unwrap_or(self.indent_front)
    }

    /// Lexes one raw token and turns whitespace into INDENT/NEWLINE/DEDENT.
    fn lex(&mut self) -> LexResult<()> {
        let mut t = self.lex_raw(false)?;
        match t.kind {
            k if k == Kind::ch(b'(') || k == Kind::ch(b'[') || k == Kind::ch(b'{') => {
                self.nesting = self.nesting.wrapping_add(1);
            }
            k if k == Kind::ch(b')') || k == Kind::ch(b']') || k == Kind::ch(b'}') => {
                self.nesting = self.nesting.wrapping_sub(1);
            }
            k if k == token::WHITESPACE || k == token::WHITESPACE_EOF => {
                let depth = if k == token::WHITESPACE_EOF {
                    self.indent_front
                } else {
                    t.end - t.start
                };
                let back = self.indent_back();
                if depth > back {
                    self.indent_stack.push(depth);
                    t.kind = token::INDENT;
                } else if depth == back {
                    t.kind = token::NEWLINE;
                } else {
                    self.queue.push_back(Token {
                        kind: token::NEWLINE,
                        ..t
                    });
                    while self.indent_back() != depth {
                        if self.indent_stack.pop().is_none() {
                            // PyTorch pops its last level and then reports.
                            self.queue.push_back(Token {
                                kind: token::DEDENT,
                                ..t
                            });
                            return Err(Box::new(SchemaParseError::lexer_report(
                                self.src,
                                format!("invalid indent level {depth}"),
                                t.range(),
                            )));
                        }
                        self.queue.push_back(Token {
                            kind: token::DEDENT,
                            ..t
                        });
                    }
                    return Ok(());
                }
            }
            _ => {}
        }
        self.queue.push_back(t);
        Ok(())
    }

    /// PyTorch's `SharedParserData::match` followed by `lexRaw`.
    fn lex_raw(&mut self, mut whitespace_token: bool) -> LexResult<Token> {
        let b = self.bytes;
        let len = b.len();
        let continuation = self.nesting > 0;
        let raw_start = self.pos;
        let mut pos = self.pos;
        let start = loop {
            let start = pos;
            while pos < len && is_blank(b[pos]) {
                pos += 1;
            }
            if pos < len {
                if b[pos] == b'#' && !b[pos..].starts_with(b"# type:") {
                    while pos < len && b[pos] != b'\n' {
                        pos += 1;
                    }
                    continue;
                }
                if b[pos] == b'\\' && pos + 1 < len && b[pos + 1] == b'\n' && !whitespace_token {
                    pos += 2;
                    whitespace_token = false;
                    continue;
                }
                if b[pos] == b'\n' {
                    pos += 1;
                    whitespace_token = !continuation;
                    continue;
                }
            }
            if whitespace_token {
                let kind = if pos < len {
                    token::WHITESPACE
                } else {
                    token::WHITESPACE_EOF
                };
                self.pos = pos;
                return Ok(Token {
                    kind,
                    start,
                    end: pos,
                });
            }
            break pos;
        };
        if start == len {
            self.pos = len;
            return Ok(Token {
                kind: token::EOF,
                start: len,
                end: len,
            });
        }
        let rest = &b[start..];
        let first = rest[0];
        // Numbers first (PyTorch asks `strtod`, refusing a leading sign or
        // letter so that `1+3` and `inf` are not numbers), then strings,
        // then identifiers and operator tokens.
        let num_len = if first != b'-' && first != b'+' && !first.is_ascii_alphabetic() {
            strtod_prefix_len(rest)
        } else {
            0
        };
        let (kind, n) = if num_len > 0 {
            let complex = rest.get(num_len) == Some(&b'j');
            (token::NUMBER, num_len + usize::from(complex))
        } else if let Some(n) = string_literal_len(rest) {
            (token::STRINGLITERAL, n)
        } else {
            match ident_or_token(rest) {
                Some(m) => m,
                None => return Err(self.invalid_token(raw_start, start)),
            }
        };
        self.pos = start + n;
        Ok(Token {
            kind,
            start,
            end: start + n,
        })
    }

    /// "expected a valid token but found 'c' here:" where `c` is, as in
    /// PyTorch, the byte where raw matching began (possibly a blank).
    fn invalid_token(&self, raw_start: usize, start: usize) -> Box<SchemaParseError> {
        let found = match self.src.get(raw_start..).and_then(|s| s.chars().next()) {
            Some(c) => c.to_string(),
            None => String::new(),
        };
        Box::new(SchemaParseError::expected_token(
            self.src,
            "a valid token",
            &found,
            start..start + 1,
        ))
    }
}

/// Length of a string literal at the start of `s` (PyTorch's `isString`).
fn string_literal_len(s: &[u8]) -> Option<usize> {
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

/// Longest identifier or token at the start of `s`.  PyTorch walks its
/// token trie and the identifier rule together and keeps the longest match,
/// preferring the token on a tie: so `None` is a keyword, `Nonex` and
/// `default` are identifiers, and `is not` is one token.
fn ident_or_token(s: &[u8]) -> Option<(Kind, usize)> {
    let first = s[0];
    if is_ident_start(first) {
        let n = 1 + s[1..].iter().take_while(|&&c| is_ident_continue(c)).count();
        let word = &s[..n];
        if word == b"is" && prefix_is(&s[2..], b" not") {
            return Some((token::ISNOT, 6));
        }
        if word == b"not" && prefix_is(&s[3..], b" in") {
            return Some((token::NOTIN, 6));
        }
        return Some((token::keyword(word).unwrap_or(token::IDENT), n));
    }
    let mut best = token::is_single_char_token(first).then_some((Kind::ch(first), 1));
    for &(text, kind) in token::operator_candidates(first) {
        if prefix_is(s, text) && best.is_none_or(|(_, n)| text.len() > n) {
            best = Some((kind, text.len()));
        }
    }
    best
}
