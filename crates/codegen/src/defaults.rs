//! Defaulted arguments: how the generated API leaves them out, and the options structs that
//! set them.

use std::fmt::Write;

use switchboard_schema::{DefaultValue, Type};

use crate::model::NativeFunction;
use crate::types::RustArg;

// Note [Operator API defaults]
// PyTorch's C++ API gives defaulted arguments C++ default values (`at::sum(x)`,
// `at::randn({4, 3})`); Rust has none, and spelling every default (`randn(&[4, 3], None,
// None, None, None)`) hides what a call does. So each operator overload gets:
//
// - `ops::NAME(required...)`: only the arguments without a default in the schema, in schema
//   order (an `out=` overload's kwarg-only `out` included); the others take the schema's
//   defaults, written into the call as constants (`ops::randn(&[4, 3])`, `ops::sum(&x)`,
//   `ops::add(&a, &b)`). Its code is the call through the handle it always was, with literals
//   in place of the defaulted parameters: no options value, no allocation (a default list is
//   a `&'static` slice).
// - when the overload has defaulted arguments, `ops::NAME_with(required..., NameOptions)`:
//   `NameOptions` (in `ops::options`, re-exported at the crate root) holds one public field
//   per defaulted argument, `Default` gives the schema's defaults exactly, and chainable
//   setters named after the arguments set them (`SumOptions::default().dtype(ScalarType::Double)`,
//   `AddOptions::default().alpha(2)`, `LinearOptions::default().bias(&b)`); the setter of an
//   optional argument takes the inner value. A struct whose fields borrow (tensors, lists,
//   strings, generators) has a lifetime parameter.
// - the operators declared `variants: method` get the same pair as `TensorOps` methods
//   (`x.sum()`, `x.sum_with(SumOptions::default().dtype(..))`).
//
// `redispatch::` functions and `handles::` keep the full signatures: a kernel that wraps others
// passes every argument on as it received it, like PyTorch's `at::redispatch`.
//
// Names. Options structs are named after the generated function in CamelCase
// (`sum_dim_int_list` -> `SumDimIntListOptions`, `_to_copy` -> `ToCopyOptions`; an operator
// with a leading `_` whose struct would be another operator's keeps it as `Underscore`:
// `_embedding_bag` -> `UnderscoreEmbeddingBagOptions` beside `EmbeddingBagOptions`). An in-place
// function keeps PyTorch's trailing `_` last: `add_` has `add_with_`, and its struct is
// `AddInplaceOptions` (a trailing `_` has no CamelCase form). Generation fails rather than
// emit two items of one name (a `_with` name or a struct name taken twice), or a parameter or
// setter that would clash with `options` or a derived method.

/// One defaulted argument of an overload, as its options field.
pub(crate) struct Defaulted {
    /// The field and setter name (a Rust identifier).
    pub name: String,
    /// The field's type (`bool`, `Option<&'a Tensor>`, `&'a [i64]`, `Scalar`).
    pub field_ty: String,
    /// The schema default as a constant Rust expression of the field's type.
    pub default: String,
    /// The argument as the schema spells it, default included (for the docs).
    pub schema: String,
    /// The setter's parameter type and the expression that stores it.
    setter_param: String,
    setter_value: String,
}

/// How one overload's arguments split between the short function and its options.
pub(crate) struct Defaults {
    /// For each schema argument, the default expression when it has one.
    pub defaults: Vec<Option<String>>,
    /// The defaulted arguments in schema order (empty: no `_with` function, no options).
    pub fields: Vec<Defaulted>,
    /// The options struct's name (`SumDimIntListOptions`).
    pub options: String,
    /// The `_with` function's name (`sum_dim_int_list_with`, `add_with_`).
    pub with_name: String,
    /// Whether the struct borrows (has a lifetime parameter).
    pub borrows: bool,
}

impl Defaults {
    /// The options type as a parameter type (`SumOptions`, `LinearOptions<'_>`).
    pub fn param_type(&self) -> String {
        if self.borrows {
            format!("{}<'_>", self.options)
        } else {
            self.options.clone()
        }
    }
}

