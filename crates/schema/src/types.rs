//! The types that appear in operator schemas.

use std::fmt;

/// A schema type, as PyTorch's `c10::Type` hierarchy models the ones a
/// schema string can spell.
///
/// `Display` prints the schema spelling (`Tensor?`, `int[]`, `Dict(str, t)`),
/// [`Type::annotation_str`] the Python spelling PyTorch's `str(type)` gives
/// (`Optional[Tensor]`, `List[int]`, `number`).
///
/// Note [Real and fake types]
/// PyTorch keeps two types per argument: the *real* one (`ScalarType`,
/// `SymInt[]`) and a *fake* one where `SymInt`, `ScalarType`, `Layout` and
/// `MemoryFormat` are plain `int` (see [`Type::fake`]).  Arguments store the
/// real type; the fake one drives default-value parsing.  Types nested in
/// tuples, `Dict`, `Future`, `RRef`, `Await` and `Union` are already fake,
/// because PyTorch parses them with the fake-returning `parseType`: a
/// `(SymInt, int)` argument prints as `(int, int)`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Type {
    /// `Tensor`.
    Tensor,
    /// `int` (also what `ConstQuantizerPtr` and `DeviceIndex` mean).
    Int,
    /// `SymInt`.
    SymInt,
    /// `SymBool` (a symbolic `bool`; unlike `SymInt`, its fake type is itself).
    SymBool,
    /// `float` (a C++ `double`).
    Float,
    /// `complex`.
    Complex,
    /// `bool`.
    Bool,
    /// `str`.
    Str,
    /// `Scalar` (PyTorch's `NumberType`).
    Scalar,
    /// `ScalarType`.
    ScalarType,
    /// `Layout`.
    Layout,
    /// `MemoryFormat`.
    MemoryFormat,
    /// `Device`.
    Device,
    /// `Stream`.
    Stream,
    /// `Generator`.
    Generator,
    /// `Storage`.
    Storage,
    /// `QScheme`.
    QScheme,
    /// `Quantizer`.
    Quantizer,
    /// `NoneType` (spelled `None` or `NoneType`).
    NoneType,
    /// `Capsule`.
    Capsule,
    /// `Any`.
    Any,
    /// `AnyClassType`.
    AnyClassType,
    /// `AnyEnumType`.
    AnyEnumType,
    /// A type variable: any other identifier starting with a lowercase
    /// letter (`t`, `tVal`, and also `tensor`, `double`, `int64_t`).
    Var(String),
    /// A custom class, `__torch__.torch.classes.<ns>.<Name>` (full name).
    CustomClass(String),
    /// `T[]` (a fixed size `T[N]` is a list whose size lives on the
    /// argument, see [`crate::Argument::n`]).
    List(Box<Type>),
    /// `T?`.
    Optional(Box<Type>),
    /// `(A, B)`.
    Tuple(Vec<Type>),
    /// `Dict(K, V)`.
    Dict(Box<Type>, Box<Type>),
    /// `Future(T)`.
    Future(Box<Type>),
    /// `RRef(T)`.
    RRef(Box<Type>),
    /// `Await(T)`.
    Await(Box<Type>),
    /// `Union(A, B, ...)`, members canonicalised as PyTorch does (flattened,
    /// deduplicated, sorted).
    Union(Vec<Type>),
}

impl Type {
    /// The type a base type name stands for in a schema (PyTorch's
    /// `SchemaTypeParser::parseBaseType` table), or `None` if the name is
    /// not a known base type.  Type variables are not resolved here.
    pub fn from_base_name(name: &str) -> Option<Type> {
        // Note [Type names by length and first byte]: as for keywords, the
        // length and first byte leave one candidate (two for `Device` /
        // `Layout`-sized names), compared once, instead of a string
        // comparison per table entry.
        let b = name.as_bytes();
        let (text, ty): (&str, Type) = match (b.len(), *b.first()?) {
            (3, b'i') => ("int", Type::Int),
            (3, b's') => ("str", Type::Str),
            (3, b'A') => ("Any", Type::Any),
            (4, b'b') => ("bool", Type::Bool),
            (4, b'N') => ("None", Type::NoneType),
            (5, b'f') => ("float", Type::Float),
            (6, b'L') => ("Layout", Type::Layout),
            (6, b'D') => ("Device", Type::Device),
            (6, b'S') => match b[1] {
                b't' => ("Stream", Type::Stream),
                b'c' => ("Scalar", Type::Scalar),
                _ => ("SymInt", Type::SymInt),
            },
            (7, b'S') => match b[1] {
                b'y' => ("SymBool", Type::SymBool),
                _ => ("Storage", Type::Storage),
            },
            (7, b'Q') => ("QScheme", Type::QScheme),
            (7, b'c') => ("complex", Type::Complex),
            (7, b'C') => ("Capsule", Type::Capsule),
            (8, b'N') => ("NoneType", Type::NoneType),
            (9, b'G') => ("Generator", Type::Generator),
            (9, b'Q') => ("Quantizer", Type::Quantizer),
            (10, b'S') => ("ScalarType", Type::ScalarType),
            (11, b'D') => ("DeviceIndex", Type::Int),
            (11, b'A') => ("AnyEnumType", Type::AnyEnumType),
            (12, b'M') => ("MemoryFormat", Type::MemoryFormat),
            (12, b'A') => ("AnyClassType", Type::AnyClassType),
            (17, b'C') => ("ConstQuantizerPtr", Type::Int),
            _ => return None,
        };
        (name == text).then_some(ty)
    }

