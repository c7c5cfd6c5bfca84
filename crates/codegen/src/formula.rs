//! Derivative formulas: Rust expressions over the gradient, the operator's inputs and outputs,
//! and helper functions, read token by token to find what they use.
//!
//! Note [Formula variables]
//! A formula of `derivatives.yaml` is a Rust expression. The generator does not parse Rust; it
//! splits the text into tokens and looks at identifiers: one named after an argument or an
//! output of the operator (`self`, `other`, `result`, `indices`), or `grad`, `grads`,
//! `grad_input_mask`, is a variable of the formula, unless it is a path segment (after `::`),
//! a method or field name (after `.`), or called (`name(`). `NAME.sizes()` (and `strides()`,
//! `dim()`, `numel()`, `scalar_type()`, `device()`, `storage_offset()`) of a tensor only needs
//! that value, not the tensor: the node saves the value (`self_sizes`) and the formula reads it,
//! as PyTorch's codegen saves `self_sym_sizes`. `to_args_sizes(tensors)` and
//! `to_args_scalartypes(tensors)` do the same for a tensor list. `self` is a Rust keyword: it is
//! renamed `self_`, as in the generated API.

use std::collections::BTreeSet;

/// One token of a formula.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Token {
    /// An identifier (raw identifiers keep their `r#`).
    Ident(String),
    /// Anything else, as written (a number, a string literal, a punctuation character or `::`).
    Other(String),
}

impl Token {
    fn text(&self) -> &str {
        match self {
            Token::Ident(s) | Token::Other(s) => s,
        }
    }

    fn is(&self, s: &str) -> bool {
        self.text() == s
    }
}

/// Splits a formula into tokens; whitespace is dropped (the formula is re-emitted with single
/// spaces where two identifiers or numbers meet).
pub(crate) fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            if c == 'r' && chars.get(i + 1) == Some(&'#') {
                i += 2;
            }
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Token::Ident(chars[start..i].iter().collect()));
        } else if c.is_ascii_digit() {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric()
                    || chars[i] == '_'
                    || (chars[i] == '.' && chars.get(i + 1).is_some_and(|n| n.is_ascii_digit())))
            {
                i += 1;
            }
            out.push(Token::Other(chars[start..i].iter().collect()));
        } else if c == '"' {
            let start = i;
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            if i >= chars.len() {
                return Err(format!("unterminated string in `{text}`"));
            }
            i += 1;
            out.push(Token::Other(chars[start..i].iter().collect()));
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push(Token::Other("::".into()));
            i += 2;
        } else {
            out.push(Token::Other(c.to_string()));
            i += 1;
        }
    }
    Ok(out)
}

/// Writes tokens back as Rust source.
pub(crate) fn render(tokens: &[Token]) -> String {
    let mut s = String::new();
    let mut prev_word = false;
    for t in tokens {
        let word = matches!(t, Token::Ident(_))
            || t.text()
                .starts_with(|c: char| c.is_ascii_digit() || c == '"');
        if word && prev_word {
            s.push(' ');
        }
        s.push_str(t.text());
        prev_word = word;
    }
    s
}

/// A value of a tensor a formula reads instead of the tensor (Note [Formula variables]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Derived {
    Sizes,
    Strides,
    StorageOffset,
    Dim,
    Numel,
    ScalarType,
    Device,
    /// `to_args_sizes(list)`.
    ListSizes,
    /// `to_args_scalartypes(list)`.
    ListScalarTypes,
}

impl Derived {
    fn of_method(m: &str) -> Option<Derived> {
        Some(match m {
            "sizes" | "sym_sizes" => Derived::Sizes,
            "strides" | "sym_strides" => Derived::Strides,
            "storage_offset" => Derived::StorageOffset,
            "dim" => Derived::Dim,
            "numel" | "sym_numel" => Derived::Numel,
            "scalar_type" | "dtype" => Derived::ScalarType,
            "device" => Derived::Device,
            _ => return None,
        })
    }

    /// The suffix of the saved field (`self_sizes`).
    pub(crate) fn suffix(self) -> &'static str {
        match self {
            Derived::Sizes => "sizes",
            Derived::Strides => "strides",
            Derived::StorageOffset => "storage_offset",
            Derived::Dim => "dim",
            Derived::Numel => "numel",
            Derived::ScalarType => "scalar_type",
            Derived::Device => "device",
            Derived::ListSizes => "args_sizes",
            Derived::ListScalarTypes => "args_scalartypes",
        }
    }
}

/// What a formula uses, and its text with derived values and `self` renamed.
#[derive(Debug, Clone, Default)]
pub(crate) struct Analysis {
    /// The formula as emitted.
    pub code: String,
    /// Variables used whole (their schema names: `self`, `result`, `grad`).
    pub vars: BTreeSet<String>,
    /// Values derived from a variable: (schema name, which value).
    pub derived: BTreeSet<(String, Derived)>,
}

/// The Rust name of a formula variable (`self` -> `self_`, keywords raw).
pub(crate) fn var_ident(name: &str) -> String {
    crate::types::rust_ident(name)
}

/// The Rust name of a derived value (`self_sizes`).
pub(crate) fn derived_ident(name: &str, d: Derived) -> String {
    format!("{}_{}", name.trim_start_matches("r#"), d.suffix())
}