/// Names a derived or conventional method takes on every options struct: an argument of one
/// of these names would shadow it.
const RESERVED_SETTERS: &[&str] = &["default", "clone", "clone_from", "fmt"];

/// Splits `f`'s arguments (Rust forms in `args`) into required and defaulted ones.
pub(crate) fn defaults(f: &NativeFunction, args: &[RustArg]) -> Result<Defaults, String> {
    let err = |e: String| format!("{}: {e}", f.schema_text);
    let mut out = Vec::with_capacity(args.len());
    let mut fields = Vec::new();
    for (a, r) in f.schema.arguments().iter().zip(args) {
        let Some(v) = a.default_value() else {
            if r.name == "options" {
                return Err(err(
                    "a required argument named `options` clashes with the `_with` function's options parameter".into(),
                ));
            }
            out.push(None);
            continue;
        };
        let default = default_expr(a.ty(), v)
            .map_err(|e| err(format!("argument `{}`: default {v}: {e}", a.name())))?;
        let name = r.name.clone();
        if RESERVED_SETTERS.contains(&name.as_str()) {
            return Err(err(format!(
                "a defaulted argument named `{name}` would clash with the options struct's `{name}` method"
            )));
        }
        let field_ty = with_lifetime(&r.param);
        let (setter_param, setter_value) = match field_ty.strip_prefix("Option<") {
            Some(inner) => {
                let inner = &inner[..inner.len() - 1];
                if inner == "Scalar" {
                    (
                        "impl Into<Scalar>".to_owned(),
                        format!("Some({name}.into())"),
                    )
                } else {
                    (inner.to_owned(), format!("Some({name})"))
                }
            }
            None if field_ty == "Scalar" => {
                ("impl Into<Scalar>".to_owned(), format!("{name}.into()"))
            }
            None => (field_ty.clone(), name.clone()),
        };
        let mut schema = format!("{} {}", a.type_string(), a.name());
        if let Some(d) = a.default_string() {
            write!(schema, "={d}").unwrap();
        }
        out.push(Some(default.clone()));
        fields.push(Defaulted {
            name,
            field_ty,
            default,
            schema: schema.replace('`', "'"),
            setter_param,
            setter_value,
        });
    }
    let borrows = fields.iter().any(|d| d.field_ty.contains('&'));
    Ok(Defaults {
        defaults: out,
        fields,
        options: options_name(&f.api_name),
        with_name: with_name(&f.api_name),
        borrows,
    })
}

/// `&T` becomes `&'a T` (the options struct's lifetime).
fn with_lifetime(param: &str) -> String {
    param.replace('&', "&'a ")
}

fn is_inplace(api_name: &str) -> bool {
    api_name.ends_with('_') && !api_name.ends_with("__")
}

/// `sum` -> `sum_with`, `add_` -> `add_with_` (Note [Operator API defaults]).
pub(crate) fn with_name(api_name: &str) -> String {
    let n = api_name.trim_start_matches("r#");
    if is_inplace(n) {
        format!("{}_with_", &n[..n.len() - 1])
    } else {
        format!("{n}_with")
    }
}

/// `sum_dim_int_list` -> `SumDimIntListOptions`, `add_` -> `AddInplaceOptions`.
pub(crate) fn options_name(api_name: &str) -> String {
    let n = api_name.trim_start_matches("r#");
    let (stem, suffix) = if is_inplace(n) {
        (&n[..n.len() - 1], "InplaceOptions")
    } else {
        (n, "Options")
    };
    let mut out = String::new();
    for part in stem.split('_').filter(|p| !p.is_empty()) {
        let mut c = part.chars();
        if let Some(first) = c.next() {
            out.extend(first.to_uppercase());
            out.push_str(c.as_str());
        }
    }
    out.push_str(suffix);
    out
}

