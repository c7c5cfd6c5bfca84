//! Parsing types and alias annotations (PyTorch's `SchemaTypeParser`).

use crate::alias::{AliasInfo, WILDCARD};
use crate::custom_class::{is_custom_class_registered, qualified_name};
use crate::error::SchemaParseError;
use crate::lexer::Token;
use crate::parser::{ch, PResult, SchemaParser};
use crate::token;
use crate::types::Type;
use crate::union::{create_optional, create_union, UnionError};

fn union_error(e: UnionError, at: Token) -> Box<SchemaParseError> {
    Box::new(SchemaParseError::internal_assert(
        "false",
        e.file,
        54,
        &e.message,
        Some(at.range()),
    ))
}

/// The type keyword handled by `parse_type` that an identifier is, or `""`:
/// checked by length and first byte first, like Note [Type names by length
/// and first byte].
fn type_keyword(text: &str) -> &'static str {
    let candidate = match (text.len(), text.as_bytes().first()) {
        (6, Some(b'T')) => "Tensor",
        (6, Some(b'F')) => "Future",
        (5, Some(b'A')) => "Await",
        (4, Some(b'R')) => "RRef",
        (4, Some(b'D')) => "Dict",
        (5, Some(b'U')) => "Union",
        (9, Some(b'_')) => "__torch__",
        _ => return "",
    };
    if text == candidate {
        candidate
    } else {
        ""
    }
}

