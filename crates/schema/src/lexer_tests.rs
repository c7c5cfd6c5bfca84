//! Lexer tests, and the comparison with the queue-based lexer it replaced
//! (Note [One token of state]).

use proptest::prelude::*;

use super::*;
use crate::lexer_reference;

fn kinds(src: &str) -> Vec<(String, String)> {
    let mut l = Lexer::new(src).unwrap();
    let mut out = Vec::new();
    loop {
        let t = l.next().unwrap();
        out.push((token::kind_name(t.kind).into_owned(), l.text(t).to_string()));
        if t.kind == token::EOF {
            break;
        }
    }
    out
}

fn names(src: &str) -> Vec<String> {
    kinds(src).into_iter().map(|(k, _)| k).collect()
}

#[test]
fn basic_tokens() {
    assert_eq!(
        names("foo(Tensor x) -> Tensor"),
        ["ident", "(", "ident", "ident", ")", "arrow", "ident", "eof"]
    );
    assert_eq!(names("a=1.5e-3j"), ["ident", "=", "number", "eof"]);
    assert_eq!(names("x==None"), ["ident", "eq", "None", "eof"]);
    assert_eq!(
        names("is not Nonex ..."),
        ["is not", "ident", "dots", "eof"]
    );
    assert_eq!(names("foo.1"), ["ident", "number", "eof"]);
    assert_eq!(names("._x .5"), [".", "ident", "number", "eof"]);
    assert_eq!(kinds("\"a\\\"b\" 'c'")[0].1, "\"a\\\"b\"");
}

#[test]
fn newlines_and_indentation() {
    assert_eq!(names("foo(\n  x\n)"), ["ident", "(", "ident", ")", "eof"]);
    assert_eq!(
        names("foo ->\n  x"),
        ["ident", "arrow", "indent", "ident", "eof"]
    );
    assert_eq!(names("foo\n"), ["ident", "newline", "eof"]);
    assert_eq!(names("x # comment"), ["ident", "eof"]);
    assert_eq!(
        names("x # type: int"),
        ["ident", "type comment", "ident", "eof"]
    );
    assert_eq!(
        names("a\n b\n  c\n d\nx"),
        [
            "ident", "indent", "ident", "indent", "ident", "newline", "dedent", "ident", "newline",
            "dedent", "ident", "eof"
        ]
    );
    assert_eq!(
        names("a\n b\n  c\nx"),
        [
            "ident", "indent", "ident", "indent", "ident", "newline", "dedent", "dedent", "ident",
            "eof"
        ]
    );
}

#[test]
fn lookahead_sees_pending_dedents() {
    let mut l = Lexer::new("a\n b\n  c\nx").unwrap();
    for _ in 0..5 {
        l.next().unwrap();
    }
    assert_eq!(l.cur().kind, token::NEWLINE);
    assert_eq!(l.lookahead().unwrap().kind, token::DEDENT);
    l.next().unwrap();
    assert_eq!(l.lookahead().unwrap().kind, token::DEDENT);
    l.next().unwrap();
    assert_eq!(l.lookahead().unwrap().kind, token::IDENT);
}

#[test]
fn invalid_token_names_the_raw_byte() {
    let mut l = Lexer::new("foo $").unwrap();
    let e = l.next().unwrap_err();
    assert_eq!(e.first_line(), "expected a valid token but found ' ' here:");
    let mut l = Lexer::new("foo$").unwrap();
    let e = l.next().unwrap_err();
    assert_eq!(
        e.to_string(),
        "expected a valid token but found '$' here:\nfoo$\n   ~ <--- HERE\n"
    );
}

#[test]
fn bad_dedent() {
    let mut l = Lexer::new("  a\nb").unwrap();
    let e = l.next().unwrap_err();
    assert_eq!(e.first_line(), "invalid indent level 0:");
}

/// The longest-match walk over PyTorch's token table that `operator_token`
/// spells out.
fn operator_token_by_table(s: &[u8]) -> Option<(Kind, usize)> {
    let first = s[0];
    let mut best = token::is_single_char_token(first).then_some((Kind::ch(first), 1));
    for &(text, kind) in token::operator_candidates(first) {
        if s.starts_with(text) && best.is_none_or(|(_, n)| text.len() > n) {
            best = Some((kind, text.len()));
        }
    }
    best
}

#[test]
fn operator_tokens_agree_with_the_table() {
    let alphabet = b"<>=!/+-*%|&^#.@()[]:,{}?~ atype\"$";
    let mut inputs: Vec<Vec<u8>> = vec![b"# type:".to_vec(), b"# type".to_vec(), b"...".to_vec()];
    for &a in alphabet {
        inputs.push(vec![a]);
        for &b in alphabet {
            inputs.push(vec![a, b]);
            for &c in alphabet {
                inputs.push(vec![a, b, c]);
            }
        }
    }
    for s in inputs {
        assert_eq!(operator_token(&s), operator_token_by_table(&s), "{s:?}");
    }
}