/// The schema default `v` of an argument of type `ty` as a constant Rust expression of the
/// argument's Rust type (Note [Operator API defaults]).
fn default_expr(ty: &Type, v: &DefaultValue) -> Result<String, String> {
    let unsupported = || Err(format!("no Rust form for a default of type {ty}"));
    Ok(match (ty, v) {
        (Type::Optional(_), DefaultValue::None) => "None".to_owned(),
        (Type::Optional(inner), v) => format!("Some({})", default_expr(inner, v)?),
        (Type::Int | Type::SymInt, DefaultValue::Int(i)) => i.to_string(),
        (Type::Float, DefaultValue::Int(i)) => float_literal(*i as f64),
        (Type::Float, DefaultValue::Float(x)) => float_literal(*x),
        (Type::Bool, DefaultValue::Bool(b)) => b.to_string(),
        (Type::Scalar, DefaultValue::Int(i)) => format!("Scalar::Int({i})"),
        (Type::Scalar, DefaultValue::Float(x)) => format!("Scalar::Float({})", float_literal(*x)),
        (Type::Scalar, DefaultValue::Bool(b)) => format!("Scalar::Bool({b})"),
        (Type::Str, DefaultValue::Str(_)) => match v.as_str() {
            Some(s) => format!("{s:?}"),
            None => return Err("a string default that is not UTF-8".into()),
        },
        (Type::ScalarType, DefaultValue::Int(i)) => format!("ScalarType::{}", scalar_type(*i)?),
        (Type::Layout, DefaultValue::Int(0)) => "Layout::Strided".to_owned(),
        (Type::MemoryFormat, DefaultValue::Int(i)) => {
            // c10::MemoryFormat's numbering.
            let name = match i {
                0 => "Contiguous",
                1 => "Preserve",
                2 => "ChannelsLast",
                3 => "ChannelsLast3d",
                _ => return Err(format!("no MemoryFormat numbered {i}")),
            };
            format!("MemoryFormat::{name}")
        }
        (Type::Device, DefaultValue::Device(d)) => match (d.type_name(), d.index()) {
            ("cpu", None) => "Device::CPU".to_owned(),
            ("meta", None) => "Device::META".to_owned(),
            _ => return Err(format!("no Rust constant for device {d}")),
        },
        (Type::List(e), DefaultValue::List(items)) => {
            let items: Result<Vec<String>, String> =
                items.iter().map(|i| default_expr(e, i)).collect();
            // A promoted constant: `&'static`, never allocated.
            format!("&[{}]", items?.join(", "))
        }
        _ => return unsupported(),
    })
}

/// A Rust `f64` literal that reads back as `x` exactly.
fn float_literal(x: f64) -> String {
    if x.is_nan() {
        "f64::NAN".to_owned()
    } else if x.is_infinite() {
        if x > 0.0 {
            "f64::INFINITY"
        } else {
            "f64::NEG_INFINITY"
        }
        .to_owned()
    } else {
        // `Debug` prints the shortest form that round-trips, always with a `.` or an exponent.
        format!("{x:?}")
    }
}

/// The `ScalarType` variant of PyTorch's number `i` (c10's `ScalarType` numbering).
fn scalar_type(i: i64) -> Result<&'static str, String> {
    Ok(match i {
        0 => "Byte",
        1 => "Char",
        2 => "Short",
        3 => "Int",
        4 => "Long",
        5 => "Half",
        6 => "Float",
        7 => "Double",
        11 => "Bool",
        15 => "BFloat16",
        _ => return Err(format!("ScalarType {i} is not supported")),
    })
}