/// Analyses `text`: `is_var` says which identifiers are variables, `is_list` which of those
/// are tensor lists, `is_tensor` which are tensors (so `.sizes()` of them is a derived value).
pub(crate) fn analyse(
    text: &str,
    is_var: &dyn Fn(&str) -> bool,
    is_tensor: &dyn Fn(&str) -> bool,
    is_list: &dyn Fn(&str) -> bool,
) -> Result<Analysis, String> {
    let toks = tokenize(text)?;
    let mut out: Vec<Token> = Vec::with_capacity(toks.len());
    let mut a = Analysis::default();
    let mut i = 0;
    while i < toks.len() {
        let t = &toks[i];
        let Token::Ident(name) = t else {
            out.push(t.clone());
            i += 1;
            continue;
        };
        let prev = out.last();
        let after_dot = prev.is_some_and(|p| p.is("."));
        let after_path = prev.is_some_and(|p| p.is("::"));
        let next = toks.get(i + 1);
        let macro_call =
            next.is_some_and(|n| n.is("!")) && !toks.get(i + 2).is_some_and(|n| n.is("="));
        let called = next.is_some_and(|n| n.is("(") || n.is("::")) || macro_call;
        // `to_args_sizes(list)` / `to_args_scalartypes(list)`.
        if !after_dot && !after_path && (name == "to_args_sizes" || name == "to_args_scalartypes") {
            if let (Some(Token::Ident(arg)), Some(close)) = (toks.get(i + 2), toks.get(i + 3)) {
                if next.is_some_and(|n| n.is("(")) && close.is(")") && is_list(arg) {
                    let d = if name == "to_args_sizes" {
                        Derived::ListSizes
                    } else {
                        Derived::ListScalarTypes
                    };
                    a.derived.insert((arg.clone(), d));
                    out.push(Token::Ident(derived_ident(arg, d)));
                    i += 4;
                    continue;
                }
            }
            return Err(format!(
                "`{name}` takes one tensor-list argument of the operator in `{text}`"
            ));
        }
        if after_dot || after_path || called || !is_var(name) {
            out.push(t.clone());
            i += 1;
            continue;
        }
        // `NAME.method()` of a tensor: a derived value.
        if is_tensor(name) {
            if let (Some(dot), Some(Token::Ident(m)), Some(open), Some(close)) = (
                toks.get(i + 1),
                toks.get(i + 2),
                toks.get(i + 3),
                toks.get(i + 4),
            ) {
                if dot.is(".") && open.is("(") && close.is(")") {
                    if let Some(d) = Derived::of_method(m) {
                        a.derived.insert((name.clone(), d));
                        out.push(Token::Ident(derived_ident(name, d)));
                        i += 5;
                        continue;
                    }
                }
            }
        }
        a.vars.insert(name.clone());
        out.push(Token::Ident(var_ident(name)));
        i += 1;
    }
    a.code = render(&out);
    Ok(a)
}

/// `text` with the variables `rename` maps renamed (the same identifiers as [`analyse`] reads
/// as variables: not after `.` or `::`, not called), written back as Rust source.
pub(crate) fn substitute(
    text: &str,
    rename: &dyn Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let toks = tokenize(text)?;
    let mut out: Vec<Token> = Vec::with_capacity(toks.len());
    for (i, t) in toks.iter().enumerate() {
        let renamed = match t {
            Token::Ident(name) => {
                let prev = out.last();
                let after = prev.is_some_and(|p| p.is(".") || p.is("::"));
                let next = toks.get(i + 1);
                let called = next.is_some_and(|n| n.is("(") || n.is("::") || n.is("!"));
                if after || called {
                    None
                } else {
                    rename(name)
                }
            }
            Token::Other(_) => None,
        };
        out.push(match renamed {
            Some(n) => Token::Ident(n),
            None => t.clone(),
        });
    }
    Ok(render(&out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &str) -> Analysis {
        let vars = ["self", "other", "result", "grad", "tensors", "dim", "alpha"];
        analyse(
            text,
            &|n| vars.contains(&n),
            &|n| ["self", "other", "result", "grad"].contains(&n),
            &|n| n == "tensors",
        )
        .unwrap()
    }

    #[test]
    fn variables_and_derived_values() {
        let a = run("sum_to(&maybe_multiply(grad, alpha)?, self.sizes())");
        assert_eq!(a.code, "sum_to(&maybe_multiply(grad,alpha)?,self_sizes)");
        assert_eq!(
            a.vars.iter().map(String::as_str).collect::<Vec<_>>(),
            ["alpha", "grad"]
        );
        assert_eq!(
            a.derived.iter().cloned().collect::<Vec<_>>(),
            [("self".to_owned(), Derived::Sizes)]
        );
    }

    #[test]
    fn calls_paths_and_methods_are_not_variables() {
        // `dim(` is a call, `x.dim` a method of another value, `ops::other` a path.
        let a = run("dim(grad).other(ops::other, self.neg()?, 1.5, \"s\")");
        assert_eq!(
            a.vars.iter().map(String::as_str).collect::<Vec<_>>(),
            ["grad", "self"]
        );
        assert!(a.code.contains("self_.neg()"), "{}", a.code);
        assert!(a.code.contains("1.5"), "{}", a.code);
    }

    #[test]
    fn substitution_renames_variables_only() {
        let s = substitute("mul(grad, &self.sgn()?).grad", &|v| match v {
            "grad" => Some("self_t".into()),
            "self" => Some("self_p".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(s, "mul(self_t,&self_p.sgn()?).grad");
    }

    #[test]
    fn lists() {
        let a = run("cat_tensors_backward(grad, to_args_sizes(tensors), dim)");
        assert_eq!(a.code, "cat_tensors_backward(grad,tensors_args_sizes,dim)");
        assert!(a
            .derived
            .contains(&("tensors".to_owned(), Derived::ListSizes)));
        assert!(!a.vars.contains("tensors"));
    }
}
