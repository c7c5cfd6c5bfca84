//! The schema parser: declarations, names and arguments.
//!
//! Note [Same steps, same errors]
//! The parser mirrors PyTorch's `SchemaParser` call for call: the same
//! tokens are consumed in the same order and every check happens at the
//! same point.  Together with the lazy lexer (Note [Lazy lexing]) this is
//! what makes the *first* error PyTorch reports also ours, e.g. an illegal
//! overload name is reported only if the token after it lexes, and a
//! default after a non-default is reported before trailing garbage.

use std::cell::Cell;

use crate::alias::AliasInfo;
use crate::argument::Argument;
use crate::error::{ErrorKind, SchemaParseError};
use crate::lexer::{LexResult, Lexer, Token};
use crate::number::{stoll, ConvError};
use crate::schema::{FunctionSchema, OperatorName, SchemaOrName};
use crate::token::{self, Kind};
use crate::types::Type;

pub(crate) type PResult<T> = LexResult<T>;

pub(crate) struct SchemaParser<'a> {
    pub(crate) lex: Lexer<'a>,
    /// Counter for the fresh alias sets of the `Tensor!` shorthand.
    pub(crate) next_alias_id: usize,
}

/// Parses a full schema or a bare operator name, like PyTorch's
/// `torch::jit::parseSchemaOrName`.
///
/// ```
/// use switchboard_schema::{parse_schema_or_name, SchemaOrName};
/// match parse_schema_or_name("aten::add.Tensor")? {
///     SchemaOrName::Name(n) => assert_eq!(n.to_string(), "aten::add.Tensor"),
///     SchemaOrName::Schema(_) => unreachable!(),
/// }
/// # Ok::<(), switchboard_schema::SchemaParseError>(())
/// ```
pub fn parse_schema_or_name(s: &str) -> Result<SchemaOrName, SchemaParseError> {
    if let Some(name) = plain_name(s) {
        return Ok(SchemaOrName::Name(name));
    }
    parse_full(s)
}

/// The full parser (PyTorch's steps).
fn parse_full(s: &str) -> Result<SchemaOrName, SchemaParseError> {
    let run = || -> PResult<SchemaOrName> {
        let mut p = SchemaParser {
            lex: Lexer::unstarted(s),
            next_alias_id: 0,
        };
        p.lex.start()?;
        let result = p.parse_declaration()?;
        p.lex.next_if(token::NEWLINE)?;
        p.lex.expect(token::EOF)?;
        Ok(result)
    };
    run().map_err(|e| *e)
}

// Note [Plain operator names skip the lexer]
// Registering a kernel parses its operator's name (`impl_("op", ...)`), and the lexer's set-up
// and per-token work cost more than a thousand instructions for a few bytes. A name that is
// nothing but `ident`, `ident::ident`, optionally followed by `.ident`, where no part is a
// keyword and the overload is legal, parses to exactly its own text: such names are split
// directly. Anything else (spaces, keywords, digits first, `default`, errors) takes the full
// parser, so every message stays PyTorch's.

/// The name `s` spells when it is a plain `ns::name.overload` (see Note [Plain operator names
/// skip the lexer]); `None` when the full parser must decide.
fn plain_name(s: &str) -> Option<OperatorName> {
    let b = s.as_bytes();
    // The end of the identifier starting at `at`, if one does and is not a keyword.
    let ident = |at: usize| -> Option<usize> {
        let first = *b.get(at)?;
        if !(first.is_ascii_alphabetic() || first == b'_') {
            return None;
        }
        let mut end = at + 1;
        while b
            .get(end)
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
        {
            end += 1;
        }
        token::keyword(&b[at..end]).is_none().then_some(end)
    };
    let mut end = ident(0)?;
    if b[end..].starts_with(b"::") {
        end = ident(end + 2)?;
    }
    let name_end = end;
    let overload = match b.get(end) {
        None => "",
        Some(b'.') => {
            let o_end = ident(end + 1)?;
            if o_end != b.len() {
                return None;
            }
            let o = &s[end + 1..o_end];
            if o == "default" || o.starts_with("__") {
                return None;
            }
            o
        }
        Some(_) => return None,
    };
    Some(OperatorName::new(&s[..name_end], overload))
}

// Note [Exact-size argument vectors]
// A registered operator keeps its schema for the life of the program, so its argument and
// return vectors must have no spare capacity; growing a vector and shrinking it afterwards
// costs a `realloc` each (a third of a small schema's parse). The lists are collected in a
// per-thread scratch vector that keeps its capacity between parses, and moved out into
// vectors allocated at their exact size. The scratch is taken out of its cell for the parse
// (so a nested or failed parse simply uses or drops another one) and put back emptied.

