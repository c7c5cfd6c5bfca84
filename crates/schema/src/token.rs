//! Token kinds of PyTorch's TorchScript lexer, as far as schema strings can
//! reach them.
//!
//! Note [Why the whole keyword table]
//! The schema parser reuses the TorchScript lexer, so `in`, `if`, `True`,
//! `is not`, `**=` ... are tokens, not identifiers, and they show up by name
//! in error messages ("expected ident but found 'in' here:").  To reject the
//! same inputs and name the same token, we keep PyTorch's full table of
//! multi-character tokens, even the ones no valid schema can contain.

/// A token kind: single-character tokens are their byte, the others are the
/// constants below (all >= 256, like PyTorch's `TokenKind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Kind(pub(crate) u16);

impl Kind {
    pub(crate) const fn ch(c: u8) -> Kind {
        Kind(c as u16)
    }
}

macro_rules! kinds {
    ($($name:ident = $val:expr, $text:expr;)*) => {
        $(pub(crate) const $name: Kind = Kind($val);)*
        /// The name PyTorch's `kindToString` gives a multi-character kind.
        fn multi_name(k: Kind) -> &'static str {
            match k.0 {
                $($val => $text,)*
                _ => "unknown",
            }
        }
    };
}

kinds! {
    EOF = 256, "eof";
    WHITESPACE = 257, "whitespace";
    WHITESPACE_EOF = 258, "whitespace_eof";
    NUMBER = 259, "number";
    NEWLINE = 260, "newline";
    INDENT = 261, "indent";
    DEDENT = 262, "dedent";
    DEF = 263, "def";
    EQUIVALENT = 264, "equivalent";
    IDENT = 265, "ident";
    STRINGLITERAL = 266, "string_literal";
    IF = 267, "if";
    ELSE = 268, "else";
    ELIF = 269, "elif";
    WHILE = 270, "while";
    RETURN = 271, "return";
    IS = 272, "is";
    ISNOT = 273, "is not";
    NE = 274, "ne";
    EQ = 275, "eq";
    LE = 276, "le";
    GE = 277, "ge";
    FLOOR_DIV = 278, "floordiv";
    TRUE = 279, "True";
    FALSE = 280, "False";
    NONE = 281, "None";
    AND = 282, "and";
    OR = 283, "or";
    NOT = 284, "not";
    LSHIFT = 285, "<<";
    RSHIFT = 286, ">>";
    PLUS_EQ = 287, "+=";
    MINUS_EQ = 288, "-=";
    TIMES_EQ = 289, "*=";
    DIV_EQ = 290, "/=";
    MOD_EQ = 291, "%=";
    BIT_OR_EQ = 292, "|=";
    BIT_AND_EQ = 293, "&=";
    BIT_XOR_EQ = 294, "^=";
    LSHIFT_EQ = 295, "<<=";
    RSHIFT_EQ = 296, ">>=";
    POW_EQ = 297, "**=";
    GLOBAL = 298, "global";
    FOR = 299, "for";
    IN = 300, "in";
    NOTIN = 301, "not in";
    POW = 302, "pow operator";
    ARROW = 303, "arrow";
    TYPE_COMMENT = 304, "type comment";
    RAISE = 305, "raise";
    ASSERT = 306, "assert";
    DOTS = 307, "dots";
    BREAK = 308, "break";
    CONTINUE = 309, "continue";
    DELETE = 310, "del";
    PASS = 311, "pass";
    CLASS_DEF = 312, "class";
    IMPORT = 313, "import";
    WITH = 314, "with";
    AS = 315, "as";
    ELLIPSIS = 316, "Ellipsis";
    NONE_TYPE = 317, "NoneType";
}

/// The text PyTorch uses for a kind in "expected X but found 'Y'".
pub(crate) fn kind_name(k: Kind) -> std::borrow::Cow<'static, str> {
    if k.0 < 256 {
        // Single-byte kinds are named by the byte itself.  Only ASCII bytes
        // become kinds (see `Lexer::invalid_token`).
        std::borrow::Cow::Owned(char::from(k.0 as u8).to_string())
    } else {
        std::borrow::Cow::Borrowed(multi_name(k))
    }
}

/// PyTorch's `valid_single_char_tokens`.
pub(crate) fn is_single_char_token(c: u8) -> bool {
    matches!(
        c,
        b'+' | b'-'
            | b'*'
            | b'/'
            | b'%'
            | b'@'
            | b'('
            | b')'
            | b'['
            | b']'
            | b':'
            | b','
            | b'='
            | b'{'
            | b'}'
            | b'>'
            | b'<'
            | b'.'
            | b'?'
            | b'!'
            | b'&'
            | b'^'
            | b'|'
            | b'~'
    )
}