    /// The fake type PyTorch uses for default values and `arg.type`:
    /// `SymInt`, `ScalarType`, `Layout` and `MemoryFormat` become `int`,
    /// through lists and optionals.
    pub fn fake(&self) -> Type {
        match self {
            Type::SymInt | Type::ScalarType | Type::Layout | Type::MemoryFormat => Type::Int,
            Type::List(t) => Type::List(Box::new(t.fake())),
            Type::Optional(t) => Type::Optional(Box::new(t.fake())),
            other => other.clone(),
        }
    }

    /// Whether `fake()` would change anything (avoids cloning in the parser).
    pub(crate) fn has_fake_parts(&self) -> bool {
        match self {
            Type::SymInt | Type::ScalarType | Type::Layout | Type::MemoryFormat => true,
            Type::List(t) | Type::Optional(t) => t.has_fake_parts(),
            _ => false,
        }
    }

    /// The element type of a list, if this is a list.
    pub fn list_element(&self) -> Option<&Type> {
        match self {
            Type::List(t) => Some(t),
            _ => None,
        }
    }

    /// The wrapped type of an optional, if this is an optional.
    pub fn optional_element(&self) -> Option<&Type> {
        match self {
            Type::Optional(t) => Some(t),
            _ => None,
        }
    }

    /// Whether the dispatcher extracts dispatch keys from an argument of
    /// this type: `Tensor`, `Tensor?`, `Tensor[]` and `Tensor?[]` (the
    /// subtypes of those, which also admits `None`), like PyTorch's
    /// `DispatchKeyExtractor::makeBitsetForDispatchArgs`.
    pub fn is_tensor_like(&self) -> bool {
        match self {
            Type::Tensor | Type::NoneType => true,
            Type::Optional(t) => **t == Type::Tensor,
            Type::List(t) => match &**t {
                Type::Tensor => true,
                Type::Optional(inner) => **inner == Type::Tensor,
                _ => false,
            },
            _ => false,
        }
    }

    /// PyTorch's `TypeKind` ordinal, which orders `Union` members.
    pub(crate) fn kind_ordinal(&self) -> u8 {
        match self {
            Type::Any => 0,
            Type::AnyEnumType => 2,
            Type::Tensor => 3,
            Type::Storage => 4,
            Type::Tuple(_) => 5,
            Type::List(_) => 6,
            Type::Dict(..) => 7,
            Type::Scalar => 8,
            Type::Float => 9,
            Type::Complex => 10,
            Type::Future(_) => 11,
            Type::Await(_) => 12,
            Type::RRef(_) => 13,
            Type::Int => 14,
            Type::NoneType => 15,
            Type::Str => 16,
            Type::Generator => 17,
            Type::Quantizer => 18,
            Type::Bool => 19,
            Type::Optional(_) => 20,
            Type::Var(_) => 21,
            Type::Device => 22,
            Type::Stream => 23,
            Type::CustomClass(_) => 25,
            Type::Capsule => 27,
            Type::QScheme => 29,
            Type::ScalarType => 30,
            Type::Layout => 31,
            Type::MemoryFormat => 32,
            Type::AnyClassType => 35,
            Type::SymInt => 36,
            Type::SymBool => 38,
            Type::Union(_) => 39,
        }
    }