thread_local! {
    static SCRATCH: Cell<Vec<Argument>> = const { Cell::new(Vec::new()) };
}

/// Runs `f` with the thread's (empty) scratch vector; see Note [Exact-size argument vectors].
fn with_scratch<R>(f: impl FnOnce(&mut Vec<Argument>) -> R) -> R {
    let mut buf = SCRATCH.with(Cell::take);
    let r = f(&mut buf);
    buf.clear();
    SCRATCH.with(|s| s.set(buf));
    r
}

/// Moves the contents of `buf` into a vector of exactly their size, in one
/// copy (Note [Exact-size argument vectors]).
fn take_exact(buf: &mut Vec<Argument>) -> Vec<Argument> {
    let mut v = Vec::with_capacity(buf.len());
    v.append(buf);
    v
}

pub(crate) fn ch(c: u8) -> Kind {
    Kind::ch(c)
}

impl<'a> SchemaParser<'a> {
    pub(crate) fn src(&self) -> &'a str {
        self.lex.src()
    }

    pub(crate) fn error_at(
        &self,
        span: std::ops::Range<usize>,
        msg: impl Into<String>,
    ) -> Box<SchemaParseError> {
        Box::new(SchemaParseError::report(self.src(), msg, span))
    }

    /// `begin item (sep item)* end`, where `begin`/`end` may be absent.
    pub(crate) fn parse_list(
        &mut self,
        begin: Option<Kind>,
        sep: Kind,
        end: Option<Kind>,
        mut item: impl FnMut(&mut Self) -> PResult<()>,
    ) -> PResult<()> {
        if let Some(b) = begin {
            self.lex.expect(b)?;
        }
        if end.is_none_or(|e| self.lex.cur().kind != e) {
            loop {
                item(self)?;
                if !self.lex.next_if(sep)? {
                    break;
                }
            }
        }
        if let Some(e) = end {
            self.lex.expect(e)?;
        }
        Ok(())
    }

    fn parse_declaration(&mut self) -> PResult<SchemaOrName> {
        let name = self.parse_name()?;
        if self.lex.cur().kind != ch(b'(') {
            return Ok(SchemaOrName::Name(name));
        }
        with_scratch(|buf| self.parse_signature(name, buf))
    }

    /// The argument and return lists after the name, collected in `buf` (see
    /// Note [Exact-size argument vectors]).
    fn parse_signature(
        &mut self,
        name: OperatorName,
        buf: &mut Vec<Argument>,
    ) -> PResult<SchemaOrName> {
        let mut kwarg_only = false;
        let mut is_vararg = false;
        self.parse_list(Some(ch(b'(')), ch(b','), Some(ch(b')')), |p| {
            if is_vararg {
                let at = p.lex.cur().range();
                return Err(p.error_at(at, "... must be the last element of the argument list"));
            }
            if p.lex.next_if(ch(b'*'))? {
                kwarg_only = true;
            } else if p.lex.next_if(token::DOTS)? {
                is_vararg = true;
            } else {
                buf.push(p.parse_argument(false, kwarg_only)?);
            }
            Ok(())
        })?;
        if is_vararg && buf.iter().any(|a| a.default_value().is_some()) {
            let at = self.lex.cur().range();
            return Err(self.error_at(
                at,
                "schemas with vararg (...) can't have default value args",
            ));
        }
        let arguments = take_exact(buf);
        self.lex.expect(token::ARROW)?;
        let mut is_varret = false;
        let returns = if self.lex.next_if(token::DOTS)? {
            is_varret = true;
            Vec::new()
        } else if self.lex.cur().kind == ch(b'(') {
            self.parse_list(Some(ch(b'(')), ch(b','), Some(ch(b')')), |p| {
                if is_varret {
                    let at = p.lex.cur().range();
                    return Err(p.error_at(at, "... must be the last element of the return list"));
                }
                if p.lex.next_if(token::DOTS)? {
                    is_varret = true;
                } else {
                    buf.push(p.parse_argument(true, false)?);
                }
                Ok(())
            })?;
            take_exact(buf)
        } else {
            vec![self.parse_argument(true, false)?]
        };
        let schema = FunctionSchema::new(name, arguments, returns, is_vararg, is_varret)
            .map_err(Box::new)?;
        Ok(SchemaOrName::Schema(schema))
    }

    fn ident_text(&mut self) -> PResult<&'a str> {
        let t = self.lex.expect(token::IDENT)?;
        Ok(self.lex.text(t))
    }

    fn parse_name(&mut self) -> PResult<OperatorName> {
        let first = self.lex.expect(token::IDENT)?;
        let src = self.src();
        let mut owned = None;
        let mut name = self.lex.text(first);
        if self.lex.next_if(ch(b':'))? {
            let colon = self.lex.expect(ch(b':'))?;
            let base = self.lex.expect(token::IDENT)?;
            // `ns::name` is usually written without spaces: then it is one
            // slice of the source, copied once into the name.
            if colon.start == first.end + 1 && base.start == colon.end {
                name = src.get(first.start..base.end).unwrap_or("");
            } else {
                let base = self.lex.text(base);
                let mut s = String::with_capacity(name.len() + 2 + base.len());
                s.push_str(name);
                s.push_str("::");
                s.push_str(base);
                owned = Some(s);
            }
        }
        let overload = if self.lex.next_if(ch(b'.'))? {
            self.ident_text()?
        } else {
            ""
        };
        // `default` names the overload-less operator in Python
        // (`torch.ops.aten.foo.default`), and dunder names are attributes.
        if overload == "default" || overload.starts_with("__") {
            return Err(Box::new(SchemaParseError::plain(
                ErrorKind::Check,
                format!("{overload} is not a legal overload name for aten operators"),
                None,
            )));
        }
        Ok(match owned {
            Some(name) => OperatorName::new(name, overload),
            None => OperatorName::new(name, overload),
        })
    }

    fn parse_argument(&mut self, is_return: bool, kwarg_only: bool) -> PResult<Argument> {
        let (mut ty, mut alias_info) = self.parse_type()?;
        let mut n = None;
        let mut default = None;
        if self.lex.next_if(ch(b'['))? {
            // A size can only appear at argument level: `int[2]`.
            ty = Type::List(Box::new(ty));
            let num = self.lex.expect(token::NUMBER)?;
            n = Some(self.stoll_token(num)? as i32);
            self.lex.expect(ch(b']'))?;
            let mut container = self.parse_alias_annotation()?;
            if let Some(inner) = alias_info.take() {
                let mut c = container.unwrap_or_else(|| {
                    let mut c = AliasInfo::new();
                    c.set_is_write(inner.is_write());
                    c
                });
                c.add_contained_type(inner);
                container = Some(c);
            }
            alias_info = container;
            if self.lex.next_if(ch(b'?'))? {
                ty = self.make_optional(ty, num)?;
            }
        }
        let name = if is_return {
            if self.lex.cur().kind == token::IDENT {
                let t = self.lex.next()?;
                self.lex.text(t)
            } else {
                ""
            }
        } else {
            let name = self.ident_text()?;
            if self.lex.next_if(ch(b'='))? {
                default = Some(self.parse_default_value(&ty, n)?);
            }
            name
        };
        Ok(Argument::with_name(
            crate::names::intern(name),
            ty,
            n,
            default,
            !is_return && kwarg_only,
            alias_info,
        ))
    }

    /// `std::stoll` of a number token, failing like libstdc++.
    pub(crate) fn stoll_token(&self, t: Token) -> PResult<i64> {
        stoll(self.lex.text(t)).map_err(|e| conv_error(e, "stoll", t))
    }
}