#[cfg(test)]
/// Every keyword an identifier-shaped word can be.  (`is not` and `not in`
/// are handled by the lexer, since they contain a space.)
const KEYWORDS: &[(&[u8], Kind)] = &[
    (b"def", DEF),
    (b"del", DELETE),
    (b"if", IF),
    (b"is", IS),
    (b"in", IN),
    (b"import", IMPORT),
    (b"else", ELSE),
    (b"elif", ELIF),
    (b"while", WHILE),
    (b"with", WITH),
    (b"return", RETURN),
    (b"raise", RAISE),
    (b"True", TRUE),
    (b"False", FALSE),
    (b"None", NONE),
    (b"NoneType", NONE_TYPE),
    (b"and", AND),
    (b"assert", ASSERT),
    (b"as", AS),
    (b"or", OR),
    (b"not", NOT),
    (b"global", GLOBAL),
    (b"for", FOR),
    (b"break", BREAK),
    (b"continue", CONTINUE),
    (b"class", CLASS_DEF),
    (b"pass", PASS),
    (b"Ellipsis", ELLIPSIS),
];

/// Bit `c - b'A'` of entry `n` is set when some keyword of `n` bytes starts
/// with byte `c` (keywords are 2 to 8 bytes long and start with a letter).
const KEYWORD_STARTS: [u64; 9] = {
    let words: [&[u8]; 28] = [
        b"def",
        b"del",
        b"if",
        b"is",
        b"in",
        b"import",
        b"else",
        b"elif",
        b"while",
        b"with",
        b"return",
        b"raise",
        b"True",
        b"False",
        b"None",
        b"NoneType",
        b"and",
        b"assert",
        b"as",
        b"or",
        b"not",
        b"global",
        b"for",
        b"break",
        b"continue",
        b"class",
        b"pass",
        b"Ellipsis",
    ];
    let mut t = [0u64; 9];
    let mut i = 0;
    while i < words.len() {
        t[words[i].len()] |= 1 << (words[i][0] - b'A');
        i += 1;
    }
    t
};

/// A cheap test that rules out almost every identifier of a schema before
/// [`keyword`]: no keyword has this length and first byte.
#[inline(always)]
pub(crate) fn may_be_keyword(word: &[u8]) -> bool {
    match (KEYWORD_STARTS.get(word.len()), word.first()) {
        (Some(&mask), Some(&c)) => c >= b'A' && c - b'A' < 64 && mask >> (c - b'A') & 1 != 0,
        _ => false,
    }
}

/// The keyword an identifier-shaped word is, if any.
///
/// Note [Keyword lookup by length and first byte]
/// Every identifier of a schema goes through here, and nearly none is a
/// keyword.  Switching on the length and then the first byte leaves at most
/// two candidates to compare, and rejects `Tensor`, `self`, `int` ... after
/// two jumps (a match on the byte strings alone compares them one by one).
/// `KEYWORDS` is the table this must agree with (see the tests).
pub(crate) fn keyword(word: &[u8]) -> Option<Kind> {
    let &first = word.first()?;
    let (text, kind): (&[u8], Kind) = match (word.len(), first) {
        (2, b'i') => match word[1] {
            b'f' => (b"if", IF),
            b's' => (b"is", IS),
            _ => (b"in", IN),
        },
        (2, b'a') => (b"as", AS),
        (2, b'o') => (b"or", OR),
        (3, b'd') => match word[2] {
            b'f' => (b"def", DEF),
            _ => (b"del", DELETE),
        },
        (3, b'a') => (b"and", AND),
        (3, b'n') => (b"not", NOT),
        (3, b'f') => (b"for", FOR),
        (4, b'e') => match word[2] {
            b's' => (b"else", ELSE),
            _ => (b"elif", ELIF),
        },
        (4, b'w') => (b"with", WITH),
        (4, b'T') => (b"True", TRUE),
        (4, b'N') => (b"None", NONE),
        (4, b'p') => (b"pass", PASS),
        (5, b'w') => (b"while", WHILE),
        (5, b'r') => (b"raise", RAISE),
        (5, b'F') => (b"False", FALSE),
        (5, b'b') => (b"break", BREAK),
        (5, b'c') => (b"class", CLASS_DEF),
        (6, b'r') => (b"return", RETURN),
        (6, b'i') => (b"import", IMPORT),
        (6, b'a') => (b"assert", ASSERT),
        (6, b'g') => (b"global", GLOBAL),
        (8, b'N') => (b"NoneType", NONE_TYPE),
        (8, b'E') => (b"Ellipsis", ELLIPSIS),
        (8, b'c') => (b"continue", CONTINUE),
        _ => return None,
    };
    (word == text).then_some(kind)
}