/// Writes the options struct of `f` (nothing when it has no defaulted argument): its fields,
/// `Default` with the schema's defaults, and one setter per field.
pub(crate) fn emit_options(w: &mut String, f: &NativeFunction, d: &Defaults, method: bool) {
    if d.fields.is_empty() {
        return;
    }
    let (generics, ty) = if d.borrows {
        ("<'a>", format!("{}<'a>", d.options))
    } else {
        ("", d.options.clone())
    };
    let method_link = if method {
        format!(
            " and [`TensorOps::{}`](crate::TensorOps::{})",
            d.with_name, d.with_name
        )
    } else {
        String::new()
    };
    writeln!(
        w,
        "    /// The defaulted arguments of `{}`, for [`{with}`](crate::{with}){method_link}.\n    ///\n    /// `Default` gives the schema's defaults; each setter sets one argument (see\n    /// [defaulted arguments](crate#defaulted-arguments)).\n    #[derive(Clone, Copy, Debug)]\n    pub struct {ty} {{",
        f.qualified(),
        with = d.with_name,
    )
    .unwrap();
    for field in &d.fields {
        writeln!(
            w,
            "        /// `{}`\n        pub {}: {},",
            field.schema, field.name, field.field_ty
        )
        .unwrap();
    }
    writeln!(w, "    }}\n").unwrap();
    let lt = if d.borrows { "<'_>" } else { "" };
    writeln!(
        w,
        "    impl Default for {}{lt} {{\n        /// The schema's defaults.\n        #[inline]\n        fn default() -> Self {{\n            Self {{",
        d.options
    )
    .unwrap();
    for field in &d.fields {
        writeln!(w, "                {}: {},", field.name, field.default).unwrap();
    }
    writeln!(w, "            }}\n        }}\n    }}\n").unwrap();
    writeln!(w, "    impl{generics} {ty} {{").unwrap();
    for field in &d.fields {
        let bare = field.name.trim_start_matches("r#");
        writeln!(
            w,
            "        /// Sets `{bare}` (`{}`).\n        #[inline]\n        #[must_use]\n        pub fn {}(mut self, {}: {}) -> Self {{\n            self.{} = {};\n            self\n        }}",
            field.schema, field.name, field.name, field.setter_param, field.name, field.setter_value
        )
        .unwrap();
    }
    writeln!(w, "    }}\n").unwrap();
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_schema::FunctionSchema;

    fn expr(schema_arg: &str) -> String {
        let s = FunctionSchema::parse(&format!("f({schema_arg}) -> ()")).unwrap();
        let a = &s.arguments()[0];
        default_expr(a.ty(), a.default_value().unwrap()).unwrap()
    }

    #[test]
    fn defaults_as_constants() {
        assert_eq!(expr("Scalar alpha=1"), "Scalar::Int(1)");
        assert_eq!(expr("Scalar alpha=0.5"), "Scalar::Float(0.5)");
        assert_eq!(expr("float eps=1e-05"), "1e-5");
        assert_eq!(expr("float from=0"), "0.0");
        assert_eq!(expr("int reduction=Mean"), "1");
        assert_eq!(expr("SymInt ignore_index=-100"), "-100");
        assert_eq!(expr("int[2] stride=[]"), "&[]");
        assert_eq!(expr("SymInt[2] padding=0"), "&[0, 0]");
        assert_eq!(expr("int[1]? dim=None"), "None");
        assert_eq!(expr("ScalarType? dtype=long"), "Some(ScalarType::Long)");
        assert_eq!(
            expr("MemoryFormat memory_format=contiguous_format"),
            "MemoryFormat::Contiguous"
        );
        assert_eq!(expr("str approximate='none'"), "\"none\"");
        assert_eq!(expr("bool keepdim=False"), "false");
        assert_eq!(expr("Device device=\"meta\""), "Device::META");
    }

    #[test]
    fn unsupported_defaults_are_errors() {
        let s = FunctionSchema::parse("f(ScalarType d=8) -> ()").unwrap();
        let a = &s.arguments()[0];
        assert!(default_expr(a.ty(), a.default_value().unwrap()).is_err());
    }

    #[test]
    fn names() {
        assert_eq!(options_name("sum_dim_int_list"), "SumDimIntListOptions");
        assert_eq!(options_name("add_"), "AddInplaceOptions");
        assert_eq!(options_name("add_scalar_"), "AddScalarInplaceOptions");
        assert_eq!(options_name("_to_copy"), "ToCopyOptions");
        assert_eq!(options_name("max_pool2d"), "MaxPool2dOptions");
        assert_eq!(with_name("add_"), "add_with_");
        assert_eq!(with_name("sum"), "sum_with");
        assert_eq!(with_name("r#where"), "where_with");
    }
}
