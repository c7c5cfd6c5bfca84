//! Schema types to Rust types (see Note [Argument families] in the dispatcher).

use switchboard_schema::{Argument, Type};

/// How one schema argument appears in generated Rust code.
#[derive(Debug, Clone, PartialEq)]
pub struct RustArg {
    /// The parameter name (`self_` for `self`, raw identifiers for keywords).
    pub name: String,
    /// The dispatcher's argument family (`Tensor`, `Vec<i64>`, `Option<Tensor>`).
    pub family: String,
    /// The type a kernel receives (`&Tensor`, `&[i64]`, `Option<&Tensor>`).
    pub param: String,
}

const KEYWORDS: &[&str] = &[
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for",
    "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return",
    "static", "struct", "super", "trait", "true", "type", "unsafe", "use", "where", "while",
    "async", "await", "dyn", "abstract", "become", "box", "do", "final", "macro", "override",
    "priv", "typeof", "unsized", "virtual", "yield", "try", "gen",
];

/// A Rust identifier for a schema name: keywords become raw identifiers (`r#where`), `self`
/// (which cannot be raw) becomes `self_`, and PyTorch's capitalized names (`native_group_norm`'s
/// `N`, `C`, `HxW`) are lower-cased, as Rust names variables (`n`, `c`, `hxw`).
pub fn rust_ident(name: &str) -> String {
    match name {
        "self" | "Self" | "super" | "crate" => format!("{name}_"),
        n if KEYWORDS.contains(&n) => format!("r#{n}"),
        n if n.bytes().any(|b| b.is_ascii_uppercase()) => rust_ident(&n.to_ascii_lowercase()),
        n => n.to_owned(),
    }
}

fn scalar_family(t: &Type) -> Option<(&'static str, &'static str)> {
    Some(match t {
        Type::Tensor => ("Tensor", "&Tensor"),
        Type::Int | Type::SymInt => ("i64", "i64"),
        Type::Float => ("f64", "f64"),
        Type::Bool => ("bool", "bool"),
        Type::Scalar => ("Scalar", "Scalar"),
        Type::Str => ("String", "&str"),
        Type::ScalarType => ("ScalarType", "ScalarType"),
        Type::Layout => ("Layout", "Layout"),
        Type::Device => ("Device", "Device"),
        Type::MemoryFormat => ("MemoryFormat", "MemoryFormat"),
        Type::Generator => ("Generator", "&Generator"),
        _ => return None,
    })
}

fn family_of(t: &Type) -> Option<(String, String)> {
    match t {
        Type::List(e) => match &**e {
            Type::Tensor => Some(("Vec<Tensor>".into(), "&[Tensor]".into())),
            Type::Optional(inner) if **inner == Type::Tensor => {
                Some(("Vec<Option<Tensor>>".into(), "&[Option<Tensor>]".into()))
            }
            Type::Int | Type::SymInt => Some(("Vec<i64>".into(), "&[i64]".into())),
            Type::Float => Some(("Vec<f64>".into(), "&[f64]".into())),
            Type::Bool => Some(("Vec<bool>".into(), "&[bool]".into())),
            _ => None,
        },
        Type::Optional(e) => {
            let (f, p) = family_of(e)?;
            Some((format!("Option<{f}>"), format!("Option<{p}>")))
        }
        t => scalar_family(t).map(|(f, p)| (f.to_owned(), p.to_owned())),
    }
}

impl RustArg {
    /// The Rust form of a schema argument; `Err` names what is unsupported.
    pub fn of(a: &Argument) -> Result<RustArg, String> {
        let (family, param) = family_of(a.ty())
            .ok_or_else(|| format!("argument `{}`: unsupported type {}", a.name(), a.ty()))?;
        Ok(RustArg {
            name: rust_ident(a.name()),
            family,
            param,
        })
    }
}

/// The Rust type of a schema's returns: `()`, one type, or a tuple.
pub fn return_type(returns: &[Argument]) -> Result<String, String> {
    let one = |a: &Argument| -> Result<String, String> {
        Ok(match a.ty() {
            Type::Tensor => "Tensor",
            Type::List(e) if **e == Type::Tensor => "Vec<Tensor>",
            Type::Int | Type::SymInt => "i64",
            Type::Float => "f64",
            Type::Bool => "bool",
            Type::Scalar => "Scalar",
            Type::ScalarType => "ScalarType",
            t => return Err(format!("unsupported return type {t}")),
        }
        .to_owned())
    };
    match returns {
        [] => Ok("()".into()),
        [r] => one(r),
        rs => {
            let parts: Result<Vec<String>, String> = rs.iter().map(one).collect();
            Ok(format!("({})", parts?.join(", ")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_schema::FunctionSchema;

    #[test]
    fn families() {
        let s = FunctionSchema::parse(
            "f(Tensor self, Tensor? w, Tensor[] ts, int[1]? dim, SymInt[2] k, str? m, Generator? g, float where) -> (Tensor, Tensor)",
        )
        .unwrap();
        let a: Vec<RustArg> = s
            .arguments()
            .iter()
            .map(|a| RustArg::of(a).unwrap())
            .collect();
        let p: Vec<&str> = a.iter().map(|a| a.param.as_str()).collect();
        assert_eq!(
            p,
            [
                "&Tensor",
                "Option<&Tensor>",
                "&[Tensor]",
                "Option<&[i64]>",
                "&[i64]",
                "Option<&str>",
                "Option<&Generator>",
                "f64"
            ]
        );
        assert_eq!(a[0].name, "self_");
        assert_eq!(a[7].name, "r#where");
        assert_eq!(a[3].family, "Option<Vec<i64>>");
        assert_eq!(return_type(s.returns()).unwrap(), "(Tensor, Tensor)");
    }
}