/// The error `std::stod` / `std::stoll` throw (`what()` is the function name).
pub(crate) fn conv_error(e: ConvError, func: &str, t: Token) -> Box<SchemaParseError> {
    let kind = match e {
        ConvError::Invalid => ErrorKind::InvalidNumber,
        ConvError::Range => ErrorKind::NumberOutOfRange,
    };
    Box::new(SchemaParseError::plain(kind, func, Some(t.range())))
}

#[cfg(test)]
mod tests {
    use crate::{FunctionSchema, Type};

    fn print(s: &str) -> String {
        match FunctionSchema::parse(s) {
            Ok(schema) => schema.to_string(),
            Err(e) => format!("ERR {}", e.first_line()),
        }
    }

    #[test]
    fn canonical_printing() {
        assert_eq!(
            print("aten::items.str(Dict(str, t) self) -> ((str, t)[])"),
            "aten::items.str(Dict(str, t) self) -> ((str, t)[])"
        );
        assert_eq!(
            print("foo(Tensor x) -> (Tensor out)"),
            "foo(Tensor x) -> Tensor out"
        );
        assert_eq!(
            print("foo(int [ 2 ] stride = 1) -> ()"),
            "foo(int[2] stride=1) -> ()"
        );
        assert_eq!(
            print("foo(SymInt[2] x=1) -> ()"),
            "foo(SymInt[2] x=[1, 1]) -> ()"
        );
        assert_eq!(
            print("foo(float x=1e-05, complex c=1.5) -> ()"),
            "foo(float x=1.0000000000000001e-05, complex c=0.+1.j) -> ()"
        );
        assert_eq!(
            print("foo(ScalarType s=long, MemoryFormat m=contiguous_format) -> ()"),
            "foo(ScalarType s=4, MemoryFormat m=0) -> ()"
        );
        assert_eq!(
            print("foo(str b='\"\\'\\\\') -> ()"),
            "foo(str b=\"\\\"\\'\\\\\") -> ()"
        );
        assert_eq!(
            print("foo(Tensor!) -> ()"),
            "ERR expected ident but found ')' here:"
        );
        assert_eq!(
            print("foo(Tensor! x) -> ()"),
            "foo(Tensor($0! -> ) x) -> ()"
        );
        assert_eq!(
            print("foo(Tensor(a)[][] x, Tensor?? y) -> ()"),
            "foo(Tensor[]()[] x, Tensor? y) -> ()"
        );
        assert_eq!(
            print("foo(int[1.5] x, tensor y) -> Tensor Tensor #c"),
            "foo(int[1] x, tensor y) -> Tensor Tensor"
        );
        assert_eq!(
            print("prim::Print(...) -> (...)"),
            "prim::Print(...) -> ..."
        );
    }