/// One step of a lexer: the token it returned (or the error it failed with),
/// and what `cur` is afterwards.
type Step = Result<(Token, Token), String>;

/// Drives a lexer (the new one or the queue-based reference, which share their
/// method names but not a type): for each entry of `peeks`, optionally asks for
/// the lookahead, then takes a token; stops at EOF or the first error.
macro_rules! drive {
    ($lexer:expr, $peeks:expr) => {{
        let peeks: &[bool] = $peeks;
        match $lexer {
            Err(e) => vec![Err(e.to_string())],
            Ok(mut l) => {
                let mut out: Vec<Step> = Vec::new();
                for i in 0.. {
                    if peeks.get(i % peeks.len().max(1)).copied().unwrap_or(false) {
                        if let Err(e) = l.lookahead() {
                            out.push(Err(e.to_string()));
                            break;
                        }
                    }
                    match l.next() {
                        Ok(t) => out.push(Ok((t, l.cur()))),
                        Err(e) => {
                            out.push(Err(e.to_string()));
                            break;
                        }
                    }
                    if out
                        .last()
                        .is_some_and(|s| matches!(s, Ok((t, _)) if t.kind == token::EOF))
                    {
                        break;
                    }
                }
                out
            }
        }
    }};
}

/// Runs the new lexer (see `drive!`).
fn run_new(src: &str, peeks: &[bool]) -> Vec<Step> {
    drive!(Lexer::new(src), peeks)
}

/// The same with the queue-based reference lexer.
fn run_reference(src: &str, peeks: &[bool]) -> Vec<Step> {
    drive!(lexer_reference::Lexer::new(src), peeks)
}

fn same_tokens(src: &str, peeks: &[bool]) {
    assert_eq!(run_new(src, peeks), run_reference(src, peeks), "{src:?}");
}

/// Every input of the conformance files (`valid*.txt` lines, the `input`
/// of `invalid*.jsonl` and `roundtrip*.jsonl`), if the folder is there.
fn conformance_inputs() -> Vec<String> {
    let dir = switchboard_testkit::conformance_dir().join("schemas");
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return out;
    };
    for p in entries.filter_map(Result::ok).map(|e| e.path()) {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        if name.ends_with(".txt") {
            out.extend(text.lines().map(String::from));
        } else if name.ends_with(".jsonl") {
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                let v: serde_json::Value = serde_json::from_str(line).unwrap();
                if let Some(s) = v["input"].as_str() {
                    out.push(s.to_string());
                }
            }
        }
    }
    out
}

const EXTRA: &[&str] = &[
    "",
    "\n",
    "  a\nb",
    "a\n b\n  c\n d\nx",
    "a\n b\n  c\nx",
    "foo(Tensor x) ->\n  Tensor",
    "foo(Tensor x) -> Tensor\n",
    "foo(Tensor x) -> Tensor  # c\n  \n",
    "foo(\\\n x)",
    "x \\\ny",
    "a # type: int\n b",
    ")\n a\nb",
    "'''a\nb''' \"c",
    "0x1p3 0x.8 0x 1e5j .5 ..",
    "<<= >>= **= **  != <=> //= -> -= ... . é $",
    "is not  not in  isnot  is  not",
];

#[test]
fn same_tokens_as_the_reference_lexer() {
    let inputs = conformance_inputs();
    // The public conformance files hold more than a thousand inputs; an
    // empty list means the folder is missing (then only EXTRA is compared).
    assert!(inputs.is_empty() || inputs.len() > 1000, "{}", inputs.len());
    for src in inputs
        .iter()
        .map(String::as_str)
        .chain(EXTRA.iter().copied())
    {
        for peeks in [&[][..], &[true], &[false, true], &[true, false, false]] {
            same_tokens(src, peeks);
        }
    }
}

proptest! {
    #[test]
    fn same_tokens_on_schema_like_strings(
        src in "[aNe_Tsio:.(\\[\\])\\-> ,*!|?=0-9'\"\\\\#\n\t]{0,40}",
        peeks in proptest::collection::vec(any::<bool>(), 1..6),
    ) {
        same_tokens(&src, &peeks);
    }

    #[test]
    fn same_tokens_on_indented_lines(
        lines in proptest::collection::vec(("[ ]{0,4}", "[a(),]{0,3}"), 0..6),
        peeks in proptest::collection::vec(any::<bool>(), 1..4),
    ) {
        let src: String = lines.iter().map(|(i, t)| format!("{i}{t}\n")).collect();
        same_tokens(&src, &peeks);
    }
}