impl SchemaParser<'_> {
    /// `T?`, canonicalised like PyTorch's `OptionalType::get`.
    pub(crate) fn make_optional(&self, ty: Type, at: Token) -> PResult<Type> {
        create_optional(ty).map_err(|e| union_error(e, at))
    }

    fn contained(&mut self) -> PResult<Type> {
        // Types inside containers come back fake (Note [Real and fake types]).
        let (t, _alias) = self.parse_type()?;
        Ok(if t.has_fake_parts() { t.fake() } else { t })
    }

    /// `Future(T)`, `RRef(T)`, `Await(T)`: the inner annotation is dropped.
    fn wrapped(&mut self) -> PResult<Box<Type>> {
        self.lex.next()?;
        self.lex.expect(ch(b'('))?;
        let inner = self.contained()?;
        self.lex.expect(ch(b')'))?;
        Ok(Box::new(inner))
    }

    /// Parses a type with its alias annotation.  Returns the real type.
    pub(crate) fn parse_type(&mut self) -> PResult<(Type, Option<AliasInfo>)> {
        let mut alias_info = None;
        let first = self.lex.cur();
        let keyword = if first.kind == token::IDENT {
            type_keyword(self.lex.text(first))
        } else {
            ""
        };
        let mut value = if first.kind == ch(b'(') {
            // A tuple.  Annotations of its elements are dropped, as PyTorch
            // only attaches them when the tuple itself has one, which the
            // grammar cannot express.
            let mut types = Vec::new();
            self.parse_list(Some(ch(b'(')), ch(b','), Some(ch(b')')), |p| {
                types.push(p.contained()?);
                Ok(())
            })?;
            Type::Tuple(types)
        } else {
            match keyword {
                "Future" => Type::Future(self.wrapped()?),
                "Await" => Type::Await(self.wrapped()?),
                "RRef" => Type::RRef(self.wrapped()?),
                "Tensor" => {
                    self.lex.next()?;
                    alias_info = self.parse_alias_annotation()?;
                    Type::Tensor
                }
                "Dict" => {
                    self.lex.next()?;
                    self.lex.expect(ch(b'('))?;
                    let key = self.contained()?;
                    self.lex.expect(ch(b','))?;
                    let value = self.contained()?;
                    self.lex.expect(ch(b')'))?;
                    alias_info = self.parse_alias_annotation()?;
                    Type::Dict(Box::new(key), Box::new(value))
                }
                "Union" => {
                    self.lex.next()?;
                    self.lex.expect(ch(b'('))?;
                    let mut types = vec![self.contained()?];
                    while self.lex.cur().kind != ch(b')') {
                        self.lex.expect(ch(b','))?;
                        types.push(self.contained()?);
                    }
                    let close = self.lex.expect(ch(b')'))?;
                    alias_info = self.parse_alias_annotation()?;
                    create_union(types).map_err(|e| union_error(e, close))?
                }
                "__torch__" => self.parse_custom_class()?,
                _ => {
                    let base = self.parse_base_type()?;
                    alias_info = self.parse_alias_annotation()?;
                    base
                }
            }
        };
        loop {
            let cur = self.lex.cur();
            if cur.kind == ch(b'[') && self.lex.lookahead()?.kind == ch(b']') {
                self.lex.next()?;
                self.lex.next()?;
                value = Type::List(Box::new(value));
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
            } else if self.lex.next_if(ch(b'?'))? {
                value = self.make_optional(value, cur)?;
            } else {
                break;
            }
        }
        Ok((value, alias_info))
    }

    /// `__torch__.torch.classes.<ns>.<Class>`, which must be registered (Note [Custom class
    /// registry]).
    fn parse_custom_class(&mut self) -> PResult<Type> {
        self.lex.next()?;
        self.lex.expect(ch(b'.'))?;
        for expected in ["torch", "classes"] {
            let tok = self.lex.expect(token::IDENT)?;
            let text = self.lex.text(tok);
            if text != expected {
                return Err(self.error_at(
                    tok.range(),
                    format!("Expected classes namespace but got {text}"),
                ));
            }
            self.lex.expect(ch(b'.'))?;
        }
        let ns = self.lex.expect(token::IDENT)?;
        let ns = self.lex.text(ns);
        self.lex.expect(ch(b'.'))?;
        let class_tok = self.lex.expect(token::IDENT)?;
        let class = self.lex.text(class_tok);
        let name = qualified_name(ns, class);
        if !is_custom_class_registered(&name) {
            return Err(self.error_at(
                class_tok.range(),
                format!("Unknown custom class type {ns}.{class}. Please ensure it is registered."),
            ));
        }
        Ok(Type::CustomClass(name))
    }

    fn parse_base_type(&mut self) -> PResult<Type> {
        let tok = self.lex.cur();
        if !self.lex.next_if(token::NONE)? && !self.lex.next_if(token::NONE_TYPE)? {
            self.lex.expect(token::IDENT)?;
        }
        let text = self.lex.text(tok);
        if let Some(t) = Type::from_base_name(text) {
            return Ok(t);
        }
        if text.as_bytes().first().is_some_and(u8::is_ascii_lowercase) {
            // Lowercase identifiers that are not types are type variables.
            return Ok(Type::Var(text.to_string()));
        }
        Err(self.error_at(
            tok.range(),
            "unknown type specifier. Common valid schema types include Tensor, SymInt, int, float, bool, \
             Scalar; for a full list, please see \
             https://github.com/pytorch/pytorch/blob/main/aten/src/ATen/native/README.md#func ",
        ))
    }

    /// `(a)`, `(a!)`, `(a|b -> c)`, `(*)`, or the `!` shorthand for a fresh
    /// written set.
    pub(crate) fn parse_alias_annotation(&mut self) -> PResult<Option<AliasInfo>> {
        let kind = self.lex.cur().kind;
        if kind != ch(b'(') && kind != ch(b'!') {
            return Ok(None);
        }
        let mut info = AliasInfo::new();
        if self.lex.next_if(ch(b'('))? {
            self.parse_alias_sets(&mut info, false)?;
            if self.lex.next_if(ch(b'!'))? {
                info.set_is_write(true);
            }
            // Without `->` the after sets mirror the before sets.
            if self.lex.next_if(token::ARROW)? {
                info.clear_after_sets();
                self.parse_alias_sets(&mut info, true)?;
            }
            self.lex.expect(ch(b')'))?;
        } else if self.lex.next_if(ch(b'!'))? {
            let name = format!("${}", self.next_alias_id);
            self.next_alias_id += 1;
            info.add_before_set(&name);
            info.set_is_write(true);
            // PyTorch leaves the after sets empty here: `Tensor($0! -> )`.
            info.clear_after_sets();
        } else {
            return Ok(None);
        }
        Ok(Some(info))
    }

    /// `a|b|*`.  After a wildcard PyTorch ignores further set names without
    /// consuming them, so `(*|a)` fails at `a`.
    fn parse_alias_sets(&mut self, info: &mut AliasInfo, after: bool) -> PResult<()> {
        self.parse_list(None, ch(b'|'), None, |p| {
            let wildcard = if after {
                info.is_wildcard_after()
            } else {
                info.is_wildcard_before()
            };
            if p.lex.next_if(ch(b'*'))? {
                if after {
                    info.add_after_set(WILDCARD);
                } else {
                    info.add_before_set(WILDCARD);
                }
            } else if !wildcard {
                let t = p.lex.expect(token::IDENT)?;
                let name = p.lex.text(t);
                if after {
                    info.add_after_set(name);
                } else {
                    info.add_before_set(name);
                }
            }
            Ok(())
        })
    }
}