    #[test]
    fn errors() {
        assert_eq!(
            print("foo"),
            "ERR Tried to parse a function schema but only the operator name was given"
        );
        assert_eq!(
            print("ns::foo.default(Tensor x) -> ()"),
            "ERR default is not a legal overload name for aten operators"
        );
        assert_eq!(print("foo(complex c=1) -> ()"), "ERR stod");
        assert_eq!(print("foo(int[99999999999999999999] x) -> ()"), "ERR stoll");
        assert_eq!(
            print("foo(Tensor(*|a) x) -> ()"),
            "ERR expected ) but found 'ident' here:"
        );
        assert_eq!(
            print("foo(Tensor x) ->\n  Tensor"),
            "ERR expected ident but found 'indent' here:"
        );
        assert_eq!(
            print("foo(int x=1, Tensor y) -> ()")
                .split(" INTERNAL")
                .next(),
            Some("ERR !seen_default_arg || arg.kwarg_only()")
        );
    }

    #[test]
    fn queries() {
        let s = FunctionSchema::parse(
            "aten::chunk(Tensor(a -> *) self, int chunks, int dim=0) -> Tensor(a)[]",
        )
        .unwrap();
        assert!(s.is_view_op() && !s.is_mutable());
        let s = FunctionSchema::parse(
            "f(Tensor[] a, Tensor?[] b, Tensor? c, int d, *, Tensor(a!)[] out) -> ()",
        )
        .unwrap();
        assert_eq!(s.tensor_like_argument_indices(), [0, 1, 2, 4]);
        assert_eq!(s.out_arguments(), [4]);
        assert_eq!(s.written_arguments(), [4]);
        assert!(s.is_argument_written(4) && !s.is_argument_written(9));
        assert_eq!(s.arguments()[3].ty(), &Type::Int);
        assert_eq!(s.kwarg_only_index(), Some(4));
    }
}

#[cfg(test)]
mod plain_name_tests {
    use super::*;
    use proptest::prelude::*;

    fn check(s: &str) {
        if let Some(fast) = plain_name(s) {
            match parse_full(s) {
                Ok(SchemaOrName::Name(full)) => assert_eq!(fast, full, "{s:?}"),
                other => panic!("{s:?}: fast path gave {fast}, parser {other:?}"),
            }
        }
    }

    #[test]
    fn plain_names_parse_as_the_parser_does() {
        for s in [
            "op",
            "reg::op5",
            "aten::add.Tensor",
            "a::b::c",
            "def",
            "ns::None",
            "x.default",
            "x.__init__",
            "x._y",
            "_::x",
            "x.",
            "x..y",
            "1x",
            "x y",
            "x::",
            "::x",
            "is",
            "isx",
            "x.1",
            "aten::add.out",
            "x.Tensor_",
            "ns::is",
            "",
        ] {
            check(s);
        }
        assert_eq!(plain_name("reg::op5").unwrap().to_string(), "reg::op5");
        assert_eq!(plain_name("a.b").unwrap().overload_name(), "b");
        assert!(plain_name("x.default").is_none());
        assert!(plain_name("None").is_none());
    }

    proptest! {
        #[test]
        fn plain_name_agrees_with_the_parser(s in "[a-dINoe_:.0-9 ]{0,12}") {
            check(&s);
        }
    }
}
