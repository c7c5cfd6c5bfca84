//! A byte-level re-implementation of PyTorch's TorchScript lexer, as used by
//! its schema parser.  The rules for single tokens (byte classes,
//! identifiers and keywords, strings, operators) are in `lexer_rules`.
//!
//! Note [Indentation tokens in a schema]
//! PyTorch parses schemas with the Python-like lexer: a newline outside
//! brackets ends a "line", and the indentation of the next line becomes an
//! INDENT, NEWLINE or DEDENT token.  So `foo(Tensor x) ->\n  Tensor` fails
//! with "expected ident but found 'indent'", a newline inside `( )` is plain
//! whitespace, and a trailing newline is accepted.  Bracket nesting is a
//! wrapping counter (PyTorch's is a `size_t`), so an unmatched `)` turns
//! every later newline into whitespace, as it does there.
//!
//! Note [Lazy lexing]
//! Tokens are produced on demand with one token of lookahead, exactly when
//! PyTorch's parser asks for them.  That keeps error precedence identical:
//! an invalid character after a syntax error is never reached, and an
//! invalid character right after a token is reported when that token is
//! consumed, before any semantic check that follows.
//!
//! Note [One token of state]
//! Tokens are `Copy` byte ranges into the source (the text is sliced out
//! when asked for), and the lookahead PyTorch keeps in a queue is, for the
//! schema grammar, never more than: the current token, at most one token
//! lexed ahead by `lookahead`, and a run of DEDENT tokens (one raw
//! whitespace token can close any number of indentation levels; they all
//! share the whitespace's range).  `lex` is only called when nothing is
//! pending, so these three fields replace the queue exactly: `cur` is read
//! directly, and `next` is a branch and a copy on the common path.  The
//! queue-based lexer is kept as a test oracle (`lexer_reference`), and the
//! tests below compare token streams on every conformance input.

use std::ops::Range;

use crate::error::SchemaParseError;
use crate::lexer_rules::{
    ident_or_keyword, is_blank, operator_token, string_literal_len, BLANK, CLASS, END, IDENT,
    NUMBER, QUOTE, SINGLE, SPACE,
};
use crate::number::strtod_prefix_len;
use crate::token::{self, Kind};

/// A token: its kind and byte range in the source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Token {
    pub(crate) kind: Kind,
    pub(crate) start: usize,
    pub(crate) end: usize,
}

impl Token {
    pub(crate) fn range(&self) -> Range<usize> {
        self.start..self.end
    }
}

pub(crate) type LexResult<T> = Result<T, Box<SchemaParseError>>;

pub(crate) struct Lexer<'a> {
    src: &'a str,
    bytes: &'a [u8],
    /// Raw position: where the next raw token match starts.
    pos: usize,
    /// Depth of `( [ {` nesting; wraps below zero like a `size_t`.
    nesting: usize,
    /// Indentation of the first line (the bottom of PyTorch's indent stack).
    indent_front: usize,
    /// The rest of the indent stack above `indent_front` (never allocated
    /// unless the input indents a line).
    indent_stack: Vec<usize>,
    /// The current token.
    cur: Token,
    /// The token after `cur`, once `lookahead` has lexed it.
    ahead: Option<Token>,
    /// How many DEDENT tokens (all equal to `dedent`) follow `ahead`, or
    /// `cur` when there is no `ahead`.
    dedents: usize,
    dedent: Token,
}

impl<'a> Lexer<'a> {
    /// A lexer over `src` and its first token.
    #[cfg(test)]
    pub(crate) fn new(src: &'a str) -> LexResult<Self> {
        let mut lexer = Lexer::unstarted(src);
        lexer.start()?;
        Ok(lexer)
    }

    /// A lexer over `src` that has not lexed anything: [`Lexer::start`]
    /// must be called first.  (Built in place by the parser; returning the
    /// whole lexer in a `Result` would copy it.)
    pub(crate) fn unstarted(src: &'a str) -> Self {
        let eof = Token {
            kind: token::EOF,
            start: src.len(),
            end: src.len(),
        };
        Lexer {
            src,
            bytes: src.as_bytes(),
            pos: 0,
            nesting: 0,
            indent_front: 0,
            indent_stack: Vec::new(),
            cur: eof,
            ahead: None,
            dedents: 0,
            dedent: eof,
        }
    }