#[cfg(test)]
type Entry = (&'static [u8], Kind);

/// Multi-character operator tokens starting with `first`: PyTorch's table,
/// which the lexer's `operator_token` spells out (and is tested against).
#[cfg(test)]
pub(crate) fn operator_candidates(first: u8) -> &'static [Entry] {
    match first {
        b'<' => &[
            (b"<=>", EQUIVALENT),
            (b"<=", LE),
            (b"<<", LSHIFT),
            (b"<<=", LSHIFT_EQ),
        ],
        b'!' => &[(b"!=", NE)],
        b'=' => &[(b"==", EQ)],
        b'>' => &[(b">=", GE), (b">>", RSHIFT), (b">>=", RSHIFT_EQ)],
        b'/' => &[(b"//", FLOOR_DIV), (b"/=", DIV_EQ)],
        b'+' => &[(b"+=", PLUS_EQ)],
        b'-' => &[(b"-=", MINUS_EQ), (b"->", ARROW)],
        b'*' => &[(b"*=", TIMES_EQ), (b"**=", POW_EQ), (b"**", POW)],
        b'%' => &[(b"%=", MOD_EQ)],
        b'|' => &[(b"|=", BIT_OR_EQ)],
        b'&' => &[(b"&=", BIT_AND_EQ)],
        b'^' => &[(b"^=", BIT_XOR_EQ)],
        b'#' => &[(b"# type:", TYPE_COMMENT)],
        b'.' => &[(b"...", DOTS)],
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords() {
        assert_eq!(keyword(b"None"), Some(NONE));
        assert_eq!(keyword(b"NoneType"), Some(NONE_TYPE));
        assert_eq!(keyword(b"Nonex"), None);
        assert_eq!(keyword(b"Tensor"), None);
        assert_eq!(keyword(b"in"), Some(IN));
    }

    /// The table lookup `keyword` must agree with.
    fn keyword_by_table(word: &[u8]) -> Option<Kind> {
        KEYWORDS
            .iter()
            .find(|(k, _)| *k == word)
            .map(|&(_, kind)| kind)
    }

    #[test]
    fn keyword_agrees_with_the_table() {
        for &(k, kind) in KEYWORDS {
            assert_eq!(keyword(k), Some(kind), "{}", String::from_utf8_lossy(k));
            // Same length and first byte, one byte changed anywhere.
            for i in 0..k.len() {
                let mut w = k.to_vec();
                for c in [b'a', b'z', b'_', b'0', b'N'] {
                    w[i] = c;
                    assert_eq!(keyword(&w), keyword_by_table(&w), "{w:?}");
                }
            }
        }
        for w in ["", "i", "id", "io", "iff", "Tensor", "None_", "NoneTyp"] {
            assert_eq!(keyword(w.as_bytes()), None, "{w}");
        }
    }

    #[test]
    fn keyword_starts_match_the_table() {
        assert_eq!(KEYWORDS.len(), 28);
        for &(k, _) in KEYWORDS {
            assert!(may_be_keyword(k));
        }
        for w in ["Tensor", "self", "int", "", "_", "a", "z", "None_x"] {
            assert!(!may_be_keyword(w.as_bytes()), "{w}");
        }
    }

    proptest::proptest! {
        #[test]
        fn keyword_agrees_with_the_table_on_words(w in "[a-gi-pr-tw-zA-Z_]{0,9}") {
            proptest::prop_assert_eq!(keyword(w.as_bytes()), keyword_by_table(w.as_bytes()));
            if keyword(w.as_bytes()).is_some() {
                proptest::prop_assert!(may_be_keyword(w.as_bytes()));
            }
        }
    }

    #[test]
    fn names() {
        assert_eq!(kind_name(Kind::ch(b'(')), "(");
        assert_eq!(kind_name(Kind::ch(b'$')), "$");
        assert_eq!(kind_name(IDENT), "ident");
        assert_eq!(kind_name(EQ), "eq");
        assert_eq!(kind_name(ISNOT), "is not");
        assert_eq!(kind_name(NONE_TYPE), "NoneType");
    }
}