    /// The Python annotation spelling PyTorch's `str(type)` gives:
    /// `List[int]`, `Optional[Tensor]`, `Dict[str, t]`, `number` for
    /// `Scalar`, `int` for `SymInt`.
    pub fn annotation_str(&self) -> String {
        let mut s = String::new();
        self.write_annotation(&mut s);
        s
    }

    fn write_annotation(&self, out: &mut String) {
        let wrap = |out: &mut String, name: &str, inner: &[&Type]| {
            out.push_str(name);
            out.push('[');
            for (i, t) in inner.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                t.write_annotation(out);
            }
            out.push(']');
        };
        match self {
            Type::SymInt => out.push_str("int"),
            Type::SymBool => out.push_str("bool"),
            Type::Scalar => out.push_str("number"),
            Type::List(t) => wrap(out, "List", &[t]),
            Type::Optional(t) => wrap(out, "Optional", &[t]),
            Type::Future(t) => wrap(out, "Future", &[t]),
            Type::RRef(t) => wrap(out, "RRef", &[t]),
            Type::Await(t) => wrap(out, "Await", &[t]),
            Type::Dict(k, v) => wrap(out, "Dict", &[k, v]),
            Type::Tuple(ts) if ts.is_empty() => out.push_str("Tuple[()]"),
            Type::Tuple(ts) => wrap(out, "Tuple", &ts.iter().collect::<Vec<_>>()),
            Type::Union(ts) => crate::union::write_union(out, ts, true),
            other => other.write_schema(out),
        }
    }

    /// The spelling of a type without parameters or a name of its own (`Tensor`, `int`,
    /// `SymInt`, ...); `None` for type variables, custom classes and composite types.
    ///
    /// ```
    /// use switchboard_schema::Type;
    /// assert_eq!(Type::SymInt.builtin_name(), Some("SymInt"));
    /// assert_eq!(Type::List(Box::new(Type::Int)).builtin_name(), None);
    /// ```
    pub fn builtin_name(&self) -> Option<&'static str> {
        Some(match self {
            Type::Tensor => "Tensor",
            Type::Int => "int",
            Type::SymInt => "SymInt",
            Type::SymBool => "SymBool",
            Type::Float => "float",
            Type::Complex => "complex",
            Type::Bool => "bool",
            Type::Str => "str",
            Type::Scalar => "Scalar",
            Type::ScalarType => "ScalarType",
            Type::Layout => "Layout",
            Type::MemoryFormat => "MemoryFormat",
            Type::Device => "Device",
            Type::Stream => "Stream",
            Type::Generator => "Generator",
            Type::Storage => "Storage",
            Type::QScheme => "QScheme",
            Type::Quantizer => "Quantizer",
            Type::NoneType => "NoneType",
            Type::Capsule => "Capsule",
            Type::Any => "Any",
            Type::AnyClassType => "AnyClassType",
            Type::AnyEnumType => "AnyEnumType",
            _ => return None,
        })
    }

    /// Appends the schema spelling (PyTorch's `Type::str()`, what `Display` prints) to `out`,
    /// without allocating a string of its own.
    ///
    /// ```
    /// use switchboard_schema::Type;
    /// let mut s = String::new();
    /// Type::Optional(Box::new(Type::Int)).write_schema(&mut s);
    /// assert_eq!(s, "int?");
    /// ```
    pub fn write_schema(&self, out: &mut String) {
        if let Some(name) = self.builtin_name() {
            out.push_str(name);
            return;
        }
        let simple = match self {
            Type::Var(name) | Type::CustomClass(name) => name,
            Type::List(t) => {
                t.write_schema(out);
                out.push_str("[]");
                return;
            }
            Type::Optional(t) => {
                t.write_schema(out);
                out.push('?');
                return;
            }
            Type::Tuple(ts) => {
                out.push('(');
                for (i, t) in ts.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    t.write_schema(out);
                }
                out.push(')');
                return;
            }
            Type::Dict(k, v) => {
                out.push_str("Dict(");
                k.write_schema(out);
                out.push_str(", ");
                v.write_schema(out);
                out.push(')');
                return;
            }
            Type::Future(t) | Type::RRef(t) | Type::Await(t) => {
                out.push_str(match self {
                    Type::Future(_) => "Future(",
                    Type::RRef(_) => "RRef(",
                    _ => "Await(",
                });
                t.write_schema(out);
                out.push(')');
                return;
            }
            Type::Union(ts) => {
                crate::union::write_union(out, ts, false);
                return;
            }
            // Every other type has a builtin name, written above.
            _ => return,
        };
        out.push_str(simple);
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        self.write_schema(&mut s);
        f.write_str(&s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(t: Type) -> Type {
        Type::List(Box::new(t))
    }
    fn opt(t: Type) -> Type {
        Type::Optional(Box::new(t))
    }

    #[test]
    fn schema_and_annotation_spellings() {
        let t = list(opt(list(Type::Int)));
        assert_eq!(t.to_string(), "int[]?[]");
        assert_eq!(t.annotation_str(), "List[Optional[List[int]]]");
        assert_eq!(opt(Type::Scalar).annotation_str(), "Optional[number]");
        let d = Type::Dict(Box::new(Type::Str), Box::new(Type::Var("t".into())));
        assert_eq!(d.to_string(), "Dict(str, t)");
        assert_eq!(d.annotation_str(), "Dict[str, t]");
        assert_eq!(Type::Tuple(vec![]).to_string(), "()");
        assert_eq!(
            Type::Future(Box::new(Type::Var("t".into()))).annotation_str(),
            "Future[t]"
        );
    }

    #[test]
    fn sym_bool_is_its_own_fake_type() {
        assert_eq!(Type::from_base_name("SymBool"), Some(Type::SymBool));
        assert_eq!(Type::SymBool.fake(), Type::SymBool);
        assert_eq!(Type::SymBool.to_string(), "SymBool");
        assert_eq!(list(Type::SymBool).annotation_str(), "List[bool]");
        assert_eq!(Type::from_base_name("SymFloat"), None);
    }

    /// The table `from_base_name` must agree with (PyTorch's `parseBaseType`).
    const BASE_NAMES: &[(&str, Type)] = &[
        ("Generator", Type::Generator),
        ("ScalarType", Type::ScalarType),
        ("Layout", Type::Layout),
        ("MemoryFormat", Type::MemoryFormat),
        ("Storage", Type::Storage),
        ("QScheme", Type::QScheme),
        ("Quantizer", Type::Quantizer),
        ("ConstQuantizerPtr", Type::Int),
        ("DeviceIndex", Type::Int),
        ("int", Type::Int),
        ("Device", Type::Device),
        ("Stream", Type::Stream),
        ("Scalar", Type::Scalar),
        ("str", Type::Str),
        ("float", Type::Float),
        ("complex", Type::Complex),
        ("SymInt", Type::SymInt),
        ("bool", Type::Bool),
        ("SymBool", Type::SymBool),
        ("None", Type::NoneType),
        ("NoneType", Type::NoneType),
        ("Capsule", Type::Capsule),
        ("Any", Type::Any),
        ("AnyClassType", Type::AnyClassType),
        ("AnyEnumType", Type::AnyEnumType),
    ];

    fn by_table(name: &str) -> Option<Type> {
        BASE_NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| t.clone())
    }

    #[test]
    fn base_names_agree_with_the_table() {
        for (name, ty) in BASE_NAMES {
            assert_eq!(Type::from_base_name(name).as_ref(), Some(ty), "{name}");
            for i in 0..name.len() {
                for c in ['a', 'S', 'c', 't', '_'] {
                    let mut w: Vec<char> = name.chars().collect();
                    w[i] = c;
                    let w: String = w.into_iter().collect();
                    assert_eq!(Type::from_base_name(&w), by_table(&w), "{w}");
                }
            }
        }
        for w in ["", "i", "Tensor", "Sym", "SymInts", "Stream_", "ints"] {
            assert_eq!(Type::from_base_name(w), None, "{w}");
        }
    }

    proptest::proptest! {
        #[test]
        fn base_names_agree_with_the_table_on_words(w in "[A-Za-z_]{0,12}") {
            proptest::prop_assert_eq!(Type::from_base_name(&w), by_table(&w));
        }
    }

    #[test]
    fn fake_types() {
        assert_eq!(opt(Type::ScalarType).fake(), opt(Type::Int));
        assert_eq!(list(Type::SymInt).fake(), list(Type::Int));
        assert!(list(Type::SymInt).has_fake_parts());
        assert!(!list(Type::Tensor).has_fake_parts());
    }

    #[test]
    fn tensor_like() {
        assert!(Type::Tensor.is_tensor_like());
        assert!(opt(Type::Tensor).is_tensor_like());
        assert!(list(Type::Tensor).is_tensor_like());
        assert!(list(opt(Type::Tensor)).is_tensor_like());
        assert!(!opt(list(Type::Tensor)).is_tensor_like());
        assert!(!Type::Scalar.is_tensor_like());
    }
}