    /// Measures the first line's indentation and lexes the first token.
    pub(crate) fn start(&mut self) -> LexResult<()> {
        if self
            .bytes
            .first()
            .is_some_and(|&c| CLASS[usize::from(c)] == IDENT)
        {
            // No indentation (a raw whitespace token of length 0, as the
            // general path below finds), and a first token `advance` lexes.
            return self.advance();
        }
        let first = self.lex_raw(true)?;
        self.indent_front = first.end - first.start;
        self.cur = self.lex()?;
        Ok(())
    }

    pub(crate) fn src(&self) -> &'a str {
        self.src
    }

    /// The text of a token.
    #[inline]
    pub(crate) fn text(&self, t: Token) -> &'a str {
        // Token boundaries are always at ASCII bytes or the ends of the input.
        self.src.get(t.start..t.end).unwrap_or("")
    }

    #[inline]
    pub(crate) fn cur(&self) -> Token {
        self.cur
    }

    /// Returns the current token and moves to the next one.
    #[inline(always)]
    pub(crate) fn next(&mut self) -> LexResult<Token> {
        let t = self.cur;
        self.bump()?;
        Ok(t)
    }

    /// Moves to the next token.  (Returning only the error keeps the result
    /// in a register; `next` copies the token, where it is wanted.)
    #[inline]
    fn bump(&mut self) -> LexResult<()> {
        if let Some(a) = self.ahead.take() {
            self.cur = a;
        } else if self.dedents > 0 {
            self.dedents -= 1;
            self.cur = self.dedent;
        } else {
            self.advance()?;
        }
        Ok(())
    }

    /// Lexes the next token into `cur` when nothing is pending.
    ///
    /// Note [The lexer's fast path]
    /// Between two tokens of a schema there is at most a space or two.
    /// Spaces are skipped here and the token is matched right away (see
    /// Note [Byte classes]), written into `cur` in place.  Any other
    /// whitespace (newlines, tabs, comments, line continuations, which can
    /// produce indentation tokens) goes through `lex`, which starts over
    /// from `pos` with PyTorch's full rules, so both paths give the same
    /// token.
    fn advance(&mut self) -> LexResult<()> {
        let b = self.bytes;
        let mut start = self.pos;
        let class = loop {
            match b.get(start) {
                Some(&c) if CLASS[usize::from(c)] == SPACE => start += 1,
                Some(&c) => break CLASS[usize::from(c)],
                None => break END,
            }
        };
        if class == BLANK {
            self.cur = self.lex()?;
            return Ok(());
        }
        let (kind, n) = self.match_token(self.pos, start, class)?;
        self.count_nesting(kind);
        self.pos = start + n;
        self.cur = Token {
            kind,
            start,
            end: start + n,
        };
        Ok(())
    }

    /// Tracks `( [ {` nesting (Note [Indentation tokens in a schema]).
    #[inline(always)]
    fn count_nesting(&mut self, kind: Kind) {
        if kind.0 < 256 {
            match kind.0 as u8 {
                b'(' | b'[' | b'{' => self.nesting = self.nesting.wrapping_add(1),
                b')' | b']' | b'}' => self.nesting = self.nesting.wrapping_sub(1),
                _ => {}
            }
        }
    }

    /// Skips the current token if it has the given kind.
    #[inline]
    pub(crate) fn next_if(&mut self, kind: Kind) -> LexResult<bool> {
        if self.cur.kind != kind {
            return Ok(false);
        }
        self.next()?;
        Ok(true)
    }

    /// Consumes a token of the given kind or fails like PyTorch's `expect`.
    #[inline]
    pub(crate) fn expect(&mut self, kind: Kind) -> LexResult<Token> {
        if self.cur.kind != kind {
            return Err(self.expected_kind(kind));
        }
        self.next()
    }

    #[cold]
    #[inline(never)]
    fn expected_kind(&self, kind: Kind) -> Box<SchemaParseError> {
        self.expected(&token::kind_name(kind))
    }

    /// The "expected X but found 'Y' here:" error at the current token.
    #[cold]
    pub(crate) fn expected(&self, what: &str) -> Box<SchemaParseError> {
        let t = self.cur;
        Box::new(SchemaParseError::expected_token(
            self.src,
            what,
            &token::kind_name(t.kind),
            t.range(),
        ))
    }

    /// The token after the current one (lexing it if need be).
    pub(crate) fn lookahead(&mut self) -> LexResult<Token> {
        if let Some(a) = self.ahead {
            return Ok(a);
        }
        if self.dedents > 0 {
            return Ok(self.dedent);
        }
        let a = self.lex()?;
        self.ahead = Some(a);
        Ok(a)
    }

    fn indent_back(&self) -> usize {
        self.indent_stack
            .last()
            .copied()
            .unwrap_or(self.indent_front)
    }

    /// Lexes one raw token and turns whitespace into INDENT/NEWLINE/DEDENT.
    /// Only called when no token is pending (Note [One token of state]); a
    /// dedent returns NEWLINE and leaves its DEDENTs in `dedents`.
    #[inline(never)]
    fn lex(&mut self) -> LexResult<Token> {
        let t = self.lex_raw(false)?;
        if t.kind == token::WHITESPACE || t.kind == token::WHITESPACE_EOF {
            return self.indentation(t);
        }
        self.count_nesting(t.kind);
        Ok(t)
    }

    #[cold]
    fn indentation(&mut self, t: Token) -> LexResult<Token> {
        let depth = if t.kind == token::WHITESPACE_EOF {
            self.indent_front
        } else {
            t.end - t.start
        };
        let back = self.indent_back();
        if depth > back {
            self.indent_stack.push(depth);
            return Ok(Token {
                kind: token::INDENT,
                ..t
            });
        }
        if depth < back {
            let mut n = 0;
            while self.indent_back() != depth {
                if self.indent_stack.pop().is_none() {
                    // PyTorch pops its last level and then reports.
                    return Err(Box::new(SchemaParseError::lexer_report(
                        self.src,
                        format!("invalid indent level {depth}"),
                        t.range(),
                    )));
                }
                n += 1;
            }
            self.dedents = n;
            self.dedent = Token {
                kind: token::DEDENT,
                ..t
            };
        }
        Ok(Token {
            kind: token::NEWLINE,
            ..t
        })
    }

    /// PyTorch's `SharedParserData::match` followed by `lexRaw`.
    fn lex_raw(&mut self, whitespace_token: bool) -> LexResult<Token> {
        let raw_start = self.pos;
        let start = match self.skip_whitespace(whitespace_token) {
            Ok(s) => s,
            Err(t) => return Ok(t),
        };
        let class = self
            .bytes
            .get(start)
            .map_or(END, |&c| CLASS[usize::from(c)]);
        let (kind, n) = self.match_token(raw_start, start, class)?;
        self.pos = start + n;
        Ok(Token {
            kind,
            start,
            end: start + n,
        })
    }

    /// The kind and length of the token at `start`, whose first byte has
    /// class `class`; `raw_start` is where matching began, for the error.
    ///
    /// PyTorch tries numbers first (`strtod`, refusing a leading sign or
    /// letter so that `1+3` and `inf` are not numbers), then strings, then
    /// identifiers and operator tokens.  Only a digit or `.` can start a
    /// number and only a quote a string, so the first byte picks the one
    /// rule that can match (Note [Byte classes]).
    #[inline(always)]
    fn match_token(&self, raw_start: usize, start: usize, class: u8) -> LexResult<(Kind, usize)> {
        let rest = &self.bytes[start..];
        let m = match class {
            IDENT => Some(ident_or_keyword(rest)),
            SINGLE => Some((Kind::ch(rest[0]), 1)),
            END => Some((token::EOF, 0)),
            NUMBER => match strtod_prefix_len(rest) {
                0 => operator_token(rest),
                num_len => {
                    let complex = rest.get(num_len) == Some(&b'j');
                    Some((token::NUMBER, num_len + usize::from(complex)))
                }
            },
            QUOTE => string_literal_len(rest).map(|n| (token::STRINGLITERAL, n)),
            _ => operator_token(rest),
        };
        match m {
            Some(m) => Ok(m),
            None => Err(self.invalid_token(raw_start, start)),
        }
    }

    /// The whitespace, comment and line-continuation loop of PyTorch's
    /// `match`, from `self.pos`: `Ok(start)` of the next token, or
    /// `Err(token)` when the whitespace itself is the token.
    fn skip_whitespace(&mut self, mut whitespace_token: bool) -> Result<usize, Token> {
        let b = self.bytes;
        let len = b.len();
        let continuation = self.nesting > 0;
        let mut pos = self.pos;
        loop {
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
                return Err(Token {
                    kind,
                    start,
                    end: pos,
                });
            }
            return Ok(pos);
        }
    }

    /// "expected a valid token but found 'c' here:" where `c` is, as in
    /// PyTorch, the byte where raw matching began (possibly a blank).
    #[cold]
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

#[cfg(test)]
#[path = "lexer_tests.rs"]
mod tests;
